package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TestApprovalWhilePostgresIsDownIsRefusedClearly: with the app on a real
// PostgreSQL that stops, an approval and a denial are answered 503 with
// what is wrong (the store at HOST:PORT is unreachable), what waits and
// what did not happen, and no command reaches the agent; the cards say
// the same. Once PostgreSQL is back, the same session approves, and the
// command is sent once.
func TestApprovalWhilePostgresIsDownIsRefusedClearly(t *testing.T) {
	srv := pgtest.Own(t)
	st, err := store.OpenPostgres(context.Background(), srv.Database(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvOn(t, Config{}, st)
	c := e.login(t)
	r := e.submit(t, command.Submission{})

	srv.Halt()
	down := "the store (PostgreSQL at " + srv.Addr() + ") is unreachable: approvals and commands wait until it is back; "
	for _, call := range []struct {
		rq   req
		want string
	}{
		{req{method: "POST", path: "/api/requests/" + r.ID + "/approve", body: map[string]string{"note": "go"}, cookie: c}, down + "nothing was approved"},
		{req{method: "POST", path: "/api/requests/" + r.ID + "/deny", body: map[string]string{"note": "no"}, cookie: c}, down + "nothing was denied"},
		{req{method: "GET", path: "/api/requests?status=pending", cookie: c}, down + "nothing can be read"},
	} {
		got := e.do(t, call.rq)
		if got.code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s with PostgreSQL down: %d %s; want 503", call.rq.method, call.rq.path, got.code, got.body)
		}
		if msg := got.errorText(t); !strings.HasPrefix(msg, call.want) || strings.Contains(msg, srv.Password()) {
			t.Errorf("%s %s with PostgreSQL down says %q; want it to start %q, without the password", call.rq.method, call.rq.path, msg, call.want)
		}
	}
	if rc := e.agent.last(); rc != nil {
		t.Fatalf("the agent was sent %v with PostgreSQL down", rc)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	got := e.do(t, req{method: "POST", path: "/api/requests/" + r.ID + "/approve", body: map[string]string{"note": "go"}, cookie: c})
	if got.code != http.StatusOK {
		t.Fatalf("approve once PostgreSQL is back: %d %s; want 200", got.code, got.body)
	}
	if e.agent.mu.Lock(); len(e.agent.sent) != 1 || e.agent.sent[0].GetRequestId() != r.ID {
		t.Errorf("the agent was sent %v; want %s once", e.agent.sent, r.ID)
	}
	e.agent.mu.Unlock()
}
