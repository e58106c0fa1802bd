package graph

import (
	"math/bits"
	"slices"
	"time"
)

// RootCause is a troubled target that nothing troubled beneath it explains.
type RootCause struct {
	Target
	// Explains holds every other troubled target that reaches this one
	// through a chain of troubled targets, sorted.
	Explains []string
	// AtRisk holds every healthy target that reaches this one through
	// uses links of any kind, sorted.
	AtRisk []string
	// Cycle holds the other troubled members of the cycle this root cause
	// was chosen from, sorted (they are in Explains too); empty when the
	// root cause is on no troubled cycle.
	Cycle []string
}

// Troubled is a troubled target and what explains it.
type Troubled struct {
	Target
	// RootCause is the nearest root cause the target reaches through
	// troubled targets (fewest links; ties go to the smaller id), the
	// target itself when it is one. Never empty in a report.
	RootCause string
	// RootCauses holds every root cause the target reaches that way
	// (itself when it is one), sorted: a target above a diamond over two
	// failures has two.
	RootCauses []string
}

// Report is the incident report over one snapshot.
type Report struct {
	Healthy, Total int
	RootCauses     []RootCause // sorted by id
	Troubled       []Troubled  // every troubled target, root causes included, sorted by id
}

// Incidents computes the root causes of the troubled targets.
//
// Blame travels only through troubled targets: a troubled target whose
// dependencies are all healthy is a root cause even when something healthy
// it uses in turn uses something troubled — the healthy link in between
// says that trouble did not come through there. So the work is done on the
// subgraph of troubled targets, condensed into strongly connected
// components: a component with no troubled dependency outside itself is a
// root-cause group.
//
// A group of one is its own root cause. A group with several members is a
// cycle of troubled targets that all explain one another; naming all of
// them root causes would make each explain the others, so one is named: the
// member troubled for longest (earliest Since; an unknown Since counts as
// latest), ties going to the smaller id. It explains the rest of the cycle,
// which is listed in its Cycle.
//
// Every troubled target reaches at least one root cause (following troubled
// dependencies from it must end in such a group), so every Troubled entry
// has one.
func (g *Graph) Incidents() Report {
	n := len(g.targets)
	rep := Report{Total: n}
	troubled := make([]bool, n)
	var troubledIDs []int32
	for i, t := range g.targets {
		if t.Troubled {
			troubled[i] = true
			troubledIDs = append(troubledIDs, int32(i))
		}
	}
	rep.Healthy = n - len(troubledIDs)
	rep.RootCauses = []RootCause{}
	rep.Troubled = []Troubled{}
	if len(troubledIDs) == 0 {
		return rep
	}

	tc := condense(g.uses, troubled)
	var roots []int32
	for k := range int32(tc.count()) {
		members := tc.members(k)
		sink := true
	members:
		for _, v := range members {
			for _, w := range g.uses.of(v) {
				if troubled[w] && tc.comp[w] != k {
					sink = false
					break members
				}
			}
		}
		if !sink {
			continue
		}
		root := members[0]
		for _, v := range members[1:] {
			if troubledLonger(g.targets[v].Since, g.targets[root].Since) {
				root = v
			}
		}
		roots = append(roots, root)
	}
	slices.Sort(roots)

	causes := make([]RootCause, len(roots))
	for i, r := range roots {
		causes[i] = RootCause{Target: g.targets[r], Explains: []string{}, Cycle: []string{}}
		for _, v := range tc.members(tc.comp[r]) {
			if v != r {
				causes[i].Cycle = append(causes[i].Cycle, g.targets[v].ID)
			}
		}
	}
	rootsOf := make([][]string, n)

	// Sixty-four root causes at a time: which troubled targets reach them
	// through troubled ones, and which healthy targets reach them at all.
	tbits := make([]uint64, tc.count())
	fbits := make([]uint64, g.full.count())
	for lo := 0; lo < len(roots); lo += 64 {
		batch := roots[lo:min(lo+64, len(roots))]
		tbits = tc.reach(g.uses, batch, tbits)
		for _, v := range troubledIDs {
			for b := tbits[tc.comp[v]]; b != 0; b &= b - 1 {
				k := bits.TrailingZeros64(b)
				r := batch[k]
				if v != r {
					causes[lo+k].Explains = append(causes[lo+k].Explains, g.targets[v].ID)
				}
				rootsOf[v] = append(rootsOf[v], g.targets[r].ID)
			}
		}
		// At-risk lists can hold most of the fleet each: count them first
		// so that each is allocated once, at its size.
		fbits = g.full.reach(g.uses, batch, fbits)
		var count [64]int
		for v := range int32(n) {
			if !troubled[v] {
				for b := fbits[g.full.comp[v]]; b != 0; b &= b - 1 {
					count[bits.TrailingZeros64(b)]++
				}
			}
		}
		for k := range batch {
			causes[lo+k].AtRisk = make([]string, 0, count[k])
		}
		for v := range int32(n) {
			if troubled[v] {
				continue
			}
			for b := fbits[g.full.comp[v]]; b != 0; b &= b - 1 {
				k := bits.TrailingZeros64(b)
				causes[lo+k].AtRisk = append(causes[lo+k].AtRisk, g.targets[v].ID)
			}
		}
	}
	rep.RootCauses = causes

	nearest := g.nearestRoots(troubled, roots)
	rep.Troubled = make([]Troubled, len(troubledIDs))
	for i, v := range troubledIDs {
		t := Troubled{Target: g.targets[v], RootCauses: rootsOf[v]}
		if r := nearest[v]; r >= 0 {
			t.RootCause = g.targets[r].ID
		}
		if t.RootCauses == nil {
			t.RootCauses = []string{}
		}
		rep.Troubled[i] = t
	}
	return rep
}

// nearestRoots walks from all root causes at once, one level at a time, up
// the uses links between troubled targets, so that each troubled target gets
// the root cause fewest links away; among those at the same distance the
// smaller id wins. It returns, per target, that root cause or -1.
func (g *Graph) nearestRoots(troubled []bool, roots []int32) []int32 {
	n := len(g.targets)
	nearest := make([]int32, n)
	dist := make([]int32, n)
	for v := range nearest {
		nearest[v], dist[v] = -1, -1
	}
	level := make([]int32, 0, len(roots))
	for _, r := range roots {
		nearest[r], dist[r] = r, 0
		level = append(level, r)
	}
	var next []int32
	for d := int32(1); len(level) > 0; d++ {
		next = next[:0]
		for _, v := range level {
			for _, w := range g.usedBy.of(v) {
				switch {
				case !troubled[w]:
				case dist[w] < 0:
					dist[w], nearest[w] = d, nearest[v]
					next = append(next, w)
				case dist[w] == d && nearest[v] < nearest[w]:
					nearest[w] = nearest[v]
				}
			}
		}
		level, next = next, level
	}
	return nearest
}

// troubledLonger reports whether a target troubled since a has been so
// longer than one troubled since b; an unknown (zero) time counts as latest.
func troubledLonger(a, b time.Time) bool {
	switch {
	case a.IsZero():
		return false
	case b.IsZero():
		return true
	}
	return a.Before(b)
}
