package main

import (
	"bytes"
	"context"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// TestAgentsSimulation runs `agents` with a small fleet against a real
// coordinator built from ./coordinator/cmd/gridcity, on loopback.
func TestAgentsSimulation(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skip("no /proc/self/smaps_rollup here: the driver measures the coordinator from /proc")
	}
	dir := t.TempDir()
	bin := buildCoordinator(t, dir)
	data := filepath.Join(dir, "data")
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "--data", data, "--http", httpAddr, "--grpc", grpcAddr, "--advertise", grpcAddr)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("coordinator log:\n%s", logs.String())
		}
	})
	waitHealthy(t, httpAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const n = 20
	var log bytes.Buffer
	res, err := runAgents(ctx, agentsConfig{
		N: n, PID: cmd.Process.Pid, Data: data, Gridcity: bin,
		Baseline: time.Second, Settle: time.Second, Window: 2 * time.Second,
		// Faster than the coordinator's 5 s, so that a short window sees
		// every agent's messages.
		Heartbeat: 500 * time.Millisecond, Change: 500 * time.Millisecond,
		Parallel: 4, Rate: 200, Calls: 3, ClkTck: 100, Log: &log,
	})
	t.Logf("driver log:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}

	if res.Online != n || res.Total != n {
		t.Errorf("list_servers: %d of %d online; want %d of %d", res.Online, res.Total, n, n)
	}
	if res.Targets != n || res.Healthy != n {
		t.Errorf("incident_report: %d of %d healthy; want %d of %d", res.Healthy, res.Targets, n, n)
	}
	// Servers 4–20 are application servers: each uses its district's
	// database, cache and queue and one other application server, links
	// the coordinator discovers from their connections (68 today).
	if apps := n - 3; res.Links < apps || res.Links > apps*4 || res.Districts != 1 {
		t.Errorf("get_topology: %d links in %d districts; want %d to %d in 1", res.Links, res.Districts, apps, apps*4)
	}
	if res.ReconnectsInWindow != 0 || res.Reconnects != 0 {
		t.Errorf("%d reconnects (%d in the window); want none", res.Reconnects, res.ReconnectsInWindow)
	}
	// Every agent sends about four heartbeats and four changes in 2 s.
	if res.Heartbeats < n*2 || res.Changes < n*2 {
		t.Errorf("%d heartbeats and %d changes in the window; want at least %d each", res.Heartbeats, res.Changes, n*2)
	}
	if res.Baseline.RSS == 0 || res.Coordinator.RSS == 0 || res.Coordinator.CPUNs == 0 || res.Baseline.PID != cmd.Process.Pid {
		t.Errorf("coordinator not measured: baseline %+v, window %+v", res.Baseline, res.Coordinator)
	}
	if res.Coordinator.MemSamples != 2 || res.Baseline.MemSamples != 1 {
		t.Errorf("%d samples in the window and %d in the baseline; want 2 and 1", res.Coordinator.MemSamples, res.Baseline.MemSamples)
	}
	if res.CoordinatorFDs < n {
		t.Errorf("the coordinator holds %d files; want at least one connection per agent (%d)", res.CoordinatorFDs, n)
	}
	for name, tl := range map[string]toolLatency{"list_servers": res.ListServers, "incident_report": res.IncidentReport} {
		if len(tl.Ms) != 3 || tl.Bytes == 0 {
			t.Errorf("%s: %d calls, %d bytes; want 3 calls", name, len(tl.Ms), tl.Bytes)
		}
		for _, ms := range tl.Ms {
			if ms <= 0 || ms > 10000 {
				t.Errorf("%s took %.1f ms", name, ms)
			}
		}
	}

	rows := agentsRows(res)
	if want := 8 + 2*len(readTools); len(rows) != want {
		t.Fatalf("%d rows; want %d", len(rows), want)
	}
	for _, tool := range readTools {
		if l := res.Tools[tool.label]; len(l.Ms) != 3 || l.Bytes == 0 {
			t.Errorf("%s: %d calls, %d bytes; want 3 calls", tool.label, len(l.Ms), l.Bytes)
		}
	}
	for _, r := range rows {
		if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Peer != "" || r.Ratio != nil || !strings.Contains(r.Name, "20 agents") || !strings.Contains(r.Notes, "No peer") {
			t.Errorf("row %+v", r)
		}
	}
	if m := agentsMethod([]agentsRun{res}); !strings.Contains(m, "20 agents") {
		t.Errorf("method: %s", m)
	}
	// At the size of issue 19's aims the rows say whether each aim was met
	// and what the figure was before.
	big := res
	big.Agents = aimFleet
	aims := 0
	for _, r := range agentsRows(big) {
		if r.aim == "" {
			continue
		}
		aims++
		_, recorded := before[r.Name]
		if !strings.HasPrefix(r.Notes, r.aim) || recorded != (r.PeerValue != nil) || recorded != strings.Contains(r.Peer, "before issue 19") {
			t.Errorf("row %+v: want its aim first in the notes, and the figure from before where one was recorded", r)
		}
	}
	if want := 6 + 2*len(readTools); aims != want {
		t.Errorf("%d rows with an aim at %d agents; want %d (CPU per message, RSS per agent, every read tool at median and p95)", aims, aimFleet, want)
	}
}

func TestSimFleet(t *testing.T) {
	const n = 250
	addrs := map[string]int{}
	for i := range n {
		a := simfleet.Addr(i)
		if net.ParseIP(a) == nil {
			t.Fatalf("simfleet.Addr(%d) = %q", i, a)
		}
		if j, ok := addrs[a]; ok {
			t.Fatalf("servers %d and %d share %s", i, j, a)
		}
		addrs[a] = i
	}
	for _, c := range []struct {
		i, links int // connections to other simulated servers
		role     simfleet.Role
	}{
		{0, 0, simfleet.RoleDB}, {1, 0, simfleet.RoleCache}, {2, 0, simfleet.RoleQueue}, {3, 4, simfleet.RoleApp}, {99, 4, simfleet.RoleApp},
		{100, 0, simfleet.RoleDB}, {203, 4, simfleet.RoleApp},
		// The last district has servers 200–249: all four still exist.
		{249, 4, simfleet.RoleApp},
	} {
		a := newSimAgent(c.i, n, simIdentity{name: simfleet.Name(c.i)})
		if simfleet.RoleOf(c.i) != c.role {
			t.Errorf("server %d: role %d; want %d", c.i, simfleet.RoleOf(c.i), c.role)
		}
		got := 0
		for _, conn := range a.full.GetConnections().GetItems() {
			if j, ok := addrs[conn.GetRemoteAddress()]; ok {
				got++
				if j/simfleet.Group != c.i/simfleet.Group || j == c.i {
					t.Errorf("server %d connects to %d, outside its district or itself", c.i, j)
				}
			}
		}
		if got != c.links {
			t.Errorf("server %d: %d connections to simulated servers; want %d", c.i, got, c.links)
		}
		if l := len(a.full.GetListeners().GetItems()); l < 8 || l > 12 {
			t.Errorf("server %d: %d listeners; want about ten", c.i, l)
		}
		full := a.fullState()
		u := a.nextChange()
		if !full.GetFull() || u.GetFull() || u.GetCpu() == nil || u.GetMemory() == nil || u.GetHost() != nil {
			t.Errorf("server %d: full %v, change %v", c.i, full, u)
		}
		if full.GetCpu() == a.full.GetCpu() {
			t.Errorf("server %d: a change altered a section already sent", c.i)
		}
	}
	// A district of one database alone: nothing to connect to.
	if a := newSimAgent(3, 4, simIdentity{name: simfleet.Name(3)}); len(a.full.GetConnections().GetItems()) != 6+3 {
		t.Errorf("the only application server: %d connections; want 6 outside and 3 in the fleet", len(a.full.GetConnections().GetItems()))
	}
}

func TestFmtCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0"}, {20, "20"}, {999, "999"}, {1000, "1,000"}, {10000, "10,000"}, {1234567, "1,234,567"}} {
		if got := fmtCount(c.n); got != c.want {
			t.Errorf("fmtCount(%d) = %q; want %q", c.n, got, c.want)
		}
	}
}

// buildCoordinator builds ./coordinator/cmd/gridcity into dir, with the
// race detector when this test runs with it (so that the build shares the
// test's compiled packages).
func buildCoordinator(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("no go command to build the coordinator with")
		}
	}
	bin := filepath.Join(dir, "gridcity")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append(args, "github.com/gridcity/gridcity/coordinator/cmd/gridcity")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the coordinator: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator is not healthy on %s after 20 s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// splitGoBench is report's: tested here, beside the report's other rows.
func TestSplitGoBench(t *testing.T) {
	for _, c := range []struct {
		in   string
		want [4]string
		bad  bool
	}{
		{in: "g.test|dir|^BenchmarkTools$|one call", want: [4]string{"g.test", "dir", "^BenchmarkTools$", "one call"}},
		{in: "g.test|dir|^Benchmark(Incidents|New|Topology)$|graph work (aim 20 ms)", want: [4]string{"g.test", "dir", "^Benchmark(Incidents|New|Topology)$", "graph work (aim 20 ms)"}},
		{in: "g.test|dir|what", bad: true},
		{in: "g.test", bad: true},
	} {
		got, err := splitGoBench(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("splitGoBench(%q) = %q, %v; want %q (error: %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestSourceAddr(t *testing.T) {
	seen := map[string]bool{}
	for i := range 2 * sourceAddrs {
		a := sourceAddr(i, "127.0.0.1:4601")
		if a == nil || !a.(*net.TCPAddr).IP.IsLoopback() {
			t.Fatalf("sourceAddr(%d) = %v; want a loopback address", i, a)
		}
		seen[a.String()] = true
	}
	if len(seen) != sourceAddrs {
		t.Errorf("%d source addresses; want %d", len(seen), sourceAddrs)
	}
	for _, addr := range []string{"10.0.0.1:4601", "[::1]:4601", "coordinator:4601"} {
		if a := sourceAddr(1, addr); a != nil {
			t.Errorf("sourceAddr(%q) = %v; want the system's choice", addr, a)
		}
	}
}

func TestTolerated(t *testing.T) {
	for n, want := range map[int]int64{20: 0, 1000: 0, 4999: 0, 10000: 2, 18000: 3, 50000: 10} {
		if got := tolerated(n); got != want {
			t.Errorf("tolerated(%d) = %d; want %d", n, got, want)
		}
	}
	r := agentsRun{Agents: 18000, ReconnectsInWindow: 2, WindowEnds: []string{"2× Unavailable: error reading from server: EOF"}}
	if got := windowEnds(r); !strings.Contains(got, "2 of the 18000 streams ended") || !strings.Contains(got, "EOF") {
		t.Errorf("windowEnds = %q", got)
	}
}
