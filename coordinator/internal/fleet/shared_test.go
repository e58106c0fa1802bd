package fleet

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TestSharedFleetShowsTheOtherReplicasStreams: two replicas' fleets on one
// store. A server streaming to A shows in B online, held by A, with the
// state A saved, and follows A's updates; B never writes it nor takes
// commands for it; it goes offline in B when A releases the stream and
// when A goes silent; and a late release by A of a stream B has taken
// over leaves B's lease alone.
func TestSharedFleetShowsTheOtherReplicasStreams(t *testing.T) {
	ctx := context.Background()
	r := newSharedFleets(t)
	st := r.st
	beat, open := r.beat, func(id string) *Fleet { return r.open(id, 15*time.Second) }
	step := func(fs ...*Fleet) {
		t.Helper()
		r.now = r.now.Add(2 * time.Second)
		for _, f := range fs {
			if err := f.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range fs {
			if err := f.Reload(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	beat("a", "b")
	a, b := open("a"), open("b")

	stream := a.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop", CommandsEnabled: true})
	a.Apply("web-1", stream, &gridcityv1.StateUpdate{Full: true, Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100, UsedPercent: 40}}}})
	if _, ok := b.Server("web-1"); ok {
		t.Fatal("b knows web-1 before any reload")
	}
	step(a, b)
	s, ok := b.Server("web-1")
	if !ok || s.Status() != StatusOnline || s.Replica != "a" || s.Hello.GetDistrict() != "shop" || len(s.State.GetDisks().GetItems()) != 1 || s.State.GetDisks().GetItems()[0].GetUsedPercent() != 40 {
		t.Fatalf("web-1 in b: %+v (known %v); want online, held by a, district shop, disk / at 40%%", s, ok)
	}
	if s, _ := a.Server("web-1"); s.Replica != "" || !s.Online {
		t.Fatalf("web-1 in a: online %v, replica %q; want online here", s.Online, s.Replica)
	}
	if info := b.ServerInfo("web-1"); info.Online || info.HeldBy != "coord-a:4600" || info.Replica != "a" {
		t.Fatalf("b: %+v; want web-1 not on this stream but held by replica a (coord-a:4600), which b hands its commands to", info)
	}

	// A's next update reaches b; b's flush does not write web-1 back.
	a.Apply("web-1", stream, &gridcityv1.StateUpdate{Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100, UsedPercent: 70}}}})
	step(a, b)
	step(b)
	if s, _ := b.Server("web-1"); s.State.GetDisks().GetItems()[0].GetUsedPercent() != 70 || !s.Online {
		t.Fatalf("web-1 in b after a's update: online %v, %v; want online, disk at 70%%", s.Online, s.State.GetDisks())
	}

	// A releases the stream: offline in b.
	a.Disconnect("web-1", stream)
	step(a, b)
	if s, _ := b.Server("web-1"); s.Status() != StatusOffline || s.Replica != "" {
		t.Fatalf("web-1 in b after a released it: %s held by %q; want offline", s.Status(), s.Replica)
	}

	// Back on a, then a goes silent: offline in b once a's heartbeat is
	// older than the live bound.
	stream = a.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"})
	step(a, b)
	if s, _ := b.Server("web-1"); s.Status() != StatusOnline {
		t.Fatalf("web-1 in b after it came back to a: %s; want online", s.Status())
	}
	for range 8 {
		beat("b")
		step(b)
	}
	if s, _ := b.Server("web-1"); s.Status() != StatusOffline || s.Replica != "" {
		t.Fatalf("web-1 in b 16 s after a's last heartbeat: %s held by %q; want offline", s.Status(), s.Replica)
	}

	// Its agent fails over to b, and a, back, releases its stale stream
	// late: b keeps it, and a shows it held by b.
	beat("a", "b")
	bs := b.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"})
	step(b)
	a.Disconnect("web-1", stream)
	step(a, b)
	if s, _ := b.Server("web-1"); !s.Online || s.Replica != "" {
		t.Fatalf("web-1 in b, which holds it: online %v, replica %q; want online here", s.Online, s.Replica)
	}
	if s, _ := a.Server("web-1"); !s.Online || s.Replica != "b" {
		t.Fatalf("web-1 in a: online %v, replica %q; want online, held by b", s.Online, s.Replica)
	}
	ls, err := st.StreamLeases(ctx, time.Time{})
	if err != nil || len(ls) != 1 || ls[0].Replica != "b" {
		t.Fatalf("leases %+v, %v; want web-1 held by b", ls, err)
	}
	b.Disconnect("web-1", bs)
}

// TestReloadKeepsWhatDidNotChange: b reads web-1 again each time a saves
// it. An update of the figures alone leaves b's shape (the topology's
// key) as it was and keeps the sections b made before (the same pointers,
// which the topology's reuse keys by), while the new figures show; a
// change of listeners, connections, addresses or district changes the
// shape.
func TestReloadKeepsWhatDidNotChange(t *testing.T) {
	ctx := context.Background()
	r := newSharedFleets(t)
	r.beat("a", "b")
	a, b := r.open("a", time.Hour), r.open("b", time.Hour)
	step := func() {
		t.Helper()
		r.now = r.now.Add(2 * time.Second)
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stream := a.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"})
	a.Apply("web-1", stream, &gridcityv1.StateUpdate{Full: true,
		Host:        &gridcityv1.HostInfo{Hostname: "web-1", Addresses: []string{"10.0.0.1"}, UptimeSeconds: 100},
		Cpu:         &gridcityv1.CPU{Cores: 4},
		Listeners:   &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Address: "0.0.0.0", Port: 80, Proto: "tcp"}}},
		Connections: &gridcityv1.Connections{Items: []*gridcityv1.Connection{{RemoteAddress: "10.0.0.9", RemotePort: 5432}}}})
	step()
	before, _ := b.Server("web-1")
	shape := b.ShapeVersion()

	// Figures and uptime only: the shape stays, the sections that did not change are kept.
	a.Apply("web-1", stream, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 8},
		Host: &gridcityv1.HostInfo{Hostname: "web-1", Addresses: []string{"10.0.0.1"}, UptimeSeconds: 160}})
	step()
	after, _ := b.Server("web-1")
	if after.State.GetCpu().GetCores() != 8 || after.State.GetHost().GetUptimeSeconds() != 160 {
		t.Fatalf("b after the figures changed: %v; want 8 cores, uptime 160", after.State)
	}
	if b.ShapeVersion() != shape {
		t.Fatal("the shape changed when only figures and uptime did")
	}
	if after.State.GetListeners() != before.State.GetListeners() || after.State.GetConnections() != before.State.GetConnections() || after.Hello != before.Hello {
		t.Fatal("a reload made new listeners, connections or hello of the same content; want the ones made before kept")
	}

	for _, c := range []struct {
		what string
		u    *gridcityv1.StateUpdate
	}{
		{"listeners", &gridcityv1.StateUpdate{Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Address: "0.0.0.0", Port: 443, Proto: "tcp"}}}}},
		{"connections", &gridcityv1.StateUpdate{Connections: &gridcityv1.Connections{}}},
		{"addresses", &gridcityv1.StateUpdate{Host: &gridcityv1.HostInfo{Hostname: "web-1", Addresses: []string{"10.0.0.2"}}}},
	} {
		shape := b.ShapeVersion()
		a.Apply("web-1", stream, c.u)
		step()
		if b.ShapeVersion() == shape {
			t.Fatalf("the %s changed and the shape did not", c.what)
		}
	}
	shape = b.ShapeVersion()
	a.Disconnect("web-1", stream)
	stream = a.Connect(&gridcityv1.Hello{Name: "web-1", District: "back-office"})
	step()
	if s, _ := b.Server("web-1"); s.Hello.GetDistrict() != "back-office" || b.ShapeVersion() == shape {
		t.Fatalf("after the district changed: %q, shape changed %v; want back-office, a new shape", s.Hello.GetDistrict(), b.ShapeVersion() != shape)
	}
}

// TestUnsharedFleetWritesNoLeases: a fleet that is not shared (SQLite, one
// replica) behaves as before: no leases, and Reload does nothing.
func TestUnsharedFleetWritesNoLeases(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err := New(ctx, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	f.Connect(&gridcityv1.Hello{Name: "web-1"})
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if ls, err := st.StreamLeases(ctx, time.Time{}); err != nil || len(ls) != 0 {
		t.Fatalf("leases %+v, %v; want none", ls, err)
	}
}

// sharedFleets are replicas' fleets on one SQLite store, on one clock.
type sharedFleets struct {
	t   *testing.T
	st  *store.SQLite
	now time.Time
}

func newSharedFleets(t *testing.T) *sharedFleets {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &sharedFleets{t: t, st: st, now: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
}

// beat records a heartbeat of each replica now (HTTP coord-ID:4600).
func (r *sharedFleets) beat(ids ...string) {
	r.t.Helper()
	for _, id := range ids {
		if err := r.st.HeartbeatReplica(context.Background(), store.Replica{ID: id, GRPC: "127.0.0.1:4601", HTTP: "coord-" + id + ":4600", HeartbeatAt: r.now}, time.Time{}); err != nil {
			r.t.Fatal(err)
		}
	}
}

// open is replica id's fleet, counting a replica live for liveFor.
func (r *sharedFleets) open(id string, liveFor time.Duration) *Fleet {
	r.t.Helper()
	f, err := New(context.Background(), r.st, slog.New(slog.NewTextHandler(io.Discard, nil)), WithClock(func() time.Time { return r.now }), WithStartupGrace(0))
	if err != nil {
		r.t.Fatal(err)
	}
	f.Share(id, liveFor)
	return f
}
