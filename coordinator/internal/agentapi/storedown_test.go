package agentapi

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// agentsUnreadable fails reading agents while down, as PostgreSQL's
// store does while it restarts; calls counts the reads.
type agentsUnreadable struct {
	Store
	down  atomic.Bool
	calls atomic.Int64
}

func (a *agentsUnreadable) Agent(ctx context.Context, name string) (store.Agent, error) {
	a.calls.Add(1)
	if a.down.Load() {
		return store.Agent{}, &store.UnavailableError{Addr: "db:5432", Err: errors.New("connection refused")}
	}
	return a.Store.Agent(ctx, name)
}

// TestStoreDownKeepsConnectedAgents: while the store cannot be read, the
// certificate re-checks of live streams fail, and the streams stay (an
// unreadable store is not a revocation); once it answers again, the next
// check ends a stream whose certificate was revoked meanwhile.
func TestStoreDownKeepsConnectedAgents(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RevocationCheck = 50 * time.Millisecond })
	st := &agentsUnreadable{Store: h.st}
	h.api.store = st
	s := connect(t, h.dial(h.mustEnroll("web-1")))
	s.Send(hello("web-1"))
	s.Recv()
	st.down.Store(true)
	from := st.calls.Load()
	waitFor(t, 5*time.Second, func() bool { return st.calls.Load() >= from+4 })
	if srv, _ := h.fleet.Server("web-1"); !srv.Online || len(h.api.Connected()) != 1 {
		t.Fatalf("after failed re-checks: online %v, %d streams; want the stream kept", srv.Online, len(h.api.Connected()))
	}
	h.st.RevokeAgent(context.Background(), "web-1", time.Now())
	st.down.Store(false)
	var err error
	for err == nil {
		_, err = s.Recv()
	}
	wantCode(t, err, codes.PermissionDenied, "revoked")
}
