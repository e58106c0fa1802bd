// Package fleettest builds fleet models for tests: simulated servers
// (simfleet's agents) in a fleet over a fresh SQLite store. Harness: no
// product binary imports it.
package fleettest

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// Simulated is n simulated servers in a fleet model over a fresh SQLite store
// in tb's temporary directory, each with the state state makes for server
// i, in districts of 100: one in a hundred is offline, one in 500 was
// revoked and another never connected, as in a fleet in use. It returns
// the enrolled agents rather than writing them to the store: enrolling
// thousands in SQLite, one fsync each, would make the fixture slower than
// what it is for.
func Simulated(tb testing.TB, n int, state func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate) (*fleet.Fleet, *store.SQLite, []store.Agent) {
	tb.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	f, err := fleet.New(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	var agents []store.Agent
	now := time.Now()
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range n {
		name := simfleet.Name(i)
		a := store.Agent{Name: name, Serial: "01", EnrolledAt: now.Add(-48 * time.Hour)}
		if i%500 == 100 {
			a.RevokedAt = now.Add(-time.Hour)
		}
		agents = append(agents, a)
		if i%500 == 250 {
			continue // enrolled, never connected
		}
		id := f.Connect(simfleet.Hello(i, "0.9.0"))
		f.Apply(name, id, state(r, i, now))
		if i%100 == 42 || a.Revoked() {
			f.Disconnect(name, id)
		}
	}
	return f, st, agents
}

// Troubled is simfleet's state for server i of n with its trouble (open
// and ended attacks, failed units), for Simulated.
func Troubled(n int) func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate {
	return func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate {
		st := simfleet.State(i, n, r, now)
		simfleet.AddTrouble(st, i, now)
		return st
	}
}

// Streams connects each of the first n simulated servers that is online
// again, with the state it has, and returns the stream ids: what a test
// that writes as the agents do needs.
func Streams(f *fleet.Fleet, n int) map[string]uint64 {
	streams := map[string]uint64{}
	for i := range n {
		name := simfleet.Name(i)
		if s, ok := f.Server(name); ok && s.Online {
			streams[name] = f.Connect(simfleet.Hello(i, "0.9.0"))
			f.Apply(name, streams[name], s.State)
		}
	}
	return streams
}

// Tracker is an incident tracker on st judging topo's graph, as serve
// wires it.
func Tracker(st incidents.Store, topo *topology.Source, logger *slog.Logger) *incidents.Tracker {
	return incidents.New(st, func() (graph.Report, error) {
		g, err := topo.Graph()
		if err != nil {
			return graph.Report{}, err
		}
		return g.Incidents(), nil
	}, logger)
}

// AcceptAll accepts and closes every connection on l until it is closed:
// a target that answers a TCP connect and nothing else.
func AcceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
