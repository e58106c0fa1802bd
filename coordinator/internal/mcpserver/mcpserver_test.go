package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// nopDispatcher drops commands: these tests stop at the agent boundary.
type nopDispatcher struct{}

func (nopDispatcher) Send(string, *gridcityv1.CoordinatorMessage) error { return nil }

type env struct {
	st    store.Store
	cmds  *command.Service
	fleet *fleet.Fleet
	srv   *httptest.Server
	token string
	deps  Deps
	guard GuardConfig
}

func newEnv(t *testing.T, guard GuardConfig) *env {
	t.Helper()
	return newEnvTimed(t, guard, timing{run: 300 * time.Millisecond, again: 5 * time.Second})
}

// timing is how long run_command and wait_for_command wait, and how often
// a waiting call reports progress (0: the service's default).
type timing struct{ run, again, progress time.Duration }

func newEnvTimed(t *testing.T, guard GuardConfig, tm timing) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := fleet.New(ctx, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	tok := "gc_test-token"
	if err := st.CreateToken(ctx, store.Token{Name: "tester", Scope: store.ScopeOperate, Hash: bearer.Hash(tok), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cmds := command.New(command.Config{ProgressEvery: tm.progress}, st, f, nopDispatcher{}, logger)
	cfg, err := config.Parse(strings.NewReader(testConfig), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prober := resources.New(cfg, logger)
	e := &env{st: st, cmds: cmds, fleet: f, token: tok, guard: guard,
		deps: Deps{Deps: fleetview.Deps{Fleet: f, Store: st, Commands: cmds, Topology: topology.New(cfg, f, prober), Resources: prober, Logger: logger}, Store: st, AppURL: "http://127.0.0.1:4600/", RunWait: tm.run, WaitAgain: tm.again}}
	e.srv = e.replica(t)
	return e
}

// replica starts another /mcp endpoint over the same fleet and store, as a
// second coordinator would serve it.
func (e *env) replica(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(e.deps, e.guard))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// headerTransport adds headers to every request, as an MCP client configured
// with them does.
type headerTransport struct {
	base http.RoundTripper
	h    map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

func (e *env) client(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	return e.clientWith(t, token, nil)
}

// clientWith is client with the SDK client's options (handlers for the
// server's notifications).
func (e *env) clientWith(t *testing.T, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{http.DefaultTransport, map[string]string{"Authorization": "Bearer " + token, "X-Agent-Client": "go-test"}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestListServers(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	id := e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", AgentVersion: "1.0", CommandsEnabled: true, RunAs: "root"})
	e.fleet.Apply("web-1", id, &gridcityv1.StateUpdate{
		Full:            true,
		CollectedUnixMs: time.Now().UnixMilli(),
		Host:            &gridcityv1.HostInfo{Hostname: "web-1", Os: "debian", OsVersion: "12", Kernel: "6.1", Arch: "amd64", BootUnix: time.Now().Add(-time.Hour).Unix()},
		Cpu:             &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(12.34), Load1: 0.5},
		Memory:          &gridcityv1.Memory{TotalBytes: 1 << 30, UsedPercent: 40},
		Disks:           &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", Filesystem: "ext4", UsedPercent: 91}}},
		Listeners:       &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Proto: "tcp", Address: "0.0.0.0", Port: 5432, Process: "postgres"}, {Proto: "tcp", Address: "0.0.0.0", Port: 22, Process: "sshd"}}},
		FailedUnits:     &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "nginx.service", Description: "A high performance web server"}}},
		Updates:         &gridcityv1.Updates{Pending: 7, Security: 2, Manager: "apt"},
		Gaps:            &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "containers", Reason: "docker socket /var/run/docker.sock: no such file or directory"}}},
	})
	id2 := e.fleet.Connect(&gridcityv1.Hello{Name: "db-1"})
	e.fleet.Disconnect("db-1", id2)
	ctx := context.Background()
	now := time.Now()
	for _, n := range []string{"new-1", "old-1"} {
		e.st.CreateJoinToken(ctx, store.JoinToken{Hash: []byte(n), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		if _, err := e.st.Enroll(ctx, []byte(n), now, store.Agent{Name: n, Serial: "01", EnrolledAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	id3 := e.fleet.Connect(&gridcityv1.Hello{Name: "old-1"})
	e.fleet.Disconnect("old-1", id3)
	e.st.RevokeAgent(ctx, "old-1", now)

	cs := e.client(t, e.token)
	call := func(args map[string]any) (fleetview.ListServersOutput, *mcp.CallToolResult) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_servers", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("list_servers(%v): %v %+v", args, err, res)
		}
		var out fleetview.ListServersOutput
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out, res
	}
	out, res := call(map[string]any{})
	if out.Total != 4 || out.Online != 1 || out.ByStatus["offline"] != 2 || out.ByStatus["revoked"] != 1 {
		t.Fatalf("total %d online %d by status %v; want 4, 1 online, 2 offline, 1 revoked", out.Total, out.Online, out.ByStatus)
	}
	// At a glance: the servers needing attention first, the most serious
	// first; web-1 with the figures and reasons that say why.
	var ranked []string
	for _, r := range out.Rows {
		ranked = append(ranked, r.Name)
	}
	if want := []string{"db-1", "new-1", "web-1", "old-1"}; !slices.Equal(ranked, want) {
		t.Errorf("rows %v; want %v", ranked, want)
	}
	if i := slices.Index(ranked, "web-1"); i >= 0 {
		r := out.Rows[i]
		if r.CPU == nil || *r.CPU != 12.3 || r.Mem == nil || *r.Mem != 40 || r.Load == nil || *r.Load != 0.5 ||
			!slices.Equal(r.Why, []string{"1 failed unit: nginx.service", "disk / 91%", "2 security updates"}) {
			t.Errorf("web-1's row %+v (why %q)", r, r.Why)
		}
	}
	// The text content is the compact rendering, with the same facts.
	text := res.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"4 servers: 1 online, 2 offline, 1 revoked", "web-1", "1 failed unit: nginx.service", "12.3"} {
		if !strings.Contains(text, want) {
			t.Errorf("text content lacks %q:\n%s", want, text)
		}
	}
	var views []fleetview.ServerView
	for _, n := range []string{"db-1", "new-1", "old-1", "web-1"} {
		one, _ := call(map[string]any{"name": n})
		if len(one.Servers) != 1 || one.Rows != nil {
			t.Fatalf("list_servers {name: %s}: %d servers, %d rows; want that one in full", n, len(one.Servers), len(one.Rows))
		}
		views = append(views, one.Servers[0])
	}
	db, fresh, old, web := views[0], views[1], views[2], views[3]
	if fresh.Name != "new-1" || fresh.Status != "offline" || len(fresh.Gaps) != 1 || !strings.Contains(fresh.Gaps[0].Reason, "never connected") {
		t.Errorf("enrolled, never connected: got %+v", fresh)
	}
	if old.Name != "old-1" || old.Status != "revoked" {
		t.Errorf("revoked: got %s %s; want old-1 revoked", old.Name, old.Status)
	}
	if db.Name != "db-1" || db.Status != "offline" {
		t.Errorf("got %s %s; want db-1 offline", db.Name, db.Status)
	}
	if web.Status != "online" || web.OS == nil || web.OS.Name != "debian" || web.CPU == nil || web.CPU.BusyPercent == nil || *web.CPU.BusyPercent != 12.3 || web.Updates == nil || web.Updates.Security != 2 {
		t.Errorf("web-1 = %+v", web)
	}
	if web.UptimeSeconds == nil || *web.UptimeSeconds < 3590 || *web.UptimeSeconds > 3700 {
		t.Errorf("uptime %v; want about 3600 from the boot time", web.UptimeSeconds)
	}
	if len(web.Listening) != 2 || web.Listening[0].Port != 22 {
		t.Errorf("listening %+v; want sorted by port", web.Listening)
	}
	// The state here has no processes section: that gap says so.
	web.Gaps = slices.DeleteFunc(web.Gaps, func(g fleetview.GapView) bool { return g.Check == "processes" })
	if len(web.FailedUnits) != 1 || len(web.Gaps) != 1 || web.Gaps[0].Check != "containers" {
		t.Errorf("failed units %+v gaps %+v", web.FailedUnits, web.Gaps)
	}
}

func TestToolsHaveTiersAndMatchingAnnotations(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	cs := e.client(t, e.token)
	listed, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]Tier{}
	for _, tl := range tools {
		if tl.tier != TierReadOnly && tl.tier != TierGated {
			t.Errorf("tool %s has no tier", tl.name)
		}
		tiers[tl.name] = tl.tier
	}
	if len(listed.Tools) != len(tools) {
		t.Errorf("listed %d tools; the list has %d", len(listed.Tools), len(tools))
	}
	for _, tl := range listed.Tools {
		tier, ok := tiers[tl.Name]
		if !ok {
			t.Errorf("tool %s is served but not in the tool list", tl.Name)
			continue
		}
		a := tl.Annotations
		if a == nil || a.Title == "" || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("tool %s: annotations must be set explicitly, got %+v", tl.Name, a)
			continue
		}
		if a.ReadOnlyHint != (tier == TierReadOnly) {
			t.Errorf("tool %s: readOnlyHint %v disagrees with tier %s", tl.Name, a.ReadOnlyHint, tier)
		}
		if tl.OutputSchema == nil || tl.Description == "" {
			t.Errorf("tool %s: needs a description and an output schema", tl.Name)
		}
		if tl.Title == "" {
			t.Errorf("tool %s: needs a title", tl.Name)
		}
		if out, _ := json.Marshal(tl.OutputSchema); strings.Contains(string(out), `"null"`) {
			t.Errorf("tool %s: output schema allows null somewhere: %s", tl.Name, out)
		}
		in, _ := json.Marshal(tl.InputSchema)
		if !strings.Contains(string(in), `"additionalProperties":false`) {
			t.Errorf("tool %s: input schema must forbid additional properties: %s", tl.Name, in)
		}
	}
}

func TestGuard(t *testing.T) {
	g := DefaultGuardConfig()
	g.MaxBodyBytes = 4096
	g.RatePerToken, g.BurstPerToken = rate.Every(time.Hour), 3
	g.RateFailedAuth, g.BurstFailedAuth = rate.Every(time.Hour), 3
	e := newEnv(t, g)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(body string, h map[string]string) (int, string) {
		req, _ := http.NewRequest("POST", e.srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	auth := map[string]string{"Authorization": "Bearer " + e.token}
	with := func(k, v string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + e.token, k: v}
	}
	tests := []struct {
		name string
		body string
		h    map[string]string
		code int
		text string
	}{
		{"no token", initialize, nil, 401, "no bearer token"},
		{"basic auth", initialize, map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}, 401, "no bearer token"},
		{"wrong token", initialize, map[string]string{"Authorization": "Bearer gc_wrong"}, 401, "unknown or revoked token"},
		{"bad origin", initialize, with("Origin", "https://evil.example"), 403, "may not call this endpoint"},
		{"rebinding host", initialize, with("Host", "evil.example:4600"), 403, "DNS rebinding"},
		{"huge body", `{"x":"` + strings.Repeat("a", 5000) + `"}`, auth, 413, "over the limit"},
		{"loopback origin", initialize, with("Origin", "http://localhost:4600"), 200, ""},
		{"good", initialize, auth, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(tt.body, tt.h)
			if code != tt.code || !strings.Contains(body, tt.text) {
				t.Fatalf("got %d %q; want %d with %q", code, body, tt.code, tt.text)
			}
		})
	}
	// The burst of 3 per token is spent (loopback origin, good, and one
	// more); the next is refused with 429.
	post(initialize, auth)
	if code, body := post(initialize, auth); code != 429 {
		t.Fatalf("got %d %q; want 429", code, body)
	}
	// Failed authentications are limited per address too.
	if code, _ := post(initialize, nil); code != 429 {
		t.Fatalf("got %d; want 429 after repeated failed authentication", code)
	}
}

func TestRevokedTokenRefused(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.client(t, e.token) // works
	if err := e.st.RevokeToken(context.Background(), "tester", time.Now()); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: headerTransport{http.DefaultTransport, map[string]string{"Authorization": "Bearer " + e.token}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	if _, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: hc}, nil); err == nil {
		t.Fatal("revoked token connected")
	}
}

func TestClientName(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "unknown"},
		{"claude-code", "claude-code"},
		{"evil\x1b[31m\nname", "evil[31mname"},
		{strings.Repeat("é", 100), strings.Repeat("é", 64)},
	} {
		h := http.Header{}
		h.Set("X-Agent-Client", tt.in)
		if got := ClientName(h); got != tt.want {
			t.Errorf("ClientName(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func callJSON(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, CommandResult) {
	t.Helper()
	return callParams(t, cs, &mcp.CallToolParams{Name: name, Arguments: args})
}

func TestRunCommandWaitingThenResult(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	progressed := make(chan struct{}, 1)
	cs := e.clientWith(t, e.token, &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case progressed <- struct{}{}:
		default:
		}
	}})

	// Errors are isError with a message and no structured content.
	res, _ := callJSON(t, cs, "run_command", map[string]any{"server": "web-3", "command": "uptime", "reason": "look", "timeout_seconds": 10})
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown server "web-3"; known servers: web-1`) {
		t.Fatalf("unknown server: %+v", res)
	}

	res, out := callJSON(t, cs, "run_command", map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10})
	if res.IsError || out.Status != "waiting" || out.RequestID == "" || !strings.Contains(out.Next, "wait_for_command") {
		t.Fatalf("got %+v %+v", res, out)
	}
	pending, _ := e.cmds.Pending(context.Background())
	if len(pending) != 1 || pending[0].Client != "go-test" || pending[0].Token != "tester" {
		t.Fatalf("pending %+v; want the client and token named", pending)
	}
	go func() {
		// The call's first progress comes once it has read the request
		// as pending: what follows has to wake it.
		select {
		case <-progressed:
		case <-t.Context().Done():
			return
		}
		ctx := context.Background()
		e.cmds.Approve(ctx, out.RequestID, "alice", command.Approval{Note: "ok"})
		e.cmds.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: out.RequestID, Kind: gridcityv1.CommandEvent_KIND_STARTED})
		e.cmds.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: out.RequestID, Kind: gridcityv1.CommandEvent_KIND_OUTPUT, Data: []byte(" 10:00 up 3 days\n")})
		e.cmds.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: out.RequestID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutTotal: 17, DurationMs: 4})
	}()
	wait := &mcp.CallToolParams{Name: "wait_for_command", Arguments: map[string]any{"request_id": out.RequestID}}
	wait.SetProgressToken("w1")
	res, got := callParams(t, cs, wait)
	if res.IsError || got.Status != "completed" || got.ExitCode == nil || *got.ExitCode != 0 || got.Stdout != " 10:00 up 3 days\n" || got.Note != "ok" {
		t.Fatalf("got %+v", got)
	}
	res, _ = callJSON(t, cs, "wait_for_command", map[string]any{"request_id": "cmd_nope"})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "no command request") {
		t.Fatalf("unknown id: %+v", res)
	}
}

func TestReadTokenCannotRunCommands(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	ctx := context.Background()
	if err := e.st.CreateToken(ctx, store.Token{Name: "reader", Scope: store.ScopeRead, Hash: bearer.Hash("gc_read"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cs := e.client(t, "gc_read")
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range listed.Tools {
		if tl.Name == "run_command" || tl.Name == "wait_for_command" {
			t.Errorf("read token lists %s", tl.Name)
		}
	}
	for _, name := range []string{"run_command", "wait_for_command"} {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"server": "x", "command": "id", "reason": "r", "timeout_seconds": 1, "request_id": "cmd_x"}})
		if err == nil || !strings.Contains(err.Error(), name+" is not available to this token: its scope is read") || !strings.Contains(err.Error(), "--scope operate") {
			t.Errorf("read token calling %s: %v; want a refusal that names the scope", name, err)
		}
	}
	// A tool that does not exist is still the SDK's unknown tool.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "rm_rf"`) {
		t.Errorf("unknown tool: %v", err)
	}
}

func TestRunCommandSendsProgress(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	var mu sync.Mutex
	var got []string
	hc := &http.Client{Transport: headerTransport{http.DefaultTransport, map[string]string{"Authorization": "Bearer " + e.token}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params.Message)
			mu.Unlock()
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10}}
	params.SetProgressToken("p1")
	if _, err := cs.CallTool(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || !strings.Contains(got[0], "approve it in the gridcity app") {
		t.Fatalf("progress notifications %q; want one saying it waits for approval", got)
	}
}

const testConfig = `
districts:
  - id: shop
    name: Shop
    members: [api-1, orders-db, shop.example]
resources:
  - id: orders-db
    kind: database
    engine: postgres
    target: 10.0.4.20:5432
  - id: cache
    kind: database
    engine: redis
    target: 10.0.4.30:6379
  - id: shop.example
    kind: probe
    engine: https
    target: https://shop.example/health
links:
  - {from: api-1, to: orders-db}
  - {from: shop.example, to: api-1}
runbooks:
  - name: restart-postgres
    description: Restart PostgreSQL on a database server
    command: systemctl restart postgresql
    readOnly: false
    match: {engine: postgres}
`

func TestTopologyAndRunbooks(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	id := e.fleet.Connect(&gridcityv1.Hello{Name: "api-1", District: "shop"})
	// api-1 talks to the cache: a discovered link.
	e.fleet.Apply("api-1", id, &gridcityv1.StateUpdate{Full: true, Connections: &gridcityv1.Connections{Items: []*gridcityv1.Connection{
		{RemoteAddress: "10.0.4.30", RemotePort: 6379, Count: 3}, {RemoteAddress: "10.0.4.20", RemotePort: 5432, Count: 1}, {RemoteAddress: "192.0.2.1", RemotePort: 443, Count: 1}}}})
	cs := e.client(t, e.token)
	call := func(args map[string]any) (*mcp.CallToolResult, fleetview.TopologyOutput) {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_topology", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var out fleetview.TopologyOutput
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		return res, out
	}
	_, all := call(map[string]any{})
	if len(all.Districts) != 1 || strings.Join(all.Districts[0].Members, ",") != "api-1,orders-db,shop.example" {
		t.Fatalf("districts %+v", all.Districts)
	}
	var links []string
	for _, l := range all.Links {
		links = append(links, l.From+">"+l.To+":"+l.Source)
	}
	if got := strings.Join(links, " "); got != "api-1>cache:discovered api-1>orders-db:declared shop.example>api-1:declared" {
		t.Fatalf("links %s", got)
	}
	if all.LinksTotal != 3 {
		t.Fatalf("linksTotal %d; want 3", all.LinksTotal)
	}
	_, shop := call(map[string]any{"district": "shop"})
	if len(shop.Districts) != 1 || shop.LinksTotal != 3 {
		t.Fatalf("district shop: %+v", shop)
	}
	if res, _ := call(map[string]any{"district": "shpo"}); !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown district "shpo"; districts: shop`) {
		t.Fatalf("unknown district: %+v", res.Content)
	}
	_, db := call(map[string]any{"target": "orders-db"})
	if db.Kind != "database" || strings.Join(db.UsedBy, ",") != "api-1" || strings.Join(db.BlastRadius, ",") != "api-1,shop.example" || len(db.Uses) != 0 {
		t.Fatalf("orders-db %+v", db)
	}
	res, _ := call(map[string]any{"target": "orders-dbb"})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown target "orders-dbb"; known targets: orders-db`) {
		t.Fatalf("unknown target: %+v", res.Content)
	}

	rb, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_runbooks", Arguments: map[string]any{}})
	if err != nil || rb.IsError {
		t.Fatal(err, rb)
	}
	var out fleetview.RunbooksOutput
	b, _ := json.Marshal(rb.StructuredContent)
	json.Unmarshal(b, &out)
	if len(out.Runbooks) != 1 || out.Runbooks[0].Match["engine"] != "postgres" || out.Runbooks[0].ReadOnly {
		t.Fatalf("runbooks %+v", out)
	}
}
