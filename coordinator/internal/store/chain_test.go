package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// No bytes can move from one field to its neighbour and keep the hash.
func TestAuditHashFieldBoundaries(t *testing.T) {
	type row struct {
		prev                   string
		at                     int64
		requestID, step, actor string
		detail                 string
	}
	hash := func(r row) string { return AuditHash(r.prev, r.at, r.requestID, r.step, r.actor, []byte(r.detail)) }
	for _, tc := range []struct {
		name string
		a, b row
	}{
		{"request id and step", row{requestID: "ab", step: "c"}, row{requestID: "a", step: "bc"}},
		{"step and actor", row{step: "ab", actor: "c"}, row{step: "a", actor: "bc"}},
		{"actor and detail", row{actor: "ab", detail: "c"}, row{actor: "a", detail: "bc"}},
		{"prev and request id", row{prev: "ab", requestID: "c"}, row{prev: "a", requestID: "bc"}},
		{"empty field moved", row{requestID: "", step: "x"}, row{requestID: "x", step: ""}},
		{"time", row{at: 1}, row{at: 2}},
		{"length bytes as content", row{requestID: "a\x00\x00\x00\x00\x00\x00\x00\x01b", step: ""}, row{requestID: "a", step: "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ha, hb := hash(tc.a), hash(tc.b); ha == hb {
				t.Errorf("%+v and %+v both hash to %s; want different hashes", tc.a, tc.b, ha)
			}
		})
	}
	// The encoding is fixed: a stored chain must verify with every later
	// gridcity. A change here needs a new version (auditChainV1).
	got := AuditHash("", 1700000000000, "cmd_a", "requested", "token:ops", []byte(`{}`))
	const want = "9748c774b66efad6b9126aed1626ca15b8b6c7303ad8d816b6030be03b39ee75"
	if got != want {
		t.Errorf("AuditHash = %s; want %s", got, want)
	}
}

// chainRows reads the whole chain.
func chainRows(t *testing.T, s Store) []ChainedAudit {
	t.Helper()
	var out []ChainedAudit
	if err := s.(AuditChainReader).AuditChain(context.Background(), func(c ChainedAudit) error {
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func verify(t *testing.T, s Store) ChainReport {
	t.Helper()
	rep, err := VerifyAuditChain(context.Background(), s.(AuditChainReader), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// rawExec changes the database behind the store's back, as someone with
// the database's password could.
func rawExec(t testing.TB, s Store, q string) {
	t.Helper()
	var err error
	switch s := s.(type) {
	case *SQLite:
		_, err = s.w.Exec(q)
	case *Postgres:
		_, err = s.pool.Exec(context.Background(), q)
	default:
		t.Fatalf("rawExec on %T", s)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Every way of writing an audit row extends the one chain, and verify
// names the first row altered or following a removed one.
func TestAuditChain(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if rep := verify(t, s); !rep.OK || rep.Entries != 0 || rep.LastHash != "" {
			t.Fatalf("empty log: %+v; want ok, 0 entries", rep)
		}
		at := time.Now()
		r := newRequest(t, s, "cmd_a", "ops", at)
		if err := s.AppendAudit(ctx, step("cmd_a", "shown", `{"to":"ann"}`)); err != nil {
			t.Fatal(err)
		}
		approved := r
		approved.Status = "approved"
		if err := s.SwapRequestAudited(ctx, "pending", approved, nil, step("cmd_a", "approved", "{}"), step("cmd_a", "dispatched", "{}")); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := s.AppendAuditOnce(ctx, step("cmd_a", "started", "{}")); err != nil {
				t.Fatal(err)
			}
		}
		approved.Status = "finished"
		if err := s.SaveRequestAudited(ctx, approved, step("cmd_a", "finished", `{"exit":0}`)); err != nil {
			t.Fatal(err)
		}
		rows := chainRows(t, s)
		if len(rows) != 6 {
			t.Fatalf("%d rows; want 6", len(rows))
		}
		rep := verify(t, s)
		if !rep.OK || rep.Entries != 6 || rep.LastHash != rows[5].Hash {
			t.Fatalf("verify = %+v; want ok, 6 entries, last hash %s", rep, rows[5].Hash)
		}

		rawExec(t, s, fmt.Sprintf(`UPDATE audit SET detail = '{"to":"eve"}' WHERE seq = %d`, rows[1].Seq))
		rep = verify(t, s)
		if rep.OK || rep.FirstFailure == nil || rep.FirstFailure.Seq != rows[1].Seq || rep.FirstFailure.Step != "shown" {
			t.Fatalf("after altering row %d: %+v; want a failure at it", rows[1].Seq, rep)
		}
		if rep.Entries != 1 {
			t.Errorf("entries before the failure = %d; want 1", rep.Entries)
		}
		rawExec(t, s, fmt.Sprintf(`UPDATE audit SET detail = '{"to":"ann"}' WHERE seq = %d`, rows[1].Seq))
		if rep := verify(t, s); !rep.OK {
			t.Fatalf("after restoring row %d: %+v; want ok", rows[1].Seq, rep)
		}

		rawExec(t, s, fmt.Sprintf(`DELETE FROM audit WHERE seq = %d`, rows[3].Seq))
		rep = verify(t, s)
		if rep.OK || rep.FirstFailure == nil || rep.FirstFailure.Seq != rows[4].Seq {
			t.Fatalf("after removing row %d: %+v; want a failure at row %d", rows[3].Seq, rep, rows[4].Seq)
		}
	})
}

// A store written before the chain is chained when it is opened by this
// gridcity, and verifies.
func TestAuditChainBackfill(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		ctx := context.Background()
		s := open(t)
		newRequest(t, s, "cmd_a", "ops", time.Now())
		for i := range chainPage + 3 { // more than one page
			if err := s.AppendAudit(ctx, step("cmd_a", "shown", fmt.Sprintf(`{"n":%d}`, i))); err != nil {
				t.Fatal(err)
			}
		}
		want := chainRows(t, s)
		// Back to the schema before the chain.
		migration := len(migrations)
		if _, ok := s.(*Postgres); ok {
			migration = len(pgMigrations)
		}
		rawExec(t, s, `ALTER TABLE audit DROP COLUMN prev_hash`)
		rawExec(t, s, `ALTER TABLE audit DROP COLUMN hash`)
		rawExec(t, s, fmt.Sprintf(`DELETE FROM schema_version WHERE version = %d`, migration))
		s.Close()

		s = open(t)
		got := chainRows(t, s)
		if len(got) != len(want) || got[len(got)-1].Hash != want[len(want)-1].Hash {
			t.Fatalf("after the migration: %d rows, last hash %s; want %d rows, last hash %s", len(got), got[len(got)-1].Hash, len(want), want[len(want)-1].Hash)
		}
		if rep := verify(t, s); !rep.OK || rep.Entries != int64(len(want)) {
			t.Fatalf("verify = %+v; want ok, %d entries", rep, len(want))
		}
	})
}

// Writers on two handles of one store (two replicas on one PostgreSQL,
// or two processes on one SQLite file) never link to the same predecessor: the chain stays one
// line.
func TestAuditChainConcurrentWriters(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		// Two handles: two replicas on PostgreSQL; on SQLite, serve and a
		// command line, each with its writer (BEGIN IMMEDIATE orders them).
		a := open(t)
		handles := []Store{a, open(t)}
		ctx := context.Background()
		const each = 40
		var wg sync.WaitGroup
		errs := make(chan error, 4*each)
		for w := range 4 {
			s := handles[w%2]
			id := fmt.Sprintf("cmd_%d", w)
			newRequest(t, s, id, "ops", time.Now())
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					var err error
					if i%2 == 0 {
						err = s.AppendAudit(ctx, step(id, "shown", "{}"))
					} else {
						_, err = s.AppendAuditOnce(ctx, step(id, fmt.Sprintf("step%d", i), "{}"))
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rows := chainRows(t, a)
		if len(rows) != 4+4*each {
			t.Fatalf("%d rows; want %d", len(rows), 4+4*each)
		}
		seen := map[string]int64{}
		for _, r := range rows {
			if s, ok := seen[r.PrevHash]; ok {
				t.Fatalf("rows %d and %d both follow %s", s, r.Seq, r.PrevHash)
			}
			seen[r.PrevHash] = r.Seq
		}
		if rep := verify(t, a); !rep.OK {
			t.Fatalf("verify = %+v; want ok", rep)
		}
	})
}
