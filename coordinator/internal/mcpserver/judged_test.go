package mcpserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// TestListServersSeesWritesAtOnce: a change an agent sends is in the next
// answer, the fleet at a glance and the server's own.
func TestListServersSeesWritesAtOnce(t *testing.T) {
	d, streams := writtenFleet(t, 300)
	cs := memSession(t, d)
	call := func(args map[string]any) fleetview.ListServersOutput {
		t.Helper()
		var out fleetview.ListServersOutput
		withinBudgetOf(t, cs, args, &out)
		return out
	}
	call(nil) // judged once, kept
	name := simfleet.Name(2)
	d.Fleet.Apply(name, streams[name], &gridcityv1.StateUpdate{CollectedUnixMs: time.Now().UnixMilli(), Memory: &gridcityv1.Memory{UsedPercent: 97}})
	glance := call(map[string]any{"attention": true})
	found := false
	for _, r := range glance.Rows {
		if r.Name == name {
			found = fmt.Sprint(r.Why) != "" && r.Mem != nil && *r.Mem == 97
		}
	}
	if !found {
		t.Fatalf("after memory at 97%%, %s's row is not among those needing attention with mem 97: %+v", name, glance.Rows)
	}
	one := call(map[string]any{"name": name})
	if len(one.Servers) != 1 || one.Servers[0].Memory == nil || one.Servers[0].Memory.UsedPercent != 97 {
		t.Fatalf("%s in full: %+v; want memory at 97%%", name, one.Servers)
	}
	d.Fleet.Disconnect(name, streams[name])
	if got := call(map[string]any{"name": name}); got.Servers[0].Status != "offline" {
		t.Fatalf("after its disconnect %s is %s; want offline", name, got.Servers[0].Status)
	}
	if got := call(map[string]any{"status": "offline", "district": simfleet.District(2)}); len(got.Rows) == 0 || got.Rows[0].Name != name {
		t.Fatalf("offline servers of %s: %+v; want %s", simfleet.District(2), got.Rows, name)
	}
}

func withinBudgetOf(t *testing.T, cs *mcp.ClientSession, args map[string]any, out any) {
	t.Helper()
	withinBudget(t, cs, "list_servers", args, out)
}

// TestReadToolsUnderWrites: the tools that keep judgements answer while
// agents write, without a race (run with -race).
func TestReadToolsUnderWrites(t *testing.T) {
	d, streams := writtenFleet(t, 200)
	cs := memSession(t, d)
	done := make(chan struct{})
	var writer, readers sync.WaitGroup
	writer.Go(func() {
		r := rand.New(rand.NewPCG(3, 4))
		names := make([]string, 0, len(streams))
		for n := range streams {
			names = append(names, n)
		}
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			default:
			}
			name := names[k%len(names)]
			d.Fleet.Apply(name, streams[name], cpuMemoryChange(r))
		}
	})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"list_servers", nil}, {"list_servers", map[string]any{"attention": true}}, {"security_findings", nil}, {"list_resources", nil}} {
		readers.Go(func() {
			for range 5 {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil || res.IsError {
					t.Errorf("%s %v: %v %+v", c.tool, c.args, err, res)
				}
			}
		})
	}
	readers.Wait()
	close(done)
	writer.Wait()
}

// TestTopologyAfterIsChecked: after names a link of the list, or the
// answer says how to start again; a page after the last link is the rest.
func TestTopologyAfterIsChecked(t *testing.T) {
	cs := memSession(t, bigFleet(t))
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_topology", Arguments: map[string]any{"after": "nowhere -> nothing"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `after "nowhere -> nothing" is not one of the links listed now`) {
		t.Fatalf("get_topology after an unknown link: %v %+v; want the error naming it", err, res)
	}
	var first, next fleetview.TopologyOutput
	withinBudget(t, cs, "get_topology", nil, &first)
	withinBudget(t, cs, "get_topology", map[string]any{"after": first.NextAfter}, &next)
	if len(first.Links) == 0 || len(next.Links) == 0 || slices.Contains(first.Links, next.Links[0]) || next.LinksTotal != first.LinksTotal {
		t.Fatalf("the page after %q starts at %+v (total %d, first page's %d)", first.NextAfter, next.Links[:min(1, len(next.Links))], next.LinksTotal, first.LinksTotal)
	}
}

// writtenFleet is n servers of simfleet's state with its trouble (open
// and ended attacks, failed units), one in a hundred offline.
func writtenFleet(t *testing.T, n int) (Deps, map[string]uint64) {
	t.Helper()
	d := fleetOf(t, n, fleettest.Troubled(n))
	cfg := config.Default()
	d.Resources = resources.New(cfg, d.Logger)
	d.Topology = topology.New(cfg, d.Fleet, d.Resources)
	// Connect again for the stream ids: the same state follows.
	streams := fleettest.Streams(d.Fleet, n)
	return d, streams
}
