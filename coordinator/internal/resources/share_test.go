package resources

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TestSharedChecksJudgeFromEveryReplica: two replicas' probers on one
// store, each holding one of a resource's two vantage agents. Each judges
// from both once they have shared; an agent that moves to the other
// replica carries its count of failures with it; only the leader probes
// from the coordinator.
func TestSharedChecksJudgeFromEveryReplica(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := map[string][]string{"db": {"web-1", "web-2"}}
	a, _, clockA := newVantageProber(t, v)
	b, _, clockB := newVantageProber(t, v)
	var aLeads atomic.Bool
	a.Share(Shared{Store: st, Replica: "a", Leads: aLeads.Load})
	b.Share(Shared{Store: st, Replica: "b", Leads: func() bool { return !aLeads.Load() }})
	a.Assign()
	b.Assign()
	tick := func(d time.Duration) { *clockA, *clockB = clockA.Add(d), clockB.Add(d) }
	sync := func() {
		t.Helper()
		for _, p := range []*Prober{a, b, a} {
			if err := p.SyncShared(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	refused := "dial tcp 10.0.4.20:5432: connect: connection refused"

	a.HandleResult("web-1", result("db", "ok", ""))
	b.HandleResult("web-2", result("db", "ok", ""))
	sync()
	for name, p := range map[string]*Prober{"a": a, "b": b} {
		if s, _ := p.State("db"); s.Status != "ok" || s.CheckedFrom != "web-1,web-2" {
			t.Fatalf("replica %s sees %+v; want ok from web-1 and web-2", name, s)
		}
	}

	// web-2 fails twice on b: a sees the resource degraded too.
	tick(15 * time.Second)
	b.HandleResult("web-2", result("db", "failed", refused))
	tick(15 * time.Second)
	b.HandleResult("web-2", result("db", "failed", refused))
	a.HandleResult("web-1", result("db", "ok", ""))
	sync()
	if s, _ := a.State("db"); s.Status != "degraded" || !strings.Contains(s.Reason, "web-2: "+refused) {
		t.Fatalf("replica a sees %+v; want degraded by web-2's failures on replica b", s)
	}

	// web-2's agent moves to a: a carries on counting from b's two failures.
	tick(15 * time.Second)
	a.HandleResult("web-2", result("db", "failed", refused))
	var web2 Check
	s, _ := a.State("db")
	for _, c := range s.Checks {
		if c.From == "web-2" {
			web2 = c
		}
	}
	if web2.Failures != 3 || !web2.Troubled {
		t.Fatalf("web-2 on replica a after moving: %+v; want its third failure in a row, troubled", web2)
	}
	sync()
	if s, _ := b.State("db"); s.Failures != 0 || s.Status != "degraded" {
		t.Fatalf("replica b sees %+v; want degraded (web-1 still ok)", s)
	}

	// Only the leader probes from the coordinator.
	if a.leads() || !b.leads() {
		t.Fatalf("a leads %v, b leads %v; want b alone", a.leads(), b.leads())
	}
	aLeads.Store(true)
	if !a.leads() || b.leads() {
		t.Fatalf("after the lead moved: a leads %v, b leads %v; want a alone", a.leads(), b.leads())
	}
}

// TestAgentMetricsMustBeFinite: an agent's NaN or infinite metric is
// dropped, and the rest of its result counts.
func TestAgentMetricsMustBeFinite(t *testing.T) {
	p, _, _ := newVantageProber(t, map[string][]string{"db": {"web-1"}})
	p.Assign()
	r := result("db", "ok", "")
	r.Metrics = map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "connections": 7}
	p.HandleResult("web-1", r)
	s, _ := p.State("db")
	if s.Status != "ok" || len(s.Metrics) != 1 || s.Metrics["connections"] != 7 {
		t.Fatalf("state %+v; want ok with the finite metric alone", s)
	}
}
