package fleetview

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/security"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// writtenFleet is n servers of simfleet's state with its trouble (open
// and ended attacks, failed units), one in a hundred offline.
func writtenFleet(t *testing.T, n int) (Deps, map[string]uint64) {
	t.Helper()
	d := fleetOf(t, n, fleettest.Troubled(n))
	cfg := config.Default()
	d.Resources = resources.New(cfg, d.Logger)
	d.Topology = topology.New(cfg, d.Fleet, d.Resources)
	// Connect again for the stream ids: the same state follows.
	streams := fleettest.Streams(d.Fleet, n)
	return d, streams
}

// TestKeptJudgementsAreJudgingAnew: what list_servers and
// security_findings keep of each server is, after writes of every kind
// and as time passes over attacks opening and ending, what judging every
// server anew gives.
func TestKeptJudgementsAreJudgingAnew(t *testing.T) {
	d, streams := writtenFleet(t, 300)
	o := security.DefaultOptions()
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	for step, at := range []time.Duration{0, 0, time.Second, 14 * time.Minute, 16 * time.Minute, 16*time.Minute + 30*time.Second, 2 * time.Hour, 2 * time.Hour} {
		now := start.Add(at)
		// Writes since the last look: changes, a reconnect, a refusal, a disconnect.
		for k := range 20 {
			i := 2 * r.IntN(150)
			name := simfleet.Name(i)
			id, ok := streams[name]
			if !ok {
				continue
			}
			switch k % 5 {
			case 0:
				d.Fleet.Disconnect(name, id)
				delete(streams, name)
			case 1:
				d.Fleet.Refuse(name, fmt.Sprintf("step %d", step))
			default:
				d.Fleet.Apply(name, id, &gridcityv1.StateUpdate{CollectedUnixMs: now.UnixMilli(), Memory: &gridcityv1.Memory{UsedPercent: 50 + 49*r.Float64()}})
			}
		}
		v := d.Fleet.View()
		kept := rowStatesOf(d, v, now)
		for i, s := range v.Servers() {
			want, _ := rankState(*s, now)
			if !reflect.DeepEqual(kept[i].val, want) {
				t.Fatalf("at +%s %s: kept reasons %+v; judged anew %+v", at, s.Name, kept[i].val, want)
			}
		}
		got, ranked := judgeFleet(d, nil, now, o)
		want := security.Judge(d.Fleet.Servers(), nil, now, o)
		if !reflect.DeepEqual(ranked, sources(want.Attacks)) {
			t.Fatalf("at +%s: kept sources differ from ranking them anew", at)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("at +%s: kept security findings differ from judging anew (%d/%d attacks, %d/%d exposures, %d/%d gaps)",
				at, len(got.Attacks), len(want.Attacks), len(got.Exposures), len(want.Exposures), len(got.Gaps), len(want.Gaps))
		}
	}
}

// TestListeningIndexFollowsTheShape: the kept listening index is the
// fleet's as soon as a server listens somewhere else.
func TestListeningIndexFollowsTheShape(t *testing.T) {
	d, streams := writtenFleet(t, 200)
	check := func(when string) {
		t.Helper()
		if got, want := listeningOf(d, d.Fleet.View()), topology.ListeningIndex(d.Fleet.Servers()); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: kept index of %d endpoints; the fleet's has %d", when, len(got), len(want))
		}
	}
	check("at first")
	name := simfleet.Name(4)
	d.Fleet.Apply(name, streams[name], &gridcityv1.StateUpdate{CollectedUnixMs: time.Now().UnixMilli(),
		Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Proto: "tcp", Address: "0.0.0.0", Port: 6543, Process: "pgbouncer"}}}})
	check("after a server's listeners changed")
	if got := listeningOf(d, d.Fleet.View())[simfleet.Addr(4)+":6543"]; got != name {
		t.Fatalf("%s:6543 is %q's; want %s", simfleet.Addr(4), got, name)
	}
}

// TestRowsRankAsBefore: a row made from the kept, ranked state and its
// status is the row of ranking all its reasons together, as rows were
// made before the state was kept: the status's reason among the state's
// by severity, its kind where it first comes, for every status.
func TestRowsRankAsBefore(t *testing.T) {
	d, _ := writtenFleet(t, 300)
	now := time.Now().Add(time.Minute)
	all, _, err := listFleet(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range all {
		for _, status := range []string{l.status, "offline", "reconnecting", "revoked", "online"} {
			if !l.connected {
				continue
			}
			l.status = status
			got := rowOf(l, now, nil)
			// As before: every reason, status first, one stable sort.
			rs := reasonsOf(*l.srv, status, now)
			slices.SortStableFunc(rs, func(a, b reason) int { return b.sev - a.sev })
			var why, kinds []string
			sev := 0
			for _, x := range rs {
				why = append(why, x.text)
				if !slices.Contains(kinds, x.kind) {
					kinds = append(kinds, x.kind)
				}
				sev = max(sev, x.sev)
			}
			if !slices.Equal(got.Why, why) || !slices.Equal(got.kinds, kinds) || got.sev != sev {
				t.Fatalf("%s as %s: why %q kinds %q sev %d; ranked together: %q %q %d", l.name, status, got.Why, got.kinds, got.sev, why, kinds, sev)
			}
			seen[status] += len(got.Why)
		}
	}
	for _, status := range []string{"offline", "reconnecting", "revoked", "online"} {
		if seen[status] == 0 {
			t.Errorf("no reason at all was ranked for status %s: the fixture tests nothing there", status)
		}
	}
}

// TestCandidatesFollowTheShape: the kept candidates are the fleet's as
// soon as a server listens on a database port.
func TestCandidatesFollowTheShape(t *testing.T) {
	d, streams := writtenFleet(t, 200)
	before := candidates(d)
	name := simfleet.Name(6)
	d.Fleet.Apply(name, streams[name], &gridcityv1.StateUpdate{CollectedUnixMs: time.Now().UnixMilli(),
		Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Proto: "tcp", Address: "0.0.0.0", Port: 3306, Process: "mysqld"}}}})
	after := candidates(d)
	if want := candidatesOf(d, d.Fleet.View()); !reflect.DeepEqual(after, want) {
		t.Fatalf("kept candidates %+v; made anew %+v", after, want)
	}
	if !slices.ContainsFunc(after, func(c CandidateView) bool { return c.Server == name && c.Engine == "mysql" }) ||
		slices.ContainsFunc(before, func(c CandidateView) bool { return c.Server == name && c.Engine == "mysql" }) {
		t.Fatalf("%s's MySQL is not a new candidate: before %d, after %d candidates", name, len(before), len(after))
	}
}

// TestAppFleetSeesWritesAtOnce: the app's fleet page, whose graph-derived
// parts are kept with the graph, shows a server going offline at once.
func TestAppFleetSeesWritesAtOnce(t *testing.T) {
	d, streams := writtenFleet(t, 200)
	app := New(d)
	ctx := context.Background()
	before, err := app.Fleet(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	name := simfleet.Name(8)
	d.Fleet.Disconnect(name, streams[name])
	after, err := app.Fleet(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if after.ByStatus["offline"] != before.ByStatus["offline"]+1 {
		t.Fatalf("offline %d before the disconnect, %d after; want one more", before.ByStatus["offline"], after.ByStatus["offline"])
	}
	i := slices.IndexFunc(after.Targets, func(v AppTarget) bool { return v.ID == name })
	if i < 0 || after.Targets[i].Status != "offline" || !slices.ContainsFunc(after.Targets[i].Why, func(w string) bool { return strings.HasPrefix(w, "offline for") }) {
		t.Fatalf("%s after its disconnect: %+v", name, after.Targets[max(i, 0)])
	}
}

// TestJudgementsOutliveAJoin: a server joining the fleet costs the others
// none of their kept judgements, and the newcomer is judged.
func TestJudgementsOutliveAJoin(t *testing.T) {
	d, _ := writtenFleet(t, 100)
	now := time.Now()
	v := d.Fleet.View()
	before := rowStatesOf(d, v, now)
	d.Fleet.Connect(&gridcityv1.Hello{Name: "aaa-new"}) // sorts first: every other moves
	w := d.Fleet.View()
	after := rowStatesOf(d, w, now)
	if len(after) != len(before)+1 || after[0].of.Name != "aaa-new" || !slices.Equal(after[0].val.why, []string{"no state yet"}) {
		t.Fatalf("the newcomer's judgement: %+v", after[0])
	}
	for i := range before {
		if after[i+1] != before[i] {
			t.Fatalf("%s was judged again after another server joined", v.Servers()[i].Name)
		}
	}
}
