package replicas

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

type told struct{ lists [][]string }

func (t *told) tell(addrs []string) error {
	t.lists = append(t.lists, addrs)
	return nil
}

func (t *told) last() []string {
	if len(t.lists) == 0 {
		return nil
	}
	return t.lists[len(t.lists)-1]
}

func sqlite(t *testing.T) *store.SQLite {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pair is two replicas on st, 10.0.0.1 and 10.0.0.2, reading the time
// from clock and telling ta and tb.
func pair(st Store, clock *time.Time, ta, tb *told) (a, b *Heart) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := func() time.Time { return *clock }
	a = New(st, Config{GRPC: "10.0.0.1:4601", HTTP: "10.0.0.1:4600"}, ta.tell, logger)
	b = New(st, Config{GRPC: "10.0.0.2:4601", HTTP: "10.0.0.2:4600"}, tb.tell, logger)
	a.now, b.now = now, now
	return a, b
}

// TestHeartbeatsTellTheLiveReplicas: each replica tells its agents every
// live replica, first started first; a silent one drops out after three
// intervals, one that stops cleanly at once; an unchanged list is not told
// again, and one that could not be told is told at the next beat.
func TestHeartbeatsTellTheLiveReplicas(t *testing.T) {
	ctx := context.Background()
	st := sqlite(t)
	clock := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var ta, tb told
	a, b := pair(st, &clock, &ta, &tb)
	if a.ID() == b.ID() {
		t.Fatalf("two replicas share the id %s", a.ID())
	}
	beat := func(h *Heart) {
		t.Helper()
		if err := h.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	beat(a)
	if got := ta.last(); !slices.Equal(got, []string{"10.0.0.1:4601"}) {
		t.Fatalf("a alone told %v; want itself", got)
	}
	clock = clock.Add(time.Second)
	beat(b)
	beat(a)
	both := []string{"10.0.0.1:4601", "10.0.0.2:4601"}
	if !slices.Equal(ta.last(), both) || !slices.Equal(tb.last(), both) {
		t.Fatalf("a told %v, b told %v; want both %v", ta.last(), tb.last(), both)
	}
	n := len(ta.lists)
	beat(a)
	if len(ta.lists) != n {
		t.Fatalf("an unchanged list was told again: %v", ta.lists)
	}

	// b falls silent (killed): three intervals later a tells itself alone.
	clock = clock.Add(3*5*time.Second + time.Millisecond)
	beat(a)
	if got := ta.last(); !slices.Equal(got, []string{"10.0.0.1:4601"}) {
		t.Fatalf("after b fell silent a told %v; want itself alone", got)
	}

	// b comes back; telling fails once, so the list is told at the next beat.
	beat(b)
	failing := errors.New("agents unreachable")
	a.tell = func([]string) error { return failing }
	if err := a.Beat(ctx); !errors.Is(err, failing) {
		t.Fatalf("Beat with a failing tell = %v; want its error", err)
	}
	a.tell = ta.tell
	beat(a)
	if !slices.Equal(ta.last(), both) {
		t.Fatalf("after a failed tell a told %v; want %v", ta.last(), both)
	}

	// b stops cleanly: it is gone from the store at once.
	stopped, stop := context.WithCancel(ctx)
	stop()
	b.Run(stopped)
	beat(a)
	if got := ta.last(); !slices.Equal(got, []string{"10.0.0.1:4601"}) {
		t.Fatalf("after b stopped cleanly a told %v; want itself alone", got)
	}
}

// outageStore is a store that can be cut off: while down, every call the
// heart makes fails as PostgreSQL's do when it is unreachable.
type outageStore struct {
	Store
	down bool
}

func (s *outageStore) err() error {
	if s.down {
		return &store.UnavailableError{Addr: "db:5432", Err: errors.New("connection refused")}
	}
	return nil
}

func (s *outageStore) HeartbeatReplica(ctx context.Context, r store.Replica, forgetBefore time.Time) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Store.HeartbeatReplica(ctx, r, forgetBefore)
}

func (s *outageStore) Replicas(ctx context.Context, since time.Time) ([]store.Replica, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Replicas(ctx, since)
}

// TestAfterAnOutageTheOthersHaveTimeToBeat: while the store is down no
// replica can beat and the agents keep the list they had; when it is back,
// the first replica to beat still tells its agents of the others (their
// heartbeats are as old as the outage, not dead), until they have had
// three intervals to beat again; one that does not is then left out.
func TestAfterAnOutageTheOthersHaveTimeToBeat(t *testing.T) {
	ctx := context.Background()
	st := &outageStore{Store: sqlite(t)}
	clock := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	var ta, tb told
	a, b := pair(st, &clock, &ta, &tb)
	beat := func(h *Heart) {
		t.Helper()
		if err := h.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	beat(a)
	clock = clock.Add(time.Second)
	beat(b)
	beat(a)
	both := []string{"10.0.0.1:4601", "10.0.0.2:4601"}
	if !slices.Equal(ta.last(), both) {
		t.Fatalf("a told %v; want %v", ta.last(), both)
	}

	st.down = true
	for range 12 { // a minute of beats that fail
		clock = clock.Add(5 * time.Second)
		if err := a.Beat(ctx); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a beat with the store down: %v; want ErrUnavailable", err)
		}
		b.Beat(ctx)
	}
	if !slices.Equal(ta.last(), both) {
		t.Fatalf("during the outage a told %v; want the list it had, %v", ta.last(), both)
	}

	st.down = false
	clock = clock.Add(time.Second)
	beat(a) // first back: b has not beaten since the outage began
	if !slices.Equal(ta.last(), both) {
		t.Fatalf("a, first to beat after the outage, told %v; want %v (b has had no chance to beat)", ta.last(), both)
	}
	clock = clock.Add(5 * time.Second)
	beat(a)
	if !slices.Equal(ta.last(), both) {
		t.Fatalf("5 s after the outage a told %v; want %v", ta.last(), both)
	}
	// b died during the outage: it never beats again.
	clock = clock.Add(3*5*time.Second - 5*time.Second + time.Millisecond)
	beat(a)
	if got := ta.last(); !slices.Equal(got, []string{"10.0.0.1:4601"}) {
		t.Fatalf("three intervals after the outage, b silent, a told %v; want itself alone", got)
	}
}
