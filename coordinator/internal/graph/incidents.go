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
	// AtRisk holds the healthy targets that reach this one through uses
	// links of any kind: all of them sorted by id, or the nearest ones when
	// the report was asked for with a MaxAtRisk (see IncidentOptions).
	AtRisk []string
	// AtRiskCount is how many healthy targets reach this one, however many
	// of them AtRisk lists.
	AtRiskCount int
	// Cycle holds the other troubled members of the cycle this root cause
	// was chosen from, sorted (they are in Explains too); empty when the
	// root cause is on no troubled cycle.
	Cycle []string
}

// IncidentOptions tunes an incident report.
type IncidentOptions struct {
	// MaxAtRisk, when positive, bounds each root cause's AtRisk list to the
	// healthy targets nearest to it: fewest links first, then smaller id,
	// in that order. A shared database can have most of the fleet at risk;
	// listing all of it costs more than the rest of the report together
	// and tells less than its nearest users do. Zero lists every at-risk
	// target, sorted by id; a negative value lists none (AtRiskCount still
	// counts them), for callers that only want the root causes.
	MaxAtRisk int
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
//
// Every AtRisk list is complete; IncidentsWith can bound them.
func (g *Graph) Incidents() Report { return g.IncidentsWith(IncidentOptions{}) }

// IncidentsWith is Incidents tuned by o.
func (g *Graph) IncidentsWith(o IncidentOptions) Report {
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
		slices.Sort(members) // for the ties below and the Cycle list
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
	rootsOf := make([][]string, len(troubledIDs)) // by position in troubledIDs

	// Sixty-four root causes at a time: which troubled targets reach them
	// through troubled ones, and which healthy targets reach them at all.
	full := condense(g.uses, nil)
	tbits := make([]uint64, tc.count())
	fbits := make([]uint64, full.count())
	for lo := 0; lo < len(roots); lo += 64 {
		batch := roots[lo:min(lo+64, len(roots))]
		tbits = tc.reach(g.uses, batch, tbits)
		for i, v := range troubledIDs {
			for b := tbits[tc.comp[v]]; b != 0; b &= b - 1 {
				k := bits.TrailingZeros64(b)
				r := batch[k]
				if v != r {
					causes[lo+k].Explains = append(causes[lo+k].Explains, g.targets[v].ID)
				}
				rootsOf[i] = append(rootsOf[i], g.targets[r].ID)
			}
		}
		fbits = full.reach(g.uses, batch, fbits)
		count := countHealthy(full, fbits, troubled)
		for k := range batch {
			causes[lo+k].AtRiskCount = count[k]
		}
		if o.MaxAtRisk != 0 {
			continue // listed below, nearest first, or not at all
		}
		// At-risk lists can hold most of the fleet each: each is allocated
		// once, at its size.
		for k := range batch {
			causes[lo+k].AtRisk = make([]string, 0, count[k])
		}
		for v := range int32(n) {
			if troubled[v] {
				continue
			}
			for b := fbits[full.comp[v]]; b != 0; b &= b - 1 {
				k := bits.TrailingZeros64(b)
				causes[lo+k].AtRisk = append(causes[lo+k].AtRisk, g.targets[v].ID)
			}
		}
	}
	switch {
	case o.MaxAtRisk > 0:
		w := newWalk(n)
		for i, r := range roots {
			causes[i].AtRisk = g.ids(w.nearestHealthy(g.usedBy, r, int32(i+1), min(o.MaxAtRisk, causes[i].AtRiskCount), troubled))
		}
	case o.MaxAtRisk < 0:
		for i := range causes {
			causes[i].AtRisk = []string{}
		}
	}
	rep.RootCauses = causes

	nearest := g.nearestRoots(troubled, roots)
	rep.Troubled = make([]Troubled, len(troubledIDs))
	for i, v := range troubledIDs {
		t := Troubled{Target: g.targets[v], RootCauses: rootsOf[i]}
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

// countHealthy counts, for each of the (up to) 64 seeds of a reach, the
// healthy targets whose component has the seed's bit set. Counting bit by
// bit would cost one step per at-risk entry, most of the fleet per root
// cause; instead the 64 counters are kept bit-sliced — planes[i] holds bit
// i of every counter — so that adding a target's word costs a carry
// ripple of a few steps.
func countHealthy(c condensation, reach []uint64, troubled []bool) [64]int {
	var planes [32]uint64 // a count never exceeds the number of targets, an int32
	for v, k := range c.comp {
		if troubled[v] {
			continue
		}
		carry := reach[k]
		for i := 0; carry != 0; i++ {
			planes[i], carry = planes[i]^carry, planes[i]&carry
		}
	}
	var count [64]int
	for i, p := range planes {
		for ; p != 0; p &= p - 1 {
			count[bits.TrailingZeros64(p)] += 1 << i
		}
	}
	return count
}

// walk is the scratch space of nearestHealthy, reused from one root cause
// to the next: seen[v] == stamp marks the targets the current walk has met,
// so nothing needs clearing in between.
type walk struct {
	seen               []int32
	level, next, found []int32
	pick               []uint64 // a bit per target, clear between calls
}

func newWalk(n int) *walk {
	return &walk{seen: make([]int32, n), pick: make([]uint64, (n+63)/64)}
}

// nearestHealthy walks up the links from root one level at a time and
// returns the first want healthy targets it meets: by distance, and by
// number (so by id) within a level. It stops at the level that brings the
// count to want, so it looks at little more than the targets it returns
// and the troubled ones on the way. That last level can be wide (all the
// users of a shared service) and only its smallest numbers are wanted: they
// are picked out of a bitmap rather than sorted. stamp must differ from
// every earlier call's.
func (w *walk) nearestHealthy(usedBy csr, root, stamp int32, want int, troubled []bool) []int32 {
	w.found = w.found[:0]
	w.level = append(w.level[:0], root)
	w.seen[root] = stamp
	for len(w.level) > 0 && len(w.found) < want {
		w.next = w.next[:0]
		for _, v := range w.level {
			for _, u := range usedBy.of(v) {
				if w.seen[u] != stamp {
					w.seen[u] = stamp
					w.next = append(w.next, u)
				}
			}
		}
		from := len(w.found)
		for _, u := range w.next {
			if !troubled[u] {
				w.found = append(w.found, u)
			}
		}
		if len(w.found) <= want {
			slices.Sort(w.found[from:])
		} else {
			for _, u := range w.found[from:] {
				w.pick[u/64] |= 1 << (u % 64)
			}
			w.found = w.found[:from]
		pick:
			for i, b := range w.pick {
				for ; b != 0; b &= b - 1 {
					w.found = append(w.found, int32(i*64+bits.TrailingZeros64(b)))
					if len(w.found) == want {
						break pick
					}
				}
			}
			clear(w.pick)
		}
		w.level, w.next = w.next, w.level
	}
	return w.found
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
