package e2e

// Faults in the demo city (netlab.BuildCity): six hosts in network namespaces — a load
// balancer (nginx) in front of two web servers (nginx) that pass /api to the orders API
// (gridcity-fleet app), which keeps its orders in PostgreSQL, and a scraper calling the API
// through the load balancer — each with its own agent, watched by a coordinator whose config
// declares the resource chain and leaves the servers' links to discovery. A host's cable is
// pulled (its veth set down) and put back; the database is stopped and started again.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
)

var fleetBin struct {
	once sync.Once
	path string
	err  error
}

// gridcityFleet is the gridcity-fleet binary (the city's API and scraper), built with -race
// beside the others unless it is there already.
func gridcityFleet(t *testing.T) string {
	t.Helper()
	fleetBin.once.Do(func() {
		p := filepath.Join(bin, "gridcity-fleet")
		if fileExists(p) {
			fleetBin.path = p
			return
		}
		out, err := exec.Command("go", "build", "-race", "-o", p, "../harness/cmd/gridcity-fleet").CombinedOutput()
		if err != nil {
			fleetBin.err = fmt.Errorf("build gridcity-fleet: %v\n%s", err, out)
			return
		}
		fleetBin.path = p
	})
	if fleetBin.err != nil {
		t.Fatal(fleetBin.err)
	}
	return fleetBin.path
}

// testCity is the demo city with its coordinator, every agent online and every target healthy.
type testCity struct {
	*netlab.City
	c      *coordinator
	tok    string
	cs     *mcp.ClientSession
	agents map[string]*netlab.Proc
}

// cityReport is incident_report with its history.
type cityReport struct {
	incidentReport
	Recent []struct{ Target, Reason, StartedAt, EndedAt string }
}

func startTestCity(t *testing.T) *testCity {
	t.Helper()
	needRoot(t)
	needPrograms(t, netlab.Nginx, netlab.Postgres, netlab.Setpriv)
	ctx := context.Background()
	fleet := gridcityFleet(t)
	n := newTestNet(t)
	began := time.Now()
	race := []string{"GORACE=halt_on_error=1"}
	city, err := netlab.NewCity(ctx, n.Net)
	if err != nil {
		t.Fatal(err)
	}
	// The services start while the coordinator and the agents do: the config needs only the
	// hosts' addresses.
	servicesErr := make(chan error, 1)
	go func() {
		servicesErr <- city.Start(ctx, netlab.CityOptions{FleetBin: fleet, ScrapeEvery: time.Second, Env: race})
	}()
	servicesDone := false
	t.Cleanup(func() {
		if !servicesDone {
			<-servicesErr
		}
		for _, p := range n.Procs() {
			if p.Name != "agent" {
				watchProc(t, p) // registered now, so it runs right away, before the net goes
			}
		}
	})
	cfgFile := filepath.Join(t.TempDir(), "gridcity.yaml")
	cfg := city.Config(netlab.ConfigOptions{ProbeInterval: time.Second, ProbeTimeout: 500 * time.Millisecond, FailuresBeforeTroubled: 2,
		CollectFast: time.Second, CollectMedium: 2 * time.Second})
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := &testCity{City: city, agents: map[string]*netlab.Proc{}}
	tc.c = startCoordinatorOn(t, n, cfgFile)
	tc.tok = tc.c.token()
	join := tc.c.joinLine("--reusable")
	agents, err := city.StartAgents(ctx, netlab.AgentOptions{Bin: filepath.Join(bin, "gridcity-agent"), Args: []string{"--log-level", "debug"}, Env: race},
		func(*netlab.Host) (string, error) { return join, nil })
	for _, p := range agents {
		watchProc(t, p)
		tc.agents[p.Host] = p
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the coordinator and the agents run, %s after the net was made", time.Since(began).Round(100*time.Millisecond))
	err, servicesDone = <-servicesErr, true
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the city's services run, %s after the net was made", time.Since(began).Round(100*time.Millisecond))
	if tc.cs, err = tc.c.mcpClient(tc.tok, "e2e-fleet"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.cs.Close() })

	// Healthy, with the links the assertions rely on discovered from the agents' connections
	// (kept alive by nginx, the API and the scraper) and listening ports.
	eventually(t, 45*time.Second, "the city online, healthy and its links discovered", func() error {
		var servers struct {
			ByStatus map[string]int
			Total    int
		}
		if err := callTool(tc.cs, "list_servers", nil, &servers); err != nil {
			return err
		}
		if online := servers.ByStatus["online"]; online != len(netlab.CityHosts) {
			return fmt.Errorf("%d of %d servers online: %v of %d", online, len(netlab.CityHosts), servers.ByStatus, servers.Total)
		}
		var rep incidentReport
		if err := callTool(tc.cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if want := len(netlab.CityHosts) + len(netlab.CityResources); rep.Total != want || rep.Healthy != want {
			return fmt.Errorf("%d of %d targets healthy; want all %d: %+v", rep.Healthy, rep.Total, want, rep.Troubled)
		}
		var rs resourceList
		if err := callTool(tc.cs, "list_resources", nil, &rs); err != nil {
			return err
		}
		for _, id := range netlab.CityResources {
			if r := rs.get(id); r.Status != "ok" {
				return fmt.Errorf("%s not probed ok yet: %+v", id, r)
			}
		}
		var topo struct {
			Links []struct{ From, To, Source string }
		}
		if err := callTool(tc.cs, "get_topology", nil, &topo); err != nil {
			return err
		}
		for _, l := range [][2]string{
			{netlab.CityScraper, netlab.ResourceLB},
			{netlab.CityLB, netlab.ResourceWeb1}, {netlab.CityLB, netlab.ResourceWeb2},
			{netlab.CityWeb1, netlab.ResourceAPI}, {netlab.CityWeb2, netlab.ResourceAPI},
			{netlab.ResourceDatabase, netlab.CityDB}, {netlab.ResourceAPI, netlab.CityAPI},
		} {
			if !slices.ContainsFunc(topo.Links, func(x struct{ From, To, Source string }) bool {
				return x.From == l[0] && x.To == l[1] && x.Source == "discovered"
			}) {
				return fmt.Errorf("no discovered link %s → %s yet", l[0], l[1])
			}
		}
		return nil
	})
	t.Logf("the city is healthy, its links discovered, %s after the net was made", time.Since(began).Round(100*time.Millisecond))
	return tc
}

// orders reads the API's orders from the root namespace.
func (tc *testCity) orders(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(tc.App.Addr(), "/") + "/api/orders")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Orders []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 || len(v.Orders) == 0 {
		t.Fatalf("GET /api/orders: %d, %v, %+v", resp.StatusCode, err, v)
	}
	b, _ := json.Marshal(v.Orders)
	return string(b)
}

// report calls incident_report.
func (tc *testCity) report() (cityReport, error) {
	var rep cityReport
	err := callTool(tc.cs, "incident_report", nil, &rep)
	return rep, err
}

// waitIncidentOpen waits until the incident of root is recorded, open, in the history (the
// coordinator records incidents every few seconds: a fault must last that long to be in it).
func (tc *testCity) waitIncidentOpen(t *testing.T, root string) {
	t.Helper()
	eventually(t, 15*time.Second, "the "+root+" incident recorded", func() error {
		rep, err := tc.report()
		if err != nil {
			return err
		}
		for _, inc := range rep.Recent {
			if inc.Target == root && inc.EndedAt == "" {
				return nil
			}
		}
		return fmt.Errorf("no open %s incident in the history: %+v", root, rep.Recent)
	})
}

// waitAllHealthy waits until nothing is troubled and the incident of root is in the history,
// ended.
func (tc *testCity) waitAllHealthy(t *testing.T, within time.Duration, root string) {
	t.Helper()
	eventually(t, within, "all healthy, the "+root+" incident ended", func() error {
		rep, err := tc.report()
		if err != nil {
			return err
		}
		if len(rep.RootCauses) != 0 || len(rep.Troubled) != 0 || rep.Healthy != rep.Total {
			return fmt.Errorf("%d of %d healthy; troubled %+v", rep.Healthy, rep.Total, rep.Troubled)
		}
		for _, inc := range rep.Recent {
			if inc.Target == root {
				if inc.EndedAt == "" {
					return fmt.Errorf("the %s incident is open: %+v", root, inc)
				}
				return nil
			}
		}
		return fmt.Errorf("no %s incident in the history: %+v", root, rep.Recent)
	})
}

// explained are the resources that fail with the database: everything from the API up.
var explained = []string{netlab.ResourceAPI, netlab.ResourceLB, netlab.ResourceWeb1, netlab.ResourceWeb2}

// A pulled cable: db-1's veth goes down. The server goes offline within 15 s, and it is the one
// root cause, explaining the database on it (probed from api-1, which uses it: the probe fails)
// and everything above. Nothing is lost: db-1 keeps its last report while offline, and when
// the cable is back the same agent reconnects by itself, the same PostgreSQL still holds the
// same orders, everything recovers and the incident ends.
func TestFaultLinkCut(t *testing.T) {
	t.Parallel()
	tc := startTestCity(t)
	ctx := context.Background()
	ordersBefore := tc.orders(t)
	agentPID, pgPID := tc.agents[netlab.CityDB].PID(), tc.Database.PID()

	cut := time.Now()
	if err := tc.DB.CutLink(ctx); err != nil {
		t.Fatal(err)
	}
	tc.c.waitStatus(tc.tok, netlab.CityDB, "offline", 15*time.Second)
	t.Logf("db-1 offline %s after its link was cut", time.Since(cut).Round(100*time.Millisecond))

	var rep cityReport
	eventually(t, 30*time.Second, "db-1 the root cause of everything troubled", func() error {
		var err error
		if rep, err = tc.report(); err != nil {
			return err
		}
		if len(rep.RootCauses) != 1 || rep.RootCauses[0].ID != netlab.CityDB {
			return fmt.Errorf("root causes %+v; want db-1 alone", rep.RootCauses)
		}
		rc := rep.RootCauses[0]
		for _, id := range append([]string{netlab.ResourceDatabase}, explained...) {
			if !slices.Contains(rc.Explains, id) {
				return fmt.Errorf("db-1 explains %v; want %s among them", rc.Explains, id)
			}
		}
		return nil
	})
	t.Logf("db-1 named the root cause of %v %s after the cut", rep.RootCauses[0].Explains, time.Since(cut).Round(100*time.Millisecond))
	if rc := rep.RootCauses[0]; rc.Kind != "server" || rc.Reason != "agent offline" || rc.Since == "" {
		t.Errorf("root cause %+v; want a server, agent offline, with a since", rc)
	}
	for _, tr := range rep.Troubled {
		if tr.RootCause != netlab.CityDB {
			t.Errorf("%s's root cause is %q; want db-1", tr.ID, tr.RootCause)
		}
		if tr.Kind == "server" && tr.ID != netlab.CityDB {
			t.Errorf("server %s is troubled (%s) though only db-1 was cut off", tr.ID, tr.Reason)
		}
	}
	var rs struct {
		Resources []struct {
			ID, Status, Reason, CheckedFrom string
			Troubled                        bool
		}
	}
	if err := callTool(tc.cs, "list_resources", nil, &rs); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Resources {
		if r.ID == netlab.ResourceDatabase && (!r.Troubled || r.CheckedFrom != netlab.CityAPI || !strings.Contains(r.Reason, tc.DB.Addr.String())) {
			t.Errorf("orders-db %+v; want troubled, checked from api-1 (its user), the reason naming %s", r, tc.DB.Addr)
		}
	}
	// Offline, db-1 keeps its last report.
	servers, err := tc.c.servers(tc.tok)
	if err != nil {
		t.Fatal(err)
	}
	db := servers[netlab.CityDB]
	if db.Status != "offline" || !slices.Equal(db.Addresses, []string{tc.DB.Addr.String()}) ||
		!slices.ContainsFunc(db.Listening, func(l struct {
			Proto, Address, Process string
			Port                    int
		}) bool {
			return l.Port == 5432 && l.Address == tc.DB.Addr.String() && l.Process == "postgres"
		}) {
		t.Errorf("db-1 while offline: %s, addresses %v, listening %+v; want its last report: %s with postgres on 5432", db.Status, db.Addresses, db.Listening, tc.DB.Addr)
	}

	tc.waitIncidentOpen(t, netlab.CityDB)

	restored := time.Now()
	if err := tc.DB.RestoreLink(ctx); err != nil {
		t.Fatal(err)
	}
	tc.c.waitStatus(tc.tok, netlab.CityDB, "online", 45*time.Second)
	t.Logf("db-1 online again %s after its link came back", time.Since(restored).Round(100*time.Millisecond))
	tc.waitAllHealthy(t, 30*time.Second, netlab.CityDB)
	t.Logf("all healthy, the incident ended, %s after the link came back", time.Since(restored).Round(100*time.Millisecond))
	if got := tc.agents[netlab.CityDB].PID(); got != agentPID {
		t.Errorf("db-1's agent is pid %d; want %d, the one that ran before the cut (it reconnects by itself)", got, agentPID)
	}
	if got := tc.Database.PID(); got != pgPID {
		t.Errorf("PostgreSQL is pid %d; want %d", got, pgPID)
	}
	if got := tc.orders(t); got != ordersBefore {
		t.Errorf("orders after the cut %s; want %s", got, ordersBefore)
	}
}

// The database stops: orders-db is the one root cause, with PostgreSQL's refusal as its reason,
// explaining the API, both web servers' sites and the load balancer; the servers that use them
// are at risk, and none is troubled. It starts again: everything recovers and the incident
// ends.
func TestFaultDatabaseStopped(t *testing.T) {
	t.Parallel()
	tc := startTestCity(t)
	ctx := context.Background()

	stopped := time.Now()
	if err := tc.Database.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var rep cityReport
	eventually(t, 30*time.Second, "orders-db the root cause of the API, the web servers and the load balancer", func() error {
		var err error
		if rep, err = tc.report(); err != nil {
			return err
		}
		if len(rep.RootCauses) != 1 || rep.RootCauses[0].ID != netlab.ResourceDatabase {
			return fmt.Errorf("root causes %+v; want orders-db alone", rep.RootCauses)
		}
		if ex := slices.Sorted(slices.Values(rep.RootCauses[0].Explains)); !slices.Equal(ex, explained) {
			return fmt.Errorf("orders-db explains %v; want %v", ex, explained)
		}
		return nil
	})
	t.Logf("orders-db named the root cause %s after PostgreSQL stopped", time.Since(stopped).Round(100*time.Millisecond))
	rc := rep.RootCauses[0]
	if !strings.Contains(rc.Reason, "connection refused") || !strings.Contains(rc.Reason, tc.Database.Addr()) || rc.Kind != "database" {
		t.Errorf("orders-db %+v; want a database refusing connections on %s", rc, tc.Database.Addr())
	}
	for _, s := range []string{netlab.CityAPI, netlab.CityLB, netlab.CityScraper, netlab.CityWeb1, netlab.CityWeb2} {
		if !slices.Contains(rc.AtRisk, s) {
			t.Errorf("orders-db puts %v at risk; want %s among them", rc.AtRisk, s)
		}
	}
	for _, tr := range rep.Troubled {
		if tr.Kind == "server" {
			t.Errorf("server %s is troubled (%s): only resources fail", tr.ID, tr.Reason)
		}
		if tr.ID != netlab.ResourceDatabase && tr.RootCause != netlab.ResourceDatabase {
			t.Errorf("%s's root cause is %q; want orders-db", tr.ID, tr.RootCause)
		}
		if tr.ID == netlab.ResourceLB && !strings.Contains(tr.Reason, "503") {
			t.Errorf("shop-lb's reason %q; want the 503 the API answers, passed on by nginx twice", tr.Reason)
		}
	}
	// The scraper, a real user, got the 503 too.
	scraper := tc.Net.Proc(netlab.CityScraper, "scraper")
	eventually(t, 10*time.Second, "the scraper sees 503", func() error {
		if !strings.Contains(scraper.Tail(20), "status=503") {
			return fmt.Errorf("scraper log:\n%s", scraper.Tail(5))
		}
		return nil
	})

	tc.waitIncidentOpen(t, netlab.ResourceDatabase)

	restarted := time.Now()
	if err := tc.Database.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tc.waitAllHealthy(t, 30*time.Second, netlab.ResourceDatabase)
	t.Logf("all healthy, the incident ended, %s after PostgreSQL started again", time.Since(restarted).Round(100*time.Millisecond))
	tc.orders(t)
}
