package topology

import (
	"reflect"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
)

// movingServers is a fleet whose servers a test changes between builds.
type movingServers struct{ list []fleet.Server }

func (m *movingServers) Servers() []fleet.Server { return m.list }

// TestRebuildsReuseOnlyWhatHolds: a graph built by a source that keeps
// what its builds learned (see reuse) is, after each kind of change, the
// graph a new source builds of the same fleet.
func TestRebuildsReuseOnlyWhatHolds(t *testing.T) {
	cfg := mustConfig(t, `
resources:
  - {id: orders-db, kind: database, engine: postgres, target: "10.0.4.20:5432"}
links:
  - {from: web-1, to: orders-db}
`)
	fl := &movingServers{list: []fleet.Server{
		server("app-1", []string{"10.0.1.1"}, []string{"tcp 0.0.0.0:8080"}, "10.0.4.20:5432", "10.0.2.2:6379"),
		server("cache-1", []string{"10.0.2.2"}, []string{"tcp 0.0.0.0:6379"}),
		server("db-1", []string{"10.0.4.20"}, []string{"tcp 0.0.0.0:5432"}),
		server("web-1", []string{"10.0.3.3"}, []string{"tcp 0.0.0.0:80"}, "10.0.1.1:8080"),
	}}
	kept := New(cfg, fl, nil)
	check := func(when string) {
		t.Helper()
		got, err := kept.build()
		if err != nil {
			t.Fatal(err)
		}
		want, err := New(cfg, fl, nil).build()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.g.Links(), want.g.Links()) || !reflect.DeepEqual(got.hosts, want.hosts) {
			t.Fatalf("%s: kept build's links %v hosts %v; a new source's %v %v", when, linkSet(got.g), got.hosts, linkSet(want.g), want.hosts)
		}
	}
	check("at first")
	// Each change replaces a section whole, as the fleet does.
	fl.list[3].State = withSection(fl.list[3].State, func(u *gridcityv1.StateUpdate) {
		u.Connections = server("", nil, nil, "10.0.2.2:6379").State.Connections
	})
	check("after web-1's connections changed")
	fl.list[1].State = withSection(fl.list[1].State, func(u *gridcityv1.StateUpdate) {
		u.Listeners = server("", nil, []string{"tcp 127.0.0.1:6379"}).State.Listeners
	})
	check("after cache-1 listens on loopback only")
	fl.list[0].State = withSection(fl.list[0].State, func(u *gridcityv1.StateUpdate) {
		u.Host = &gridcityv1.HostInfo{Addresses: []string{"10.0.9.9"}}
	})
	check("after app-1's address changed")
	fl.list = append(fl.list, server("db-2", []string{"10.0.1.1"}, []string{"tcp 0.0.0.0:8080"}))
	check("after a server claims app-1's old endpoint")
}

// withSection is a shallow copy of u changed by change.
func withSection(u *gridcityv1.StateUpdate, change func(*gridcityv1.StateUpdate)) *gridcityv1.StateUpdate {
	c := &gridcityv1.StateUpdate{}
	gridcityv1.MergeState(c, u)
	change(c)
	return c
}
