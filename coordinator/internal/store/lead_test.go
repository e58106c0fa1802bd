package store

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestPostgresLead: of two replicas campaigning on one database, one
// leads; when its session is terminated it steps down and the other takes
// over within an interval or two; when that one stops, the first leads
// again.
func TestPostgresLead(t *testing.T) {
	url := pgtest.Database(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const every = 100 * time.Millisecond
	type change struct {
		who     string
		leading bool
	}
	changes := make(chan change, 16)
	campaign := func(p *Postgres, who string) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.Lead(ctx, every, quiet, func(l bool) { changes <- change{who, l} })
		}()
		return func() { cancel(); <-done }
	}
	next := func(want change) {
		t.Helper()
		select {
		case c := <-changes:
			if c != want {
				t.Fatalf("leadership change %+v; want %+v", c, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no leadership change; want %+v", want)
		}
	}
	stopA := campaign(a, "a")
	defer func() { stopA() }()
	next(change{"a", true})
	stopB := campaign(b, "b")
	defer func() { stopB() }()
	select {
	case c := <-changes:
		t.Fatalf("%+v while a leads; want b to wait", c)
	case <-time.After(5 * every):
	}

	// a's session ends as a dead replica's would.
	tag, err := b.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND granted`, uint32(lockLeader))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the leader's session: %v (%d rows); want one", err, tag.RowsAffected())
	}
	// Either order: a notices its loss at its next check, b wins at its next try.
	got := map[change]bool{}
	for range 2 {
		select {
		case c := <-changes:
			got[c] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("changes %v after the leader's session ended; want a down and b up", got)
		}
	}
	if !got[change{"a", false}] || !got[change{"b", true}] {
		t.Fatalf("changes %v; want a down and b up", got)
	}

	// b stops cleanly: its lock goes with its session, and a leads again.
	stopB()
	stopB = func() {}
	next(change{"b", false})
	next(change{"a", true})
	stopA()
	stopA = func() {}
	next(change{"a", false})
}
