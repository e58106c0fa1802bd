package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// A fleet without a config file has no districts or links: get_topology
// says so with empty lists and zero counts, in each mode, rather than an
// empty object, and notes that no config is loaded.
func TestTopologyOfABareFleetHasEveryField(t *testing.T) {
	d := fleetOf(t, 0, nil)
	d.Fleet.Connect(&gridcityv1.Hello{Name: "vm"})
	d.Topology = topology.New(&config.Config{}, d.Fleet, nil)
	cs := memSession(t, d)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, `{"districts":[],"districtsCount":0,"links":[],"linksTotal":0}`},
		{map[string]any{"target": "vm"}, `{"blastRadius":[],"blastRadiusCount":0,"kind":"server","target":"vm","usedBy":[],"usedByCount":0,"uses":[],"usesCount":0}`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_topology", Arguments: tc.args})
		if err != nil || res.IsError {
			t.Fatalf("get_topology(%v): %v %+v", tc.args, err, res)
		}
		sc := res.StructuredContent.(map[string]any)
		if sc["note"] == nil {
			t.Errorf("get_topology(%v) has no note that no config is loaded", tc.args)
		}
		delete(sc, "note") // TestNoConfigSaysHowToLoadOne reads it
		b, _ := json.Marshal(sc)
		if string(b) != tc.want {
			t.Errorf("get_topology(%v) = %s; want %s", tc.args, b, tc.want)
		}
	}
}

// Without a config file, the tools whose answers come from it say that none
// is loaded and how to load one, in the structured answer and its text;
// with a file, even an empty one, they say nothing of it.
func TestNoConfigSaysHowToLoadOne(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      func(t *testing.T) *config.Config
		wantNote bool
	}{
		{name: "no --config", cfg: func(*testing.T) *config.Config { return config.Default() }, wantNote: true},
		{name: "an empty config file", cfg: func(t *testing.T) *config.Config {
			c, err := config.Parse(strings.NewReader(""), "city.yaml")
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := fleetOf(t, 0, nil)
			d.Fleet.Connect(&gridcityv1.Hello{Name: "vm"})
			cfg := tc.cfg(t)
			d.Resources = resources.New(cfg, slog.New(slog.DiscardHandler))
			d.Topology = topology.New(cfg, d.Fleet, d.Resources)
			cs := memSession(t, d)
			for _, call := range []struct {
				tool string
				args map[string]any
			}{
				{"list_resources", map[string]any{}},
				{"list_runbooks", map[string]any{}},
				{"get_topology", map[string]any{}},
				{"get_topology", map[string]any{"target": "vm"}},
			} {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: call.tool, Arguments: call.args})
				if err != nil || res.IsError {
					t.Fatalf("%s(%v): %v %+v", call.tool, call.args, err, res)
				}
				note, _ := res.StructuredContent.(map[string]any)["note"].(string)
				text := res.Content[0].(*mcp.TextContent).Text
				if !tc.wantNote {
					if note != "" || strings.Contains(text, "no coordinator config") {
						t.Errorf("%s(%v) with a config file: note %q, text %s; want none", call.tool, call.args, note, text)
					}
					continue
				}
				for _, want := range []string{"no coordinator config is loaded", "gridcity serve` with --config FILE", "make run CONFIG=FILE"} {
					if !strings.Contains(note, want) || !strings.Contains(text, want) {
						t.Errorf("%s(%v): note %q, text %s; want both to say %q", call.tool, call.args, note, text, want)
					}
				}
			}
		})
	}
}
