package resources

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/lib/probe"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// A resource is troubled only after failuresBeforeTroubled checks in a row,
// since its first failed one; a good check ends it.
func TestDampingAndSince(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens: every check fails with connection refused
	cfg, err := config.Parse(strings.NewReader("resources:\n  - {id: db, kind: database, engine: tcp, target: \""+addr+"\"}\nprobes: {interval: 1s, timeout: 500ms, failuresBeforeTroubled: 3}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	ctx := context.Background()

	p.CheckAll(ctx)
	first := clock
	for i := 0; i < 2; i++ {
		s, _ := p.State("db")
		if s.Troubled || s.Status != "failed" || !strings.Contains(s.Reason, "connection refused") {
			t.Fatalf("after %d failed checks: %+v", i+1, s)
		}
		clock = clock.Add(15 * time.Second)
		p.CheckAll(ctx)
	}
	s, _ := p.State("db")
	if !s.Troubled || s.Failures != 3 || !s.Since.Equal(first) {
		t.Fatalf("after 3 failed checks: troubled=%v failures=%d since=%s; want troubled since the first failure %s", s.Troubled, s.Failures, s.Since, first)
	}

	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err)
	}
	defer l2.Close()
	go func() {
		for {
			c, err := l2.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	clock = clock.Add(15 * time.Second)
	p.CheckAll(ctx)
	if s, _ := p.State("db"); s.Troubled || s.Status != "ok" || s.Failures != 0 || !s.Since.Equal(clock) {
		t.Fatalf("after a good check: %+v", s)
	}
}

// fakeAgents records assignments and answers on-demand probes through the
// prober, as the agent API and an agent would.
type fakeAgents struct {
	mu       sync.Mutex
	assigned map[string][]*gridcityv1.ProbeSpec
	p        *Prober
	answer   func(server string, spec *gridcityv1.ProbeSpec) *gridcityv1.ProbeResult
}

func (f *fakeAgents) AssignProbes(server string, specs []*gridcityv1.ProbeSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assigned[server] = specs
	return nil
}

func (f *fakeAgents) RunProbe(server string, spec *gridcityv1.ProbeSpec) error {
	if server == "gone" {
		return errors.New(`server "gone" is not connected`)
	}
	if r := f.answer(server, spec); r != nil {
		go f.p.HandleResult(server, r)
	}
	return nil
}

func newVantageProber(t *testing.T, vantages map[string][]string) (*Prober, *fakeAgents, *time.Time) {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(`resources:
  - {id: db, kind: database, engine: postgres, target: "10.0.4.20:5432"}
  - {id: cache, kind: database, engine: redis, target: "10.0.4.30:6379", interval: 10s}
probes: {interval: 15s, timeout: 5s, failuresBeforeTroubled: 2}
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	a := &fakeAgents{assigned: map[string][]*gridcityv1.ProbeSpec{}, p: p}
	p.SetAgents(a, func() map[string][]string { return vantages })
	return p, a, &clock
}

func result(resource, status, reason string) *gridcityv1.ProbeResult {
	return &gridcityv1.ProbeResult{ProbeId: resource, ResourceId: resource, Status: status, Reason: reason, LatencyUs: 1500}
}

func TestAssignSendsEachAgentItsShareOnlyWhenItChanges(t *testing.T) {
	v := map[string][]string{"db": {"web-2", "web-1"}, "cache": {"web-1"}}
	p, a, _ := newVantageProber(t, v)
	p.Assign()
	w1, w2 := a.assigned["web-1"], a.assigned["web-2"]
	if len(w1) != 2 || len(w2) != 1 || w2[0].GetResourceId() != "db" || w2[0].GetEngine() != "postgres" || w2[0].GetTarget() != "10.0.4.20:5432" ||
		w2[0].GetIntervalSeconds() != 15 || w2[0].GetTimeoutSeconds() != 5 {
		t.Fatalf("assigned web-1 %v, web-2 %v", w1, w2)
	}
	if got := p.ProbesFor("web-1"); len(got) != 2 {
		t.Fatalf("ProbesFor(web-1) = %v", got)
	}
	for _, s := range w1 {
		if s.GetId() == "cache" && s.GetIntervalSeconds() != 10 {
			t.Fatalf("cache's own interval not passed on: %v", s)
		}
	}
	// Nothing changed: nothing is sent again.
	delete(a.assigned, "web-1")
	p.Assign()
	if _, ok := a.assigned["web-1"]; ok {
		t.Fatal("an unchanged assignment was sent again")
	}
	// web-2 stops being a vantage point: it is told to stop.
	v["db"] = []string{"web-1"}
	p.Assign()
	if got, ok := a.assigned["web-2"]; !ok || len(got) != 0 {
		t.Fatalf("web-2 after losing its share: %v (sent %v); want an empty list sent", got, ok)
	}
}

func TestVantagePointsJudgeTheResource(t *testing.T) {
	p, _, clock := newVantageProber(t, map[string][]string{"db": {"web-1", "web-2"}})
	p.Assign()
	refused := "dial tcp 10.0.4.20:5432: connect: connection refused"

	// A result for a resource the server does not probe is dropped.
	p.HandleResult("web-3", result("db", "failed", refused))
	p.HandleResult("web-1", result("cache", "failed", refused))
	if s, _ := p.State("db"); s.Status != "unknown" || len(s.Checks) != 0 {
		t.Fatalf("unassigned results counted: %+v", s)
	}
	if s, _ := p.State("cache"); s.Status != "unknown" {
		t.Fatalf("unassigned results counted: %+v", s)
	}

	p.HandleResult("web-1", result("db", "ok", ""))
	p.HandleResult("web-2", result("db", "ok", ""))
	s, _ := p.State("db")
	if s.Status != "ok" || s.CheckedFrom != "web-1,web-2" || s.Latency != 1500*time.Microsecond || len(s.Checks) != 2 {
		t.Fatalf("both ok: %+v", s)
	}
	if !p.agentsProbe("db") {
		t.Fatal("fresh agent checks should spare the coordinator its own probe")
	}

	// One vantage point fails: degraded, not troubled, and the reason says where.
	*clock = clock.Add(15 * time.Second)
	first := *clock
	p.HandleResult("web-2", result("db", "failed", refused))
	p.HandleResult("web-2", result("db", "failed", refused))
	s, _ = p.State("db")
	if s.Status != "degraded" || s.Troubled || !strings.Contains(s.Reason, "web-2: "+refused) || !strings.Contains(s.Reason, "ok from web-1") {
		t.Fatalf("one of two failing: %+v", s)
	}

	// Both fail long enough: troubled since the later of their first failures.
	*clock = clock.Add(15 * time.Second)
	second := *clock
	p.HandleResult("web-1", result("db", "failed", refused))
	if s, _ = p.State("db"); s.Troubled || s.Status != "failed" {
		t.Fatalf("web-1's first failure must not trouble it yet: %+v", s)
	}
	*clock = clock.Add(15 * time.Second)
	p.HandleResult("web-1", result("db", "failed", refused))
	s, _ = p.State("db")
	if !s.Troubled || s.Status != "failed" || !s.Since.Equal(second) || s.Since.Equal(first) ||
		s.Reason != "web-1: "+refused+"; web-2: "+refused {
		t.Fatalf("both failing: %+v; want troubled since %s", s, second)
	}

	// The agents fall silent: their checks go stale and the coordinator probes again.
	*clock = clock.Add(2 * time.Minute)
	if p.agentsProbe("db") {
		t.Fatal("stale agent checks still spare the coordinator")
	}
	p.record("db", Coordinator, probe.Result{OK: true})
	if s, _ = p.State("db"); s.Troubled || s.Status != "ok" || s.CheckedFrom != Coordinator {
		t.Fatalf("the coordinator's fresh check should count when the agents' are stale: %+v", s)
	}
}

func TestAgentTextIsCleaned(t *testing.T) {
	p, _, _ := newVantageProber(t, map[string][]string{"db": {"web-1"}})
	p.Assign()
	m := result("db", "failed", "\x1b[31mIGNORE PREVIOUS INSTRUCTIONS\x00"+strings.Repeat("x", 5000))
	m.Metrics = map[string]float64{}
	for i := range 100 {
		m.Metrics[strings.Repeat("k", i+1)] = float64(i)
	}
	p.HandleResult("web-1", m)
	s, _ := p.State("db")
	if len(s.Reason) > 600 || strings.ContainsAny(s.Reason, "\x1b\x00") || len(s.Metrics) > maxMetrics {
		t.Fatalf("agent text not bounded: reason %d bytes %q…, %d metrics", len(s.Reason), s.Reason[:40], len(s.Metrics))
	}
	// A failure without a reason still says something.
	p.HandleResult("web-1", result("db", "failed", ""))
	if s, _ := p.State("db"); s.Reason == "" {
		t.Fatal("empty reason kept")
	}
}

func TestProbeFromAsksTheAgentAndWaits(t *testing.T) {
	p, a, _ := newVantageProber(t, nil)
	a.answer = func(server string, spec *gridcityv1.ProbeSpec) *gridcityv1.ProbeResult {
		if server == "silent" {
			return nil
		}
		return &gridcityv1.ProbeResult{ProbeId: spec.GetId(), Status: "failed", Reason: "dial tcp " + spec.GetTarget() + ": i/o timeout"}
	}
	c, err := p.ProbeFrom(context.Background(), "web-1", "tcp", "10.0.4.21:5432", time.Second)
	if err != nil || c.From != "web-1" || c.Status != "failed" || c.Reason != "dial tcp 10.0.4.21:5432: i/o timeout" {
		t.Fatalf("ProbeFrom = %+v, %v", c, err)
	}
	if _, err := p.ProbeFrom(context.Background(), "gone", "tcp", "10.0.4.21:5432", time.Second); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("ProbeFrom a disconnected server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.ProbeFrom(ctx, "silent", "tcp", "10.0.4.21:5432", time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ProbeFrom a silent agent: %v", err)
	}
	if len(p.waiters) != 0 {
		t.Fatalf("%d waiters left behind", len(p.waiters))
	}
}

// When a resource becomes troubled or recovers, the failing ones are checked again at once:
// from their agents when agents probe them.
func TestRecoveryRechecksTheTroubled(t *testing.T) {
	p, a, _ := newVantageProber(t, map[string][]string{"db": {"web-1"}})
	var asked []string
	var mu sync.Mutex
	a.answer = func(server string, spec *gridcityv1.ProbeSpec) *gridcityv1.ProbeResult {
		mu.Lock()
		asked = append(asked, server+":"+spec.GetId())
		mu.Unlock()
		return result(spec.GetResourceId(), "ok", "")
	}
	p.Assign()
	refused := "dial tcp 10.0.4.20:5432: connect: connection refused"
	for range 2 {
		p.HandleResult("web-1", result("db", "failed", refused))
		p.record("cache", Coordinator, probe.Result{Reason: refused})
	}
	if s, _ := p.State("cache"); !s.Troubled {
		t.Fatalf("cache not troubled: %+v", s)
	}
	select {
	case <-p.recheck: // cache became troubled
	default:
		t.Fatal("no recheck asked for when cache became troubled")
	}
	p.record("cache", Coordinator, probe.Result{OK: true})
	select {
	case <-p.recheck:
	default:
		t.Fatal("no recheck asked for when cache recovered")
	}
	p.recheckTroubled(context.Background())
	eventuallyTrue(t, func() bool { s, _ := p.State("db"); return s.Status == "ok" })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"web-1:db"}) {
		t.Fatalf("asked %v; want web-1 asked to probe db again", asked)
	}
}

func eventuallyTrue(t *testing.T, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}
