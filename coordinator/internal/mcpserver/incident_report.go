package mcpserver

import (
	"context"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addIncidentReport(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "incident_report",
		Title: "Incident report",
		Description: "What is broken, as root causes rather than alarms: how many targets are healthy, the root causes (troubled targets whose own dependencies are healthy; " +
			"those explaining the most first) with what each explains and puts at risk, then the troubled targets with their root cause. " +
			"A server is troubled when its agent is offline, a resource after enough failed probes in a row. Lists cut short say how many: " +
			"after pages the root causes, root_cause lists all that one explains. Next: diagnose or get_topology on a root cause.",
		Annotations:  readOnly("Incident report"),
		OutputSchema: outputSchema[fleetview.IncidentOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in fleetview.IncidentInput) (*mcp.CallToolResult, fleetview.IncidentOutput, error) {
		out, err := d.view.IncidentReport(ctx, in)
		return nil, out, err
	})
}
