package mcpserver

import (
	"context"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ResourcesOutput is list_resources' result.
type ResourcesOutput struct {
	Resources []ResourceView `json:"resources"`
}

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
		out := ResourcesOutput{Resources: []ResourceView{}}
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
