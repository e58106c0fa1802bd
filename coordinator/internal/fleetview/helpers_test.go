package fleetview

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The fixtures of the read model's tests; mcpserver's tests build the same
// fleets for the tools.

// nopDispatcher drops commands: these tests stop at the agent boundary.
type nopDispatcher struct{}

func (nopDispatcher) Send(string, *gridcityv1.CoordinatorMessage) error { return nil }

// fleetAndStore is the store of the fleet model and of the read model,
// which the tests wire to one store.
type fleetAndStore interface {
	fleet.Store
	Store
}

// enrolledStore answers Agents from memory: enrolling thousands of agents
// in SQLite, one fsync each, would make the fixture slower than the call.
type enrolledStore struct {
	fleetAndStore
	agents []store.Agent
}

func (s enrolledStore) Agents(context.Context) ([]store.Agent, error) { return s.agents, nil }

// fleetOf is n simulated servers (gridcity-bench's agents) with the state
// state makes for server i: one in a hundred offline, one in 500 revoked
// and another never connected.
func fleetOf(tb testing.TB, n int, state func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate) Deps {
	tb.Helper()
	f, st, agents := fleettest.Simulated(tb, n, state)
	es := enrolledStore{fleetAndStore: st, agents: agents}
	logger := slog.New(slog.DiscardHandler)
	return Deps{Fleet: f, Store: es, Logger: logger}
}
