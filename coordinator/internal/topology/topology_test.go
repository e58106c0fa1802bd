package topology

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

type servers []fleet.Server

func (s servers) Servers() []fleet.Server { return s }

// server is an online agent with addresses, listeners ("tcp 0.0.0.0:80")
// and connections ("10.0.4.20:5432").
func server(name string, addrs []string, listen []string, conns ...string) fleet.Server {
	st := &gridcityv1.StateUpdate{Host: &gridcityv1.HostInfo{Hostname: name, Addresses: addrs},
		Listeners: &gridcityv1.Listeners{}, Connections: &gridcityv1.Connections{}}
	for _, l := range listen {
		var proto, addr string
		var port uint32
		f := strings.Fields(l)
		proto = f[0]
		i := strings.LastIndex(f[1], ":")
		addr = f[1][:i]
		fmt.Sscan(f[1][i+1:], &port)
		st.Listeners.Items = append(st.Listeners.Items, &gridcityv1.Listener{Proto: proto, Address: addr, Port: port})
	}
	for _, c := range conns {
		i := strings.LastIndex(c, ":")
		var port uint32
		fmt.Sscan(c[i+1:], &port)
		st.Connections.Items = append(st.Connections.Items, &gridcityv1.Connection{RemoteAddress: strings.Trim(c[:i], "[]"), RemotePort: port, Count: 1})
	}
	return fleet.Server{Name: name, Online: true, State: st, Hello: &gridcityv1.Hello{Name: name, Capabilities: []string{"state", "probes"}}}
}

func mustConfig(t *testing.T, y string) *config.Config {
	t.Helper()
	c, err := config.Parse(strings.NewReader(y), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func linkSet(g *graph.Graph) []string {
	var out []string
	for _, l := range g.Links() {
		out = append(out, l.From+">"+l.To+" "+l.Source)
	}
	slices.Sort(out)
	return out
}

func TestDiscoveredLinks(t *testing.T) {
	cfg := mustConfig(t, `
resources:
  - {id: orders-db, kind: database, engine: postgres, target: "10.0.4.20:5432"}
  - {id: site, kind: probe, engine: https, target: "https://example.test/health"}
links:
  - {from: lb, to: web-1}
`)
	fl := servers{
		server("lb", []string{"10.0.4.10"}, []string{"tcp 0.0.0.0:80"}, "10.0.4.11:8080", "10.0.4.12:8080"),
		server("web-1", []string{"10.0.4.11"}, []string{"tcp6 :::8080", "tcp 127.0.0.1:9000"}, "10.0.4.20:5432", "127.0.0.1:9000"),
		server("web-2", []string{"10.0.4.12", "fd00::12"}, []string{"tcp6 :::8080"}, "10.0.4.20:5432", "[fd00::30]:6379"),
		server("db-1", []string{"10.0.4.20"}, []string{"tcp 10.0.4.20:5432", "tcp 127.0.0.1:5432"}),
		server("cache", []string{"fd00::30"}, []string{"tcp6 fd00::30:6379"}),
	}
	g, err := New(cfg, fl, nil).Graph()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"lb>web-1 declared", // also seen: kept once, as declared
		"lb>web-2 discovered",
		"orders-db>db-1 discovered", // the database runs on db-1
		"web-1>orders-db discovered",
		"web-2>cache discovered",
		"web-2>orders-db discovered",
	}
	if got := linkSet(g); !slices.Equal(got, want) {
		t.Fatalf("links:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestListeningIndexDropsAmbiguousEndpoints(t *testing.T) {
	// Two private networks reuse 10.0.0.5: a connection to it names neither.
	idx := ListeningIndex(servers{
		server("a", []string{"10.0.0.5"}, []string{"tcp 0.0.0.0:5432"}),
		server("b", []string{"10.0.0.5"}, []string{"tcp 0.0.0.0:5432", "tcp 0.0.0.0:22"}),
	})
	if got := slices.Sorted(maps.Keys(idx)); !slices.Equal(got, []string{"10.0.0.5:22"}) || idx["10.0.0.5:22"] != "b" {
		t.Fatalf("index %v; want only b's unambiguous 10.0.0.5:22", idx)
	}
}

func TestVantages(t *testing.T) {
	cfg := mustConfig(t, `
resources:
  - {id: orders-db, kind: database, engine: postgres, target: "10.0.4.20:5432"}
  - {id: pinned, kind: database, engine: redis, target: "10.0.4.30:6379", probeFrom: [web-2, old]}
  - {id: lonely, kind: probe, engine: tcp, target: "10.0.9.9:1"}
  - {id: declared, kind: probe, engine: tcp, target: "10.0.9.9:2"}
links:
  - {from: web-2, to: declared}
  - {from: off, to: declared}
`)
	off := server("off", nil, nil, "10.0.4.20:5432")
	off.Online = false
	old := server("old", nil, nil, "10.0.4.30:6379")
	old.Hello.Capabilities = []string{"state"} // an agent that runs no probes
	fl := servers{
		server("web-1", nil, nil, "10.0.4.20:5432", "10.0.4.30:6379"),
		server("web-2", nil, nil, "10.0.4.20:5432"),
		off, old,
	}
	got := New(cfg, fl, nil).Vantages()
	want := map[string][]string{
		"orders-db": {"web-1", "web-2"}, // its users, the offline one left out
		"pinned":    {"web-2"},          // probeFrom wins over web-1's use; old runs no probes
		"declared":  {"web-2"},
		// lonely: nobody uses it, so the coordinator probes it
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("vantages %v; want %v", got, want)
	}
}

type versioned struct {
	servers
	shape *uint64
}

func (v versioned) ShapeVersion() uint64 { return *v.shape }

type states struct{ version *uint64 }

func (s states) State(string) (resources.State, bool) { return resources.State{}, false }
func (s states) Version() uint64                      { return *s.version }

func TestGraphIsReusedUntilSomethingChanges(t *testing.T) {
	var shape, version uint64
	fl := versioned{servers: servers{server("web-1", nil, nil)}, shape: &shape}
	src := New(mustConfig(t, "resources:\n  - {id: db, kind: database, engine: postgres, target: \"10.0.4.20:5432\"}\n"), fl, states{&version})
	g1, _ := src.Graph()
	if g2, _ := src.Graph(); g2 != g1 {
		t.Fatal("nothing changed, yet the graph was built again")
	}
	shape++
	g3, _ := src.Graph()
	if g3 == g1 {
		t.Fatal("the fleet changed, yet the old graph came back")
	}
	version++
	if g4, _ := src.Graph(); g4 == g3 {
		t.Fatal("a resource changed, yet the old graph came back")
	}
	// Without versions, every call builds.
	plain := New(mustConfig(t, ""), servers{}, nil)
	a, _ := plain.Graph()
	if b, _ := plain.Graph(); a == b {
		t.Fatal("an unversioned source reused its graph")
	}
}

// After a restart a server whose agent has not reconnected yet is not
// troubled during the fleet's startup grace; one offline from before is.
func TestReconnectingServerIsNotTroubled(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	waiting := fleet.Server{Name: "web-2", LastSeen: t0.Add(-4 * time.Second), Reconnecting: true, Restarted: t0, GraceEnds: t0.Add(75 * time.Second)}
	gone := fleet.Server{Name: "old", LastSeen: t0.Add(-3 * time.Hour)}
	g, err := New(mustConfig(t, ""), servers{server("web-1", nil, nil), waiting, gone}, nil).Graph()
	if err != nil {
		t.Fatal(err)
	}
	w, _ := g.Target("web-2")
	if w.Troubled || w.Status != fleet.StatusReconnecting || !w.Since.Equal(waiting.LastSeen) ||
		!strings.Contains(w.Reason, "restarted at 2025-06-01T12:00:00Z") || !strings.Contains(w.Reason, "not back by 2025-06-01T12:01:15Z") {
		t.Errorf("web-2 = %+v; want reconnecting, not troubled, since it was last heard from, saying when the coordinator restarted and until when it waits", w)
	}
	o, _ := g.Target("old")
	if !o.Troubled || o.Status != fleet.StatusOffline || o.Reason != "agent offline" || !o.Since.Equal(gone.LastSeen) {
		t.Errorf("old = %+v; want troubled, offline since it was last heard from", o)
	}
	if rep := g.Incidents(); len(rep.RootCauses) != 1 || rep.RootCauses[0].ID != "old" {
		t.Errorf("root causes %+v; want old only", rep.RootCauses)
	}
}

// The graph built during the startup grace is not reused after it: the
// fleet's shape changes when the grace ends.
func TestGraphAfterTheStartupGrace(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_750_000_000_000)
	seen := t0.Add(-2 * time.Second)
	if err := st.SaveServers(ctx, []store.ServerRecord{{Name: "web-1", State: []byte{}, Hello: []byte{}, LastSeen: seen}}); err != nil {
		t.Fatal(err)
	}
	now := t0
	fl, err := fleet.New(ctx, st, slog.New(slog.DiscardHandler), fleet.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	var version uint64
	src := New(mustConfig(t, ""), fl, states{&version})
	g1, _ := src.Graph()
	if w, _ := g1.Target("web-1"); w.Troubled || w.Status != fleet.StatusReconnecting {
		t.Fatalf("during the grace web-1 = %+v; want reconnecting", w)
	}
	now = t0.Add(fleet.DefaultStartupGrace - time.Second)
	if g2, _ := src.Graph(); g2 != g1 {
		t.Fatal("nothing changed within the grace, yet the graph was built again")
	}
	now = t0.Add(fleet.DefaultStartupGrace)
	g3, _ := src.Graph()
	if w, _ := g3.Target("web-1"); !w.Troubled || w.Status != fleet.StatusOffline || !w.Since.Equal(seen) {
		t.Fatalf("after the grace web-1 = %+v; want troubled, offline since %v", w, seen)
	}
}

// A revoked server is retired: not troubled, so no incident stays open for
// a server a person took out of the fleet.
func TestRevokedServerIsNotTroubled(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	retired := fleet.Server{Name: "web-test", LastSeen: at.Add(-time.Minute), RevokedAt: at}
	g, err := New(mustConfig(t, ""), servers{server("web-1", nil, nil), retired}, nil).Graph()
	if err != nil {
		t.Fatal(err)
	}
	w, _ := g.Target("web-test")
	if w.Troubled || w.Status != fleet.StatusRevoked || !w.Since.Equal(at) || !strings.Contains(w.Reason, "revoked at 2025-06-01T12:00:00Z") {
		t.Errorf("web-test = %+v; want revoked since %v, not troubled", w, at)
	}
	if rep := g.Incidents(); len(rep.RootCauses) != 0 {
		t.Errorf("root causes %+v; want none", rep.RootCauses)
	}
}
