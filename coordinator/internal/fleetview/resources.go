package fleetview

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// ResourcesInput is list_resources' input.
type ResourcesInput struct {
	Status string `json:"status,omitempty" jsonschema:"only resources with this status: ok, failed, degraded or unknown"`
	Kind   string `json:"kind,omitempty" jsonschema:"only resources of this kind: database, bucket, probe or load_balancer"`
	After  string `json:"after,omitempty" jsonschema:"continue the list after this resource: the answer's nextAfter"`
}

// ResourcesOutput is list_resources' result.
type ResourcesOutput struct {
	Note            string         `json:"note,omitempty" jsonschema:"why the answer is empty when a person can fix it (e.g. no config is loaded), and how"`
	Resources       []ResourceView `json:"resources" jsonschema:"troubled ones first, then by id; as many as fit"`
	ResourcesCount  int            `json:"resourcesCount" jsonschema:"how many resources match, however many are listed"`
	TroubledCount   int            `json:"troubledCount" jsonschema:"how many of them are troubled"`
	NextAfter       string         `json:"nextAfter,omitempty" jsonschema:"set when resources was cut short: pass it as after (with the same status and kind) for the next ones"`
	CandidatesCount int            `json:"candidatesCount" jsonschema:"how many candidates there are, however many are listed"`
	// Candidates are services the servers run that look like resources but
	// are not in the config yet.
	Candidates []CandidateView `json:"candidates" jsonschema:"servers listening off loopback on a database or cache port no resource names: add them to the config to probe them"`
}

// CandidateView is a possible resource found on a server.
type CandidateView struct {
	Server  string `json:"server"`
	Engine  string `json:"engine" jsonschema:"what the port suggests: postgres, mysql, redis, mongodb, elasticsearch, memcached"`
	Address string `json:"address" jsonschema:"the listening address"`
	Port    uint32 `json:"port"`
	Process string `json:"process,omitempty"`
}

// wellKnown maps ports to the engine they suggest.
var wellKnown = map[uint32]string{5432: "postgres", 3306: "mysql", 6379: "redis", 27017: "mongodb", 9200: "elasticsearch", 11211: "memcached"}

// ResourceView is one resource; reason is the probe's real error text.
type ResourceView struct {
	ID            string             `json:"id"`
	Name          string             `json:"name"`
	Kind          string             `json:"kind" jsonschema:"database, bucket, probe or load_balancer"`
	Engine        string             `json:"engine"`
	Target        string             `json:"target"`
	Status        string             `json:"status" jsonschema:"ok, failed (from every place it is checked from), degraded (failing from some of them) or unknown (not checked yet)"`
	Troubled      bool               `json:"troubled" jsonschema:"failing enough checks in a row to count as an incident"`
	Reason        string             `json:"reason,omitempty" jsonschema:"why the last check failed, as the probe saw it"`
	Metrics       map[string]float64 `json:"metrics" jsonschema:"latency_ms and what the protocol tells cheaply (status_code, days_left, auth_required …)"`
	CheckedAt     string             `json:"checkedAt,omitempty"`
	CheckedFrom   string             `json:"checkedFrom,omitempty" jsonschema:"where the checks that count ran: the servers that use it (comma-separated), or the coordinator"`
	Since         string             `json:"since,omitempty" jsonschema:"since when it has been troubled (or healthy)"`
	Backends      []BackendView      `json:"backends,omitempty" jsonschema:"load balancers: the targets behind it (what it uses, but the server it runs on) and their state; troubled ones first, the first 10"`
	BackendsCount int                `json:"backendsCount,omitempty" jsonschema:"load balancers: how many targets are behind it (get_topology on it lists them all)"`
	Checks        []CheckView        `json:"checks" jsonschema:"each vantage point's latest check, failed ones first, the first 10: the servers that use it probe it through their agents; the coordinator probes it when none can"`
	ChecksCount   int                `json:"checksCount" jsonschema:"how many vantage points check it"`
}

// BackendView is a target behind a load balancer.
type BackendView struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Troubled bool   `json:"troubled"`
	Reason   string `json:"reason,omitempty"`
}

// CheckView is one vantage point's latest check of a resource.
type CheckView struct {
	From      string  `json:"from" jsonschema:"a server, or coordinator"`
	Status    string  `json:"status" jsonschema:"ok or failed"`
	Reason    string  `json:"reason,omitempty"`
	Failures  int     `json:"failures" jsonschema:"checks failed in a row from here"`
	LatencyMs float64 `json:"latencyMs"`
	CheckedAt string  `json:"checkedAt"`
	Fresh     bool    `json:"fresh" jsonschema:"recent enough to count; a stale check is from a vantage point that stopped reporting"`
}

// candidatesMemo keys the fleet's kept candidates (see candidates) by
// the config whose resources they leave out.
type candidatesMemo struct{ cfg *config.Config }

// keptCandidates are the candidates at one shape of the fleet.
type keptCandidates struct {
	mu    sync.Mutex
	shape uint64
	list  []CandidateView
}

// candidates lists well-known database ports the servers listen on (not
// only on loopback) that no configured resource's target names. What a
// server listens on and its addresses are part of the fleet's shape, so
// the list is made again only when the shape has changed. It is shared:
// the caller must not change it.
func candidates(d Deps) []CandidateView {
	v := d.Fleet.View()
	k := d.Fleet.Memo(candidatesMemo{d.Topology.Config()}, func() any { return &keptCandidates{} }).(*keptCandidates)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.list == nil || k.shape != v.Shape() {
		k.list, k.shape = candidatesOf(d, v), v.Shape()
	}
	return k.list
}

// candidatesOf is candidates of the servers of v.
func candidatesOf(d Deps, v *fleet.View) []CandidateView {
	configured := map[string]bool{}
	for _, r := range d.Topology.Config().Resources {
		if ep := topology.Endpoint(r.Engine, r.Target); ep != "" {
			configured[ep] = true
		}
	}
	out := []CandidateView{}
	for _, srv := range v.Servers() {
		seen := map[uint32]bool{}
		for _, l := range srv.State.GetListeners().GetItems() {
			engine, ok := wellKnown[l.GetPort()]
			if !ok || seen[l.GetPort()] || loopback.Host(l.GetAddress()) || !strings.HasPrefix(l.GetProto(), "tcp") {
				continue
			}
			// A wildcard listener serves each of the server's addresses.
			addrs := []string{l.GetAddress()}
			if ip := net.ParseIP(l.GetAddress()); ip != nil && ip.IsUnspecified() {
				addrs = srv.State.GetHost().GetAddresses()
			}
			if slices.ContainsFunc(addrs, func(a string) bool { return configured[net.JoinHostPort(a, strconv.Itoa(int(l.GetPort())))] }) {
				continue
			}
			seen[l.GetPort()] = true
			out = append(out, CandidateView{Server: srv.Name, Engine: engine, Address: l.GetAddress(), Port: l.GetPort(), Process: l.GetProcess()})
		}
	}
	return out
}

// Resources answers list_resources.
func (m *Model) Resources(ctx context.Context, in ResourcesInput) (ResourcesOutput, error) {
	d := m.d
	if in.Status != "" && !slices.Contains([]string{"ok", "failed", "degraded", "unknown"}, in.Status) {
		return ResourcesOutput{}, fmt.Errorf("status %q is not one of ok, failed, degraded, unknown", in.Status)
	}
	if in.Kind != "" && !slices.Contains([]string{"database", "bucket", "probe", "load_balancer"}, in.Kind) {
		return ResourcesOutput{}, fmt.Errorf("kind %q is not one of database, bucket, probe, load_balancer", in.Kind)
	}
	budget := BudgetFor(in.Status != "" || in.Kind != "" || in.After != "")
	out := ResourcesOutput{Resources: []ResourceView{}, Candidates: candidates(d),
		Note: noConfigNote(d, "configured resources to probe (candidates lists what the servers run that could be one)")}
	g, err := d.Topology.Graph()
	if err != nil {
		return ResourcesOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
	}
	hosts, err := d.Topology.HostedOn() // cached with the graph, not built again
	if err != nil {
		return ResourcesOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
	}
	states := slices.DeleteFunc(d.Resources.States(), func(st resources.State) bool {
		return (in.Status != "" && st.Status != in.Status) || (in.Kind != "" && st.Kind != in.Kind)
	})
	slices.SortStableFunc(states, func(a, b resources.State) int {
		return cmp.Or(cmp.Compare(first(a.Troubled), first(b.Troubled)), cmp.Compare(a.ID, b.ID))
	})
	keys := make([]string, len(states))
	for i, st := range states {
		keys[i] = st.ID
		if st.Troubled {
			out.TroubledCount++
		}
	}
	from, err := afterKey(keys, in.After, "resources")
	if err != nil {
		return ResourcesOutput{}, err
	}
	out.ResourcesCount, out.CandidatesCount = len(states), len(out.Candidates)
	out.Candidates = fill(out.Candidates, func(c CandidateView) CandidateView { return c }, budget/8)
	out.Resources = fill(states[from:], func(st resources.State) ResourceView {
		// A metric that is not a number is left out: it would fail the
		// answer for every resource.
		m := maps.Collect(func(yield func(string, float64) bool) {
			for k, v := range st.Metrics {
				if !math.IsNaN(v) && !math.IsInf(v, 0) && !yield(k, v) {
					return
				}
			}
		})
		if st.Status != "unknown" {
			m["latency_ms"] = float64(st.Latency.Microseconds()) / 1000
		}
		checks := []CheckView{}
		failedFirst := slices.Clone(st.Checks)
		slices.SortStableFunc(failedFirst, func(a, b resources.Check) int {
			return cmp.Compare(first(a.Status == "failed"), first(b.Status == "failed"))
		})
		for _, c := range failedFirst[:min(len(failedFirst), MaxListed)] {
			checks = append(checks, CheckView{From: c.From, Status: c.Status, Reason: c.Reason, Failures: c.Failures,
				LatencyMs: float64(c.Latency.Microseconds()) / 1000, CheckedAt: RFC3339(c.CheckedAt), Fresh: c.Fresh})
		}
		var backends []BackendView
		if st.Kind == "load_balancer" {
			backends = []BackendView{}
			for _, id := range g.Uses(st.ID) {
				if id == hosts[st.ID] {
					continue // the server it runs on, not one it balances
				}
				if b, ok := g.Target(id); ok {
					backends = append(backends, BackendView{ID: b.ID, Kind: b.Kind, Status: b.Status, Troubled: b.Troubled, Reason: b.Reason})
				}
			}
		}
		v := ResourceView{ID: st.ID, Name: st.Name, Kind: st.Kind, Engine: st.Engine, Target: st.Target,
			Status: st.Status, Troubled: st.Troubled, Reason: st.Reason, Metrics: m, CheckedAt: RFC3339(st.CheckedAt), CheckedFrom: st.CheckedFrom,
			Since: RFC3339(st.Since), Checks: checks, ChecksCount: len(st.Checks)}
		if backends != nil {
			slices.SortStableFunc(backends, func(a, b BackendView) int { return cmp.Compare(first(a.Troubled), first(b.Troubled)) })
			v.Backends, v.BackendsCount = backends[:min(len(backends), MaxListed)], len(backends)
		}
		return v
	}, budget-JSONSize(out)-300)
	if n := len(out.Resources); n > 0 && from+n < len(states) {
		out.NextAfter = keys[from+n-1]
	}
	return out, nil
}
