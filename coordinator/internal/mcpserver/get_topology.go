package mcpserver

import (
	"context"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addGetTopology(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "get_topology",
		Title: "Get the topology",
		Description: "How the fleet fits together. Without a target: the districts (the first members of each) and the uses links, declared in the config or discovered " +
			"from the servers' connections; district narrows to one. With a target (a server or resource id): what it uses, what uses it, and its blast radius, " +
			"everything that transitively depends on it. Lists cut short say how many; after (the answer's nextAfter) pages on. Call it before changing something.",
		Annotations:  readOnly("Get the topology"),
		OutputSchema: outputSchema[fleetview.TopologyOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in fleetview.TopologyInput) (*mcp.CallToolResult, fleetview.TopologyOutput, error) {
		out, err := d.view.Topology(ctx, in)
		if err != nil {
			return nil, fleetview.TopologyOutput{}, err
		}
		return nil, out, nil
	})
}
