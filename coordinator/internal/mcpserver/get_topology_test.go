package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// A fleet without a config file has no districts or links: get_topology
// says so with empty lists and zero counts, in each mode, rather than an
// empty object.
func TestTopologyOfABareFleetHasEveryField(t *testing.T) {
	d := fleetOf(t, 0, nil)
	d.Fleet.Connect(&gridcityv1.Hello{Name: "vm"})
	d.Topology = topology.New(&config.Config{}, d.Fleet, nil)
	cs := memSession(t, d)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, `{"districts":[],"links":[],"linksTotal":0}`},
		{map[string]any{"target": "vm"}, `{"blastRadius":[],"blastRadiusCount":0,"kind":"server","target":"vm","usedBy":[],"uses":[]}`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_topology", Arguments: tc.args})
		if err != nil || res.IsError {
			t.Fatalf("get_topology(%v): %v %+v", tc.args, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		if string(b) != tc.want {
			t.Errorf("get_topology(%v) = %s; want %s", tc.args, b, tc.want)
		}
	}
}
