// Package graph is the fleet's topology: targets, the districts that group
// them and the `uses` links between them, with the questions asked of it —
// what a target uses, what uses it, its blast radius, and which troubled
// targets are root causes and which are only suffering from one.
//
// It is pure logic over a snapshot: the caller builds a Graph from config,
// discovery and probe results, asks it questions, and builds a new one when
// anything changes. A Graph is immutable and safe for concurrent use.
//
// Targets are numbered in id order when the graph is built, so every list
// the package returns comes out sorted without sorting strings, and the
// incident report costs a few passes over integer arrays (see incidents.go).
package graph

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Link sources.
const (
	SourceDeclared   = "declared"
	SourceDiscovered = "discovered"
)

// Target is a server or a resource as the graph sees it.
type Target struct {
	ID, Name, Kind string
	// Troubled is what the incident report works on; Status keeps the
	// target's own words for it ("offline", "degraded" …).
	Troubled bool
	Status   string
	Reason   string    // the real error text, for a troubled target
	Since    time.Time // when the target entered its current status; zero if unknown
}

// Link says that From uses To.
type Link struct {
	From, To string
	Source   string // SourceDeclared or SourceDiscovered
}

// District groups targets (a product, an environment).
type District struct {
	ID, Name string
	Members  []string
}

// Graph is an immutable snapshot of targets, links and districts.
type Graph struct {
	targets   []Target // sorted by ID; a target's index is its number
	index     map[string]int32
	links     []Link     // one per (From, To), sorted
	districts []District // sorted by ID, members sorted
	uses      csr        // i → the targets i uses
	usedBy    csr        // i → the targets that use i
	full      condensation
}

// csr is an adjacency list in compressed sparse row form: the neighbours of
// v are dst[off[v]:off[v+1]], ascending.
type csr struct {
	off []int32
	dst []int32
}

func (a csr) of(v int32) []int32 { return a.dst[a.off[v]:a.off[v+1]] }

// New builds a graph. It refuses empty or duplicate ids, links and district
// members naming targets it does not know, a target that uses itself and a
// link source other than declared or discovered; the error names every
// offender. When the same pair is linked twice the declared link is kept:
// the config is the authority, discovery only confirms it.
func New(targets []Target, links []Link, districts []District) (*Graph, error) {
	g := &Graph{
		targets: slices.Clone(targets),
		index:   make(map[string]int32, len(targets)),
	}
	slices.SortFunc(g.targets, func(a, b Target) int { return strings.Compare(a.ID, b.ID) })
	var errs []error
	for i, t := range g.targets {
		switch {
		case t.ID == "":
			errs = append(errs, fmt.Errorf("target %q has no id", t.Name))
		case i > 0 && g.targets[i-1].ID == t.ID:
			errs = append(errs, fmt.Errorf("target id %q is used twice", t.ID))
		default:
			g.index[t.ID] = int32(i)
		}
	}

	unknown := map[string]bool{}
	known := func(id string) bool {
		if _, ok := g.index[id]; ok {
			return true
		}
		unknown[id] = true
		return false
	}
	pairs := make(map[[2]int32]int, len(links)) // (from, to) → position in g.links
	for _, l := range links {
		okFrom, okTo := known(l.From), known(l.To)
		if l.Source != SourceDeclared && l.Source != SourceDiscovered {
			errs = append(errs, fmt.Errorf("link %s → %s: source %q is neither %q nor %q", l.From, l.To, l.Source, SourceDeclared, SourceDiscovered))
			continue
		}
		if !okFrom || !okTo {
			continue
		}
		if l.From == l.To {
			errs = append(errs, fmt.Errorf("link %s → %s: a target cannot use itself", l.From, l.To))
			continue
		}
		p := [2]int32{g.index[l.From], g.index[l.To]}
		if at, dup := pairs[p]; dup {
			if l.Source == SourceDeclared {
				g.links[at].Source = SourceDeclared
			}
			continue
		}
		pairs[p] = len(g.links)
		g.links = append(g.links, l)
	}
	seenDistrict := map[string]bool{}
	for _, d := range districts {
		if d.ID == "" {
			errs = append(errs, fmt.Errorf("district %q has no id", d.Name))
			continue
		}
		if seenDistrict[d.ID] {
			errs = append(errs, fmt.Errorf("district id %q is used twice", d.ID))
			continue
		}
		seenDistrict[d.ID] = true
		members := slices.Clone(d.Members)
		for _, m := range members {
			known(m)
		}
		slices.Sort(members)
		g.districts = append(g.districts, District{ID: d.ID, Name: d.Name, Members: slices.Compact(members)})
	}
	if len(unknown) > 0 {
		ids := make([]string, 0, len(unknown))
		for id := range unknown {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		errs = append(errs, fmt.Errorf("links or districts name unknown targets: %s", strings.Join(ids, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}

	slices.SortFunc(g.links, func(a, b Link) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.To, b.To))
	})
	slices.SortFunc(g.districts, func(a, b District) int { return strings.Compare(a.ID, b.ID) })
	n := len(g.targets)
	from := make([]int32, len(g.links))
	to := make([]int32, len(g.links))
	for i, l := range g.links {
		from[i], to[i] = g.index[l.From], g.index[l.To]
	}
	g.uses = buildCSR(n, from, to)
	g.usedBy = buildCSR(n, to, from)
	g.full = condense(g.uses, nil)
	return g, nil
}

// buildCSR lays out the edges src[i] → dst[i]; neighbours come out ascending
// because the edges are counted out in order of src and then sorted per row.
func buildCSR(n int, src, dst []int32) csr {
	a := csr{off: make([]int32, n+1), dst: make([]int32, len(dst))}
	for _, s := range src {
		a.off[s+1]++
	}
	for i := 1; i <= n; i++ {
		a.off[i] += a.off[i-1]
	}
	next := slices.Clone(a.off[:n])
	for i, s := range src {
		a.dst[next[s]] = dst[i]
		next[s]++
	}
	for v := range n {
		slices.Sort(a.dst[a.off[v]:a.off[v+1]])
	}
	return a
}

// Target returns the target with this id.
func (g *Graph) Target(id string) (Target, bool) {
	i, ok := g.index[id]
	if !ok {
		return Target{}, false
	}
	return g.targets[i], true
}

// Targets returns every target, sorted by id.
func (g *Graph) Targets() []Target { return slices.Clone(g.targets) }

// Links returns every link, one per (From, To), sorted by From then To.
func (g *Graph) Links() []Link { return slices.Clone(g.links) }

// Districts returns every district sorted by id, members sorted.
func (g *Graph) Districts() []District {
	out := slices.Clone(g.districts)
	for i := range out {
		out[i].Members = slices.Clone(out[i].Members)
	}
	return out
}

// Uses returns the targets id uses directly, sorted; nil for an unknown id.
func (g *Graph) Uses(id string) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.ids(g.uses.of(i))
}

// UsedBy returns the targets that use id directly, sorted; nil for an
// unknown id.
func (g *Graph) UsedBy(id string) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	return g.ids(g.usedBy.of(i))
}

// BlastRadius returns every target that transitively uses id, not id
// itself (even when it sits on a cycle), sorted; nil for an unknown id.
func (g *Graph) BlastRadius(id string) []string {
	start, ok := g.index[id]
	if !ok {
		return nil
	}
	seen := make([]bool, len(g.targets))
	seen[start] = true
	queue := []int32{start}
	var found []int32
	for len(queue) > 0 {
		v := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, w := range g.usedBy.of(v) {
			if !seen[w] {
				seen[w] = true
				found = append(found, w)
				queue = append(queue, w)
			}
		}
	}
	slices.Sort(found)
	return g.ids(found)
}

// ids maps ascending target numbers to their (therefore ascending) ids.
func (g *Graph) ids(vs []int32) []string {
	if len(vs) == 0 {
		return []string{}
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = g.targets[v].ID
	}
	return out
}
