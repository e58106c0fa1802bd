package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func TestStateSurvivesRestartAndStaleStreamsAreIgnored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := New(ctx, st, logger)
	old := f.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"})
	cur := f.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"}) // reconnect before the old stream ended
	f.Apply("web-1", cur, &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 8, BusyPercent: proto.Float64(10)}, Memory: &gridcityv1.Memory{UsedPercent: 40}, Host: &gridcityv1.HostInfo{Os: "debian"}})
	f.Apply("web-1", old, &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 1}})
	f.Disconnect("web-1", old)
	if s, _ := f.Server("web-1"); !s.Online || s.State.GetCpu().GetCores() != 8 {
		t.Fatalf("got online=%v cores=%d; want the current stream's view: online, 8", s.Online, s.State.GetCpu().GetCores())
	}
	f.Apply("web-1", cur, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 8, BusyPercent: proto.Float64(55)}})
	if err := f.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2, _ := store.OpenSQLite(ctx, dir)
	defer st2.Close()
	f2, err := New(ctx, st2, logger)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f2.Server("web-1")
	if !ok || s.Online || s.State.GetCpu().GetBusyPercent() != 55 || s.State.GetHost().GetOs() != "debian" || s.Hello.GetDistrict() != "shop" {
		t.Fatalf("after restart got %+v; want web-1 offline with its merged state", s)
	}
	if m := history(t, st2, "web-1"); m["cpu"] != "1 55 55 55" {
		t.Fatalf("metrics %+v; want one cpu sample at 55%%", m)
	}
}

// history is a server's one-minute history by metric, each bucket as "N
// min avg max", the buckets of a metric joined by "; ".
func history(t *testing.T, st store.Store, server string) map[string]string {
	t.Helper()
	ps, err := st.MetricHistory(context.Background(), server, store.MetricStep, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range ps {
		b := fmt.Sprintf("%d %g %g %g", p.N, p.Min, p.Avg(), p.Max)
		if out[p.Metric] != "" {
			b = out[p.Metric] + "; " + b
		}
		out[p.Metric] = b
	}
	return out
}

// TestMetricSampleNeedsKnownValues: an unknown busy share is not stored as
// 0 in the history (an agent's first sample has no busy share); the
// figures that are known are.
func TestMetricSampleNeedsKnownValues(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, _ := New(ctx, st, slog.New(slog.DiscardHandler))
	id := f.Connect(&gridcityv1.Hello{Name: "web-1"})
	for _, u := range []*gridcityv1.StateUpdate{
		{Full: true, Cpu: &gridcityv1.CPU{Cores: 8, Load1: 1}, Memory: &gridcityv1.Memory{UsedPercent: 40}}, // first sample: busy unknown
		{Cpu: &gridcityv1.CPU{Cores: 8, BusyPercent: proto.Float64(30), Load1: 1}},                          // memory stays known
	} {
		f.Apply("web-1", id, u)
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if m := history(t, st, "web-1"); m["cpu"] != "1 30 30 30" || m["memory"] != "2 40 40 40" || m["load"] != "2 1 1 1" {
		t.Fatalf("history %v; want one cpu sample of 30%% (none with an unknown busy share as 0), two of memory and load", m)
	}
}

// TestMetricHistoryKeepsMinutes samples a server every 5 s for three
// minutes on an injected clock: the store receives each minute once it
// has passed, as one bucket per metric (cpu, memory, load and each disk,
// the 32 largest of a host with 40), the minute in progress is readable
// from the fleet, and the retention given to the fleet is the store's.
func TestMetricHistoryKeepsMinutes(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &clock{time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	keep := store.MetricRetention{Raw: time.Hour, Rollup: 2 * time.Hour}
	f, _ := New(ctx, st, slog.New(slog.DiscardHandler), WithClock(c.now), WithMetricRetention(keep))
	if f.MetricRetention() != keep {
		t.Fatalf("MetricRetention = %v; want %v", f.MetricRetention(), keep)
	}
	id := f.Connect(&gridcityv1.Hello{Name: "web-1"})
	var disks []*gridcityv1.Disk
	for i := range 40 {
		disks = append(disks, &gridcityv1.Disk{Mount: fmt.Sprintf("/d%02d", i), TotalBytes: uint64(1+i) << 30, UsedPercent: 10})
	}
	f.Apply("web-1", id, &gridcityv1.StateUpdate{Full: true, Memory: &gridcityv1.Memory{UsedPercent: 40}, Disks: &gridcityv1.Disks{Items: disks}})
	for i := range 36 { // 10:00:00 to 10:02:55
		f.Apply("web-1", id, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{BusyPercent: proto.Float64(float64(i % 12)), Load1: 2}})
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		m := history(t, st, "web-1")
		if minutes := i / 12; strings.Count(m["cpu"], ";")+1 != minutes && minutes > 0 {
			t.Fatalf("at %s the store holds cpu %q; want the %d minutes passed", c.t.Format("15:04:05"), m["cpu"], minutes)
		}
		c.t = c.t.Add(5 * time.Second)
	}
	open := f.OpenMetrics("web-1")
	if len(open) != 3+maxHistoryDisks || open[0].N != 12 || !open[0].At.Equal(time.Date(2026, 12, 1, 10, 2, 0, 0, time.UTC)) {
		t.Fatalf("open minute %+v; want 35 buckets of 12 samples at 10:02", open[:1])
	}
	if err := f.Flush(ctx); err != nil { // 10:03:00: the third minute is written
		t.Fatal(err)
	}
	m := history(t, st, "web-1")
	if want := "12 0 5.5 11; 12 0 5.5 11; 12 0 5.5 11"; m["cpu"] != want || m["load"] != "12 2 2 2; 12 2 2 2; 12 2 2 2" {
		t.Errorf("cpu %q load %q; want three minutes of 12 samples each: %q", m["cpu"], m["load"], want)
	}
	if len(m) != 3+maxHistoryDisks || m["disk:/d39"] == "" || m["disk:/d08"] != m["disk:/d39"] || m["disk:/d07"] != "" {
		t.Errorf("history has %d metrics (/d39 %q, /d08 %q, /d07 %q); want cpu, memory, load and the 32 largest disks, /d08 to /d39", len(m), m["disk:/d39"], m["disk:/d08"], m["disk:/d07"])
	}
	// Two hours later, with a sample every minute: the one-hour retention
	// holds, and the minutes of 10:00 are gone.
	for range 120 {
		c.t = c.t.Add(time.Minute)
		f.Apply("web-1", id, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{BusyPercent: proto.Float64(1)}})
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := st.MetricHistory(ctx, "web-1", store.MetricStep, time.Time{}, 0)
	if oldest := raw[0].At; c.t.Sub(oldest) > keep.Raw+store.MetricStep {
		t.Errorf("oldest minute %s at %s; want at most %s kept", oldest, c.t, keep.Raw)
	}
}

// clock is a settable time for the fleet under test.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// restarted stores servers as a coordinator that stopped at t0 left them
// (last heard from at t0 minus the given age), with the open incidents
// given, and starts a fleet on them at t0 with the clock c.
func restarted(t *testing.T, c *clock, seen map[string]time.Duration, open []store.Incident, opts ...Option) (*Fleet, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var recs []store.ServerRecord
	for name, age := range seen {
		recs = append(recs, store.ServerRecord{Name: name, State: []byte{}, Hello: []byte{}, LastSeen: c.t.Add(-age)})
	}
	if err := st.SaveServers(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, in := range open {
		if _, err := st.OpenIncident(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(ctx, st, slog.New(slog.DiscardHandler), append([]Option{WithClock(c.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return f, st
}

func statuses(f *Fleet) map[string]string {
	out := map[string]string{}
	for _, s := range f.Servers() {
		out[s.Name] = s.Status()
	}
	return out
}

func TestStartupGrace(t *testing.T) {
	t0 := time.UnixMilli(1_750_000_000_000)
	c := &clock{t0}
	f, _ := restarted(t, c, map[string]time.Duration{
		"web-1": 3 * time.Second,  // connected at the stop
		"web-2": 40 * time.Second, // a quiet one: its stored LastSeen lags
		"db-1":  20 * time.Second, // went down just before the stop: its incident is open
		"api":   25 * time.Second, // down too, explained by the database's incident
		"old":   3 * time.Hour,    // offline long before the stop
	}, []store.Incident{
		{Target: "db-1", Kind: "server", Reason: "agent offline", StartedAt: t0.Add(-20 * time.Second)},
		{Target: "orders-db", Kind: "database", Reason: "connection refused", StartedAt: t0.Add(-time.Minute), Explains: []string{"api"}},
	})
	want := map[string]string{"web-1": StatusReconnecting, "web-2": StatusReconnecting, "db-1": StatusOffline, "api": StatusOffline, "old": StatusOffline}
	if got := statuses(f); !maps.Equal(got, want) {
		t.Fatalf("at the start got %v; want %v", got, want)
	}
	if s, _ := f.Server("web-2"); s.Online || !s.Restarted.Equal(t0) || !s.GraceEnds.Equal(t0.Add(DefaultStartupGrace)) || !s.LastSeen.Equal(t0.Add(-40*time.Second)) {
		t.Fatalf("web-2 = %+v; want offline, reconnecting since the restart at %v until %v", s, t0, t0.Add(DefaultStartupGrace))
	}

	// web-1 returns; web-2 does not.
	c.t = t0.Add(8 * time.Second)
	f.Connect(&gridcityv1.Hello{Name: "web-1"})
	shape := f.ShapeVersion()
	c.t = t0.Add(DefaultStartupGrace - time.Millisecond)
	if got := f.ShapeVersion(); got != shape {
		t.Fatalf("shape changed from %d to %d within the grace with nothing happening", shape, got)
	}
	if got := statuses(f)["web-2"]; got != StatusReconnecting {
		t.Fatalf("web-2 is %s just before the grace ends; want reconnecting", got)
	}
	c.t = t0.Add(DefaultStartupGrace)
	if got := f.ShapeVersion(); got == shape {
		t.Fatal("the grace ended without a change of shape: a graph built during it would be reused")
	}
	want = map[string]string{"web-1": StatusOnline, "web-2": StatusOffline, "db-1": StatusOffline, "api": StatusOffline, "old": StatusOffline}
	if got := statuses(f); !maps.Equal(got, want) {
		t.Fatalf("after the grace got %v; want %v", got, want)
	}
	if s, _ := f.Server("web-2"); s.Reconnecting || !s.Restarted.IsZero() || !s.GraceEnds.IsZero() {
		t.Fatalf("web-2 after the grace = %+v; want no grace fields", s)
	}

	// A server that connects and drops again during the grace was seen
	// going: it is offline, not reconnecting.
	c.t = t0
	g, _ := restarted(t, c, map[string]time.Duration{"web-1": time.Second, "web-2": time.Second}, nil)
	id := g.Connect(&gridcityv1.Hello{Name: "web-1"})
	g.Disconnect("web-1", id)
	if got := statuses(g); got["web-1"] != StatusOffline || got["web-2"] != StatusReconnecting {
		t.Fatalf("got %v; want web-1 offline (it came and went), web-2 reconnecting", got)
	}
}

func TestStartupGraceEndsWhenEveryoneIsBack(t *testing.T) {
	t0 := time.UnixMilli(1_750_000_000_000)
	c := &clock{t0}
	f, _ := restarted(t, c, map[string]time.Duration{"web-1": time.Second, "web-2": 2 * time.Second}, nil)
	f.Connect(&gridcityv1.Hello{Name: "web-1"})
	f.Connect(&gridcityv1.Hello{Name: "web-2"})
	shape := f.ShapeVersion()
	c.t = t0.Add(time.Hour)
	if got := f.ShapeVersion(); got != shape {
		t.Fatalf("shape changed from %d to %d at the end of a grace nobody was left in", shape, got)
	}
}

func TestStartupGraceOff(t *testing.T) {
	c := &clock{time.UnixMilli(1_750_000_000_000)}
	f, _ := restarted(t, c, map[string]time.Duration{"web-1": time.Second}, nil, WithStartupGrace(0))
	if got := statuses(f)["web-1"]; got != StatusOffline {
		t.Fatalf("web-1 is %s with the grace off; want offline", got)
	}
}

// Heartbeats alone keep the stored LastSeen within seenRefresh of the
// truth, so that after a crash it still tells who was connected.
func TestQuietServerLastSeenIsStored(t *testing.T) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_750_000_000_000)
	c := &clock{t0}
	f, st := restarted(t, c, nil, nil)
	id := f.Connect(&gridcityv1.Hello{Name: "quiet"})
	stored := func() time.Time {
		t.Helper()
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		recs, err := st.Servers(ctx)
		if err != nil || len(recs) != 1 {
			t.Fatalf("stored servers %+v, %v; want one", recs, err)
		}
		return recs[0].LastSeen
	}
	stored()
	for _, tc := range []struct {
		at, want time.Duration
	}{
		{10 * time.Second, 0},                      // fresh enough: no write
		{seenRefresh - time.Second, 0},             // still
		{seenRefresh, seenRefresh},                 // written again
		{seenRefresh + 5*time.Second, seenRefresh}, // and not at every heartbeat
		{2 * seenRefresh, 2 * seenRefresh},
	} {
		c.t = t0.Add(tc.at)
		f.Touch("quiet", id)
		if got := stored(); !got.Equal(t0.Add(tc.want)) {
			t.Errorf("after a heartbeat at +%s the stored LastSeen is +%s; want +%s", tc.at, got.Sub(t0), tc.want)
		}
	}
}

// A server whose agent is revoked (by the CLI, in another process) is
// "revoked" once the fleet looks again, not offline; the shape changes so
// that the topology drops it from the troubled; and after a restart it is
// not awaited as reconnecting.
func TestRevokedServers(t *testing.T) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_750_000_000_000)
	c := &clock{t0}
	f, st := restarted(t, c, nil, nil)
	for _, name := range []string{"web-1", "web-2"} {
		if err := st.CreateJoinToken(ctx, store.JoinToken{Hash: []byte(name), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), SingleUse: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Enroll(ctx, []byte(name), t0, store.Agent{Name: name, Serial: "01", EnrolledAt: t0}); err != nil {
			t.Fatal(err)
		}
		f.Disconnect(name, f.Connect(&gridcityv1.Hello{Name: name}))
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAgent(ctx, "web-2", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	before := f.ShapeVersion()
	if err := f.SyncRevoked(ctx); err != nil {
		t.Fatal(err)
	}
	if got := statuses(f); got["web-1"] != StatusOffline || got["web-2"] != StatusRevoked {
		t.Fatalf("statuses %v; want web-1 offline, web-2 revoked", got)
	}
	if f.ShapeVersion() == before {
		t.Error("a revocation did not change the shape: a cached graph would keep the server troubled")
	}
	if s, _ := f.Server("web-2"); !s.RevokedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("web-2 revoked at %v; want %v", s.RevokedAt, t0.Add(time.Second))
	}
	same := f.ShapeVersion()
	if err := f.SyncRevoked(ctx); err != nil || f.ShapeVersion() != same {
		t.Errorf("looking again with nothing new changed the shape (%v)", err)
	}

	// After a restart web-1 waits as reconnecting; web-2 stays revoked.
	f2, err := New(ctx, st, slog.New(slog.DiscardHandler), WithClock(c.now))
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(f2); got["web-1"] != StatusReconnecting || got["web-2"] != StatusRevoked {
		t.Fatalf("after a restart statuses %v; want web-1 reconnecting, web-2 revoked", got)
	}
}

// The figures an agent sends every few seconds are written with the
// server's next write (at most seenRefresh later) or by FlushAll, not at
// every flush; any other section is written at the next flush.
func TestFiguresAreWrittenLessOften(t *testing.T) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_750_000_000_000)
	c := &clock{t0}
	f, st := restarted(t, c, nil, nil)
	id := f.Connect(&gridcityv1.Hello{Name: "web-1"})
	f.Apply("web-1", id, &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(10)}, Disks: &gridcityv1.Disks{}})
	stored := func(flush func(context.Context) error) *gridcityv1.StateUpdate {
		t.Helper()
		if err := flush(ctx); err != nil {
			t.Fatal(err)
		}
		recs, err := st.Servers(ctx)
		if err != nil || len(recs) != 1 {
			t.Fatalf("stored servers %+v, %v; want one", recs, err)
		}
		var u gridcityv1.StateUpdate
		if err := proto.Unmarshal(recs[0].State, &u); err != nil {
			t.Fatal(err)
		}
		return &u
	}
	busy := func(u *gridcityv1.StateUpdate) float64 { return u.GetCpu().GetBusyPercent() }
	if got := busy(stored(f.Flush)); got != 10 {
		t.Fatalf("busy %v stored; want the full state's 10", got)
	}
	step := func(d time.Duration, u *gridcityv1.StateUpdate) {
		c.t = c.t.Add(d)
		f.Apply("web-1", id, u)
	}
	step(5*time.Second, &gridcityv1.StateUpdate{CollectedUnixMs: 1, Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(20)}, Memory: &gridcityv1.Memory{UsedPercent: 40}})
	if got := busy(stored(f.Flush)); got != 10 {
		t.Errorf("busy %v stored after a change of figures alone; want 10 until later", got)
	}
	step(5*time.Second, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(30)}, Gaps: &gridcityv1.Gaps{}})
	if got := busy(stored(f.Flush)); got != 30 {
		t.Errorf("busy %v stored after a change with gaps; want 30 at once", got)
	}
	step(5*time.Second, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(40)}})
	step(seenRefresh, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(50)}})
	if got := busy(stored(f.Flush)); got != 50 {
		t.Errorf("busy %v stored %s after the last write; want 50", got, seenRefresh+5*time.Second)
	}
	step(5*time.Second, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(60)}})
	if got := busy(stored(f.FlushAll)); got != 60 {
		t.Errorf("busy %v stored by FlushAll; want 60", got)
	}
	for name := range figureFields {
		if (&gridcityv1.StateUpdate{}).ProtoReflect().Descriptor().Fields().ByName(name) == nil {
			t.Errorf("StateUpdate has no field %q", name)
		}
	}
}
