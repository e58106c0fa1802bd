package store

import (
	"context"
	"os"
	"testing"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// The behaviour tests run on every engine: the embedded SQLite, and a
// real PostgreSQL (one server for the package's run, a database per test;
// skipped when it is not installed, except in CI).
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// engine is a store implementation under test.
type engine struct {
	name string
	// place makes a new, empty store location and returns its opener:
	// each call opens the same store, closed when the test ends.
	place func(t testing.TB) func(t testing.TB) Store
	// refuseApproval makes the store refuse to write a request whose
	// status is "approved", as a full disk or a lost database would.
	refuseApproval func(t testing.TB, s Store)
}

var engines = []engine{
	{
		name: "sqlite",
		place: func(t testing.TB) func(testing.TB) Store {
			dir := t.TempDir()
			return func(t testing.TB) Store { return open(t, dir) }
		},
		refuseApproval: func(t testing.TB, s Store) {
			if _, err := s.(*SQLite).w.Exec(`CREATE TRIGGER refuse_approval BEFORE UPDATE ON requests WHEN NEW.status = 'approved'
				BEGIN SELECT RAISE(ABORT, 'approvals refused by the test'); END`); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name: "postgres",
		place: func(t testing.TB) func(testing.TB) Store {
			url := pgtest.Database(t)
			return func(t testing.TB) Store { return openPostgres(t, url) }
		},
		refuseApproval: func(t testing.TB, s Store) {
			if _, err := s.(*Postgres).pool.Exec(context.Background(), `ALTER TABLE requests ADD CONSTRAINT refuse_approval CHECK (status <> 'approved')`); err != nil {
				t.Fatal(err)
			}
		},
	},
}

func openPostgres(t testing.TB, url string) *Postgres {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eachEngine runs f on a new, empty store of each engine.
func eachEngine(t *testing.T, f func(t *testing.T, s Store)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, e.place(t)(t)) })
	}
}

// eachPlace runs f with the opener of a new, empty store of each engine,
// for tests that close a store and open it again.
func eachPlace(t *testing.T, f func(t *testing.T, open func(testing.TB) Store)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, e.place(t)) })
	}
}

// eachEngineWith is eachEngine with the engine itself, for tests that
// inject a fault the engine's own way.
func eachEngineWith(t *testing.T, f func(t *testing.T, e engine, s Store)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, e, e.place(t)(t)) })
	}
}
