package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/graph"
)

// IncidentOutput is incident_report's result.
type IncidentOutput struct {
	Healthy     int             `json:"healthy"`
	Total       int             `json:"total"`
	RootCauses  []RootCauseView `json:"rootCauses" jsonschema:"troubled targets none of whose dependencies is troubled: fix these first"`
	Troubled    []TroubledView  `json:"troubled" jsonschema:"every troubled target, with the root cause it is explained by"`
	Recent      []IncidentView  `json:"recent" jsonschema:"the latest incidents, open and ended, newest first (kept across restarts)"`
	GeneratedAt string          `json:"generatedAt"`
}

type RootCauseView struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Status   string   `json:"status"`
	Reason   string   `json:"reason"`
	Since    string   `json:"since,omitempty"`
	Explains []string `json:"explains" jsonschema:"troubled targets that depend on it: they should recover when it does"`
	AtRisk   []string `json:"atRisk" jsonschema:"healthy targets that depend on it, directly or through others: the 25 nearest at most, fewest links first, then by id; get_topology on it gives the whole blast radius"`
	// AtRiskCount is the full count when atRisk was cut short.
	AtRiskCount int `json:"atRiskCount" jsonschema:"how many healthy targets depend on it: all of them, however many atRisk lists"`
}

type TroubledView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Since     string `json:"since,omitempty"`
	RootCause string `json:"rootCause"`
}

// IncidentView is one recorded incident.
type IncidentView struct {
	Target    string   `json:"target"`
	Kind      string   `json:"kind"`
	Reason    string   `json:"reason"`
	StartedAt string   `json:"startedAt"`
	EndedAt   string   `json:"endedAt,omitempty" jsonschema:"empty while it is open"`
	Explains  []string `json:"explains"`
}

// maxAtRisk bounds each root cause's atRisk list (the schema says 25);
// atRiskCount counts them all. A shared database can have most of the fleet
// at risk: its nearest users say more than a list of thousands.
const maxAtRisk = 25

func addIncidentReport(s *mcp.Server, d Deps) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "incident_report",
		Title: "Incident report",
		Description: "Answer \"what is broken?\" with root causes rather than a list of alarms: how many targets are healthy, the root causes " +
			"(troubled targets whose own dependencies are healthy) with what each one explains and what is at risk, and every troubled target with its root cause. " +
			"Servers are troubled when their agent is offline; resources when they fail enough probes in a row. Call diagnose or get_topology on a root cause next.",
		Annotations:  readOnly("Incident report"),
		OutputSchema: outputSchema[IncidentOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, IncidentOutput, error) {
		g, err := d.Topology.Graph()
		if err != nil {
			return nil, IncidentOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
		}
		rep := g.IncidentsWith(graph.IncidentOptions{MaxAtRisk: maxAtRisk})
		out := IncidentOutput{Healthy: rep.Healthy, Total: rep.Total, RootCauses: []RootCauseView{}, Troubled: []TroubledView{}, Recent: []IncidentView{}, GeneratedAt: rfc3339(time.Now())}
		for _, rc := range rep.RootCauses {
			if d.Incidents != nil {
				// The incident's recorded start survives restarts; the
				// probe's own "since" starts over with the coordinator.
				if since, ok := d.Incidents.Since(rc.ID); ok {
					rc.Since = since
				}
			}
			out.RootCauses = append(out.RootCauses, RootCauseView{ID: rc.ID, Name: rc.Name, Kind: rc.Kind, Status: rc.Status, Reason: rc.Reason,
				Since: rfc3339(rc.Since), Explains: orEmpty(rc.Explains), AtRisk: orEmpty(rc.AtRisk), AtRiskCount: rc.AtRiskCount})
		}
		for _, t := range rep.Troubled {
			out.Troubled = append(out.Troubled, TroubledView{ID: t.ID, Name: t.Name, Kind: t.Kind, Status: t.Status, Reason: t.Reason, Since: rfc3339(t.Since), RootCause: t.RootCause})
		}
		if d.Incidents != nil {
			hist, err := d.Incidents.History(ctx, 20)
			if err != nil {
				return nil, IncidentOutput{}, fmt.Errorf("reading the incident history failed (%v); retry", err)
			}
			for _, in := range hist {
				out.Recent = append(out.Recent, IncidentView{Target: in.Target, Kind: in.Kind, Reason: in.Reason,
					StartedAt: rfc3339(in.StartedAt), EndedAt: rfc3339(in.EndedAt), Explains: orEmpty(in.Explains)})
			}
		}
		return nil, out, nil
	})
}
