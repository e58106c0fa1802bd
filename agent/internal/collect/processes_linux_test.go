package collect

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// processesSet is a Set of the processes collector alone over the fixture
// tree root, with 4 KiB pages and a clock the test moves.
func processesSet(t *testing.T, root string) (*Set, *processesCollector, *time.Time) {
	t.Helper()
	s := New(Config{ProcRoot: root, EtcRoot: "testdata/processes/etc"}, nil)
	s.entries = slices.DeleteFunc(s.entries, func(e *entry) bool { return e.name != "processes" })
	c := s.entries[0].c.(*processesCollector)
	clock := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	c.pageSize, c.now = 4096, func() time.Time { return clock }
	return s, c, &clock
}

// TestProcessesTwoWalks: the first walk only remembers the ticks (CPU
// shares need two readings) and says so in a gap; the second lists the
// busiest and the largest processes with their users and units: a pid
// reused between the walks is a new process, a process under a user's
// manager has no unit, a hostile name arrives cleaned.
func TestProcessesTwoWalks(t *testing.T) {
	s, c, _ := processesSet(t, "testdata/processes/t1")
	u := s.Collect(context.Background(), TierFast)
	if u.GetProcesses() != nil || !strings.HasPrefix(gapText(u), "processes: not collected yet") {
		t.Fatalf("first walk: processes %v, gaps %q; want none, and a not-collected-yet gap", u.GetProcesses(), gapText(u))
	}
	c.procRoot = "testdata/processes/t2"
	u = s.Collect(context.Background(), TierFast)
	want := &gridcityv1.Processes{Items: []*gridcityv1.Process{
		{Pid: 1500, Name: "sh", User: "deploy", CpuPercent: 100, RssBytes: 200 * 4096, Unit: "hog.service"},
		{Pid: 812, Name: "postgres", User: "postgres", CpuPercent: 50, RssBytes: 25600 * 4096, Unit: "postgresql@15-main.service"},
		{Pid: 6000, Name: "new", User: "root", CpuPercent: 25, RssBytes: 800 * 4096, Unit: "new.service"},
		{Pid: 2001, Name: "evil) name??[31m", User: "deploy", CpuPercent: 10, RssBytes: 1000 * 4096, Unit: `evil\x2dname.service`},
		{Pid: 1600, Name: "memhog", User: "deploy", RssBytes: 76900 * 4096},
		{Pid: 1, Name: "systemd", User: "root", RssBytes: 3000 * 4096},
	}}
	if !proto.Equal(u.GetProcesses(), want) || gapText(u) != "" {
		got, _ := protojson.Marshal(u.GetProcesses())
		t.Fatalf("second walk: got %s, gaps %q\nwant %v", got, gapText(u), want)
	}
	var names []string
	for _, p := range want.ByMemory() {
		names = append(names, p.GetName())
	}
	if strings.Join(names, ",") != "memhog,postgres,systemd,evil) name??[31m,new" {
		t.Errorf("ByMemory = %v", names)
	}
}

// TestProcessesWalkOnlyWhenBusyOrDue: on a calm host the processes are
// walked every processWalkEvery, not every tick; a busy one (here its
// load) is walked every tick.
func TestProcessesWalkOnlyWhenBusyOrDue(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/processes/t1")); err != nil {
		t.Fatal(err)
	}
	s, c, clock := processesSet(t, root)
	s.Collect(context.Background(), TierFast)
	c.procRoot = "testdata/processes/t2"
	if u := s.Collect(context.Background(), TierFast); u.GetProcesses() == nil {
		t.Fatalf("second walk gave no processes: %q", gapText(u))
	}
	// Calm, 5 s later: no walk (a walk would find no CPU time passed and say so).
	*clock = clock.Add(5 * time.Second)
	if u := s.Collect(context.Background(), TierFast); u.GetProcesses() != nil || gapText(u) != "" {
		t.Fatalf("calm tick: processes %v, gaps %q; want no walk", u.GetProcesses(), gapText(u))
	}
	// Busy: the load is above one per core, so this tick walks.
	c.procRoot = root
	copyFile(t, "testdata/processes/t2/stat", filepath.Join(root, "stat"))
	if err := os.WriteFile(filepath.Join(root, "loadavg"), []byte("2.50 1.00 0.50 3/100 7000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(5 * time.Second)
	if u := s.Collect(context.Background(), TierFast); !strings.Contains(gapText(u), "no CPU time passed") {
		t.Fatalf("busy tick: gaps %q; want a walk (which finds no CPU time passed)", gapText(u))
	}
	// Calm again, and processWalkEvery after the last walk: it walks.
	if err := os.WriteFile(filepath.Join(root, "loadavg"), []byte("0.10 0.10 0.10 1/100 7000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	*clock = clock.Add(processWalkEvery)
	if u := s.Collect(context.Background(), TierFast); !strings.Contains(gapText(u), "no CPU time passed") {
		t.Fatalf("due tick: gaps %q; want a walk", gapText(u))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkProcessesWalk is the cost of one walk of this machine's /proc
// (what a busy host pays every fast tick), and BenchmarkProcessesCalmTick
// that of a tick that does not walk.
func BenchmarkProcessesWalk(b *testing.B) {
	c := newProcessesCollector(DefaultConfig(), nil).(*processesCollector)
	var n int
	for b.Loop() {
		cur, _, err := c.walk(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		n = len(cur)
	}
	b.ReportMetric(float64(n), "processes")
}

func BenchmarkProcessesCalmTick(b *testing.B) {
	c := newProcessesCollector(Config{ProcRoot: "testdata/processes/t2", EtcRoot: "testdata/processes/etc"}, nil).(*processesCollector)
	c.every = time.Hour
	n := &notes{name: "processes"}
	c.update(context.Background(), &gridcityv1.StateUpdate{}, n)
	c.reported = true
	for b.Loop() {
		if err := c.update(context.Background(), &gridcityv1.StateUpdate{}, n); err != nil {
			b.Fatal(err)
		}
	}
}
