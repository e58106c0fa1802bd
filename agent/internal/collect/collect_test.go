package collect

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixtureConfig points every root at the checked-in tree. The paths are
// relative so that the gaps they show in the golden file do not depend on
// where the repository is checked out.
func fixtureConfig() Config {
	return Config{
		ProcRoot:     "testdata/proc",
		SysRoot:      "testdata/sys",
		EtcRoot:      "testdata/etc",
		RootFS:       "testdata",
		SystemdDir:   "testdata/run/systemd/system",
		DockerSocket: "testdata/docker.sock",
		SSHDConfig:   "testdata/defenses/etc/ssh/sshd_config",
	}
}

func TestRegistry(t *testing.T) {
	got := map[string]Tier{}
	for _, r := range registry {
		if _, dup := got[r.name]; dup {
			t.Errorf("collector %q registered twice", r.name)
		}
		got[r.name] = r.tier
	}
	want := map[string]Tier{
		"cpu": TierFast, "memory": TierFast, "logins": TierFast,
		"disks": TierMedium, "sockets": TierMedium, "failed_units": TierMedium, "containers": TierMedium, "defenses": TierMedium,
		"host": TierSlow, "updates": TierUpdates, "processes": TierFast,
	}
	for name, tier := range want {
		if got[name] != tier {
			t.Errorf("collector %q: got tier %v; want %v", name, got[name], tier)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got collectors %v; want %v", got, want)
	}
}

// fakeCollector fails with err, panics, or fills the cpu section.
type fakeCollector struct {
	mu    sync.Mutex
	err   error
	panic bool
	note  string
	runs  int
}

func (f *fakeCollector) update(_ context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	if f.panic {
		out.Cpu = &gridcityv1.CPU{Cores: 1} // half-way, then
		var m map[string]int
		m["boom"]++
	}
	if f.note != "" {
		n.add("part", f.note)
	}
	if f.err != nil {
		return f.err
	}
	out.Cpu = &gridcityv1.CPU{Cores: 8}
	return nil
}

func (f *fakeCollector) set(err error, panic bool, note string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.panic, f.note = err, panic, note
}

// testSet builds a Set around the given collectors, outside the registry.
func testSet(cs map[string]collector, tier Tier) *Set {
	s := &Set{logger: slog.New(slog.DiscardHandler), gaps: map[string][]*gridcityv1.Gap{}}
	for name, c := range cs {
		s.entries = append(s.entries, &entry{name: name, tier: tier, c: c, lock: make(chan struct{}, 1)})
	}
	return s
}

func gapText(u *gridcityv1.StateUpdate) string {
	var gs []string
	for _, g := range u.GetGaps().GetItems() {
		gs = append(gs, g.GetCheck()+": "+g.GetReason())
	}
	return strings.Join(gs, "\n")
}

func TestCollectGaps(t *testing.T) {
	fc := &fakeCollector{}
	s := testSet(map[string]collector{"cpu": fc}, TierFast)
	ctx := context.Background()

	fc.set(errors.New("open /proc/stat: permission denied"), false, "")
	u := s.Collect(ctx, TierFast)
	if u.Cpu != nil || gapText(u) != "cpu: open /proc/stat: permission denied" || u.Full || u.CollectedUnixMs == 0 {
		t.Fatalf("failure: got cpu %v, gaps %q, full %v, time %d; want no section, the error as gap, full=false, a time", u.Cpu, gapText(u), u.Full, u.CollectedUnixMs)
	}

	// Other tiers do not run the collector, but the gap stays in the list.
	u = s.Collect(ctx, TierSlow)
	if u.Cpu != nil || gapText(u) != "cpu: open /proc/stat: permission denied" {
		t.Errorf("other tier: got cpu %v, gaps %q; want the standing gap only", u.Cpu, gapText(u))
	}

	// A success with a partial problem: section set, note kept.
	fc.set(nil, false, "one part missing")
	u = s.Collect(ctx, TierFast)
	if u.GetCpu().GetCores() != 8 || gapText(u) != "cpu:part: one part missing" {
		t.Errorf("partial: got cpu %v, gaps %q; want the section and the note", u.Cpu, gapText(u))
	}

	// A clean success clears every gap.
	fc.set(nil, false, "")
	u = s.Collect(ctx, TierFast)
	if u.GetCpu().GetCores() != 8 || u.Gaps == nil || len(u.Gaps.Items) != 0 {
		t.Errorf("success: got cpu %v, gaps %v; want the section and an empty gap list", u.Cpu, u.Gaps)
	}

	// A panic costs the section, not the agent, and leaves no half-made
	// section behind.
	fc.set(nil, true, "")
	u = s.Collect(ctx, TierFast)
	if u.Cpu != nil || !strings.HasPrefix(gapText(u), "cpu: collector panicked: assignment to entry in nil map") {
		t.Errorf("panic: got cpu %v, gaps %q; want no section and a panic gap", u.Cpu, gapText(u))
	}
}

func TestCollectContextDone(t *testing.T) {
	fc := &fakeCollector{}
	s := testSet(map[string]collector{"cpu": fc}, TierFast)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u := s.Collect(ctx, TierFast)
	if fc.runs != 0 || u.Cpu != nil || u.Gaps == nil {
		t.Errorf("got %d runs, cpu %v, gaps %v; want no run, no section, a gap list", fc.runs, u.Cpu, u.Gaps)
	}

	// A collector busy in another call is waited for only as long as ctx
	// allows.
	s.entries[0].lock <- struct{}{}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	s.Collect(ctx, TierFast)
	if d := time.Since(start); d > time.Second || fc.runs != 0 {
		t.Errorf("waited %v and ran %d times; want to give up with ctx", d, fc.runs)
	}
}

// TestFullOnRealHost runs everything on the machine the test runs on. What
// that machine has is not asserted: only that every section is either
// there or explained by a gap.
func TestFullOnRealHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the package manager")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u := New(DefaultConfig(), nil).Full(ctx)
	if !u.Full || u.Gaps == nil {
		t.Fatalf("got full %v, gaps %v; want a full update with a gap list", u.Full, u.Gaps)
	}
	var gapped []string
	for _, g := range u.Gaps.Items {
		gapped = append(gapped, g.Check)
	}
	sections := []struct {
		collector string
		set       bool
	}{
		{"host", u.Host != nil}, {"cpu", u.Cpu != nil}, {"memory", u.Memory != nil},
		{"disks", u.Disks != nil}, {"sockets", u.Listeners != nil && u.Connections != nil},
		{"failed_units", u.FailedUnits != nil}, {"containers", u.Containers != nil}, {"updates", u.Updates != nil},
	}
	for _, sc := range sections {
		if sc.set == slices.Contains(gapped, sc.collector) {
			t.Errorf("%s: section set %v, gap %v; want exactly one of them", sc.collector, sc.set, !sc.set)
		}
	}
}

// The benchmarks sample the real host, as the agent does every 5 and 30
// seconds; compare with prometheus-node-exporter's cost per scrape.
func BenchmarkCollectFast(b *testing.B) {
	benchmarkTiers(b, TierFast)
}

func BenchmarkCollectMedium(b *testing.B) {
	benchmarkTiers(b, TierMedium)
}

func benchmarkTiers(b *testing.B, tiers ...Tier) {
	s := New(DefaultConfig(), nil)
	ctx := context.Background()
	s.Collect(ctx, tiers...) // warm the caches a long-running agent has
	b.ReportAllocs()
	for b.Loop() {
		s.Collect(ctx, tiers...)
	}
}

// blockingUpdates fills the updates section once release is closed,
// after saying on started that it runs.
type blockingUpdates struct{ started, release chan struct{} }

func (b blockingUpdates) update(ctx context.Context, out *gridcityv1.StateUpdate, _ *notes) error {
	close(b.started)
	<-b.release
	out.Updates = &gridcityv1.Updates{Pending: 129, Security: 3, Manager: "apt"}
	return nil
}

// TestNotCollectedYet: a section whose collector has not finished a run is
// absent, with a gap that says so and when to expect it, never a zero
// (an agent used to report updates {pending: 0} before its first apt run).
func TestNotCollectedYet(t *testing.T) {
	b := blockingUpdates{started: make(chan struct{}), release: make(chan struct{})}
	s := testSet(map[string]collector{"cpu": &fakeCollector{}}, TierFast)
	s.entries = append(s.entries, &entry{name: "updates", tier: TierUpdates, c: b, lock: make(chan struct{}, 1)})

	u := s.Collect(context.Background(), TierFast, TierMedium, TierSlow)
	if u.Updates != nil || !strings.HasPrefix(gapText(u), "updates: not collected yet: the updates check has not run yet; it runs right after the agent connects") {
		t.Fatalf("before the first run: got updates %v, gaps %q; want no section and a not-collected-yet gap", u.Updates, gapText(u))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	deadline, _ := ctx.Deadline()
	done := make(chan *gridcityv1.StateUpdate)
	go func() { done <- s.Collect(ctx, TierUpdates) }()
	<-b.started
	u = s.Collect(context.Background(), TierFast)
	want := "updates: not collected yet: the first updates check is running since "
	if u.Updates != nil || !strings.HasPrefix(gapText(u), want) || !strings.HasSuffix(gapText(u), "its result is expected by "+deadline.UTC().Format(time.RFC3339)+" (its time limit)") {
		t.Fatalf("while running: got updates %v, gaps %q; want no section and %q… expected by the run's deadline", u.Updates, gapText(u), want)
	}

	close(b.release)
	u = <-done
	if u.GetUpdates().GetPending() != 129 || gapText(u) != "" {
		t.Fatalf("after the run: got updates %v, gaps %q; want the section and no gap", u.Updates, gapText(u))
	}
}
