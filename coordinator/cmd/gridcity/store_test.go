package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// gridcity runs the command line in this process and returns its stdout.
func gridcity(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out, io.Discard)
	return out.String(), err
}

// TestCommandsUseThePostgresStore: every command that reads or writes the
// store does so in the PostgreSQL database of --store or GRIDCITY_STORE,
// and none makes a SQLite file in --data.
func TestCommandsUseThePostgresStore(t *testing.T) {
	url := pgtest.Database(t)
	data := t.TempDir()
	if err := writeJSONFile(data, "coordinator.json", runtimeInfo{HTTP: "127.0.0.1:4600", GRPC: "127.0.0.1:4601", Advertise: "127.0.0.1:4601"}); err != nil {
		t.Fatal(err)
	}
	var created struct{ Token string }
	out, err := gridcity(t, "token", "create", "laptop", "--data", data, "--store", url, "--json")
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || !strings.HasPrefix(created.Token, "gc_") {
		t.Fatalf("token create --store: %q, %v", out, err)
	}
	// The rest through the environment.
	t.Setenv("GRIDCITY_STORE", url)
	t.Setenv("GRIDCITY_DATA", data)
	var approver struct{ Name, Password string }
	if out, err := gridcity(t, "approver", "add", "alice", "--json"); err != nil || json.Unmarshal([]byte(out), &approver) != nil || approver.Password == "" {
		t.Fatalf("approver add: %q, %v", out, err)
	}
	// join needs the CA, which only serve (holding the unseal key) makes.
	if _, err := gridcity(t, "join", "--json"); !errors.Is(err, pki.ErrNoCA) || !strings.Contains(err.Error(), "start `gridcity serve`") {
		t.Fatalf("join before any serve: %v; want it to say to start serve first", err)
	}
	ca := makeCA(t, url)
	var join struct{ Token, CAPin string }
	if out, err := gridcity(t, "join", "--json"); err != nil || json.Unmarshal([]byte(out), &join) != nil || join.CAPin != ca.Pin() {
		t.Fatalf("join: %q, %v; want the pin %s", out, err, ca.Pin())
	}
	var local struct{ Token string }
	if out, err := gridcity(t, "mcp", "--json"); err != nil || json.Unmarshal([]byte(out), &local) != nil || local.Token == "" {
		t.Fatalf("mcp: %q, %v", out, err)
	}
	for _, args := range [][]string{{"token", "list", "--json"}, {"agents", "list", "--json"}, {"approver", "list"}, {"audit", "--json"}} {
		if _, err := gridcity(t, args...); err != nil {
			t.Errorf("%s: %v", strings.Join(args, " "), err)
		}
	}
	if out, _ := gridcity(t, "token", "list", "--json"); !strings.Contains(out, `"laptop"`) || !strings.Contains(out, `"local"`) {
		t.Errorf("token list: %s; want laptop and local", out)
	}
	if out, _ := gridcity(t, "approver", "list"); !strings.Contains(out, "alice") {
		t.Errorf("approver list: %s; want alice", out)
	}
	if _, err := os.Stat(filepath.Join(data, "gridcity.db")); !os.IsNotExist(err) {
		t.Errorf("a SQLite store was made in --data (%v); want none with --store", err)
	}

	st, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for name, tok := range map[string]string{"laptop": created.Token, "local": local.Token} {
		if got, err := st.TokenByHash(ctx, bearer.Hash(tok)); err != nil || got.Name != name {
			t.Errorf("token %s in PostgreSQL by its hash: %+v, %v", name, got, err)
		}
	}
	if a, err := st.Approver(ctx, "alice"); err != nil || !strings.HasPrefix(a.PasswordHash, "$2") {
		t.Errorf("approver alice in PostgreSQL: %+v, %v; want a bcrypt hash", a, err)
	}
	if _, err := st.Blob(ctx, "ca.pem"); err != nil {
		t.Errorf("the CA in PostgreSQL: %v", err)
	}
}

// makeCA makes the CA in the PostgreSQL store at url, as the first
// replica's serve does.
func makeCA(t *testing.T, url string) *pki.CA {
	t.Helper()
	st, err := store.OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, err := sealing.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadOrCreate(context.Background(), st, key, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestBadStoreURL: a URL that is not PostgreSQL's, or a database nobody
// serves, stops every command with what was wrong and what to do, and
// never the password.
func TestBadStoreURL(t *testing.T) {
	data := t.TempDir()
	if err := writeJSONFile(data, "coordinator.json", runtimeInfo{HTTP: "127.0.0.1:4600", GRPC: "127.0.0.1:4601", Advertise: "127.0.0.1:4601"}); err != nil {
		t.Fatal(err)
	}
	const secret = "Sup3r-secret"
	for _, tt := range []struct{ url, want string }{
		{"mysql://root:" + secret + "@db/gridcity", "postgres://USER:PASSWORD@HOST:PORT/DATABASE"},
		{"postgres://gridcity:" + secret + "@127.0.0.1:1/gridcity?connect_timeout=5", "cannot reach the PostgreSQL store"},
	} {
		for _, args := range [][]string{
			{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, {"join"}, {"mcp"}, {"token", "list"},
			{"agents", "list"}, {"approver", "list"}, {"audit"},
		} {
			_, err := gridcity(t, append(args, "--data", data, "--store", tt.url)...)
			if err == nil {
				t.Errorf("%s --store %s: no error", args[0], store.RedactURL(tt.url))
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, "--store (GRIDCITY_STORE)") || !strings.Contains(msg, tt.want) || strings.Contains(msg, secret) {
				t.Errorf("%s --store %s: %q; want --store named, %q, and no password", args[0], store.RedactURL(tt.url), msg, tt.want)
			}
		}
	}
}
