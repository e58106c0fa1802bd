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
// The one list in another order is a bounded at-risk list, nearest first.
package graph

import (
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
	districts []District // sorted by ID, members sorted
	uses      csr        // i → the targets i uses
	usedBy    csr        // i → the targets that use i
	declared  []bool     // per entry of uses.dst: the link is declared, not only discovered
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
//
// Links are turned into target numbers once, on the way in, and from there
// on everything is integer arrays: duplicates are found and links sorted by
// two counting sorts rather than a map and a string sort.
func New(targets []Target, links []Link, districts []District) (*Graph, error) {
	g := &Graph{
		targets: slices.Clone(targets),
		index:   make(map[string]int32, len(targets)),
	}
	byID := func(a, b Target) int { return strings.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(g.targets, byID) {
		slices.SortFunc(g.targets, byID)
	}
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

	var unknown map[string]bool
	lookup := func(id string) int32 {
		if i, ok := g.index[id]; ok {
			return i
		}
		if unknown == nil {
			unknown = map[string]bool{}
		}
		unknown[id] = true
		return -1
	}
	// The links that pass, as numbers: from[i] uses to[i].
	from := make([]int32, 0, len(links))
	to := make([]int32, 0, len(links))
	declared := make([]bool, 0, len(links))
	lastFrom, f := "", int32(-1)
	for _, l := range links {
		// Links tend to come grouped by the target that uses them (a
		// server's connections, the config's list): look From up once a run.
		if l.From != lastFrom || f < 0 {
			lastFrom, f = l.From, lookup(l.From)
		}
		t := lookup(l.To)
		switch {
		case l.Source != SourceDeclared && l.Source != SourceDiscovered:
			errs = append(errs, fmt.Errorf("link %s → %s: source %q is neither %q nor %q", l.From, l.To, l.Source, SourceDeclared, SourceDiscovered))
		case f < 0 || t < 0:
		case f == t:
			errs = append(errs, fmt.Errorf("link %s → %s: a target cannot use itself", l.From, l.To))
		default:
			from, to = append(from, f), append(to, t)
			declared = append(declared, l.Source == SourceDeclared)
		}
	}
	seenDistrict := map[string]bool{}
	var nums []int32
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
		// Sorted as numbers, which is id order, and named again after.
		nums = nums[:0]
		for _, m := range d.Members {
			if i := lookup(m); i >= 0 {
				nums = append(nums, i)
			}
		}
		slices.Sort(nums)
		nums = slices.Compact(nums)
		var members []string // nil stays nil, as Districts has always returned it
		if d.Members != nil {
			members = make([]string, len(nums))
		}
		for j, i := range nums {
			members[j] = g.targets[i].ID
		}
		g.districts = append(g.districts, District{ID: d.ID, Name: d.Name, Members: members})
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

	slices.SortFunc(g.districts, func(a, b District) int { return strings.Compare(a.ID, b.ID) })
	g.uses, g.declared = buildUses(len(g.targets), from, to, declared)
	g.usedBy = g.uses.transpose()
	return g, nil
}

// buildUses lays out the links from[i] → to[i] with every row ascending and
// each pair once, declared when any of its links is. Two stable counting
// sorts, by to and then by from, leave the links ordered by (from, to), so a
// repeated pair ends up in one run.
func buildUses(n int, from, to []int32, declared []bool) (csr, []bool) {
	byTo := bucket(n, to)
	order := make([]int32, len(to))
	for i := range to {
		order[byTo[to[i]]] = int32(i)
		byTo[to[i]]++
	}
	byFrom := bucket(n, from)
	off := slices.Clone(byFrom)
	sorted := make([]int32, len(from))
	for _, e := range order {
		sorted[byFrom[from[e]]] = e
		byFrom[from[e]]++
	}
	a := csr{off: off, dst: make([]int32, 0, len(sorted))}
	dec := make([]bool, 0, len(sorted))
	for v := range n {
		start := len(a.dst)
		for _, e := range sorted[off[v]:off[v+1]] {
			if k := len(a.dst) - 1; k >= start && a.dst[k] == to[e] {
				dec[k] = dec[k] || declared[e]
				continue
			}
			a.dst = append(a.dst, to[e])
			dec = append(dec, declared[e])
		}
		a.off[v] = int32(start) // off[v] is read for the last time above
	}
	a.off[n] = int32(len(a.dst))
	return a, dec
}

// bucket returns where each key's run starts when keys in [0, n) are laid
// out in ascending order: out[k] is the number of keys smaller than k, and
// out[n] is len(keys).
func bucket(n int, keys []int32) []int32 {
	off := make([]int32, n+1)
	for _, k := range keys {
		off[k+1]++
	}
	for i := 1; i <= n; i++ {
		off[i] += off[i-1]
	}
	return off
}

// transpose reverses every edge. Rows come out ascending because the edges
// are laid out in order of their (ascending) source.
func (a csr) transpose() csr {
	n := len(a.off) - 1
	t := csr{off: bucket(n, a.dst), dst: make([]int32, len(a.dst))}
	next := slices.Clone(t.off[:n])
	for v := range int32(n) {
		for _, w := range a.of(v) {
			t.dst[next[w]] = v
			next[w]++
		}
	}
	return t
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
func (g *Graph) Links() []Link {
	out := make([]Link, len(g.uses.dst))
	for v := range int32(len(g.targets)) {
		for j := g.uses.off[v]; j < g.uses.off[v+1]; j++ {
			l := Link{From: g.targets[v].ID, To: g.targets[g.uses.dst[j]].ID, Source: SourceDiscovered}
			if g.declared[j] {
				l.Source = SourceDeclared
			}
			out[j] = l
		}
	}
	return out
}

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
