package mcpserver

import (
	"context"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addGetMetrics(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "get_metrics",
		Title: "Get a server's metric history",
		Description: "Show how one server's CPU, memory, load and disks have moved: one series per metric with points [time, min, avg, max] " +
			"(at most 120 buckets), and a summary (now, min, max, avg, trendPerHour); for each disk, when it will be full at the current trend (fullIn) or that it is not filling. " +
			"Call it after list_servers or diagnose points at a busy or filling host, to tell a spike from a trend. " +
			"since is how far back (default 1h; 1d, 7d …; the coordinator keeps a day at one-minute and a week at fifteen-minute resolution unless configured otherwise); " +
			"metrics narrows the series (cpu, memory, load, disk:/var …). Disks' series may be left out to keep the answer short: note says which, and metrics gets them.",
		Annotations:  readOnly("Get a server's metric history"),
		OutputSchema: metricsSchema(),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in fleetview.MetricsInput) (*mcp.CallToolResult, fleetview.MetricsOutput, error) {
		out, err := d.view.Metrics(ctx, in, time.Now())
		if err != nil {
			return nil, fleetview.MetricsOutput{}, err
		}
		return nil, out, nil
	})
}

// metricsSchema is get_metrics' output schema with each point typed as
// the tuple it is (a string and three numbers): inferred from [4]any, its
// items would be any value, which strict clients (Inspector --strict)
// refuse.
func metricsSchema() *jsonschema.Schema {
	s := outputSchema[fleetview.MetricsOutput]()
	point := s.Properties["series"].Items.Properties["points"].Items
	point.Items = nil
	point.PrefixItems = []*jsonschema.Schema{{Type: "string"}, {Type: "number"}, {Type: "number"}, {Type: "number"}}
	return s
}
