package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// fleet builds a synthetic fleet of n targets and 3n links, fixed by seed.
// Target i uses three targets below it: two in its own neighbourhood (a
// district of a hundred or so) and one anywhere (a shared service), which
// gives the low-numbered targets the huge blast radius shared databases
// have. One link in a hundred points upwards instead, closing cycles.
// About 2% of the targets are troubled. Each hundred targets in a row form
// a district.
func fleet(tb testing.TB, n int) *Graph {
	tb.Helper()
	r := rand.New(rand.NewPCG(10000, 30000))
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	targets := make([]Target, n)
	for i := range targets {
		targets[i] = Target{ID: id(i), Name: id(i), Kind: "server", Status: "healthy"}
		if r.IntN(100) < 2 {
			targets[i].Troubled, targets[i].Status = true, "offline"
			targets[i].Since = t0.Add(time.Duration(r.IntN(3600)) * time.Second)
		}
	}
	links := make([]Link, 0, 3*n)
	for i := 1; i < n; i++ {
		picked := map[int]bool{}
		for k := 0; k < 3 && len(picked) < i; {
			var j int
			switch {
			case r.IntN(100) == 0:
				j = r.IntN(n) // upwards now and then: cycles
			case k < 2:
				j = max(0, i-1-r.IntN(100))
			default:
				j = r.IntN(i)
			}
			if j == i || picked[j] {
				continue
			}
			picked[j] = true
			links = append(links, Link{From: id(i), To: id(j), Source: SourceDiscovered})
			k++
		}
	}
	var districts []District
	for i := range targets {
		if i%100 == 0 {
			districts = append(districts, District{ID: fmt.Sprintf("d%03d", i/100)})
		}
		d := &districts[len(districts)-1]
		d.Members = append(d.Members, id(i))
	}
	g, err := New(targets, links, districts)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

func BenchmarkIncidents(b *testing.B) {
	g := fleet(b, 10000)
	rep := g.Incidents()
	atRisk, explained := 0, 0
	for _, c := range rep.RootCauses {
		atRisk += len(c.AtRisk)
		explained += len(c.Explains)
	}
	b.Logf("%d targets, %d links, %d troubled, %d root causes, %d at-risk and %d explained entries in all",
		rep.Total, len(g.Links()), len(rep.Troubled), len(rep.RootCauses), atRisk, explained)
	b.ReportAllocs()
	for b.Loop() {
		g.Incidents()
	}
}

func BenchmarkBlastRadius(b *testing.B) {
	g := fleet(b, 10000)
	b.Logf("blast radius of %s: %d targets", id(0), len(g.BlastRadius(id(0))))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		g.BlastRadius(id(i % 10000)) // every target in turn: mostly small, some the whole fleet
		i += 37
	}
}

func BenchmarkBlastRadiusWorst(b *testing.B) {
	g := fleet(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		g.BlastRadius(id(0))
	}
}

func BenchmarkNew(b *testing.B) {
	g := fleet(b, 10000)
	targets, links := g.Targets(), g.Links()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(targets, links, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// maxAtRisk is what the incident_report tool asks for.
const maxAtRisk = 100

// BenchmarkIncidentReport is the incident_report tool's path through the
// package: a graph built from scratch, then a report with bounded at-risk
// lists.
func BenchmarkIncidentReport(b *testing.B) {
	g := fleet(b, 10000)
	targets, links, districts := g.Targets(), g.Links(), g.Districts()
	b.ReportAllocs()
	for b.Loop() {
		g, err := New(targets, links, districts)
		if err != nil {
			b.Fatal(err)
		}
		g.IncidentsWith(IncidentOptions{MaxAtRisk: maxAtRisk})
	}
}

// BenchmarkTopology is the get_topology tool's two paths through the
// package, each on a graph built from scratch: the whole fleet (districts
// and links) and one target (its links both ways and its blast radius,
// every target in turn).
func BenchmarkTopology(b *testing.B) {
	g := fleet(b, 10000)
	targets, links, districts := g.Targets(), g.Links(), g.Districts()
	b.Run("fleet", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := New(targets, links, districts)
			if err != nil {
				b.Fatal(err)
			}
			g.Districts()
			g.Links()
		}
	})
	b.Run("target", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			g, err := New(targets, links, districts)
			if err != nil {
				b.Fatal(err)
			}
			t, _ := g.Target(id(i % 10000))
			g.Uses(t.ID)
			g.UsedBy(t.ID)
			g.BlastRadius(t.ID)
			i += 37
		}
	})
}
