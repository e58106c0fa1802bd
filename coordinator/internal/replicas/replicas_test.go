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

// TestHeartbeatsTellTheLiveReplicas: each replica tells its agents every
// live replica, first started first; a silent one drops out after three
// intervals, one that stops cleanly at once; an unchanged list is not told
// again, and one that could not be told is told at the next beat.
func TestHeartbeatsTellTheLiveReplicas(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	var ta, tb told
	a := New(st, Config{GRPC: "10.0.0.1:4601", HTTP: "10.0.0.1:4600"}, ta.tell, logger)
	b := New(st, Config{GRPC: "10.0.0.2:4601", HTTP: "10.0.0.2:4600"}, tb.tell, logger)
	a.now, b.now = now, now
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
