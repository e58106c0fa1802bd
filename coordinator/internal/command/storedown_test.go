package command

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// unreachable is a store that PostgreSQL's outage cuts off: while down,
// every call fails as the engine's do (store.ErrUnavailable); downFor
// cuts off only the writes of one step.
type unreachable struct {
	Store
	down    atomic.Bool
	downFor atomic.Value // string: a step whose writes fail
}

func (u *unreachable) err(steps ...store.AuditEntry) error {
	cut := u.down.Load()
	for _, e := range steps {
		cut = cut || u.downFor.Load() == e.Step
	}
	if cut {
		return &store.UnavailableError{Addr: "db.internal:5432", Err: errors.New("dial tcp 10.0.0.9:5432: connect: connection refused")}
	}
	return nil
}

func (u *unreachable) SwapRequestAudited(ctx context.Context, expect string, r store.RequestRecord, h *store.Handoff, steps ...store.AuditEntry) error {
	if err := u.err(steps...); err != nil {
		return err
	}
	return u.Store.SwapRequestAudited(ctx, expect, r, h, steps...)
}

func (u *unreachable) CreateRequestLimited(ctx context.Context, r store.RequestRecord, limit int, since time.Time, steps ...store.AuditEntry) (int, error) {
	if err := u.err(steps...); err != nil {
		return 0, err
	}
	return u.Store.CreateRequestLimited(ctx, r, limit, since, steps...)
}

func (u *unreachable) Request(ctx context.Context, id string) (store.RequestRecord, error) {
	if err := u.err(); err != nil {
		return store.RequestRecord{}, err
	}
	return u.Store.Request(ctx, id)
}

// TestStoreDownRefusesClearlyAndDispatchesNothing: while the store cannot
// be reached an approval, a denial and a new request are refused with an
// error that says the store is unreachable, that approvals and commands
// wait, and what did not happen; nothing reaches the agent. When the store
// goes away between the approval and the dispatch, the command is not
// sent without its "dispatched" row. Once it is back the approval goes
// through and the command is sent once.
func TestStoreDownRefusesClearlyAndDispatchesNothing(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{})
	u := &unreachable{Store: e.st}
	u.downFor.Store("")
	e.svc.store = u

	u.down.Store(true)
	const down = "the store (PostgreSQL at db.internal:5432) is unreachable: approvals and commands wait until it is back; "
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"approve", func() error { _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{}); return err }, NothingApproved},
		{"deny", func() error { _, err := e.svc.Deny(ctx, r.ID, "alice", "no"); return err }, NothingDenied},
		{"submit", func() error {
			_, err := e.svc.Submit(ctx, Submission{Server: "web-1", Command: "uptime", Reason: "look", TimeoutSeconds: 5, Token: "laptop"})
			return err
		}, NothingRequested},
		{"get", func() error { _, err := e.svc.Get(ctx, r.ID); return err }, NothingRead},
	} {
		err := c.call()
		var sd *StoreDownError
		if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &sd) || !strings.HasPrefix(err.Error(), down+c.want) {
			t.Errorf("%s with the store down: %v; want %q", c.name, err, down+c.want+" (…)")
		}
	}
	if e.out.count() != 0 {
		t.Fatalf("%d commands sent with the store down; want none", e.out.count())
	}

	// The store answers the approval, then goes before the dispatch row.
	u.down.Store(false)
	u.downFor.Store("dispatched")
	got, err := e.svc.Approve(ctx, r.ID, "alice", Approval{})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "not dispatched") || !strings.Contains(err.Error(), "nothing ran") {
		t.Fatalf("approve with the store gone before the dispatch row: %v; want not dispatched, nothing ran, ErrUnavailable", err)
	}
	if got.Status == StatusDispatched || e.out.count() != 0 {
		t.Fatalf("status %s, %d sent; want nothing sent without the dispatched row", got.Status, e.out.count())
	}
	if steps := e.steps(t, r.ID); strings.Contains(steps, "dispatched") {
		t.Fatalf("audit %q has a dispatched row", steps)
	}

	// Back: a new request is approved and sent once.
	u.downFor.Store("")
	r2 := e.submit(t, Submission{})
	if got, err := e.svc.Approve(ctx, r2.ID, "alice", Approval{}); err != nil || got.Status != StatusDispatched {
		t.Fatalf("approve once the store is back: %s, %v; want dispatched", got.Status, err)
	}
	if e.out.count() != 1 {
		t.Fatalf("%d commands sent; want 1", e.out.count())
	}
}
