package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// auditedStore makes a coordinator store in a new data directory whose
// audit tells of a request requested, shown, approved, dispatched and
// finished, through the store's own writes.
func auditedStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.OpenSQLite(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now()
	step := func(name, detail string) store.AuditEntry {
		at = at.Add(time.Millisecond)
		return store.AuditEntry{At: at, RequestID: "cmd_a", Step: name, Actor: "test", Detail: []byte(detail)}
	}
	r := store.RequestRecord{ID: "cmd_a", Server: "web-1", Token: "laptop", Status: "pending", CreatedAt: at, Body: []byte(`{}`)}
	if _, err := st.CreateRequestLimited(ctx, r, 10, at.Add(-time.Hour), step("requested", `{"command":"uptime"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendAudit(ctx, step("shown", `{"to":"alice"}`)); err != nil {
		t.Fatal(err)
	}
	r.Status = "approved"
	if err := st.SwapRequestAudited(ctx, "pending", r, nil, step("approved", `{"by":"alice"}`)); err != nil {
		t.Fatal(err)
	}
	r.Status = "dispatched"
	if err := st.SwapRequestAudited(ctx, "approved", r, nil, step("dispatched", "{}")); err != nil {
		t.Fatal(err)
	}
	r.Status = "finished"
	if err := st.SaveRequestAudited(ctx, r, step("finished", `{"exit":0}`)); err != nil {
		t.Fatal(err)
	}
	return data
}

// sqlExec changes the store behind gridcity's back.
func sqlExec(t *testing.T, data, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(data, "gridcity.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

type verifyJSON struct {
	OK           bool
	Entries      int
	LastHash     string
	FirstFailure *struct {
		Seq       int64
		RequestID string
		Step      string
		At        string
		Reason    string
	}
	Authenticators approvalCheck
}

func auditVerify(t *testing.T, data string, flags ...string) (verifyJSON, string, error) {
	t.Helper()
	args := append([]string{"audit", "verify", "--data", data}, flags...)
	text, err := gridcity(t, args...)
	out, jerr := gridcity(t, append(args, "--json")...)
	if (err == nil) != (jerr == nil) {
		t.Fatalf("audit verify: %v; with --json: %v; want the same outcome", err, jerr)
	}
	var rep verifyJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit verify --json: %q: %v", out, err)
	}
	return rep, text, err
}

// audit verify passes on a store as gridcity wrote it, fails naming the
// row altered with SQL, and, once a row is removed, the row after it.
func TestAuditVerify(t *testing.T) {
	data := auditedStore(t)
	rep, text, err := auditVerify(t, data)
	if err != nil || !rep.OK || rep.Entries != 5 || len(rep.LastHash) != 64 || rep.FirstFailure != nil {
		t.Fatalf("audit verify: %+v, %v; want ok with 5 entries", rep, err)
	}
	if !strings.Contains(text, "5 entries") || !strings.Contains(text, rep.LastHash) {
		t.Errorf("audit verify printed %q; want the count and the last hash %s", text, rep.LastHash)
	}

	sqlExec(t, data, `UPDATE audit SET detail = '{"by":"mallory"}' WHERE step = 'approved'`)
	rep, text, err = auditVerify(t, data)
	if !errors.Is(err, errChainBroken) || rep.OK || rep.FirstFailure == nil || rep.FirstFailure.Seq != 3 || rep.FirstFailure.Step != "approved" || rep.FirstFailure.RequestID != "cmd_a" {
		t.Fatalf("after altering the approval: %+v, %v; want a failure at entry 3 (approved)", rep, err)
	}
	if !strings.Contains(text, "entry 3") || !strings.Contains(text, "altered") {
		t.Errorf("audit verify printed %q; want it to name entry 3 as altered", text)
	}
	sqlExec(t, data, `UPDATE audit SET detail = '{"by":"alice"}' WHERE step = 'approved'`)
	if rep, _, err := auditVerify(t, data); err != nil || !rep.OK {
		t.Fatalf("after restoring the approval: %+v, %v; want ok", rep, err)
	}

	sqlExec(t, data, `DELETE FROM audit WHERE step = 'shown'`)
	rep, text, err = auditVerify(t, data)
	if !errors.Is(err, errChainBroken) || rep.FirstFailure == nil || rep.FirstFailure.Seq != 3 || rep.Entries != 1 {
		t.Fatalf("after removing entry 2: %+v, %v; want a failure at entry 3, the one after it", rep, err)
	}
	if want := fmt.Sprintf("entry %d", 3); !strings.Contains(text, want) || !strings.Contains(text, "removed") {
		t.Errorf("audit verify printed %q; want it to name %s and a removal", text, want)
	}
}

// With the unseal key, audit verify checks each approval's authenticator
// too: an approval stored without one (decided before they existed) is
// counted, one whose authenticator does not verify fails its entry.
func TestAuditVerifyAuthenticators(t *testing.T) {
	data := auditedStore(t)
	if rep, text, err := auditVerify(t, data); err != nil || rep.Authenticators.Checked || !strings.Contains(text, "not checked") {
		t.Fatalf("without a key: %+v, %q, %v; want ok, authenticators not checked", rep, text, err)
	}
	key := filepath.Join(t.TempDir(), "unseal.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("c4", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, _, err := auditVerify(t, data, "--unseal-key-file", key)
	if err != nil || !rep.Authenticators.Checked || rep.Authenticators.WithoutAuthenticator != 1 || rep.Authenticators.Verified != 0 {
		t.Fatalf("with a key: %+v, %v; want ok, one approval without an authenticator", rep, err)
	}
	// A forged authenticator, written into the request.
	sqlExec(t, data, `UPDATE requests SET body = '{"id":"cmd_a","authenticator":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}' WHERE id = 'cmd_a'`)
	rep, text, err := auditVerify(t, data, "--unseal-key-file", key)
	if !errors.Is(err, errChainBroken) || rep.FirstFailure == nil || rep.FirstFailure.Step != "approved" || !strings.Contains(text, "authenticator") {
		t.Fatalf("with a forged authenticator: %+v, %q, %v; want the approved entry to fail", rep, text, err)
	}
}
