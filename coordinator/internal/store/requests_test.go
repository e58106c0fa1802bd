package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// limitPages caps the database at its current size plus extra pages, for
// the connection that writes (PRAGMA max_page_count): a write that needs
// more space fails with "database or disk is full", as on a full disk.
func (s *SQLite) limitPages(t *testing.T, extra int64) {
	t.Helper()
	ctx := context.Background()
	var pages, got int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+extra)).Scan(&got); err != nil || got != pages+extra {
		t.Fatalf("max_page_count: %d, %v; want %d", got, err, pages+extra)
	}
}

func step(id, name string, detail string) AuditEntry {
	return AuditEntry{At: time.Now(), RequestID: id, Step: name, Actor: "test", Detail: []byte(detail)}
}

func auditSteps(t *testing.T, s Store, id string) string {
	t.Helper()
	entries, err := s.Audit(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Step)
	}
	return strings.Join(names, ",")
}

// The disk fills up during an approval: the request's change finds no
// room, so the audit row written with it is not kept either, although
// the row alone would have fitted (as it did when they were two writes).
func TestSaveRequestAuditedOnAFullDatabase(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	now := time.Now()
	rec := RequestRecord{ID: "cmd_a", Server: "web-1", Token: "laptop", Status: "pending", CreatedAt: now, Body: []byte(`{"status":"pending"}`)}
	if err := s.SaveRequestAudited(ctx, rec, step("cmd_a", "requested", "{}")); err != nil {
		t.Fatal(err)
	}
	// Requests after it pack its page and the pages beside it, leaving
	// the audit's pages as they were.
	for i := range 300 {
		if _, err := s.w.ExecContext(ctx, `INSERT INTO requests(id, server, token, status, created_at, body) VALUES (?,?,?,?,?,?)`,
			fmt.Sprintf("cmd_b%04d", i), "web-1", "other", "denied", ms(now), []byte(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	s.limitPages(t, 0) // the audit row fits in its page; the change needs a new one
	note := strings.Repeat("n", 2000)
	approved := rec
	approved.Status, approved.Body = "approved", []byte(`{"status":"approved","note":"`+note+`"}`)
	err := s.SaveRequestAudited(ctx, approved, step("cmd_a", "approved", `{"note":"`+note+`"}`))
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("save on a full database: %v; want its error", err)
	}
	if got := auditSteps(t, s, "cmd_a"); got != "requested" {
		t.Fatalf("audit steps %q; want only requested", got)
	}
	if got, _ := s.Request(ctx, "cmd_a"); got.Status != "pending" {
		t.Fatalf("status %s; want pending", got.Status)
	}
	// The row alone fits: two writes would have left an approval that
	// never happened.
	if err := s.AppendAudit(ctx, step("cmd_a", "approved", `{"note":"`+note+`"}`)); err != nil {
		t.Fatalf("the audit row alone: %v; want it to fit, so that the test shows the change failing", err)
	}
}

func TestSaveRequestAuditedNeedsAStep(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		err := s.SaveRequestAudited(context.Background(), RequestRecord{ID: "cmd_a", Status: "pending", Body: []byte("{}")})
		if err == nil || !strings.Contains(err.Error(), "no audit row") {
			t.Fatalf("got %v; want a refusal", err)
		}
		if _, err := s.Request(context.Background(), "cmd_a"); err != ErrNotFound {
			t.Fatalf("saved without an audit row: %v", err)
		}
	})
}

func TestCountRequests(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		base := time.Unix(1_700_000_000, 0)
		for i, r := range []struct{ token, status string }{{"a", "pending"}, {"a", "pending"}, {"a", "denied"}, {"b", "pending"}} {
			id := fmt.Sprint("cmd_", i)
			if err := s.SaveRequestAudited(ctx, RequestRecord{ID: id, Token: r.token, Status: r.status, CreatedAt: base.Add(time.Duration(i) * time.Second), Body: []byte("{}")}, step(id, "requested", "{}")); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range []struct {
			token, status string
			since         time.Time
			want          int
		}{
			{"a", "pending", base.Add(-time.Second), 2},
			{"a", "pending", base, 1}, // created after since, not at it
			{"a", "denied", base.Add(-time.Second), 1},
			{"b", "pending", base.Add(-time.Second), 1},
			{"c", "pending", base.Add(-time.Second), 0},
		} {
			if n, err := s.CountRequests(ctx, tt.token, tt.status, tt.since); err != nil || n != tt.want {
				t.Errorf("CountRequests(%s, %s, %s) = %d, %v; want %d", tt.token, tt.status, tt.since, n, err, tt.want)
			}
		}
	})
}

// Requests stored before the token had its column keep counting against
// their token.
func TestMigrationGivesOldRequestsTheirToken(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "gridcity.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	qs := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`}
	for i, m := range migrations[:5] {
		qs = append(qs, m, fmt.Sprintf(`INSERT INTO schema_version(version) VALUES (%d)`, i+1))
	}
	qs = append(qs, fmt.Sprintf(`INSERT INTO requests(id, server, status, created_at, body) VALUES
		('cmd_a', 'web-1', 'pending', %d, CAST('{"id":"cmd_a","token":"laptop"}' AS BLOB)),
		('cmd_b', 'web-1', 'pending', %d, CAST('not json' AS BLOB))`, ms(now), ms(now)))
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s := open(t, dir)
	if n, err := s.CountRequests(context.Background(), "laptop", "pending", now.Add(-time.Hour)); err != nil || n != 1 {
		t.Fatalf("pending requests of laptop after the migration: %d, %v; want 1", n, err)
	}
}
