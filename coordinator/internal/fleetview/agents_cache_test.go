package fleetview

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// countingStore counts the reads of every agent.
type countingStore struct {
	*store.SQLite
	reads atomic.Int64
}

func (c *countingStore) Agents(ctx context.Context) ([]store.Agent, error) {
	c.reads.Add(1)
	return c.SQLite.Agents(ctx)
}

// The cache reads the agents again only when they changed, and a
// revocation made elsewhere (the CLI, another replica) shows at the next
// read.
func TestAgentsCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sq, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &countingStore{SQLite: sq}
	now := time.Now()
	for _, name := range []string{"web-1", "web-2"} {
		tok := []byte("tok-" + name)
		if err := sq.CreateJoinToken(ctx, store.JoinToken{Hash: tok, CreatedAt: now, ExpiresAt: now.Add(time.Hour), SingleUse: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := sq.Enroll(ctx, tok, now, store.Agent{Name: name, Serial: name, EnrolledAt: now, Key: []byte(name)}); err != nil {
			t.Fatal(err)
		}
	}
	c := NewAgentsCache()
	read := func() []store.Agent {
		t.Helper()
		a, err := c.read(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := read(); len(a) != 2 || a[0].Revoked() {
		t.Fatalf("agents %+v; want web-1 and web-2, neither revoked", a)
	}
	read()
	read()
	if n := st.reads.Load(); n != 1 {
		t.Errorf("%d reads of every agent for three unchanged calls; want 1", n)
	}
	// Revoked by another process: the same store file, another handle.
	other, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.RevokeAgent(ctx, "web-1", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if a := read(); !a[0].Revoked() {
		t.Errorf("web-1 %+v after its revocation; want it revoked at the next read", a[0])
	}
	if n := st.reads.Load(); n != 2 {
		t.Errorf("%d reads of every agent; want 2", n)
	}
	var none *AgentsCache
	if _, err := none.read(ctx, st); err != nil || st.reads.Load() != 3 {
		t.Errorf("a nil cache: %v, %d reads; want every call to read", err, st.reads.Load())
	}
}
