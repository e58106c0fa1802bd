// Package fleettest builds fleet models for tests: simulated servers
// (simfleet's agents) in a fleet over a fresh SQLite store. Harness: no
// product binary imports it.
package fleettest

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/store"
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
