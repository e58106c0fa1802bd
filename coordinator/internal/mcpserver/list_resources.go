package mcpserver

import (
	"context"
	"maps"
	"net"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// ResourcesOutput is list_resources' result.
type ResourcesOutput struct {
	Resources []ResourceView `json:"resources"`
	// Candidates are services the servers run that look like resources but
	// are not in the config yet.
	Candidates []CandidateView `json:"candidates" jsonschema:"servers listening on a well-known database or cache port that no configured resource names: add them to the config to probe them and see them in incidents"`
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
	ID          string             `json:"id"`
	Name        string             `json:"name"`
	Kind        string             `json:"kind" jsonschema:"database, bucket, probe or load_balancer"`
	Engine      string             `json:"engine"`
	Target      string             `json:"target"`
	Status      string             `json:"status" jsonschema:"ok, failed (the last check) or unknown (not checked yet)"`
	Troubled    bool               `json:"troubled" jsonschema:"failing enough checks in a row to count as an incident"`
	Reason      string             `json:"reason,omitempty" jsonschema:"why the last check failed, as the probe saw it"`
	Metrics     map[string]float64 `json:"metrics" jsonschema:"latency_ms and what the protocol tells cheaply (status_code, days_left, auth_required …)"`
	CheckedAt   string             `json:"checkedAt,omitempty"`
	CheckedFrom string             `json:"checkedFrom,omitempty" jsonschema:"where the check ran: the coordinator, or a server"`
	Since       string             `json:"since,omitempty" jsonschema:"since when it has been troubled (or healthy)"`
}

func addListResources(s *mcp.Server, d Deps) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "list_resources",
		Title: "List resources",
		Description: "List the resources in the coordinator's config — databases, buckets, URL probes, load balancers — each checked with its real protocol " +
			"(a Postgres startup, a Redis PING, an HTTP request …): status, the real error text when it fails, latency and cheap metrics, and when and from where it was checked.",
		Annotations:  readOnly("List resources"),
		OutputSchema: outputSchema[ResourcesOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, ResourcesOutput, error) {
		out := ResourcesOutput{Resources: []ResourceView{}, Candidates: candidates(d)}
		for _, st := range d.Resources.States() {
			m := maps.Clone(st.Metrics)
			if m == nil {
				m = map[string]float64{}
			}
			if st.Status != "unknown" {
				m["latency_ms"] = float64(st.Latency.Microseconds()) / 1000
			}
			out.Resources = append(out.Resources, ResourceView{ID: st.ID, Name: st.Name, Kind: st.Kind, Engine: st.Engine, Target: st.Target,
				Status: st.Status, Troubled: st.Troubled, Reason: st.Reason, Metrics: m, CheckedAt: rfc3339(st.CheckedAt), CheckedFrom: st.CheckedFrom, Since: rfc3339(st.Since)})
		}
		return nil, out, nil
	})
}

// candidates lists well-known database ports the servers listen on (not
// only on loopback) that no configured resource's target names.
func candidates(d Deps) []CandidateView {
	configured := map[string]bool{}
	for _, r := range d.Topology.Config().Resources {
		if ep := topology.Endpoint(r.Engine, r.Target); ep != "" {
			configured[ep] = true
		}
	}
	out := []CandidateView{}
	for _, srv := range d.Fleet.Servers() {
		seen := map[uint32]bool{}
		for _, l := range srv.State.GetListeners().GetItems() {
			engine, ok := wellKnown[l.GetPort()]
			if !ok || seen[l.GetPort()] || loopback.Host(l.GetAddress()) || !strings.HasPrefix(l.GetProto(), "tcp") {
				continue
			}
			if configured[net.JoinHostPort(l.GetAddress(), strconv.Itoa(int(l.GetPort())))] {
				continue
			}
			seen[l.GetPort()] = true
			out = append(out, CandidateView{Server: srv.Name, Engine: engine, Address: l.GetAddress(), Port: l.GetPort(), Process: l.GetProcess()})
		}
	}
	return out
}
