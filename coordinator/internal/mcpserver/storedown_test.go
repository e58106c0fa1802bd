package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// TestListServersWhileTheStoreIsDownSaysStale: two replicas' fleets on a
// real PostgreSQL; web-1 streams to A, web-2 to B, and a client asks B.
// With PostgreSQL stopped, B's list_servers still answers: web-1 online,
// held by A, as last read, and a gap that says the store at HOST:PORT is
// unreachable since when and that A's servers are stale; the text says
// it too. incident_report answers from memory, saying the history is
// left out. A token B never verified is refused, saying why. run_command
// is refused with what is wrong, what waits and that nothing was
// recorded. Once PostgreSQL is back the gap is gone.
func TestListServersWhileTheStoreIsDownSaysStale(t *testing.T) {
	srv := pgtest.Own(t)
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, srv.Database(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	tok := "gc_test-token"
	unseen := "gc_unseen-token"
	for name, tk := range map[string]string{"tester": tok, "unseen": unseen} {
		if err := st.CreateToken(ctx, store.Token{Name: name, Scope: store.ScopeOperate, Hash: bearer.Hash(tk), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	fleets := map[string]*fleet.Fleet{}
	for _, id := range []string{"a", "b"} {
		if err := st.HeartbeatReplica(ctx, store.Replica{ID: id, GRPC: "127.0.0.1:4601", HTTP: "coord-" + id + ":4600", HeartbeatAt: time.Now()}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		f, err := fleet.New(ctx, st, logger, fleet.WithStartupGrace(0))
		if err != nil {
			t.Fatal(err)
		}
		f.Share(id, 15*time.Second)
		fleets[id] = f
	}
	a, b := fleets["a"], fleets["b"]
	for name, f := range map[string]*fleet.Fleet{"web-1": a, "web-2": b} {
		s := f.Connect(&gridcityv1.Hello{Name: name, CommandsEnabled: true, RunAs: "root"})
		f.Apply(name, s, &gridcityv1.StateUpdate{Full: true, Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100, UsedPercent: 40}}}})
	}
	// One tick of each fleet's Run; want is what each reload meets (a
	// flush with nothing to write does not reach the store).
	tick := func(want error) {
		t.Helper()
		for _, f := range []*fleet.Fleet{a, b} {
			if err := f.Flush(ctx); err != nil && !errors.Is(err, want) {
				t.Fatalf("flush: %v; want %v", err, want)
			}
			if err := f.Reload(ctx); !errors.Is(err, want) {
				t.Fatalf("reload: %v; want %v", err, want)
			}
		}
	}
	tick(nil)
	cmds := command.New(command.Config{}, st, b, nopDispatcher{}, logger)
	cfg := config.Default()
	prober := resources.New(cfg, logger)
	topo := topology.New(cfg, b, prober)
	tracker := fleettest.Tracker(st, topo, logger)
	e := &env{st: st, cmds: cmds, fleet: b, token: tok, guard: DefaultGuardConfig(),
		deps: Deps{Deps: fleetview.Deps{Fleet: b, Store: st, Commands: cmds, Topology: topo, Resources: prober, Incidents: tracker, Logger: logger}, Store: st, AppURL: "http://coord-b:4600/", RunWait: 300 * time.Millisecond, WaitAgain: time.Second}}
	e.srv = e.replica(t)
	cs := e.client(t, tok)
	list := func(args map[string]any) (fleetview.ListServersOutput, string) {
		t.Helper()
		out, res := mustList(t, cs, args)
		return out, res.Content[0].(*mcp.TextContent).Text
	}
	if out, _ := list(nil); out.Online != 2 || len(out.Gaps) != 0 {
		t.Fatalf("with the store up: %d online, gaps %v; want both online, no gap", out.Online, out.Gaps)
	}

	srv.Halt()
	tick(store.ErrUnavailable)
	want := "the store (PostgreSQL at " + srv.Addr() + ") is unreachable since "
	for _, args := range []map[string]any{nil, {"name": "web-1"}, {"status": "online"}} {
		out, text := list(args)
		if len(out.Gaps) != 1 || out.Gaps[0].Check != "store" || !strings.HasPrefix(out.Gaps[0].Reason, want) || !strings.Contains(out.Gaps[0].Reason, "stale") {
			t.Fatalf("list_servers(%v) with the store down: gaps %+v; want one that starts %q and says other coordinators' servers are stale", args, out.Gaps, want)
		}
		if !strings.Contains(text, "not checked (store): "+want) {
			t.Errorf("list_servers(%v) text with the store down does not say so:\n%s", args, text)
		}
		if strings.Contains(text, srv.Password()) || strings.Contains(out.Gaps[0].Reason, srv.Password()) {
			t.Errorf("list_servers(%v) with the store down carries the password", args)
		}
	}
	out, text := list(nil)
	t.Logf("list_servers with the store down:\n%s", text)
	out, _ = list(map[string]any{"name": "web-1"})
	if len(out.Servers) != 1 || out.Servers[0].Status != fleet.StatusOnline || len(out.Servers[0].Disks) != 1 {
		t.Fatalf("web-1, held by the other replica, with the store down: %+v; want online with its disk, as last read", out.Servers)
	}
	if out, _ := list(nil); out.Online != 2 || out.Total != 2 {
		t.Fatalf("the fleet with the store down: %d of %d online; want both servers, online", out.Online, out.Total)
	}
	// incident_report judges from memory and leaves out the history.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "incident_report"})
	if err != nil || res.IsError {
		t.Fatalf("incident_report with the store down: %v %+v; want an answer", err, res)
	}
	var inc fleetview.IncidentOutput
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &inc); err != nil || len(inc.Gaps) != 1 || !strings.HasPrefix(inc.Gaps[0].Reason, want) || !strings.Contains(inc.Gaps[0].Reason, "recent incidents are left out") {
		t.Fatalf("incident_report with the store down: gaps %+v, %v; want one saying the store is unreachable and recent incidents are left out", inc.Gaps, err)
	}

	// A token this replica has not verified before the outage cannot be
	// checked: refused, saying why.
	rq, _ := http.NewRequest("POST", e.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	rq.Header.Set("Authorization", "Bearer "+unseen)
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Accept", "application/json, text/event-stream")
	if got, err := http.DefaultClient.Do(rq); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(got.Body)
		got.Body.Close()
		if got.StatusCode == http.StatusOK || !strings.Contains(string(body), "the store (PostgreSQL at "+srv.Addr()+") is unreachable: a token this coordinator has not seen") {
			t.Errorf("a token not verified before the outage: %d %s; want a refusal saying the store is unreachable", got.StatusCode, body)
		}
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-2", "command": "uptime", "reason": "look", "timeout_seconds": 5}})
	if err != nil || !res.IsError || res.StructuredContent != nil {
		t.Fatalf("run_command with the store down: %v %+v; want isError without structured content", err, res)
	}
	t.Logf("run_command with the store down: %s", res.Content[0].(*mcp.TextContent).Text)
	if msg := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(msg, "the store (PostgreSQL at "+srv.Addr()+") is unreachable: approvals and commands wait until it is back; "+command.NothingRequested) {
		t.Fatalf("run_command with the store down says %q; want the store, what waits and that nothing was recorded", msg)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	tick(nil)
	if out, _ := list(nil); out.Online != 2 || len(out.Gaps) != 0 {
		t.Fatalf("with the store back: %d online, gaps %v; want both online, no gap", out.Online, out.Gaps)
	}
}
