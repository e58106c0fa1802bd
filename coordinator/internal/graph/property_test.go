package graph

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func id(i int) string { return fmt.Sprintf("t%05d", i) }

// checkReport compares a report with answers worked out the slow, obvious
// way: a search per target.
func checkReport(t testing.TB, g *Graph, rep Report) {
	t.Helper()
	down := map[string]bool{}
	for _, tg := range g.Targets() {
		if tg.Troubled {
			down[tg.ID] = true
		}
	}
	// reaches(a, b, onlyDown): a reaches b through uses links, every target
	// on the way (a and b included) troubled when onlyDown.
	reaches := func(a, b string, onlyDown bool) bool {
		seen := map[string]bool{a: true}
		queue := []string{a}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for _, w := range g.Uses(v) {
				if w == b && (!onlyDown || down[w]) {
					return true
				}
				if !seen[w] && (!onlyDown || down[w]) {
					seen[w] = true
					queue = append(queue, w)
				}
			}
		}
		return false
	}
	sameCycle := func(a, b string) bool { return a == b || reaches(a, b, true) && reaches(b, a, true) }

	if rep.Total != len(g.Targets()) || rep.Healthy+len(rep.Troubled) != rep.Total || len(rep.Troubled) != len(down) {
		t.Errorf("healthy %d, troubled %d, total %d; want %d troubled of %d", rep.Healthy, len(rep.Troubled), rep.Total, len(down), len(g.Targets()))
	}
	isRoot := map[string]bool{}
	for _, c := range rep.RootCauses {
		isRoot[c.ID] = true
		if !c.Troubled {
			t.Errorf("root cause %s is not troubled", c.ID)
		}
		for _, d := range g.Uses(c.ID) {
			if down[d] && !sameCycle(c.ID, d) {
				t.Errorf("root cause %s has a troubled dependency %s outside its cycle", c.ID, d)
			}
		}
		var explains, atRisk, cycle []string
		for _, tg := range g.Targets() {
			switch {
			case tg.ID == c.ID:
			case down[tg.ID] && reaches(tg.ID, c.ID, true):
				explains = append(explains, tg.ID)
				if sameCycle(tg.ID, c.ID) {
					cycle = append(cycle, tg.ID)
					if troubledLonger(tg.Since, c.Since) || tg.Since.Equal(c.Since) && tg.ID < c.ID {
						t.Errorf("root cause %s chosen over %s on the same cycle", c.ID, tg.ID)
					}
				}
			case !down[tg.ID] && reaches(tg.ID, c.ID, false):
				atRisk = append(atRisk, tg.ID)
			}
		}
		if c.AtRiskCount != len(atRisk) {
			t.Errorf("root cause %s at-risk count %d; want %d", c.ID, c.AtRiskCount, len(atRisk))
		}
		for _, l := range []struct {
			name      string
			got, want []string
		}{{"explains", c.Explains, explains}, {"atRisk", c.AtRisk, atRisk}, {"cycle", c.Cycle, cycle}} {
			if len(l.got) != 0 || len(l.want) != 0 {
				if !reflect.DeepEqual(l.got, l.want) {
					t.Errorf("root cause %s %s = %v; want %v", c.ID, l.name, l.got, l.want)
				}
			}
		}
	}
	if !slices.IsSortedFunc(rep.RootCauses, func(a, b RootCause) int { return cmpID(a.ID, b.ID) }) ||
		!slices.IsSortedFunc(rep.Troubled, func(a, b Troubled) int { return cmpID(a.ID, b.ID) }) {
		t.Errorf("report not sorted by id")
	}
	for _, tr := range rep.Troubled {
		if tr.RootCause == "" || !isRoot[tr.RootCause] {
			t.Errorf("troubled %s has root cause %q, which is not one of the root causes", tr.ID, tr.RootCause)
			continue
		}
		if tr.RootCause != tr.ID && !reaches(tr.ID, tr.RootCause, true) {
			t.Errorf("troubled %s does not reach its root cause %s", tr.ID, tr.RootCause)
		}
		if isRoot[tr.ID] && tr.RootCause != tr.ID {
			t.Errorf("root cause %s names %s as its own root cause", tr.ID, tr.RootCause)
		}
		var all []string
		for _, c := range rep.RootCauses {
			if c.ID == tr.ID || reaches(tr.ID, c.ID, true) {
				all = append(all, c.ID)
			}
		}
		if !reflect.DeepEqual(tr.RootCauses, all) {
			t.Errorf("troubled %s root causes %v; want %v", tr.ID, tr.RootCauses, all)
		}
	}
	// Every sink of the troubled cycles has exactly one root cause.
	for tid := range down {
		sink := true
		for other := range down {
			if reaches(tid, other, true) && !reaches(other, tid, true) {
				sink = false
				break
			}
		}
		if !sink {
			if isRoot[tid] {
				t.Errorf("%s is a root cause but reaches troubled targets that do not reach it", tid)
			}
			continue
		}
		n := 0
		for r := range isRoot {
			if sameCycle(tid, r) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("troubled cycle around %s has %d root causes; want 1", tid, n)
		}
	}
	for _, tg := range g.Targets() {
		var radius []string
		for _, other := range g.Targets() {
			if other.ID != tg.ID && reaches(other.ID, tg.ID, false) {
				radius = append(radius, other.ID)
			}
		}
		if got := g.BlastRadius(tg.ID); len(got) != 0 || len(radius) != 0 {
			if !reflect.DeepEqual(got, radius) {
				t.Errorf("BlastRadius(%s) = %v; want %v", tg.ID, got, radius)
			}
		}
	}
}

// checkNearest compares a report made with a MaxAtRisk (positive, or
// negative for none) with the full one and with the nearest at-risk targets
// worked out the slow way: the distance from every healthy target to the
// root cause, by a search from each, then a sort by distance and id.
func checkNearest(t testing.TB, g *Graph, full Report, limit int) {
	t.Helper()
	rep := g.IncidentsWith(IncidentOptions{MaxAtRisk: limit})
	if len(rep.RootCauses) != len(full.RootCauses) || !reflect.DeepEqual(rep.Troubled, full.Troubled) ||
		rep.Healthy != full.Healthy || rep.Total != full.Total {
		t.Fatalf("MaxAtRisk %d: report differs beyond the at-risk lists:\n%+v\nwant\n%+v", limit, rep, full)
	}
	// distance(a, b): fewest uses links from a to b, -1 when a does not reach b.
	distance := func(a, b string) int {
		dist := map[string]int{a: 0}
		queue := []string{a}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for _, w := range g.Uses(v) {
				if _, ok := dist[w]; !ok {
					dist[w] = dist[v] + 1
					if w == b {
						return dist[w]
					}
					queue = append(queue, w)
				}
			}
		}
		return -1
	}
	for i, c := range rep.RootCauses {
		fc := full.RootCauses[i]
		if c.ID != fc.ID || !reflect.DeepEqual(c.Explains, fc.Explains) || !reflect.DeepEqual(c.Cycle, fc.Cycle) {
			t.Errorf("MaxAtRisk %d: root cause %+v; want %+v apart from the at-risk list", limit, c, fc)
		}
		if c.AtRiskCount != fc.AtRiskCount {
			t.Errorf("MaxAtRisk %d: root cause %s at-risk count %d; want %d", limit, c.ID, c.AtRiskCount, fc.AtRiskCount)
		}
		type near struct {
			id   string
			dist int
		}
		var all []near
		for _, tg := range g.Targets() {
			if d := distance(tg.ID, c.ID); !tg.Troubled && d > 0 {
				all = append(all, near{tg.ID, d})
			}
		}
		slices.SortFunc(all, func(a, b near) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmpID(a.id, b.id)) })
		want := []string{}
		for _, a := range all[:max(0, min(limit, len(all)))] {
			want = append(want, a.id)
		}
		if !reflect.DeepEqual(c.AtRisk, want) {
			t.Errorf("MaxAtRisk %d: root cause %s at risk %v; want %v (of %v)", limit, c.ID, c.AtRisk, want, all)
		}
	}
}

func cmpID(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// randomGraph decodes bytes into a small graph: the first byte sets the
// size, then each byte pair is a link and every third byte marks a target
// troubled.
func randomGraph(data []byte) *Graph {
	if len(data) == 0 {
		return nil
	}
	n := 1 + int(data[0])%24
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	targets := make([]Target, n)
	for i := range targets {
		targets[i] = Target{ID: id(i)}
	}
	var links []Link
	rest := data[1:]
	for i := 0; i+1 < len(rest); i += 2 {
		a, b := int(rest[i])%n, int(rest[i+1])%n
		if i%3 == 0 {
			tg := &targets[int(rest[i])%n]
			tg.Troubled = true
			if rest[i+1]%4 != 0 { // some with unknown since
				tg.Since = t0.Add(time.Duration(rest[i+1]%5) * time.Minute)
			}
		}
		if a != b {
			links = append(links, Link{From: id(a), To: id(b), Source: SourceDiscovered})
		}
	}
	g, err := New(targets, links, nil)
	if err != nil {
		panic(err)
	}
	return g
}

func TestIncidentsProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for range 400 {
		data := make([]byte, 1+r.IntN(80))
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		g := randomGraph(data)
		rep := g.Incidents()
		checkReport(t, g, rep)
		for _, limit := range []int{-1, 1, 2, 3, 100} {
			checkNearest(t, g, rep, limit)
		}
		if t.Failed() {
			t.Fatalf("failing input: %q", data)
		}
	}
}

func FuzzIncidents(f *testing.F) {
	f.Add([]byte{5, 0, 1, 1, 2, 2, 0, 3, 0})
	f.Add([]byte{9, 1, 2, 2, 3, 3, 1, 4, 5, 5, 4, 6, 1, 7, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := randomGraph(data)
		if g == nil {
			return
		}
		rep := g.Incidents()
		checkReport(t, g, rep)
		for _, limit := range []int{-1, 1, 2, 3} {
			checkNearest(t, g, rep, limit)
		}
	})
}

// TestNewProperties builds graphs from shuffled targets and links with
// repeats and compares what New made of them with a map built the obvious
// way.
func TestNewProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		n := 1 + r.IntN(30)
		targets := make([]Target, n)
		for i, p := range r.Perm(n) {
			targets[i] = Target{ID: id(p)}
		}
		declared := map[[2]string]bool{} // (from, to) → declared at least once
		var links []Link
		for range r.IntN(4 * n) {
			a, b := r.IntN(n), r.IntN(n)
			if a == b {
				continue
			}
			l := Link{From: id(a), To: id(b), Source: SourceDiscovered}
			if r.IntN(3) == 0 {
				l.Source = SourceDeclared
			}
			links = append(links, l)
			p := [2]string{l.From, l.To}
			declared[p] = declared[p] || l.Source == SourceDeclared
		}
		g, err := New(targets, links, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want []Link
		uses, usedBy := map[string][]string{}, map[string][]string{}
		for p, d := range declared {
			l := Link{From: p[0], To: p[1], Source: SourceDiscovered}
			if d {
				l.Source = SourceDeclared
			}
			want = append(want, l)
			uses[p[0]] = append(uses[p[0]], p[1])
			usedBy[p[1]] = append(usedBy[p[1]], p[0])
		}
		slices.SortFunc(want, func(a, b Link) int { return cmp.Or(cmpID(a.From, b.From), cmpID(a.To, b.To)) })
		if got := g.Links(); len(got) != 0 || len(want) != 0 {
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Links() = %v; want %v (from %v)", got, want, links)
			}
		}
		for i := range n {
			u, ub := uses[id(i)], usedBy[id(i)]
			slices.Sort(u)
			slices.Sort(ub)
			if got := g.Uses(id(i)); len(got) != 0 || len(u) != 0 {
				if !reflect.DeepEqual(got, u) {
					t.Fatalf("Uses(%s) = %v; want %v (from %v)", id(i), got, u, links)
				}
			}
			if got := g.UsedBy(id(i)); len(got) != 0 || len(ub) != 0 {
				if !reflect.DeepEqual(got, ub) {
					t.Fatalf("UsedBy(%s) = %v; want %v (from %v)", id(i), got, ub, links)
				}
			}
		}
		if got := g.Targets(); !slices.IsSortedFunc(got, func(a, b Target) int { return cmpID(a.ID, b.ID) }) || len(got) != n {
			t.Fatalf("Targets() = %v; want %d sorted", got, n)
		}
	}
}
