package fleetview

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gridcity/gridcity/coordinator/internal/graph"
)

// TopologyInput is get_topology's input.
type TopologyInput struct {
	Target   string `json:"target,omitempty" jsonschema:"a server or resource id; leave out for every district and link"`
	District string `json:"district,omitempty" jsonschema:"without a target: only this district, its members and the links that touch them"`
	After    string `json:"after,omitempty" jsonschema:"continue a list cut short: the answer's nextAfter (links without a target, the blast radius with one)"`
}

// A topology answer is bounded by the answer budget: a fleet of thousands
// has tens of thousands of links, more than any model should read at once;
// the counts say how many there are, district or target narrow the
// question, and after pages the rest.

// TopologyOutput is get_topology's result: districts and links without a
// target, or one target's neighbourhood with one.
type TopologyOutput struct {
	Note             string         `json:"note,omitempty" jsonschema:"why the answer is empty when a person can fix it (e.g. no config is loaded), and how"`
	Districts        []DistrictView `json:"districts,omitempty" jsonschema:"groups of targets (a product, an environment); without district, the first members of each"`
	DistrictsCount   int            `json:"districtsCount,omitempty" jsonschema:"how many districts there are, however many are listed (district gives one in full)"`
	Links            []LinkView     `json:"links,omitempty" jsonschema:"uses links (from uses to), sorted, as many as fit"`
	LinksTotal       int            `json:"linksTotal,omitempty" jsonschema:"how many links there are, however many are listed"`
	NextAfter        string         `json:"nextAfter,omitempty" jsonschema:"set when links (or with a target, blastRadius) was cut short: pass it as after for the next ones"`
	Target           string         `json:"target,omitempty"`
	Kind             string         `json:"kind,omitempty" jsonschema:"server, or the resource's kind"`
	Uses             []string       `json:"uses,omitempty" jsonschema:"what the target uses directly (as many as fit; usesCount counts them)"`
	UsesCount        int            `json:"usesCount,omitempty"`
	UsedBy           []string       `json:"usedBy,omitempty" jsonschema:"what uses the target directly (as many as fit; each is in the blast radius too)"`
	UsedByCount      int            `json:"usedByCount,omitempty"`
	BlastRadius      []string       `json:"blastRadius,omitempty" jsonschema:"everything that transitively uses the target, what breaks if it does: sorted by id, as many as fit"`
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
			Note           string         `json:"note,omitempty"`
			Districts      []DistrictView `json:"districts"`
			DistrictsCount int            `json:"districtsCount"`
			Links          []LinkView     `json:"links"`
			LinksTotal     int            `json:"linksTotal"`
			NextAfter      string         `json:"nextAfter,omitempty"`
		}{o.Note, districts, o.DistrictsCount, links, o.LinksTotal, o.NextAfter})
	}
	return json.Marshal(struct {
		Note             string   `json:"note,omitempty"`
		Target           string   `json:"target"`
		Kind             string   `json:"kind"`
		Uses             []string `json:"uses"`
		UsesCount        int      `json:"usesCount"`
		UsedBy           []string `json:"usedBy"`
		UsedByCount      int      `json:"usedByCount"`
		BlastRadius      []string `json:"blastRadius"`
		BlastRadiusCount int      `json:"blastRadiusCount"`
		NextAfter        string   `json:"nextAfter,omitempty"`
	}{o.Note, o.Target, o.Kind, orEmpty(o.Uses), o.UsesCount, orEmpty(o.UsedBy), o.UsedByCount, orEmpty(o.BlastRadius), o.BlastRadiusCount, o.NextAfter})
}

type DistrictView struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Members      []string `json:"members" jsonschema:"its targets by id; without district the first 5, or none when the fleet has too many districts to list them"`
	MembersCount int      `json:"membersCount" jsonschema:"how many targets it has, however many are listed"`
}

type LinkView struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Source string `json:"source" jsonschema:"declared (in the config) or discovered (from the servers' connections)"`
}

// maxMembers bounds the members listed for each district of the whole
// fleet; district lists one in full.
const maxMembers = 5

// linkKey names a link for after.
func linkKey(l LinkView) string { return l.From + " -> " + l.To }

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Topology answers get_topology.
func (m *Model) Topology(ctx context.Context, in TopologyInput) (TopologyOutput, error) {
	d := m.d
	g, err := d.Topology.Graph()
	if err != nil {
		return TopologyOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
	}
	note := noConfigNote(d, "districts, declared links or resources (links discovered from the servers' connections are still shown)")
	budget := BudgetFor(in.Target != "" || in.District != "" || in.After != "")
	if in.Target == "" {
		out := TopologyOutput{Note: note, Districts: []DistrictView{}, Links: []LinkView{}}
		var members map[string]bool // the district's members, when one is asked for
		if in.District != "" {
			members = map[string]bool{}
		}
		var ids []string
		var districts []DistrictView
		for _, dd := range g.Districts() {
			ids = append(ids, dd.ID)
			if members != nil && dd.ID != in.District {
				continue
			}
			listed := dd.Members
			if members == nil {
				listed = listed[:min(len(listed), maxMembers)]
			}
			districts = append(districts, DistrictView{ID: dd.ID, Name: dd.Name, Members: orEmpty(listed), MembersCount: len(dd.Members)})
			for _, m := range dd.Members {
				if members != nil {
					members[m] = true
				}
			}
		}
		if members != nil && len(districts) == 0 {
			return TopologyOutput{}, fmt.Errorf("unknown district %q; districts: %s", in.District, CloseMatches(in.District, ids))
		}
		out.DistrictsCount = len(districts)
		if members != nil {
			// One district in full, its members as many as fit in a third.
			dv := districts[0]
			dv.Members = orEmpty(fill(dv.Members, func(m string) string { return m }, budget/3))
			out.Districts = []DistrictView{dv}
		} else {
			out.Districts = fill(districts, func(v DistrictView) DistrictView { return v }, budget/2)
			if len(out.Districts) < len(districts) {
				// Every district named rather than some with members:
				// district lists one's members.
				out.Districts = fill(districts, func(v DistrictView) DistrictView { v.Members = []string{}; return v }, budget/2)
			}
		}
		// Tens of thousands of links, of which a page is sent: each is
		// made a view, and named for after, only when it is reached.
		links := g.Links()
		if members != nil {
			links = slices.DeleteFunc(links, func(l graph.Link) bool { return !members[l.From] && !members[l.To] })
		}
		out.LinksTotal = len(links)
		view := func(l graph.Link) LinkView { return LinkView{From: l.From, To: l.To, Source: l.Source} }
		from := 0
		if in.After != "" {
			i := slices.IndexFunc(links, func(l graph.Link) bool { return linkKey(view(l)) == in.After })
			if i < 0 {
				_, err := afterKey(nil, in.After, "links")
				return TopologyOutput{}, err
			}
			from = i + 1
		}
		out.Links = fill(links[from:], view, budget-JSONSize(out)-300)
		if n := len(out.Links); n > 0 && from+n < len(links) {
			out.NextAfter = linkKey(out.Links[n-1])
		}
		return out, nil
	}
	t, ok := g.Target(in.Target)
	if !ok {
		var ids []string
		for _, t := range g.Targets() {
			ids = append(ids, t.ID)
		}
		return TopologyOutput{}, fmt.Errorf("unknown target %q; known targets: %s", in.Target, CloseMatches(in.Target, ids))
	}
	br, uses, usedBy := g.BlastRadius(t.ID), g.Uses(t.ID), g.UsedBy(t.ID)
	from, err := afterKey(br, in.After, "targets in the blast radius of "+t.ID)
	if err != nil {
		return TopologyOutput{}, err
	}
	same := func(s string) string { return s }
	out := TopologyOutput{Note: note, Target: t.ID, Kind: t.Kind, UsesCount: len(uses), UsedByCount: len(usedBy), BlastRadiusCount: len(br),
		Uses: fill(uses, same, budget/6), UsedBy: fill(usedBy, same, budget/4)}
	out.BlastRadius = fill(br[from:], same, budget-JSONSize(out)-300)
	if n := len(out.BlastRadius); n > 0 && from+n < len(br) {
		out.NextAfter = br[from+n-1]
	}
	return out, nil
}
