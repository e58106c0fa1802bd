package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// fleetAndTools is the store of the fleet model and of the tools, which
// the tests wire to one store.
type fleetAndTools interface {
	fleet.Store
	Store
	fleetview.Store
}

// enrolledStore answers Agents from memory: enrolling ten thousand agents
// in SQLite, one fsync each, would make the fixture slower than the call.
type enrolledStore struct {
	fleetAndTools
	agents []store.Agent
}

func (s enrolledStore) Agents(context.Context) ([]store.Agent, error) { return s.agents, nil }

// benchFleet is n servers with the state gridcity-bench's simulated agents
// send (host, CPU, memory, 3–4 disks, about ten listeners, connections,
// updates, SSH logins and defences), in districts of 100. One in a hundred
// is offline, and one in 500 was revoked and another never connected, as
// in a fleet in use.
func benchFleet(tb testing.TB, n int) Deps {
	tb.Helper()
	return fleetOf(tb, n, func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate { return simfleet.State(i, n, r, now) })
}

// fleetOf is benchFleet's fleet with the state state makes for server i.
func fleetOf(tb testing.TB, n int, state func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate) Deps {
	tb.Helper()
	f, st, agents := fleettest.Simulated(tb, n, state)
	es := enrolledStore{fleetAndTools: st, agents: agents}
	logger := slog.New(slog.DiscardHandler)
	return Deps{Deps: fleetview.Deps{Fleet: f, Store: es, Logger: logger}, Store: es}
}

// memSession connects an MCP client to a read-scope server in memory, as
// BenchmarkTools does, but without the SDK's 16 MiB bound on a frame, so
// that a whole fleet's answer can be measured too.
func memSession(tb testing.TB, d Deps) *mcp.ClientSession {
	tb.Helper()
	ctx := context.Background()
	c1, c2 := net.Pipe()
	ct, st := &mcp.IOTransport{Reader: c1, Writer: c1, MaxLineLength: -1}, &mcp.IOTransport{Reader: c2, Writer: c2, MaxLineLength: -1}
	if _, err := NewServer(d, store.ScopeRead).Connect(ctx, st, nil); err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// BenchmarkListServers is list_servers' whole path on 10,000 servers: the
// fleet's copies, the views, and the SDK's marshalling, output-schema
// validation and text content, over an in-memory MCP session.
func BenchmarkListServers(b *testing.B) {
	cs := memSession(b, benchFleet(b, 10000))
	ctx := context.Background()
	for _, tc := range []struct {
		label string
		args  map[string]any
	}{
		{"no_arguments", map[string]any{}},
		{"district", map[string]any{"district": "district-042"}},
		{"status_offline", map[string]any{"status": "offline"}},
		{"name", map[string]any{"name": "SIM-0004"}},
		{"one_in_full", map[string]any{"name": "sim-00004"}},
		{"attention", map[string]any{"attention": true}},
		{"full", map[string]any{"full": true}},
		{"last_page", map[string]any{"after": "sim-09800"}},
		{"limit_1000", map[string]any{"limit": 1000}},
	} {
		b.Run(tc.label, func(b *testing.B) {
			b.ReportAllocs()
			var res *mcp.CallToolResult
			for b.Loop() {
				var err error
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_servers", Arguments: tc.args})
				if err != nil || res.IsError {
					b.Fatalf("list_servers(%v): %v %+v", tc.args, err, res)
				}
			}
			// The answer's size in each form: the text written for a model,
			// and the structured content's JSON.
			js, _ := json.Marshal(res.StructuredContent)
			b.ReportMetric(float64(len(res.Content[0].(*mcp.TextContent).Text)), "text-B")
			b.ReportMetric(float64(len(js)), "json-B")
		})
	}
}
