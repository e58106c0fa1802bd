package mcpserver

import (
	"context"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func addListServers(s *mcp.Server, d Deps) {
	addTool(s, &mcp.Tool{
		Name:  "list_servers",
		Title: "List servers",
		Description: "The fleet at a glance, or one server in full; call it first. " +
			"Without arguments: counts by status and district, then a row per server, those needing attention first (offline, failed units, full disks, " +
			"memory, load, open attacks, security updates) with why and cpu/mem %/load, then the others (at most security updates) by name if space is short; omitted counts what did not fit and more says how to get it. " +
			"{\"name\": \"web-7\"} (exact) answers that server in full: OS, CPU, memory, disks, uptime, addresses, listening ports with processes, containers, " +
			"failed units, updates, commands, and gaps (facts not collected, with why: unknown, never 0 or none). " +
			"district, status, attention or a name fragment page rows by name (full: true for whole views); when truncated, pass nextAfter as after.",
		Annotations:  readOnly("List servers"),
		OutputSchema: outputSchema[fleetview.ListServersOutput](),
	}, withText(renderListServers, func(ctx context.Context, req *mcp.CallToolRequest, in fleetview.ListServersInput) (fleetview.ListServersOutput, error) {
		return d.view.ListServers(ctx, in, time.Now())
	}))
}
