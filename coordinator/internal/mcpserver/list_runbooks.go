package mcpserver

import (
	"context"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addListRunbooks(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "list_runbooks",
		Title: "List runbooks",
		Description: "List the operators' runbooks from the coordinator's config: name, description, the command, whether it only reads, and which targets it matches. " +
			"Prefer a runbook's command over one of your own; run it with run_command, where a person approves it.",
		Annotations:  readOnly("List runbooks"),
		OutputSchema: outputSchema[fleetview.RunbooksOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in fleetview.RunbooksInput) (*mcp.CallToolResult, fleetview.RunbooksOutput, error) {
		out, err := d.view.Runbooks(ctx, in)
		if err != nil {
			return nil, fleetview.RunbooksOutput{}, err
		}
		return nil, out, nil
	})
}
