package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Coordinators starting together on a new PostgreSQL database all find no
// approver; the one whose create of admin comes second meets the first's.
// That is no failure (it used to stop the coordinator with "already
// exists"), and this host gets no admin-password file for an admin it did
// not make.
func TestEnsureAdminAfterAnotherReplicaMadeIt(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.OpenSQLite(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateApprover(ctx, store.Approver{Name: "admin", PasswordHash: "made by another replica", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := ensureAdmin(ctx, lookedBeforeTheOther{st}, data, io.Discard, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("ensureAdmin after another coordinator made admin: %v; want no error", err)
	}
	if _, err := os.Stat(filepath.Join(data, "admin-password")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("admin-password: %v; want none on this host", err)
	}
}

// lookedBeforeTheOther is a store whose list of approvers was read before
// another coordinator created admin.
type lookedBeforeTheOther struct{ store.Store }

func (lookedBeforeTheOther) Approvers(context.Context) ([]store.Approver, error) { return nil, nil }
