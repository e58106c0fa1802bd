package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// The big fleet's shape.
const (
	bigServers   = 10000
	bigResources = 1000
	// bigRoot is the failed resource every odd-numbered server uses; those
	// servers are offline, so it is a root cause explaining 5,000 targets.
	bigRoot = "res-0000"
	// Every bigFailedEvery-th resource fails on its own: a root cause
	// explaining nothing.
	bigFailedEvery = 10
	// bigLB is the resource that balances every fourth server.
	bigLB = 998
	// bigFullDisks is the server with 300 full disks: the Doctor has a
	// diagnosis and a fix for each.
	bigFullDisks = 2
)

// bigFleetStore is the store of every consumer the big fleet wires to one
// store: the fleet model, the incident tracker and the tools.
type bigFleetStore interface {
	fleet.Store
	incidents.Store
	Store
	fleetview.Store
}

// memStore is the store the big fleet needs: the agents it enrolled, no
// saved servers, and an incident history holding the root cause's
// incident with everything it explains.
type memStore struct {
	bigFleetStore
	agents    []store.Agent
	incidents []store.Incident
}

func (s memStore) Agents(context.Context) ([]store.Agent, error) { return s.agents, nil }
func (s memStore) Servers(context.Context) ([]store.ServerRecord, error) {
	return nil, nil
}
func (s memStore) Incidents(_ context.Context, limit int) ([]store.Incident, error) {
	return s.incidents[:min(limit, len(s.incidents))], nil
}

// quietAgents take the probes assigned to them and run none.
type quietAgents struct{}

func (quietAgents) AssignProbes(string, []*gridcityv1.ProbeSpec) error { return nil }
func (quietAgents) RunProbe(string, *gridcityv1.ProbeSpec) error       { return nil }

var (
	bigOnce sync.Once
	bigDeps Deps
)

// bigFleet is the fleet the budget holds on: 10,000 simulated servers (in
// 100 districts, with simfleet's trouble: 2,000 attack sources besides the
// blocked scanner every server reports, 200 failed units), 1,000
// resources, over 40,000 links (discovered from the servers' connections,
// and declared), 5,000 offline servers explained by one failed resource
// and 100 more failed resources, and a load balancer in front of 2,500
// servers, and one server with 300 full disks. Built once per test binary; the tools
// only read it.
func bigFleet(tb testing.TB) Deps {
	tb.Helper()
	bigOnce.Do(func() {
		start := time.Now()
		bigDeps = buildBigFleet(nil)
		tb.Logf("the big fleet was built in %s", time.Since(start).Round(time.Millisecond))
	})
	if bigDeps.Fleet == nil {
		tb.Fatal("the big fleet could not be built (see the first test's failure)")
	}
	return bigDeps
}

// buildBigFleet builds a big fleet of its own; when streams is not nil it
// records each server's stream there, for a benchmark that goes on
// writing the fleet as its agents would.
func buildBigFleet(streams map[string]uint64) Deps {
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	cfg := config.Default()
	id := func(k int) string { return fmt.Sprintf("res-%04d", k) }
	kinds := []struct{ kind, engine, target string }{
		{"database", "postgres", "172.16.%d.%d:5432"}, {"database", "redis", "172.17.%d.%d:6379"},
		{"probe", "tcp", "172.18.%d.%d:443"}, {"bucket", "s3", "172.19.%d.%d:9000"},
	}
	for k := range bigResources {
		kd := kinds[k%len(kinds)]
		cfg.Resources = append(cfg.Resources, config.Resource{ID: id(k), Kind: kd.kind, Engine: kd.engine, Target: fmt.Sprintf(kd.target, k/250, k%250+1)})
	}
	for i := 1; i < bigServers; i += 2 {
		cfg.Links = append(cfg.Links, config.Link{From: simfleet.Name(i), To: bigRoot})
	}
	// A load balancer in front of every fourth server.
	cfg.Resources[bigLB].Kind, cfg.Resources[bigLB].Engine, cfg.Resources[bigLB].Target = "load_balancer", "http", "http://172.20.0.1/"
	for i := 0; i < bigServers; i += 4 {
		cfg.Links = append(cfg.Links, config.Link{From: id(bigLB), To: simfleet.Name(i)})
	}
	cfg.Runbooks = []config.Runbook{{Name: "restart-postgres", Description: "Restart PostgreSQL on a database server", Command: "systemctl restart postgresql", Match: map[string]string{"engine": "postgres"}}}

	now := time.Now()
	ms := memStore{}
	var explains []string
	for i := 1; i < bigServers; i += 2 {
		explains = append(explains, simfleet.Name(i))
	}
	ms.incidents = []store.Incident{{ID: 1, Target: bigRoot, Kind: "database", Reason: "dial tcp 172.16.0.1:5432: connect: connection refused", StartedAt: now.Add(-time.Hour), Explains: explains}}
	for i := range bigServers {
		ms.agents = append(ms.agents, store.Agent{Name: simfleet.Name(i), Serial: "01", EnrolledAt: now.Add(-48 * time.Hour)})
	}
	f, err := fleet.New(ctx, ms, logger)
	if err != nil {
		panic(err)
	}
	r := rand.New(rand.NewPCG(bigServers, 1))
	for i := range bigServers {
		st := simfleet.State(i, bigServers, r, now)
		simfleet.AddTrouble(st, i, now)
		if i == bigFullDisks {
			for k := range 300 {
				st.Disks.Items = append(st.Disks.Items, simfleet.Disk(fmt.Sprintf("/srv/volume-%03d", k), fmt.Sprintf("/dev/vdd%d", k), 100*simfleet.GiB, 0.995))
			}
		}
		conn := f.Connect(simfleet.Hello(i, "0.9.0"))
		f.Apply(simfleet.Name(i), conn, st)
		if streams != nil {
			streams[simfleet.Name(i)] = conn
		}
		if i%2 == 1 {
			f.Disconnect(simfleet.Name(i), conn)
		}
	}
	prober := resources.New(cfg, logger)
	prober.SetAgents(quietAgents{}, func() map[string][]string {
		m := map[string][]string{}
		for k := range bigResources {
			m[id(k)] = []string{simfleet.Name(0)}
		}
		return m
	})
	prober.Assign()
	for k := range bigResources {
		res := &gridcityv1.ProbeResult{ProbeId: id(k), ResourceId: id(k), Status: "ok", LatencyUs: 1200, CheckedUnixMs: now.UnixMilli()}
		if k%bigFailedEvery == 0 {
			res.Status, res.Reason = "failed", fmt.Sprintf("dial tcp %s: connect: connection refused", cfg.Resources[k].Target)
			prober.HandleResult(simfleet.Name(0), res)
		}
		prober.HandleResult(simfleet.Name(0), res)
	}
	topo := topology.New(cfg, f, prober)
	tracker := fleettest.Tracker(ms, topo, logger)
	return Deps{Deps: fleetview.Deps{Fleet: f, Store: ms, Topology: topo, Resources: prober, Incidents: tracker, Logger: logger}, Store: ms}
}

// answerSizes calls a tool and returns its text and structured content's
// sizes in characters, and the structured content's JSON.
func answerSizes(tb testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (text, structured int, raw []byte) {
	tb.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tb.Fatalf("%s %v: %v", name, args, err)
	}
	if res.IsError {
		tb.Fatalf("%s %v: %s", name, args, res.Content[0].(*mcp.TextContent).Text)
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text += len([]rune(t.Text))
		}
	}
	raw, err = json.Marshal(res.StructuredContent)
	if err != nil {
		tb.Fatal(err)
	}
	return text, len([]rune(string(raw))), raw
}

// withinBudget calls a tool on the big fleet's session and fails the test
// when either form of its answer is over budget; it returns the
// structured content, decoded into out.
func withinBudget(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	budget := budgetOf(name, args)
	text, structured, raw := answerSizes(t, cs, name, args)
	if text > budget || structured > budget {
		t.Errorf("%s %v: text %d and structured %d characters; want at most %d each", name, args, text, structured, budget)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
	}
}

// TestToolAnswersFitTheBudgetOnABigFleet: every tool's answer without
// arguments, and with a set of them, fits the budget on 10,000 servers.
func TestToolAnswersFitTheBudgetOnABigFleet(t *testing.T) {
	cs := memSession(t, bigFleet(t))
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		// incident_report and security_findings: the tests below follow
		// their arguments, each call checked against the budget.
		{"get_topology", nil},
		{"get_topology", map[string]any{"district": "district-042"}},
		{"get_topology", map[string]any{"target": simfleet.Name(0)}},
		{"get_topology", map[string]any{"after": simfleet.Name(5001) + " -> " + bigRoot}},
		{"security_findings", map[string]any{"server": simfleet.Name(0)}},
		{"list_resources", map[string]any{"status": "ok"}},
		{"list_resources", map[string]any{"kind": "database", "after": "res-0500"}},
		{"list_resources", map[string]any{"status": "failed"}},
		{"list_resources", map[string]any{"kind": "load_balancer"}},
		{"diagnose", map[string]any{"target": bigRoot}},
		{"diagnose", map[string]any{"target": simfleet.Name(1)}},
		{"list_runbooks", nil},
	} {
		withinBudget(t, cs, c.name, c.args, nil)
	}
	var dg fleetview.DiagnoseOutput
	withinBudget(t, cs, "diagnose", map[string]any{"target": simfleet.Name(bigFullDisks)}, &dg)
	if dg.DiagnosesCount < 300 || len(dg.Diagnoses) == 0 || len(dg.Diagnoses) >= dg.DiagnosesCount || dg.FixesCount < 300 || len(dg.Fixes) == 0 ||
		!strings.Contains(dg.More, `list_servers {"name": "`+simfleet.Name(bigFullDisks)+`"}`) {
		t.Errorf("diagnose of the server with 300 full disks: %d diagnoses listed of %d, %d fixes of %d, more %q; want some of over 300 of each, and where the rest is",
			len(dg.Diagnoses), dg.DiagnosesCount, len(dg.Fixes), dg.FixesCount, dg.More)
	}
}

// TestResourcesFitTheBudgetOnABigFleet: the resources a client attaches
// whole (the servers, the topology, the incidents) are within the budget
// of an answer without arguments on 10,000 servers, and the servers'
// index counts what it leaves out, the offline servers first in it.
func TestResourcesFitTheBudgetOnABigFleet(t *testing.T) {
	cs := memSession(t, bigFleet(t))
	for _, uri := range []string{"gridcity://servers", "gridcity://topology", "gridcity://incidents", "gridcity://servers/" + simfleet.Name(7)} {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		text := res.Contents[0].Text
		if n := len([]rune(text)); n > budgetDefault {
			t.Errorf("%s: %d characters; want at most %d", uri, n, budgetDefault)
		}
		if uri != "gridcity://servers" {
			continue
		}
		var idx ServerIndex
		if err := json.Unmarshal([]byte(text), &idx); err != nil {
			t.Fatal(err)
		}
		omitted := 0
		for _, n := range idx.Omitted {
			omitted += n
		}
		if idx.Total != bigServers || !idx.Truncated || len(idx.Servers)+omitted != bigServers || idx.More == "" || idx.Servers[0].Status != "offline" {
			t.Errorf("servers index: total %d, %d listed, %d omitted, truncated %v, more %q, first %+v", idx.Total, len(idx.Servers), omitted, idx.Truncated, idx.More, idx.Servers[0])
		}
	}
}

// TestEveryRootCauseIsCountedAndReachable: the incident report on the big
// fleet counts every root cause, lists the one explaining 5,000 targets
// first, and following nextAfter, then root_cause with explainsNextAfter,
// reaches every root cause and every target it explains.
func TestEveryRootCauseIsCountedAndReachable(t *testing.T) {
	cs := memSession(t, bigFleet(t))
	wantCauses := bigResources / bigFailedEvery // the root resource is one of them
	var out fleetview.IncidentOutput
	withinBudget(t, cs, "incident_report", nil, &out)
	if out.RootCausesCount != wantCauses || out.TroubledCount != bigServers/2+wantCauses {
		t.Fatalf("rootCausesCount %d, troubledCount %d; want %d and %d", out.RootCausesCount, out.TroubledCount, wantCauses, bigServers/2+wantCauses)
	}
	if len(out.RootCauses) == 0 || out.RootCauses[0].ID != bigRoot || out.RootCauses[0].ExplainsCount != bigServers/2 {
		t.Fatalf("first root cause %+v; want %s explaining %d", out.RootCauses[:min(1, len(out.RootCauses))], bigRoot, bigServers/2)
	}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		for _, rc := range out.RootCauses {
			if seen[rc.ID] {
				t.Fatalf("page %d lists %s again", page, rc.ID)
			}
			seen[rc.ID] = true
		}
		if out.NextAfter == "" {
			break
		}
		after := out.NextAfter
		out = fleetview.IncidentOutput{}
		withinBudget(t, cs, "incident_report", map[string]any{"after": after}, &out)
	}
	if len(seen) != wantCauses {
		t.Fatalf("reached %d root causes by nextAfter; want %d", len(seen), wantCauses)
	}
	explained := map[string]bool{}
	args := map[string]any{"root_cause": bigRoot}
	for {
		out = fleetview.IncidentOutput{}
		withinBudget(t, cs, "incident_report", args, &out)
		rc := out.RootCauses[0]
		for _, e := range rc.Explains {
			explained[e] = true
		}
		if rc.ExplainsNextAfter == "" {
			break
		}
		args = map[string]any{"root_cause": bigRoot, "after": rc.ExplainsNextAfter}
	}
	if len(explained) != bigServers/2 || !explained[simfleet.Name(1)] || !explained[simfleet.Name(bigServers-1)] {
		t.Fatalf("reached %d targets explained by %s; want %d", len(explained), bigRoot, bigServers/2)
	}
}

// TestOpenAttacksAreCountedFirstAndReachable: security_findings on the big
// fleet counts every attack and every open one, lists open attacks nothing
// blocks first, and the source and after arguments it names get the rest.
func TestOpenAttacksAreCountedFirstAndReachable(t *testing.T) {
	cs := memSession(t, bigFleet(t))
	// simfleet: every server is attacked by the blocked scanner (open), and
	// every AttackedEvery-th by a source of its own, open for even ones.
	own := bigServers / simfleet.AttackedEvery
	var out fleetview.SecurityOutput
	withinBudget(t, cs, "security_findings", nil, &out)
	if out.AttacksCount != bigServers+own || out.AttacksOpen != bigServers+own/2 || out.SourcesCount != own+1 {
		t.Fatalf("attacksCount %d, attacksOpen %d, sourcesCount %d; want %d, %d, %d", out.AttacksCount, out.AttacksOpen, out.SourcesCount, bigServers+own, bigServers+own/2, own+1)
	}
	if len(out.Attacks) == 0 || out.Attacks[0].State != "open" || out.Attacks[0].Blocked || out.NextAfter == "" {
		t.Fatalf("first attack %+v, nextAfter %q; want an open unblocked one and a way on", out.Attacks[:min(1, len(out.Attacks))], out.NextAfter)
	}
	if out.ExposuresCount <= len(out.Exposures) || len(out.Exposures) == 0 || out.Exposures[0].Severity != "medium" {
		t.Fatalf("exposures %d listed of %d, first %+v", len(out.Exposures), out.ExposuresCount, out.Exposures[:min(1, len(out.Exposures))])
	}
	// The next page goes on where the first stopped, open unblocked first.
	seen := map[string]bool{}
	for _, a := range out.Attacks {
		seen[a.Server+" "+a.Source+" "+a.Kind] = true
	}
	next := fleetview.SecurityOutput{}
	withinBudget(t, cs, "security_findings", map[string]any{"after": out.NextAfter}, &next)
	if len(next.Attacks) == 0 || seen[next.Attacks[0].Server+" "+next.Attacks[0].Source+" "+next.Attacks[0].Kind] || next.Attacks[0].State != "open" {
		t.Fatalf("the page after %q starts with %+v", out.NextAfter, next.Attacks[:min(1, len(next.Attacks))])
	}
	// Every open source is reachable by source: the first one listed, and
	// the scanner on every server, page by page.
	src := fleetview.SecurityOutput{}
	withinBudget(t, cs, "security_findings", map[string]any{"source": out.Sources[0].Source}, &src)
	if src.AttacksCount != 1 || len(src.Attacks) != 1 || src.Attacks[0].State != "open" {
		t.Fatalf("source %s: %+v", out.Sources[0].Source, src)
	}
	scanner := map[string]bool{}
	args := map[string]any{"source": "198.51.100.77"}
	for pages := 0; pages < 2; pages++ {
		src = fleetview.SecurityOutput{}
		withinBudget(t, cs, "security_findings", args, &src)
		if src.AttacksCount != bigServers {
			t.Fatalf("the scanner: attacksCount %d; want %d", src.AttacksCount, bigServers)
		}
		for _, a := range src.Attacks {
			if scanner[a.Server] {
				t.Fatalf("the scanner's attack on %s listed twice", a.Server)
			}
			scanner[a.Server] = true
		}
		args = map[string]any{"source": "198.51.100.77", "after": src.NextAfter}
	}
	if src.NextAfter == "" || len(scanner) < 2*len(src.Attacks)-1 {
		t.Fatalf("two pages of the scanner's attacks reached %d servers, nextAfter %q", len(scanner), src.NextAfter)
	}
}

// TestListsOfTheOtherToolsPageToTheEnd: list_resources and get_topology
// count what they leave out, and nextAfter reaches all of it.
func TestListsOfTheOtherToolsPageToTheEnd(t *testing.T) {
	cs := memSession(t, bigFleet(t))
	var res fleetview.ResourcesOutput
	withinBudget(t, cs, "list_resources", nil, &res)
	if res.ResourcesCount != bigResources || res.TroubledCount != bigResources/bigFailedEvery || !res.Resources[0].Troubled || res.NextAfter == "" {
		t.Fatalf("list_resources: %d listed of %d, %d troubled, first %+v, nextAfter %q", len(res.Resources), res.ResourcesCount, res.TroubledCount, res.Resources[0], res.NextAfter)
	}
	var lb fleetview.ResourcesOutput
	withinBudget(t, cs, "list_resources", map[string]any{"kind": "load_balancer"}, &lb)
	if len(lb.Resources) != 1 {
		t.Fatalf("list_resources kind load_balancer: %d resources; want 1", len(lb.Resources))
	}
	if r := lb.Resources[0]; r.BackendsCount != bigServers/4 || len(r.Backends) > fleetview.MaxListed {
		t.Fatalf("the load balancer lists %d backends of %d; want at most %d of %d", len(r.Backends), r.BackendsCount, fleetview.MaxListed, bigServers/4)
	}
	// Every bucket, page by page (each kind pages alike; all of them would
	// take a minute under the race detector).
	ids := map[string]bool{}
	args := map[string]any{"kind": "bucket"}
	for {
		res = fleetview.ResourcesOutput{}
		withinBudget(t, cs, "list_resources", args, &res)
		for _, r := range res.Resources {
			ids[r.ID] = true
		}
		if res.NextAfter == "" {
			break
		}
		args = map[string]any{"kind": "bucket", "after": res.NextAfter}
	}
	if len(ids) != bigResources/4 || res.ResourcesCount != bigResources/4 {
		t.Fatalf("list_resources reached %d buckets of %d; want %d", len(ids), res.ResourcesCount, bigResources/4)
	}
	var topo fleetview.TopologyOutput
	withinBudget(t, cs, "get_topology", nil, &topo)
	if topo.DistrictsCount != bigServers/simfleet.Group || len(topo.Districts) != topo.DistrictsCount {
		t.Fatalf("get_topology names %d districts of %d; want every one (district lists one's members)", len(topo.Districts), topo.DistrictsCount)
	}
	topo = fleetview.TopologyOutput{}
	withinBudget(t, cs, "get_topology", map[string]any{"target": bigRoot}, &topo)
	if topo.BlastRadiusCount < bigServers/2 || topo.UsedByCount != bigServers/2 || topo.NextAfter == "" {
		t.Fatalf("get_topology %s: blast radius %d listed of %d, usedBy %d, nextAfter %q", bigRoot, len(topo.BlastRadius), topo.BlastRadiusCount, topo.UsedByCount, topo.NextAfter)
	}
	blast := map[string]bool{}
	for {
		for _, b := range topo.BlastRadius {
			blast[b] = true
		}
		if topo.NextAfter == "" {
			break
		}
		after := topo.NextAfter
		topo = fleetview.TopologyOutput{}
		withinBudget(t, cs, "get_topology", map[string]any{"target": bigRoot, "after": after}, &topo)
	}
	if len(blast) != topo.BlastRadiusCount {
		t.Fatalf("get_topology %s reached %d of the blast radius; want %d", bigRoot, len(blast), topo.BlastRadiusCount)
	}
}

// BenchmarkToolAnswerSizes reports each tool's answer size on the big
// fleet, in both forms, beside the time it takes.
func BenchmarkToolAnswerSizes(b *testing.B) {
	cs := memSession(b, bigFleet(b))
	for _, c := range []struct {
		label, name string
		args        map[string]any
	}{
		{"list_servers", "list_servers", nil},
		{"list_servers_attention", "list_servers", map[string]any{"attention": true}},
		{"list_servers_name", "list_servers", map[string]any{"name": simfleet.Name(42)}},
		{"list_servers_full", "list_servers", map[string]any{"full": true}},
		{"incident_report", "incident_report", nil},
		{"incident_report_root_cause", "incident_report", map[string]any{"root_cause": bigRoot}},
		{"get_topology", "get_topology", nil},
		{"get_topology_target", "get_topology", map[string]any{"target": bigRoot}},
		{"get_topology_district", "get_topology", map[string]any{"district": "district-042"}},
		{"security_findings", "security_findings", nil},
		{"security_findings_source", "security_findings", map[string]any{"source": "198.51.100.77"}},
		{"list_resources", "list_resources", nil},
		{"diagnose", "diagnose", map[string]any{"target": bigRoot}},
		{"list_runbooks", "list_runbooks", nil},
	} {
		b.Run(c.label, func(b *testing.B) {
			var text, structured int
			for b.Loop() {
				text, structured, _ = answerSizes(b, cs, c.name, c.args)
			}
			reportSizes(b, c.name, text, structured, c.args)
		})
	}
}

// budgetOf is the budget of a call: the default one when it passes no
// argument but the tool's required ones.
func budgetOf(name string, args map[string]any) int {
	required := map[string]string{"diagnose": "target", "get_metrics": "target", "wait_for_command": "request_id"}
	for k := range args {
		if k != required[name] {
			return budgetArgs
		}
	}
	return budgetDefault
}

// reportSizes reports an answer's size in both forms and its budget, for
// make bench's report.
func reportSizes(b *testing.B, name string, text, structured int, args map[string]any) {
	budget := budgetOf(name, args)
	b.ReportMetric(float64(text), "text-chars")
	b.ReportMetric(float64(structured), "structured-chars")
	b.ReportMetric(float64(budget), "budget-chars")
}

// TestToolsListLeavesRoomForMoreTools: the whole tools/list answer, every
// tool's description and schemas as an operate token lists them, stays
// under 32,000 characters with room for one more tool the size of an
// average one of today's.
func TestToolsListLeavesRoomForMoreTools(t *testing.T) {
	l, err := Offered(context.Background(), store.ScopeOperate)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&mcp.ListToolsResult{Tools: l.Tools})
	if err != nil {
		t.Fatal(err)
	}
	size := len([]rune(string(b)))
	room := size / len(l.Tools)
	t.Logf("tools/list: %d characters for %d tools", size, len(l.Tools))
	if size+room > 32000 {
		t.Errorf("tools/list is %d characters: with room for one more tool (%d) it would be over 32,000; shorten descriptions", size, room)
	}
}
