package stdiobridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

const (
	operateToken = "gc_operate-test"
	readToken    = "gc_read-test"
)

// testCoordinator is the coordinator's MCP endpoint in process, on a fixed
// address so that it can stop and come back there like a restarted
// `gridcity serve` (sessions lost, store kept).
type testCoordinator struct {
	t     *testing.T
	data  string
	addr  string
	st    store.Store
	fleet *fleet.Fleet
	cmds  *command.Service
	deps  mcpserver.Deps
	mu    sync.Mutex
	srv   *http.Server
	// stateless: the endpoint is the product's /mcp handler, which
	// serves the stateless revision (2026-07-28) beside sessions, so the
	// bridge speaks 2026-07-28 to it; otherwise it serves only sessions
	// (2025-11-25 and before), as a coordinator of the previous release.
	stateless bool
}

type dropDispatcher struct{}

func (dropDispatcher) Send(string, *gridcityv1.CoordinatorMessage) error { return nil }

func newTestCoordinator(t *testing.T, runWait time.Duration) *testCoordinator {
	t.Helper()
	ctx := context.Background()
	c := &testCoordinator{t: t, data: t.TempDir()}
	st, err := store.OpenSQLite(ctx, c.data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	fl, err := fleet.New(ctx, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	for name, scope := range map[string]store.Scope{operateToken: store.ScopeOperate, readToken: store.ScopeRead} {
		if err := st.CreateToken(ctx, store.Token{Name: strings.TrimPrefix(name, "gc_"), Scope: scope, Hash: bearer.Hash(name), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	prober := resources.New(cfg, logger)
	c.st, c.fleet = st, fl
	c.cmds = command.New(command.Config{}, st, fl, dropDispatcher{}, logger)
	c.deps = mcpserver.Deps{Deps: fleetview.Deps{Fleet: fl, Store: st, Commands: c.cmds, Topology: topology.New(cfg, fl, prober), Resources: prober, Logger: logger}, Store: st, AppURL: "http://127.0.0.1:4600/", RunWait: runWait, WaitAgain: 300 * time.Millisecond}
	fl.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	ln.Close()
	t.Cleanup(c.stop)
	return c
}

// forEachCoordinator runs f, in parallel subtests, with a coordinator of
// each era, not started yet.
func forEachCoordinator(t *testing.T, runWait time.Duration, f func(*testing.T, *testCoordinator)) {
	for _, era := range eras {
		t.Run("coordinator="+era.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCoordinator(t, runWait)
			c.stateless = era.name == "stateless"
			f(t, c)
		})
	}
}

func (c *testCoordinator) endpoint() string { return "http://" + c.addr + "/mcp" }

// start serves on the address with a fresh handler: no session survives.
func (c *testCoordinator) start() {
	c.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was just released; it may linger a moment
		if ln, err = net.Listen("tcp", c.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	mux := http.NewServeMux()
	h := mcpserver.Handler(c.deps, mcpserver.DefaultGuardConfig())
	if !c.stateless {
		read, operate := mcpserver.NewServer(c.deps, store.ScopeRead), mcpserver.NewServer(c.deps, store.ScopeOperate)
		h = mcpserver.Guard(mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
			if caller, ok := mcpserver.CallerFrom(r.Context()); ok && caller.Scope == store.ScopeOperate {
				return operate
			}
			return read
		}, &mcp.StreamableHTTPOptions{}), c.st, mcpserver.DefaultGuardConfig(), c.deps.Logger)
	}
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux}
	c.mu.Lock()
	c.srv = srv
	c.mu.Unlock()
	go srv.Serve(ln)
}

// stop closes the listener and every connection at once, as a coordinator
// that dies does.
func (c *testCoordinator) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv != nil {
		c.srv.Close()
		c.srv = nil
	}
}

// stdioClient is an MCP client on the bridge's stdin and stdout, with
// everything the bridge wrote to stdout kept for checking.
type stdioClient struct {
	*mcp.ClientSession
	stdout       *syncBuffer
	log          *syncBuffer
	progress     chan string
	logs         chan string
	toolsChanged chan struct{}
	served       chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startBridge(t *testing.T, cfg Config) *stdioClient {
	t.Helper()
	return startBridgeAt(t, cfg, "")
}

// startBridgeAt connects the go-sdk client asking for a protocol version:
// "" is the client's default.
func startBridgeAt(t *testing.T, cfg Config, version string) *stdioClient {
	t.Helper()
	ctx := context.Background()
	sc := &stdioClient{stdout: &syncBuffer{}, log: &syncBuffer{}, progress: make(chan string, 10), logs: make(chan string, 10), toolsChanged: make(chan struct{}, 10), served: make(chan error, 1)}
	logger := slog.New(slog.NewTextHandler(sc.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(ctx, asMain(t, cfg, logger), logger)
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	go func() {
		sc.served <- b.Serve(ctx, stdinR, io.MultiWriter(stdoutW, sc.stdout))
		stdoutW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case sc.progress <- req.Params.Message:
			default:
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case sc.toolsChanged <- struct{}{}:
			default:
			}
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case sc.logs <- fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data):
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to the bridge: %v\nlog:\n%s", err, sc.log.String())
	}
	sc.ClientSession = cs
	t.Cleanup(func() {
		cs.Close()
		select {
		case err := <-sc.served:
			if err != nil {
				t.Errorf("bridge ended with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the bridge did not end when its stdin closed")
		}
		// Nothing but JSON-RPC messages reached stdout.
		sc := bufio.NewScanner(strings.NewReader(sc.stdout.String()))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var m struct {
				JSONRPC string `json:"jsonrpc"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
				t.Errorf("stdout line is not a JSON-RPC message: %q", sc.Text())
			}
		}
	})
	return sc
}

func (sc *stdioClient) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := sc.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v\nbridge log:\n%s", name, err, sc.log.String())
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

// direct is a client of the coordinator's HTTP endpoint, for comparison.
func (c *testCoordinator) direct(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: &bridgeTransport{base: http.DefaultTransport, token: token, client: func() string { return "direct" }}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: c.endpoint(), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// eras are the two ways a client speaks MCP: with an initialize handshake
// and a session, or stateless (server/discover, _meta on every request).
var eras = []struct{ name, version string }{
	{"legacy", "2025-11-25"},
	{"stateless", "2026-07-28"},
}

// Both eras of client over stdio, and both eras of coordinator behind the
// bridge: each of the four pairs forwards everything.
func TestStdioBridgeForwardsEverything(t *testing.T) {
	t.Parallel()
	for _, client := range eras {
		for _, coordinator := range eras {
			t.Run("client="+client.name+",coordinator="+coordinator.name, func(t *testing.T) {
				t.Parallel()
				c := newTestCoordinator(t, 300*time.Millisecond)
				c.stateless = coordinator.name == "stateless"
				c.start()
				sc := startBridgeAt(t, Config{Endpoint: c.endpoint(), Token: operateToken, Client: "stdio-test"}, client.version)
				if got := sc.InitializeResult().ProtocolVersion; got != client.version {
					t.Fatalf("the client speaks %s to the bridge; want %s", got, client.version)
				}
				forwardsEverything(t, c, sc)
				if want := "protocol=" + coordinator.version; !strings.Contains(sc.log.String(), want) {
					t.Errorf("the bridge's log lacks %q:\n%s", want, sc.log.String())
				}
			})
		}
	}
}

func forwardsEverything(t *testing.T, c *testCoordinator, sc *stdioClient) {
	ctx := context.Background()

	// Tools, resources and prompts: exactly what the coordinator lists.
	direct := c.direct(t, operateToken)
	lists := func(cs *mcp.ClientSession) string {
		var all []any
		for tl, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, tl)
		}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, r)
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, r)
		}
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, p)
		}
		b, _ := json.Marshal(all)
		return string(b)
	}
	if got, want := lists(sc.ClientSession), lists(direct); got != want {
		t.Errorf("over stdio:\n%s\nover HTTP:\n%s", got, want)
	}

	res := sc.call(t, "list_servers", map[string]any{})
	if res.IsError || !strings.Contains(text(res), "web-1 ") {
		t.Fatalf("list_servers: %+v", res)
	}
	var out struct{ Rows []struct{ Name string } }
	b, _ := json.Marshal(res.StructuredContent)
	if json.Unmarshal(b, &out); len(out.Rows) != 1 || out.Rows[0].Name != "web-1" {
		t.Errorf("structuredContent %s", b)
	}
	// The coordinator's own errors pass through as isError results.
	res = sc.call(t, "diagnose", map[string]any{"target": "web-9"})
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(text(res), `"web-9"`) {
		t.Errorf("diagnose web-9: %+v", res)
	}

	rr, err := sc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gridcity://servers/web-1"})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"name":"web-1"`) {
		t.Errorf("read gridcity://servers/web-1: %v %+v", err, rr)
	}
	if _, err := sc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gridcity://servers/web-9"}); err == nil || !strings.Contains(err.Error(), `unknown server "web-9"`) {
		t.Errorf("read an unknown server: %v", err)
	}
	pr, err := sc.GetPrompt(ctx, &mcp.GetPromptParams{Name: "triage_incident", Arguments: map[string]string{"target": "web-1"}})
	if err != nil || len(pr.Messages) != 1 || !strings.Contains(pr.Messages[0].Content.(*mcp.TextContent).Text, `"web-1"`) {
		t.Errorf("triage_incident: %v %+v", err, pr)
	}

	// run_command: the client's name reaches the card, progress comes back.
	p := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10}}
	p.SetProgressToken("run-1")
	res, err = sc.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("run_command: %v %+v", err, res)
	}
	var run struct{ Status, RequestID string }
	b, _ = json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &run)
	if run.Status != "waiting" || run.RequestID == "" {
		t.Fatalf("run_command: %s", b)
	}
	select {
	case msg := <-sc.progress:
		if !strings.Contains(msg, "approve") {
			t.Errorf("progress %q", msg)
		}
	case <-time.After(5 * time.Second):
		t.Error("no progress notification came through the bridge")
	}
	pending, _ := c.cmds.Pending(ctx)
	if len(pending) != 1 || pending[0].Client != "stdio-test" || pending[0].Token != "operate-test" {
		t.Errorf("pending %+v; want the bridge's client name and token", pending)
	}
	if _, err := c.cmds.Deny(ctx, run.RequestID, "alice", "not now"); err != nil {
		t.Fatal(err)
	}
	res = sc.call(t, "wait_for_command", map[string]any{"request_id": run.RequestID})
	if b, _ = json.Marshal(res.StructuredContent); res.IsError || !strings.Contains(string(b), `"status":"denied"`) || !strings.Contains(string(b), "not now") {
		t.Errorf("wait_for_command: %s %+v", b, res)
	}
}

func TestStdioBridgeReadToken(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 300*time.Millisecond)
	c.start()
	sc := startBridge(t, Config{Endpoint: c.endpoint(), Token: readToken})
	if got := toolNames(t, sc.ClientSession); strings.Contains(got, "run_command") || strings.Contains(got, "wait_for_command") || !strings.Contains(got, "list_servers") {
		t.Errorf("a read token lists %s", got)
	}
	ctx := context.Background()
	for r, err := range sc.Resources(ctx, nil) {
		if err == nil && r.URI == "gridcity://audit" {
			t.Error("a read token lists the audit log")
		}
	}
	for name, args := range map[string]map[string]any{
		"run_command":      {"server": "web-1", "command": "id", "reason": "r", "timeout_seconds": 5},
		"wait_for_command": {"request_id": "cmd_x"},
	} {
		res, err := sc.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err == nil && !res.IsError {
			t.Fatalf("a read token called %s: %+v", name, res)
		}
	}
	if _, err := sc.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gridcity://audit"}); err == nil {
		t.Error("a read token read the audit log")
	}
	if pending, _ := c.cmds.Pending(ctx); len(pending) != 0 {
		t.Errorf("pending %+v", pending)
	}
}

// For a coordinator of either era: down, up, down, back, restarted.
func TestStdioBridgeCoordinatorDownAndBack(t *testing.T) {
	t.Parallel()
	forEachCoordinator(t, 300*time.Millisecond, coordinatorDownAndBack)
}

func coordinatorDownAndBack(t *testing.T, c *testCoordinator) {
	sc := startBridge(t, Config{Endpoint: c.endpoint(), Token: operateToken})

	// Down at start: the tools are listed anyway, and a call says why it fails.
	if got := toolNames(t, sc.ClientSession); got != "diagnose,get_metrics,get_topology,incident_report,list_resources,list_runbooks,list_servers,run_command,security_findings,wait_for_command" {
		t.Errorf("with the coordinator down, tools %s", got)
	}
	notAnswering := "the coordinator at " + c.endpoint() + " is not answering: is `gridcity serve` running?"
	res := sc.call(t, "list_servers", map[string]any{})
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(text(res), notAnswering) {
		t.Fatalf("coordinator down: %+v", res)
	}
	if _, err := sc.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "gridcity://topology"}); err == nil || !strings.Contains(err.Error(), "is not answering") {
		t.Errorf("read with the coordinator down: %v", err)
	}

	// It starts: the next call connects.
	c.start()
	if res := sc.call(t, "list_servers", map[string]any{}); res.IsError {
		t.Fatalf("after the coordinator started: %s", text(res))
	}
	// It stops: calls say so.
	c.stop()
	if res := sc.call(t, "list_servers", map[string]any{}); !res.IsError || !strings.Contains(text(res), "gridcity serve") {
		t.Fatalf("after the coordinator stopped: %+v", res)
	}
	// It comes back, knowing none of the old sessions: the next call works.
	c.start()
	if res := sc.call(t, "incident_report", map[string]any{}); res.IsError {
		t.Fatalf("after the coordinator came back: %s", text(res))
	}
	// A restart between two calls is not even noticed.
	c.stop()
	c.start()
	if res := sc.call(t, "list_runbooks", map[string]any{}); res.IsError {
		t.Fatalf("after a restart: %s\nlog:\n%s", text(res), sc.log.String())
	}
}

// Down at start, the bridge lists every tool; once the coordinator answers,
// a read token's list shrinks to what the coordinator shows it, and the
// client is told the list changed.
// A client of either era is told (a stateless one through its
// subscriptions/listen stream).
func TestStdioBridgeListChangesWhenTheCoordinatorAnswers(t *testing.T) {
	t.Parallel()
	for _, client := range eras {
		t.Run("client="+client.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCoordinator(t, 300*time.Millisecond)
			listChangesWhenTheCoordinatorAnswers(t, c, startBridgeAt(t, Config{Endpoint: c.endpoint(), Token: readToken}, client.version))
		})
	}
}

func listChangesWhenTheCoordinatorAnswers(t *testing.T, c *testCoordinator, sc *stdioClient) {
	if got := toolNames(t, sc.ClientSession); !strings.Contains(got, "run_command") {
		t.Fatalf("with the coordinator down, tools %s", got)
	}
	c.start()
	if res := sc.call(t, "list_servers", map[string]any{}); res.IsError {
		t.Fatal(text(res))
	}
	select {
	case <-sc.toolsChanged:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed notification")
	}
	if got := toolNames(t, sc.ClientSession); got != "diagnose,get_metrics,get_topology,incident_report,list_resources,list_runbooks,list_servers,security_findings" {
		t.Errorf("once the coordinator answers, a read token lists %s", got)
	}
}

func TestStdioBridgeCoordinatorDiesDuringACall(t *testing.T) {
	t.Parallel()
	// Without a progress token the coordinator sends nothing before the
	// result, so it dies before the response starts; with one, it dies
	// while the response stream is open.
	for _, tt := range []struct {
		progress  bool
		stateless bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		progress := tt.progress
		t.Run(fmt.Sprintf("progress=%v,stateless=%v", tt.progress, tt.stateless), func(t *testing.T) {
			t.Parallel()
			c := newTestCoordinator(t, 20*time.Second) // run_command waits long for a person
			c.stateless = tt.stateless
			c.start()
			sc := startBridge(t, Config{Endpoint: c.endpoint(), Token: operateToken})
			stopped := make(chan time.Time, 1)
			go func() {
				for range 500 {
					if p, _ := c.cmds.Pending(context.Background()); len(p) > 0 {
						// The request exists: without progress nothing is sent
						// before the result; with it, the first progress opens
						// the response stream.
						if progress {
							select {
							case <-sc.progress:
							case <-t.Context().Done():
								return
							}
						}
						at := time.Now()
						c.stop()
						stopped <- at
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			p := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10}}
			if progress {
				p.SetProgressToken("p")
			}
			res, err := sc.CallTool(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-stopped:
				if took := time.Since(at); took > 5*time.Second {
					t.Errorf("the call ended %s after the coordinator died", took)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the coordinator was never stopped; the call ended with %s", text(res))
			}
			if !res.IsError || !strings.Contains(text(res), "stopped answering during run_command: is `gridcity serve` running?") || !strings.Contains(text(res), "may have reached it") {
				t.Fatalf("got %+v", res)
			}
			// Exactly one request: the bridge did not ask again.
			if p, _ := c.cmds.Pending(context.Background()); len(p) != 1 {
				t.Errorf("%d requests pending; want 1", len(p))
			}
		})
	}
}

// A proxy in front of the coordinator (or a timeout in it) cuts the
// stream of one call while the session lives on: the SDK would wait for
// that call's response for ever; the bridge gives it up at once.
func TestStdioBridgeCallStreamCut(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 20*time.Second)
	c.start()
	u, _ := url.Parse("http://" + c.addr)
	var cut atomic.Bool
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if cut.Load() && resp.Request.Method == http.MethodPost && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &cutAfterFirstRead{ReadCloser: resp.Body}
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	sc := startBridge(t, Config{Endpoint: proxy.URL + "/mcp", Token: operateToken})
	if res := sc.call(t, "list_servers", map[string]any{}); res.IsError {
		t.Fatal(text(res))
	}
	cut.Store(true)
	p := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10}}
	p.SetProgressToken("p") // the progress event opens the stream; then it is cut
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := sc.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%v (after %s)", err, time.Since(start))
	}
	if !res.IsError || !strings.Contains(text(res), "stopped answering during run_command") || !strings.Contains(text(res), "stream broke") {
		t.Fatalf("got %s (after %s)\nlog:\n%s", text(res), time.Since(start), sc.log.String())
	}
	cut.Store(false)
	if res := sc.call(t, "list_servers", map[string]any{}); res.IsError {
		t.Fatalf("the next call: %s", text(res))
	}
}

// cutAfterFirstRead passes the first read on and fails the next: the
// proxy then aborts the response mid-stream.
type cutAfterFirstRead struct {
	io.ReadCloser
	read bool
}

func (c *cutAfterFirstRead) Read(p []byte) (int, error) {
	if c.read {
		return 0, errors.New("cut by the test")
	}
	c.read = true
	return c.ReadCloser.Read(p)
}

func TestStdioBridgeMisconfigured(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 300*time.Millisecond)
	c.start()
	for _, tt := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"wrong token", Config{Endpoint: c.endpoint(), Token: "gc_wrong"}, []string{"refused the token from GRIDCITY_TOKEN", "unknown or revoked token"}},
		{"wrong path", Config{Endpoint: "http://" + c.addr + "/nope", Token: operateToken}, []string{"/nope answered 404: no MCP endpoint there; set GRIDCITY_URL"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sc := startBridge(t, tt.cfg)
			res := sc.call(t, "list_servers", map[string]any{})
			for _, w := range tt.want {
				if !res.IsError || !strings.Contains(text(res), w) {
					t.Errorf("got %q; want isError with %q", text(res), w)
				}
			}
		})
	}
}

// Without an endpoint and a token configured, the bridge asks FindEndpoint
// and FindToken on each connection attempt (the command line looks in the
// data directory), and says where the token came from.
func TestStdioBridgeFindsTheCoordinator(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 300*time.Millisecond)
	c.start()
	from := filepath.Join(c.data, "mcp-token")
	sc := startBridge(t, Config{
		FindEndpoint: c.endpoint,
		FindToken:    func(context.Context) (string, string, error) { return operateToken, from, nil },
	})
	res := sc.call(t, "run_command", map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10})
	if res.IsError {
		t.Fatalf("run_command: %s\nlog:\n%s", text(res), sc.log.String())
	}
	pending, _ := c.cmds.Pending(context.Background())
	if len(pending) != 1 || pending[0].Token != "operate-test" || pending[0].Client != "stdio-test (stdio)" {
		t.Errorf("pending %+v; want the found token and the client by its own name", pending)
	}
	if !strings.Contains(sc.log.String(), from) {
		t.Errorf("the log does not say where the token came from:\n%s", sc.log.String())
	}

	// No token to be found: the call says why, in FindToken's words.
	sc = startBridge(t, Config{
		FindEndpoint: c.endpoint,
		FindToken: func(context.Context) (string, string, error) {
			return "", "", errors.New("no MCP token: set GRIDCITY_TOKEN")
		},
	})
	if res := sc.call(t, "list_servers", map[string]any{}); !res.IsError || !strings.Contains(text(res), "set GRIDCITY_TOKEN") {
		t.Fatalf("no token: %+v", res)
	}
	// Nothing to ask at all: the same advice.
	sc = startBridge(t, Config{Endpoint: c.endpoint()})
	if res := sc.call(t, "list_servers", map[string]any{}); !res.IsError || !strings.Contains(text(res), "set GRIDCITY_TOKEN") {
		t.Fatalf("no token and nothing to ask: %+v", res)
	}
}

func TestNormalizeEndpoint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want, err string }{
		{"http://127.0.0.1:4600/mcp", "http://127.0.0.1:4600/mcp", ""},
		{"http://127.0.0.1:4600", "http://127.0.0.1:4600/mcp", ""},
		{"https://gc.example/", "https://gc.example/mcp", ""},
		{"https://gc.example/proxy/mcp", "https://gc.example/proxy/mcp", ""},
		{"127.0.0.1:4600", "", "not an http(s) URL"},
		{"ftp://x/mcp", "", "not an http(s) URL"},
	} {
		got, err := NormalizeEndpoint(tt.in)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("NormalizeEndpoint(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// Without --client, approval cards name the stdio client by the name it
// gave itself, marked as coming through the bridge; --client overrides it.
func TestStdioBridgeNamesTheClientByItsClientInfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ client, want string }{{"", "stdio-test (stdio)"}, {"claude-desktop", "claude-desktop"}} {
		t.Run("client="+tc.client, func(t *testing.T) {
			c := newTestCoordinator(t, 300*time.Millisecond)
			c.start()
			sc := startBridgeAt(t, Config{Endpoint: c.endpoint(), Token: operateToken, Client: tc.client}, "2025-11-25")
			res := sc.call(t, "run_command", map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10})
			if res.IsError {
				t.Fatalf("run_command: %+v", res)
			}
			pending, _ := c.cmds.Pending(context.Background())
			if len(pending) != 1 || pending[0].Client != tc.want {
				t.Errorf("pending %+v; want the client named %q", pending, tc.want)
			}
		})
	}
}

func TestHeaderSafe(t *testing.T) {
	for in, want := range map[string]string{
		"Claude Desktop":        "Claude Desktop",
		" zed\r\nX-Evil: 1 ":    "zedX-Evil: 1",
		"\x00\x1b[2J":           "[2J",
		strings.Repeat("é", 60): strings.Repeat("é", 48),
	} {
		if got := headerSafe(in, 48); got != want {
			t.Errorf("headerSafe(%q) = %q; want %q", in, got, want)
		}
	}
}

// asMain is cfg with what main gives every bridge: the coordinator's own
// instructions, its offer to an operate token and its panic middleware.
func asMain(t *testing.T, cfg Config, logger *slog.Logger) Config {
	t.Helper()
	offline, err := mcpserver.Offered(context.Background(), store.ScopeOperate)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Instructions, cfg.Offline, cfg.Recover = mcpserver.Instructions, Listing(offline), mcpserver.RecoverPanics(logger)
	return cfg
}
