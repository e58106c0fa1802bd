package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// TestListServersSurvivesABadServer: a server whose state holds NaN (the
// fleet took it from somewhere the agent API does not guard) is a view with
// a gap, and a row without figures; every other server is answered in full.
func TestListServersSurvivesABadServer(t *testing.T) {
	d := smallFleet(t)
	id := d.Fleet.Connect(&gridcityv1.Hello{Name: "web-2", District: "blog"})
	d.Fleet.Apply("web-2", id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: "web-2"}, Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(math.NaN()), Load1: math.Inf(1)}})
	cs := memSession(t, d)
	glance, res := callListServers(t, cs, map[string]any{})
	if res.IsError {
		t.Fatalf("list_servers failed for the whole fleet: %+v", res.Content)
	}
	for _, r := range glance.Rows {
		if r.Name == "web-2" && (r.CPU != nil || r.Load != nil || !slices.ContainsFunc(r.Why, func(w string) bool { return strings.Contains(w, "NaN") })) {
			t.Errorf("web-2's row %+v; want no cpu or load, and why naming the NaN", r)
		}
	}
	if len(glance.Rows) != 6 {
		t.Errorf("the fleet at a glance has %d rows; want all 6", len(glance.Rows))
	}
	out, res := callListServers(t, cs, map[string]any{"full": true})
	if res.IsError {
		t.Fatalf("list_servers failed for the whole fleet: %+v", res.Content)
	}
	byName := map[string]fleetview.ServerView{}
	for _, s := range out.Servers {
		byName[s.Name] = s
	}
	if s := byName["web-1"]; s.OS == nil || s.OS.Hostname != "web-1" || s.Status != "online" {
		t.Errorf("web-1 = %+v; want its full row", s)
	}
	bad := byName["web-2"]
	if bad.Status != "online" || bad.OS != nil || bad.CPU != nil {
		t.Errorf("web-2 = %+v; want its status and no facts", bad)
	}
	var gap string
	for _, g := range bad.Gaps {
		if g.Check == "state" {
			gap = g.Reason
		}
	}
	if !strings.Contains(gap, "cpu.busyPercent = NaN") {
		t.Errorf("web-2 gaps %+v; want one naming cpu.busyPercent = NaN", bad.Gaps)
	}
	if out.Total != 6 || len(out.Servers) != 6 {
		t.Errorf("total %d, %d rows; want 6 and 6", out.Total, len(out.Servers))
	}
}

// TestListResourcesLeavesOutAMetricThatIsNotANumber: a probe metric of NaN
// (the agent API refuses it; this is the answer's own guard) is left out of
// its resource, and every resource is answered.
func TestListResourcesLeavesOutAMetricThatIsNotANumber(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader(`resources:
  - {id: db, kind: database, engine: postgres, target: "10.0.4.20:5432"}
  - {id: cache, kind: database, engine: redis, target: "10.0.4.30:6379"}
`), "nan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := fleetOf(t, 0, nil)
	prober := resources.New(cfg, slog.New(slog.DiscardHandler))
	prober.SetAgents(probingAgents{prober: prober}, func() map[string][]string { return map[string][]string{"db": {"web-1"}} })
	prober.Assign()
	prober.HandleResult("web-1", &gridcityv1.ProbeResult{ProbeId: "db", ResourceId: "db", Status: "ok", LatencyUs: 1500, CheckedUnixMs: time.Now().UnixMilli(),
		Metrics: map[string]float64{"days_left": math.NaN(), "status_code": 200}})
	d.Topology, d.Resources = topology.New(cfg, d.Fleet, prober), prober
	res, err := memSession(t, d).CallTool(context.Background(), &mcp.CallToolParams{Name: "list_resources", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_resources: %v %+v", err, res)
	}
	var out fleetview.ResourcesOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || len(out.Resources) != 2 {
		t.Fatalf("resources %s (%v); want both", b, err)
	}
	for _, r := range out.Resources {
		if r.ID != "db" {
			continue
		}
		if _, ok := r.Metrics["days_left"]; ok || r.Metrics["status_code"] != 200 || r.Status != "ok" {
			t.Errorf("db = %+v; want status_code kept and days_left left out", r)
		}
	}
}
