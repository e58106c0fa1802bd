package incidents_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// noResources has none, and tells a version so that the topology reuses
// its graphs as it does in the coordinator.
type noResources struct{}

func (noResources) State(string) (resources.State, bool) { return resources.State{}, false }
func (noResources) Version() uint64                      { return 0 }

// A coordinator restarts on a store that remembers four servers: web-1
// and web-2 were connected when it stopped, db-1 had gone down 45 s before
// and has an open incident, old has been gone for hours. The restart opens
// no incident for the servers that were connected: web-1 returns within
// the grace and never has one; web-2 does not return and gets one when the
// grace ends, starting when it was last heard from. db-1's incident stays
// open with its start, and old's opens at once.
func TestRestartOpensNoIncidentForReconnectingAgents(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_750_000_000_000) // the restart
	seen := map[string]time.Time{
		"web-1": t0.Add(-5 * time.Second),
		"web-2": t0.Add(-3 * time.Second),
		"db-1":  t0.Add(-45 * time.Second),
		"old":   t0.Add(-3 * time.Hour),
	}
	var recs []store.ServerRecord
	for name, at := range seen {
		recs = append(recs, store.ServerRecord{Name: name, State: []byte{}, Hello: []byte{}, LastSeen: at})
	}
	if err := st.SaveServers(ctx, recs); err != nil {
		t.Fatal(err)
	}
	dbIncident, err := st.OpenIncident(ctx, store.Incident{Target: "db-1", Kind: "server", Reason: "agent offline", StartedAt: seen["db-1"], Explains: []string{}})
	if err != nil {
		t.Fatal(err)
	}

	now := t0
	logger := slog.New(slog.DiscardHandler)
	fl, err := fleet.New(ctx, st, logger, fleet.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	topo := topology.New(nil, fl, noResources{})
	tr := incidents.New(st, func() (graph.Report, error) {
		g, err := topo.Graph()
		if err != nil {
			return graph.Report{}, err
		}
		return g.IncidentsWith(graph.IncidentOptions{MaxAtRisk: -1}), nil
	}, logger)
	if err := tr.Load(ctx); err != nil {
		t.Fatal(err)
	}
	// observe at t0+d and check which servers have an open incident,
	// and since when.
	observe := func(d time.Duration, want map[string]time.Time) {
		t.Helper()
		now = t0.Add(d)
		if err := tr.Observe(ctx, now); err != nil {
			t.Fatal(err)
		}
		got := map[string]time.Time{}
		for _, in := range tr.Open() {
			got[in.Target] = in.StartedAt
		}
		if len(got) != len(want) {
			t.Fatalf("at +%s open incidents on %v; want %v", d, got, want)
		}
		for target, since := range want {
			if !got[target].Equal(since) {
				t.Fatalf("at +%s open incidents on %v; want %v", d, got, want)
			}
		}
	}
	before := map[string]time.Time{"db-1": seen["db-1"], "old": seen["old"]}
	observe(0, before)
	now = t0.Add(8 * time.Second)
	fl.Connect(&gridcityv1.Hello{Name: "web-1"})
	observe(10*time.Second, before)
	observe(fleet.DefaultStartupGrace-time.Second, before)
	observe(fleet.DefaultStartupGrace, map[string]time.Time{"db-1": seen["db-1"], "old": seen["old"], "web-2": seen["web-2"]})

	if open := tr.Open(); open[0].Target != "old" || open[1].ID != dbIncident {
		t.Errorf("open incidents %+v; want db-1's from before the restart (id %d) kept", open, dbIncident)
	}
	hist, err := tr.History(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range hist {
		if in.Target == "web-1" || !in.Open() {
			t.Errorf("incident %+v; want none on web-1 and none ended", in)
		}
	}
}
