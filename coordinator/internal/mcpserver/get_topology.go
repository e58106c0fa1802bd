package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TopologyInput is get_topology's input.
type TopologyInput struct {
	Target string `json:"target,omitempty" jsonschema:"a server or resource id; leave out for every district and link"`
}

// TopologyOutput is get_topology's result: districts and links without a
// target, or one target's neighbourhood with one.
type TopologyOutput struct {
	Districts   []DistrictView `json:"districts,omitempty" jsonschema:"groups of targets (a product, an environment)"`
	Links       []LinkView     `json:"links,omitempty" jsonschema:"uses links: from uses to"`
	Target      string         `json:"target,omitempty"`
	Kind        string         `json:"kind,omitempty" jsonschema:"server, or the resource's kind"`
	Uses        []string       `json:"uses,omitempty" jsonschema:"what the target uses directly"`
	UsedBy      []string       `json:"usedBy,omitempty" jsonschema:"what uses the target directly"`
	BlastRadius []string       `json:"blastRadius,omitempty" jsonschema:"everything that transitively uses the target: what breaks if it does"`
}

type DistrictView struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

type LinkView struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Source string `json:"source" jsonschema:"declared (in the config) or discovered (from the servers' connections)"`
}

func addGetTopology(s *mcp.Server, d Deps) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "get_topology",
		Title: "Get the topology",
		Description: "Show how the fleet fits together. Without a target: every district and every uses link (declared in the config or discovered from the servers' established connections). " +
			"With a target (a server or resource id): what it uses, what uses it, and its blast radius — everything that transitively depends on it. " +
			"Call it before changing something, to see what else it would touch.",
		Annotations:  readOnly("Get the topology"),
		OutputSchema: outputSchema[TopologyOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in TopologyInput) (*mcp.CallToolResult, TopologyOutput, error) {
		g, err := d.Topology.Graph()
		if err != nil {
			return nil, TopologyOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
		}
		if in.Target == "" {
			out := TopologyOutput{Districts: []DistrictView{}, Links: []LinkView{}}
			for _, dd := range g.Districts() {
				out.Districts = append(out.Districts, DistrictView{ID: dd.ID, Name: dd.Name, Members: orEmpty(dd.Members)})
			}
			for _, l := range g.Links() {
				out.Links = append(out.Links, LinkView{From: l.From, To: l.To, Source: l.Source})
			}
			return nil, out, nil
		}
		t, ok := g.Target(in.Target)
		if !ok {
			var ids []string
			for _, t := range g.Targets() {
				ids = append(ids, t.ID)
			}
			return nil, TopologyOutput{}, fmt.Errorf("unknown target %q; known targets: %s", in.Target, closeMatches(in.Target, ids))
		}
		return nil, TopologyOutput{Target: t.ID, Kind: t.Kind, Uses: orEmpty(g.Uses(t.ID)), UsedBy: orEmpty(g.UsedBy(t.ID)), BlastRadius: orEmpty(g.BlastRadius(t.ID))}, nil
	})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
