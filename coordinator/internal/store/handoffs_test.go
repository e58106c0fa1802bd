package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

func newRequest(t *testing.T, s Store, id, token string, at time.Time) RequestRecord {
	t.Helper()
	r := RequestRecord{ID: id, Server: "web-1", Token: token, Status: "pending", CreatedAt: at, Body: []byte(`{"status":"pending"}`)}
	if _, err := s.CreateRequestLimited(context.Background(), r, 100, at.Add(-time.Hour), step(id, "requested", "{}")); err != nil {
		t.Fatal(err)
	}
	return r
}

// A change of a request is made from the status it was read in, or not at
// all: a second approval, or a denial after an approval, writes neither
// the request nor an audit row and says what the request is now. The
// hand-off written with an approval goes when the request leaves
// "approved".
func TestSwapRequestAuditedIsConditional(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_700_000_000_000)
		r := newRequest(t, s, "cmd_a", "laptop", now)
		approved := r
		approved.Status, approved.Body = "approved", []byte(`{"status":"approved"}`)
		h := &Handoff{RequestID: "cmd_a", Replica: "b", Sealed: []byte("sealed"), CreatedAt: now, Auth: []byte("auth")}
		if err := s.SwapRequestAudited(ctx, "pending", approved, h, step("cmd_a", "approved", "{}")); err != nil {
			t.Fatal(err)
		}
		denied := r
		denied.Status = "denied"
		err := s.SwapRequestAudited(ctx, "pending", denied, nil, step("cmd_a", "denied", "{}"))
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "it is approved") {
			t.Fatalf("deny after the approval: %v; want ErrConflict saying it is approved", err)
		}
		if got := auditSteps(t, s, "cmd_a"); got != "requested,approved" {
			t.Fatalf("audit steps %q; want requested,approved", got)
		}
		if got, _ := s.Request(ctx, "cmd_a"); got.Status != "approved" {
			t.Fatalf("status %s; want approved", got.Status)
		}
		for _, replica := range []string{"b", ""} {
			if hs, err := s.Handoffs(ctx, replica); err != nil || len(hs) != 1 || string(hs[0].Sealed) != "sealed" || hs[0].Replica != "b" || !hs[0].CreatedAt.Equal(now) || string(hs[0].Auth) != "auth" {
				t.Fatalf("hand-offs of %q: %+v, %v; want the one to b", replica, hs, err)
			}
		}
		if hs, err := s.Handoffs(ctx, "c"); err != nil || len(hs) != 0 {
			t.Fatalf("hand-offs of c: %+v, %v; want none", hs, err)
		}
		dispatched := r
		dispatched.Status = "dispatched"
		if err := s.SwapRequestAudited(ctx, "approved", dispatched, nil, step("cmd_a", "dispatched", "{}")); err != nil {
			t.Fatal(err)
		}
		if hs, err := s.Handoffs(ctx, ""); err != nil || len(hs) != 0 {
			t.Fatalf("hand-offs after dispatch: %+v, %v; want none", hs, err)
		}
		if err := s.SwapRequestAudited(ctx, "pending", dispatched, nil, step("cmd_x", "dispatched", "{}")); err == nil {
			t.Fatal("a change of a request that does not exist was written")
		}
		if err := s.SwapRequestAudited(ctx, "dispatched", denied, h, step("cmd_a", "denied", "{}")); err == nil {
			t.Fatal("a hand-off went with a change that is not an approval")
		}
		if err := s.SwapRequestAudited(ctx, "dispatched", denied, nil); err == nil {
			t.Fatal("a change without an audit row was written")
		}
	})
}

// Two coordinators (two opens of one store) approve one request at the
// same moment, many times over: exactly one approval is written each time.
func TestSwapRequestAuditedOneWinner(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		now := time.UnixMilli(1_700_000_000_000)
		for i := range 10 {
			id := fmt.Sprint("cmd_", i)
			r := newRequest(t, a, id, "laptop", now)
			r.Status = "approved"
			var wg sync.WaitGroup
			errs := make([]error, 6)
			start := make(chan struct{})
			for j := range errs {
				s := []Store{a, b}[j%2]
				wg.Go(func() {
					<-start
					errs[j] = s.SwapRequestAudited(ctx, "pending", r, nil, step(id, "approved", fmt.Sprintf(`{"by":%d}`, j)))
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, ErrConflict):
					t.Fatalf("a losing approval: %v; want ErrConflict", err)
				}
			}
			if got := auditSteps(t, a, id); won != 1 || got != "requested,approved" {
				t.Fatalf("%d approvals won, audit %q; want exactly one", won, got)
			}
		}
	})
}

// The pending limit holds when the requests of one token arrive at two
// coordinators at once: exactly limit are recorded, the rest refused with
// ErrTooMany; other statuses, other tokens and older requests do not count.
func TestCreateRequestLimitedAcrossCoordinators(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		now := time.UnixMilli(1_700_000_000_000)
		const limit = 5
		newRequest(t, a, "cmd_old", "laptop", now.Add(-time.Hour))
		newRequest(t, a, "cmd_other", "desk", now)
		var wg sync.WaitGroup
		errs := make([]error, 4*limit)
		start := make(chan struct{})
		for i := range errs {
			s := []Store{a, b}[i%2]
			wg.Go(func() {
				<-start
				id := fmt.Sprint("cmd_", i)
				r := RequestRecord{ID: id, Server: "web-1", Token: "laptop", Status: "pending", CreatedAt: now, Body: []byte("{}")}
				_, errs[i] = s.CreateRequestLimited(ctx, r, limit, now.Add(-time.Minute), step(id, "requested", "{}"))
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrTooMany):
				t.Fatalf("a refusal: %v; want ErrTooMany", err)
			}
		}
		if n, err := a.CountRequests(ctx, "laptop", "pending", now.Add(-time.Minute)); ok != limit || n != limit || err != nil {
			t.Fatalf("%d recorded, %d pending (%v); want exactly %d", ok, n, err, limit)
		}
		if n, err := a.CreateRequestLimited(ctx, RequestRecord{ID: "cmd_more", Token: "laptop", Status: "pending", CreatedAt: now, Body: []byte("{}")}, limit, now.Add(-time.Minute), step("cmd_more", "requested", "{}")); !errors.Is(err, ErrTooMany) || n != limit {
			t.Fatalf("one more: %d, %v; want ErrTooMany at %d", n, err, limit)
		}
		if _, err := a.Request(ctx, "cmd_more"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused request was stored: %v", err)
		}
		if got := auditSteps(t, a, "cmd_more"); got != "" {
			t.Fatalf("the refused request left audit rows %q", got)
		}
	})
}

// A replica's hand-off key is kept with its row.
func TestReplicaHandoffKey(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_700_000_000_000)
		if err := s.HeartbeatReplica(ctx, Replica{ID: "a", GRPC: "10.0.0.1:4601", HeartbeatAt: now, HandoffKey: []byte{1, 2, 3}}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if rs, err := s.Replicas(ctx, now); err != nil || len(rs) != 1 || string(rs[0].HandoffKey) != "\x01\x02\x03" {
			t.Fatalf("replicas %+v, %v; want a with its key", rs, err)
		}
	})
}

// Every change of a request is announced on PostgreSQL once it commits,
// with the request's id; a listener says when it (re)connects with "".
func TestPostgresNotifiesRequestChanges(t *testing.T) {
	s := openPostgres(t, pgtest.Database(t))
	next := listenTo(t, s, RequestsChannel)
	ctx := context.Background()
	now := time.Now()
	r := newRequest(t, s, "cmd_n", "laptop", now)
	if p := next("created"); p != "cmd_n" {
		t.Fatalf("notified %q; want cmd_n", p)
	}
	r.Status = "denied"
	if err := s.SwapRequestAudited(ctx, "approved", r, nil, step("cmd_n", "denied", "{}")); !errors.Is(err, ErrConflict) {
		t.Fatal(err)
	}
	if err := s.SwapRequestAudited(ctx, "pending", r, nil, step("cmd_n", "denied", "{}")); err != nil {
		t.Fatal(err)
	}
	if p := next("denied"); p != "cmd_n" {
		t.Fatalf("notified %q; want cmd_n", p)
	}
	// The listener's connection is killed: it listens again, and says so.
	if _, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if p := next("listening again"); p != "" {
		t.Fatalf("after the connection broke: %q; want \"\" (listening again)", p)
	}
}

// listenTo listens on channel until the test ends, once the listener says
// it listens; next returns the next payload, failing the test after 10 s.
func listenTo(t *testing.T, s *Postgres, channel string) (next func(what string) string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Listen(ctx, channel, slog.New(slog.NewTextHandler(io.Discard, nil)), func(p string) { got <- p })
	}()
	t.Cleanup(func() { cancel(); <-done })
	next = func(what string) string {
		t.Helper()
		select {
		case p := <-got:
			return p
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification on %s: %s", channel, what)
			return ""
		}
	}
	if p := next("listening"); p != "" {
		t.Fatalf("first call %q; want \"\" (listening)", p)
	}
	return next
}

// A card shown on two coordinators' apps at once is audited once: of many
// concurrent AppendAuditOnce of one step, exactly one writes; other steps
// and other requests are not held back.
func TestAppendAuditOnceAcrossCoordinators(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		now := time.UnixMilli(1_700_000_000_000)
		for i := range 5 {
			id := fmt.Sprint("cmd_", i)
			newRequest(t, a, id, "laptop", now)
			var wg sync.WaitGroup
			wrote := make([]bool, 6)
			start := make(chan struct{})
			for j := range wrote {
				s := []Store{a, b}[j%2]
				wg.Go(func() {
					<-start
					var err error
					if wrote[j], err = s.AppendAuditOnce(ctx, step(id, "shown", fmt.Sprintf(`{"by":%d}`, j))); err != nil {
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			if n := len(slices.DeleteFunc(wrote, func(w bool) bool { return !w })); n != 1 {
				t.Fatalf("%d of 6 said they wrote the shown row; want one", n)
			}
			if ok, err := b.AppendAuditOnce(ctx, step(id, "dispatched", "{}")); err != nil || !ok {
				t.Fatalf("another step after shown: %v, %v; want it written", ok, err)
			}
			if got := auditSteps(t, a, id); got != "requested,shown,dispatched" {
				t.Fatalf("audit %q; want requested,shown,dispatched: shown once", got)
			}
		}
	})
}
