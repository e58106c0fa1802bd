package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// cutStore is a shared store that can be cut off: while down, what the
// fleet reads and writes fails as PostgreSQL's calls do when it is
// unreachable.
type cutStore struct {
	*store.SQLite
	down atomic.Bool
}

func (s *cutStore) err() error {
	if s.down.Load() {
		return &store.UnavailableError{Addr: "db:5432", Err: errors.New("connection refused")}
	}
	return nil
}

func (s *cutStore) SaveServers(ctx context.Context, rs []store.ServerRecord) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.SQLite.SaveServers(ctx, rs)
}

func (s *cutStore) SaveStreamLeases(ctx context.Context, replica string, held []store.StreamLease, released []string, now time.Time) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.SQLite.SaveStreamLeases(ctx, replica, held, released, now)
}

func (s *cutStore) Replicas(ctx context.Context, since time.Time) ([]store.Replica, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.SQLite.Replicas(ctx, since)
}

func (s *cutStore) StreamLeases(ctx context.Context, since time.Time) ([]store.StreamLease, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.SQLite.StreamLeases(ctx, since)
}

func (s *cutStore) ServersSeenSince(ctx context.Context, since time.Time, wanted func(string, time.Time) bool) ([]store.ServerRecord, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.SQLite.ServersSeenSince(ctx, since, wanted)
}

// TestStoreOutageKeepsTheOtherReplicasServers: while the store is down, a
// replica keeps showing the server another replica holds as it last read
// it, online, and says since when the store is unreachable and how old
// that view is; when the store is back, and before the other replica has
// beaten again, the server stays online there, the outage is over, and
// the metric minute that ended during the outage is written.
func TestStoreOutageKeepsTheOtherReplicasServers(t *testing.T) {
	ctx := context.Background()
	sq, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &cutStore{SQLite: sq}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	beat := func(id string) {
		t.Helper()
		if err := st.HeartbeatReplica(ctx, store.Replica{ID: id, GRPC: "127.0.0.1:4601", HTTP: "coord-" + id + ":4600", HeartbeatAt: now}, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	var fleets []*Fleet
	for _, id := range []string{"a", "b"} {
		beat(id)
		f, err := New(ctx, st, slog.New(slog.NewTextHandler(io.Discard, nil)), WithClock(clock), WithStartupGrace(0))
		if err != nil {
			t.Fatal(err)
		}
		f.Share(id, 15*time.Second)
		fleets = append(fleets, f)
	}
	a, b := fleets[0], fleets[1]
	// step is one tick of Run on each fleet: a flush, then a reload.
	step := func(want error) {
		t.Helper()
		now = now.Add(2 * time.Second)
		for _, f := range fleets {
			if err := f.Flush(ctx); !errors.Is(err, want) {
				t.Fatalf("flush: %v; want %v", err, want)
			}
			if err := f.Reload(ctx); !errors.Is(err, want) {
				t.Fatalf("reload: %v; want %v", err, want)
			}
		}
	}
	stream := a.Connect(&gridcityv1.Hello{Name: "web-1"})
	a.Apply("web-1", stream, &gridcityv1.StateUpdate{Full: true, Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100, UsedPercent: 40}}}})
	step(nil)
	if s, _ := b.Server("web-1"); !s.Online || s.Replica != "a" {
		t.Fatalf("web-1 in b: online %v held by %q; want online, held by a", s.Online, s.Replica)
	}
	if o, down := b.StoreOutage(); down {
		t.Fatalf("b reports an outage with the store up: %+v", o)
	}
	lastRead := now

	st.down.Store(true)
	step(store.ErrUnavailable)
	wentDown := now
	for range 30 { // a minute without the store
		a.Apply("web-1", stream, &gridcityv1.StateUpdate{Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100, UsedPercent: 90}}}})
		step(store.ErrUnavailable)
	}
	s, _ := b.Server("web-1")
	if !s.Online || s.Replica != "a" || s.State.GetDisks().GetItems()[0].GetUsedPercent() != 40 {
		t.Fatalf("web-1 in b during the outage: online %v held by %q, %v; want online, held by a, as last read (40%%)", s.Online, s.Replica, s.State.GetDisks())
	}
	o, down := b.StoreOutage()
	if !down || !o.Since.Equal(wentDown) || !o.AsOf.Equal(lastRead) || !errors.Is(o.Err, store.ErrUnavailable) {
		t.Fatalf("b's outage: %+v (down %v); want since %s, view as of %s, ErrUnavailable", o, down, wentDown, lastRead)
	}
	if s, _ := a.Server("web-1"); !s.Online || s.Replica != "" || s.State.GetDisks().GetItems()[0].GetUsedPercent() != 90 {
		t.Fatalf("web-1 in a, which holds its stream: online %v held by %q, %v; want live here at 90%%", s.Online, s.Replica, s.State.GetDisks())
	}

	// Back. Neither replica has beaten since the outage began.
	st.down.Store(false)
	step(nil)
	if o, down := b.StoreOutage(); down {
		t.Fatalf("b still reports an outage after a reload that reached the store: %+v", o)
	}
	s, _ = b.Server("web-1")
	if !s.Online || s.Replica != "a" || s.State.GetDisks().GetItems()[0].GetUsedPercent() != 90 {
		t.Fatalf("web-1 in b after the store came back: online %v held by %q, %v; want online, held by a, at 90%% (a has had no chance to beat yet)", s.Online, s.Replica, s.State.GetDisks())
	}
	for range 10 {
		beat("a")
		beat("b")
		step(nil)
	}
	if s, _ := b.Server("web-1"); !s.Online || s.Replica != "a" {
		t.Fatalf("web-1 in b once both beat again: online %v held by %q; want online, held by a", s.Online, s.Replica)
	}
	// The minute that ended during the outage was written once it was back.
	hist, err := sq.MetricHistory(ctx, "web-1", store.MetricStep, wentDown.Truncate(time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	var outageMinute *store.MetricPoint
	for i, p := range hist {
		if p.Metric == "disk:/" && p.At.Equal(wentDown.Truncate(time.Minute)) {
			outageMinute = &hist[i]
		}
	}
	if outageMinute == nil || outageMinute.Max != 90 {
		t.Fatalf("web-1's disk history %+v; want the minute of the outage (%s), at 90%% at most", hist, wentDown.Truncate(time.Minute))
	}
}
