package mcpserver

import (
	"context"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addListResources(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "list_resources",
		Title: "List resources",
		Description: "The resources in the coordinator's config (databases, buckets, URL probes, load balancers), each checked with its real protocol " +
			"(a Postgres startup, a Redis PING, an HTTP request …): status, the real error text when it fails, latency and cheap metrics, when and from where it was checked. " +
			"Troubled ones first; a long list is cut short with counts: status and kind narrow it, after pages on.",
		Annotations:  readOnly("List resources"),
		OutputSchema: outputSchema[fleetview.ResourcesOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in fleetview.ResourcesInput) (*mcp.CallToolResult, fleetview.ResourcesOutput, error) {
		out, err := d.view.Resources(ctx, in)
		if err != nil {
			return nil, fleetview.ResourcesOutput{}, err
		}
		return nil, out, nil
	})
}
