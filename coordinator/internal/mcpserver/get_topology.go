package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TopologyInput is get_topology's input.
type TopologyInput struct {
	Target   string `json:"target,omitempty" jsonschema:"a server or resource id; leave out for every district and link"`
	District string `json:"district,omitempty" jsonschema:"without a target: only this district, its members and the links that touch them"`
}

// Bounds on a topology answer: a fleet of thousands has tens of thousands
// of links, more than any model should read at once; the counts say how
// many there are, and district or target narrow the question.
const (
	maxLinks       = 2000
	maxBlastRadius = 1000
)

// TopologyOutput is get_topology's result: districts and links without a
// target, or one target's neighbourhood with one.
type TopologyOutput struct {
	Note             string         `json:"note,omitempty" jsonschema:"set when the answer is empty for a reason a person can fix, e.g. no coordinator config is loaded, and how to fix it"`
	Districts        []DistrictView `json:"districts,omitempty" jsonschema:"groups of targets (a product, an environment)"`
	Links            []LinkView     `json:"links,omitempty" jsonschema:"uses links: from uses to (at most 2000; linksTotal counts them all — ask for a district or a target to see the rest)"`
	LinksTotal       int            `json:"linksTotal,omitempty" jsonschema:"how many links there are, however many are listed"`
	Target           string         `json:"target,omitempty"`
	Kind             string         `json:"kind,omitempty" jsonschema:"server, or the resource's kind"`
	Uses             []string       `json:"uses,omitempty" jsonschema:"what the target uses directly"`
	UsedBy           []string       `json:"usedBy,omitempty" jsonschema:"what uses the target directly"`
	BlastRadius      []string       `json:"blastRadius,omitempty" jsonschema:"everything that transitively uses the target: what breaks if it does (at most 1000, sorted by id)"`
	BlastRadiusCount int            `json:"blastRadiusCount,omitempty" jsonschema:"how many targets are in the blast radius, however many are listed"`
}

// MarshalJSON writes the fields of the answer's mode in full, empty lists
// and zero counts included, so that "no links" reads as an empty list, not
// as a field left out: the fleet's districts, links and linksTotal without
// a target; the target's kind, uses, usedBy and blastRadius with one.
func (o TopologyOutput) MarshalJSON() ([]byte, error) {
	if o.Target == "" {
		districts, links := o.Districts, o.Links
		if districts == nil {
			districts = []DistrictView{}
		}
		if links == nil {
			links = []LinkView{}
		}
		return json.Marshal(struct {
			Note       string         `json:"note,omitempty"`
			Districts  []DistrictView `json:"districts"`
			Links      []LinkView     `json:"links"`
			LinksTotal int            `json:"linksTotal"`
		}{o.Note, districts, links, o.LinksTotal})
	}
	return json.Marshal(struct {
		Note             string   `json:"note,omitempty"`
		Target           string   `json:"target"`
		Kind             string   `json:"kind"`
		Uses             []string `json:"uses"`
		UsedBy           []string `json:"usedBy"`
		BlastRadius      []string `json:"blastRadius"`
		BlastRadiusCount int      `json:"blastRadiusCount"`
	}{o.Note, o.Target, o.Kind, orEmpty(o.Uses), orEmpty(o.UsedBy), orEmpty(o.BlastRadius), o.BlastRadiusCount})
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
		Description: "Show how the fleet fits together. Without a target: every district and every uses link (declared in the config or discovered from the servers' established connections), " +
			"or only one district's when district is given. " +
			"With a target (a server or resource id): what it uses, what uses it, and its blast radius — everything that transitively depends on it. " +
			"Call it before changing something, to see what else it would touch.",
		Annotations:  readOnly("Get the topology"),
		OutputSchema: outputSchema[TopologyOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in TopologyInput) (*mcp.CallToolResult, TopologyOutput, error) {
		g, err := d.Topology.Graph()
		if err != nil {
			return nil, TopologyOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
		}
		note := noConfigNote(d, "districts, declared links or resources (links discovered from the servers' connections are still shown)")
		if in.Target == "" {
			out := TopologyOutput{Note: note, Districts: []DistrictView{}, Links: []LinkView{}}
			var members map[string]bool // the district's members, when one is asked for
			if in.District != "" {
				members = map[string]bool{}
			}
			var ids []string
			for _, dd := range g.Districts() {
				ids = append(ids, dd.ID)
				if members != nil && dd.ID != in.District {
					continue
				}
				out.Districts = append(out.Districts, DistrictView{ID: dd.ID, Name: dd.Name, Members: orEmpty(dd.Members)})
				for _, m := range dd.Members {
					if members != nil {
						members[m] = true
					}
				}
			}
			if members != nil && len(out.Districts) == 0 {
				return nil, TopologyOutput{}, fmt.Errorf("unknown district %q; districts: %s", in.District, closeMatches(in.District, ids))
			}
			for _, l := range g.Links() {
				if members != nil && !members[l.From] && !members[l.To] {
					continue
				}
				out.LinksTotal++
				if len(out.Links) < maxLinks {
					out.Links = append(out.Links, LinkView{From: l.From, To: l.To, Source: l.Source})
				}
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
		br := g.BlastRadius(t.ID)
		out := TopologyOutput{Note: note, Target: t.ID, Kind: t.Kind, Uses: orEmpty(g.Uses(t.ID)), UsedBy: orEmpty(g.UsedBy(t.ID)), BlastRadius: orEmpty(br[:min(len(br), maxBlastRadius)])}
		out.BlastRadiusCount = len(br)
		return nil, out, nil
	})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
