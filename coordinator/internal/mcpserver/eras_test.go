package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// exchange is one HTTP request a client sent and what came back.
type exchange struct {
	httpMethod, rpcMethod  string
	version                string // the request's Mcp-Protocol-Version
	session, answerSession string // Mcp-Session-Id sent, and answered
}

// recordingTransport authenticates like a configured client and records
// every exchange, so that a test can tell which era a client spoke.
type recordingTransport struct {
	token string
	mu    sync.Mutex
	log   []exchange
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+rt.token)
	x := exchange{httpMethod: r.Method, version: r.Header.Get(protocolVersionHeader), session: r.Header.Get(sessionIDHeader)}
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct{ Method string }
		json.Unmarshal(body, &m)
		x.rpcMethod = m.Method
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if resp != nil {
		x.answerSession = resp.Header.Get(sessionIDHeader)
	}
	rt.mu.Lock()
	rt.log = append(rt.log, x)
	rt.mu.Unlock()
	return resp, err
}

func (rt *recordingTransport) exchanges() []exchange {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.log)
}

// approveAfterProgress plays the person and the agent for the next
// command request: once the request exists and its caller has heard n
// progress notifications (its call is being held open), it
// approves it, and the agent runs it and prints out. It returns the
// request as it was created, or an error.
func approveAfterProgress(e *env, events <-chan command.Event, progressed <-chan string, n int, out string) <-chan any {
	done := make(chan any, 1)
	go func() {
		ctx := context.Background()
		var created command.Request
		for ev := range events {
			if ev.Kind == command.EventCreated {
				created = ev.Request
				break
			}
		}
		for range n {
			<-progressed
		}
		if _, err := e.cmds.Approve(ctx, created.ID, "alice", command.Approval{Note: "go ahead"}); err != nil {
			done <- err
			return
		}
		for _, ev := range []*gridcityv1.CommandEvent{
			{RequestId: created.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED},
			{RequestId: created.ID, Kind: gridcityv1.CommandEvent_KIND_OUTPUT, Data: []byte(out)},
			{RequestId: created.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutTotal: uint64(len(out)), DurationMs: 3},
		} {
			if err := e.cmds.HandleEvent(ctx, "web-1", ev); err != nil {
				done <- err
				return
			}
		}
		done <- created
	}()
	return done
}

// The go-sdk client in each era the endpoint serves: stateless 2026-07-28
// (server/discover, no initialize, no session) and each 2025 revision
// (initialize, then a session). Each lists the tools, calls a read tool,
// and asks run_command, which a person approves while the call is held
// open, reporting progress, and which returns the command's output. The
// client's name on the request comes from its clientInfo: it sends no
// X-Agent-Client.
func TestGoClientInEachEra(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			e := newEnvTimed(t, DefaultGuardConfig(), timing{run: 20 * time.Second, again: 5 * time.Second, progress: 5 * time.Millisecond})
			e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
			rec := &recordingTransport{token: e.token}
			progressed := make(chan string, 1000)
			c := mcp.NewClient(&mcp.Implementation{Name: "eras-" + version, Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					select {
					case progressed <- req.Params.Message:
					default:
					}
				},
			})
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: rec}},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s; want %s", got, version)
			}

			listed, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range listed.Tools {
				names = append(names, tl.Name)
			}
			for _, want := range []string{"list_servers", "run_command", "wait_for_command"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list %v lacks %s", names, want)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_servers", Arguments: map[string]any{"name": "web-1"}})
			if err != nil || res.IsError {
				t.Fatalf("list_servers: %v %+v", err, res)
			}
			if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"name":"web-1"`) {
				t.Errorf("list_servers {name: web-1}: %s", b)
			}

			events, stop := e.cmds.Subscribe()
			defer stop()
			done := approveAfterProgress(e, events, progressed, 3, "up 3 days\n")
			params := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "uptime", "reason": "look", "timeout_seconds": 10}}
			params.SetProgressToken("run-1")
			res, got := callParams(t, cs, params)
			if res.IsError || got.Status != "completed" || got.Stdout != "up 3 days\n" || got.Note != "go ahead" {
				t.Fatalf("run_command: %+v %+v", res, got)
			}
			switch r := (<-done).(type) {
			case error:
				t.Fatal(r)
			case command.Request:
				if r.Client != "eras-"+version || r.Token != "tester" {
					t.Errorf("request asked by client %q with token %q; want eras-%s, tester", r.Client, r.Token, version)
				}
			}

			// What went over the wire is the era's own.
			log := rec.exchanges()
			var methods []string
			for _, x := range log {
				methods = append(methods, x.rpcMethod)
			}
			if version == modernVersion {
				for _, x := range log {
					if x.rpcMethod == "initialize" || x.session != "" || x.answerSession != "" || x.version != modernVersion || x.httpMethod != http.MethodPost {
						t.Errorf("stateless client exchanged %+v; want POSTs of 2026-07-28 without initialize or a session", x)
					}
				}
				if methods[0] != "server/discover" {
					t.Errorf("first request %q; want server/discover", methods[0])
				}
				return
			}
			if methods[0] != "initialize" || log[0].answerSession == "" {
				t.Fatalf("first exchange %+v; want initialize answered with a session", log[0])
			}
			for _, x := range log[1:] {
				if x.session != log[0].answerSession {
					t.Errorf("%s %s sent session %q; want %q", x.httpMethod, x.rpcMethod, x.session, log[0].answerSession)
				}
			}
		})
	}
}

func callParams(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) (*mcp.CallToolResult, CommandResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", p.Name, err)
	}
	var out CommandResult
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
	}
	return res, out
}

// rpcMessage is a JSON-RPC message as a test reads it.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// modernBody is a 2026-07-28 request: params with the _meta every
// request of that revision carries.
func modernBody(t *testing.T, id int, method, params string) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		t.Fatal(err)
	}
	meta, _ := p["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[mcp.MetaKeyProtocolVersion] = modernVersion
	meta[mcp.MetaKeyClientCapabilities] = map[string]any{}
	meta[mcp.MetaKeyClientInfo] = map[string]any{"name": "raw-http", "version": "1"}
	p["_meta"] = meta
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	return b
}

// post sends one request on a connection of its own (a new transport,
// no keep-alive): nothing but the request itself reaches the server.
func post(t *testing.T, url, token string, header map[string]string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func modernHeader(method, name string) map[string]string {
	h := map[string]string{protocolVersionHeader: modernVersion, "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

// readMessages reads a response's JSON-RPC messages as they arrive, from
// an event stream or a JSON body, calling each with the message.
func readMessages(t *testing.T, resp *http.Response, each func(rpcMessage)) {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m rpcMessage
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s answer: %v", resp.Header.Get("Content-Type"), err)
		}
		each(m)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "" {
			continue
		}
		var m rpcMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		each(m)
	}
}

// answer is the response to request id among a response's messages.
func answer(t *testing.T, resp *http.Response, id int) rpcMessage {
	t.Helper()
	var got *rpcMessage
	readMessages(t, resp, func(m rpcMessage) {
		if string(m.ID) == fmt.Sprint(id) && m.Method == "" {
			got = &m
		}
	})
	if got == nil {
		t.Fatalf("no answer to request %d", id)
	}
	return *got
}

// A stateless sequence, server/discover, tools/list and tools/call, sent
// as separate HTTP requests on separate connections and spread over two
// coordinators sharing one store: no request depends on another, and each
// succeeds without a session.
func TestStatelessSequenceOnSeparateConnections(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	other := e.replica(t)
	steps := []struct {
		url, method, name, params string
		check                     func(result json.RawMessage) error
	}{
		{e.srv.URL, "server/discover", "", `{}`, func(r json.RawMessage) error {
			var d struct{ SupportedVersions []string }
			json.Unmarshal(r, &d)
			for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"} {
				if !slices.Contains(d.SupportedVersions, v) {
					return fmt.Errorf("supportedVersions %v lacks %s", d.SupportedVersions, v)
				}
			}
			return nil
		}},
		{other.URL, "tools/list", "", `{}`, func(r json.RawMessage) error {
			var l struct{ Tools []struct{ Name string } }
			json.Unmarshal(r, &l)
			if len(l.Tools) != len(tools) {
				return fmt.Errorf("%d tools listed; want %d", len(l.Tools), len(tools))
			}
			return nil
		}},
		{e.srv.URL, "tools/call", "list_servers", `{"name":"list_servers","arguments":{}}`, func(r json.RawMessage) error {
			var c struct {
				IsError           bool
				StructuredContent struct{ Total int }
			}
			json.Unmarshal(r, &c)
			if c.IsError || c.StructuredContent.Total != 1 {
				return fmt.Errorf("list_servers: %s", r)
			}
			return nil
		}},
		{other.URL, "tools/call", "list_servers", `{"name":"list_servers","arguments":{"name":"web-1"}}`, func(r json.RawMessage) error {
			if !strings.Contains(string(r), `"name":"web-1"`) || strings.Contains(string(r), `"isError":true`) {
				return fmt.Errorf("list_servers {name: web-1}: %s", r)
			}
			return nil
		}},
	}
	for i, s := range steps {
		resp := post(t, s.url, e.token, modernHeader(s.method, s.name), modernBody(t, i+1, s.method, s.params))
		if resp.StatusCode != http.StatusOK || resp.Header.Get(sessionIDHeader) != "" {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d session %q: %s", s.method, resp.StatusCode, resp.Header.Get(sessionIDHeader), b)
		}
		m := answer(t, resp, i+1)
		if m.Error != nil {
			t.Fatalf("%s: error %d %s", s.method, m.Error.Code, m.Error.Message)
		}
		if err := s.check(m.Result); err != nil {
			t.Errorf("%s: %v", s.method, err)
		}
	}
}

// A stateless run_command is one POST: it is answered as an event stream
// that carries the progress notifications while a person decides, then
// the command's result, on that one response.
func TestStatelessRunCommandIsOneResponse(t *testing.T) {
	e := newEnvTimed(t, DefaultGuardConfig(), timing{run: 20 * time.Second, again: 5 * time.Second, progress: 5 * time.Millisecond})
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	events, stop := e.cmds.Subscribe()
	defer stop()
	progressed := make(chan string, 1000)
	done := approveAfterProgress(e, events, progressed, 3, "ok\n")
	body := modernBody(t, 7, "tools/call", `{"name":"run_command","arguments":{"server":"web-1","command":"true","reason":"look","timeout_seconds":5},"_meta":{"progressToken":"p7"}}`)
	resp := post(t, e.srv.URL, e.token, modernHeader("tools/call", "run_command"), body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s; want 200 and an event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var final *rpcMessage
	notes := 0
	readMessages(t, resp, func(m rpcMessage) {
		switch {
		case m.Method == "notifications/progress":
			if final != nil {
				t.Errorf("progress after the result")
			}
			if !strings.Contains(string(m.Params), `"progressToken":"p7"`) {
				t.Errorf("progress %s; want the call's token", m.Params)
			}
			notes++
			select {
			case progressed <- string(m.Params):
			default:
			}
		case string(m.ID) == "7":
			final = &m
		}
	})
	if r, ok := (<-done).(error); ok {
		t.Fatal(r)
	}
	if final == nil || final.Error != nil || !strings.Contains(string(final.Result), `"status":"completed"`) || !strings.Contains(string(final.Result), `"stdout":"ok\n"`) {
		t.Fatalf("final message %+v; want the completed command", final)
	}
	if notes < 3 {
		t.Errorf("%d progress notifications; want at least the 3 heard before the approval", notes)
	}
}

// With the production timings (run_command holds the call up to 25 s and
// reports progress every 5 s), a stateless call approved 20 s into its
// wait returns the command's result on its one POST.
func TestStatelessRunCommandApprovedLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnvTimed(t, DefaultGuardConfig(), timing{})
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	late := make(chan string, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "late", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.Progress >= 20 {
				select {
				case late <- req.Params.Message:
				default:
				}
			}
		},
	})
	rec := &recordingTransport{token: e.token}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: rec}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	events, stop := e.cmds.Subscribe()
	defer stop()
	done := approveAfterProgress(e, events, late, 1, "late\n")
	start := time.Now()
	params := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "true", "reason": "look", "timeout_seconds": 5}}
	params.SetProgressToken("late")
	res, got := callParams(t, cs, params)
	took := time.Since(start)
	if r, ok := (<-done).(error); ok {
		t.Fatal(r)
	}
	if res.IsError || got.Status != "completed" || got.Stdout != "late\n" || took < 20*time.Second || took > 25*time.Second {
		t.Fatalf("after %s: %+v %+v; want the completed command between 20 and 25 s", took, res, got)
	}
	calls := 0
	for _, x := range rec.exchanges() {
		if x.rpcMethod == "tools/call" {
			calls++
		}
		if x.session != "" || x.version != modernVersion {
			t.Errorf("exchange %+v; want stateless 2026-07-28", x)
		}
	}
	if calls != 1 {
		t.Errorf("%d tools/call requests; want the one POST", calls)
	}
}

// Every stateless request is authenticated and limited on its own: no
// token is 401, a read token's request is served the read tools, and the
// token's rate limit counts stateless requests too.
func TestStatelessRequestsAreGuardedEachTime(t *testing.T) {
	g := DefaultGuardConfig()
	g.RatePerToken, g.BurstPerToken = 0.001, 3
	e := newEnv(t, g)
	if err := e.st.CreateToken(context.Background(), store.Token{Name: "reader", Scope: store.ScopeRead, Hash: bearer.Hash("gc_read"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	list := func(token string) *http.Response {
		return post(t, e.srv.URL, token, modernHeader("tools/list", ""), modernBody(t, 1, "tools/list", `{}`))
	}
	if resp := list(""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d; want 401", resp.StatusCode)
	}
	if resp := list("gc_wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d; want 401", resp.StatusCode)
	}
	// A token for Prometheus is no MCP token: no tools, not even the read ones.
	if err := e.st.CreateToken(context.Background(), store.Token{Name: "prom", Scope: store.ScopeMetrics, Hash: bearer.Hash("gc_prom"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if resp := list("gc_prom"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("metrics token: %d; want 401", resp.StatusCode)
	} else if b, _ := io.ReadAll(resp.Body); !strings.Contains(resp.Header.Get("WWW-Authenticate")+string(b), "scope metrics") {
		t.Errorf("metrics token refused with %q %q; want the scope named", resp.Header.Get("WWW-Authenticate"), b)
	}
	m := answer(t, list("gc_read"), 1)
	if strings.Contains(string(m.Result), `"run_command"`) || !strings.Contains(string(m.Result), `"list_servers"`) {
		t.Errorf("read token's tools/list: %s; want the read tools only", m.Result)
	}
	for i := range 3 {
		if resp := list(e.token); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	if resp := list(e.token); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("past the burst: %d; want 429", resp.StatusCode)
	}
	if resp := list("gc_read"); resp.StatusCode != http.StatusOK {
		t.Errorf("another token: %d; want 200, the limit is per token", resp.StatusCode)
	}
}

// legacySession opens a 2025-11-25 session by hand and returns its id.
func legacySession(t *testing.T, e *env) string {
	t.Helper()
	resp := post(t, e.srv.URL, e.token, nil, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	sid := resp.Header.Get(sessionIDHeader)
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	answer(t, resp, 1)
	resp = post(t, e.srv.URL, e.token, map[string]string{sessionIDHeader: sid, protocolVersionHeader: "2025-11-25"}, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	return sid
}

// The protocol faults real clients met are answered as JSON-RPC errors in
// a JSON body, with the status and code the spec gives them.
func TestProtocolFaultsAreJSONRPCErrors(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	sid := legacySession(t, e)
	inSession := map[string]string{sessionIDHeader: sid, protocolVersionHeader: "2025-11-25"}
	for _, tc := range []struct {
		name   string
		header map[string]string
		body   string
		status int
		code   int64
		says   string
	}{
		{"unknown method in a session", inSession, `{"jsonrpc":"2.0","id":5,"method":"bogus/method","params":{}}`, http.StatusOK, -32601, `"bogus/method"`},
		{"call without its params in a session", inSession, `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`, http.StatusOK, -32600, "params"},
		{"2025-11-25 request without a session", map[string]string{protocolVersionHeader: "2025-11-25"}, `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`, http.StatusBadRequest, -32600, "initialize"},
		{"2025-06-18 request without a session", map[string]string{protocolVersionHeader: "2025-06-18"}, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"list_servers"}}`, http.StatusBadRequest, -32600, "Mcp-Session-Id"},
		{"2025-03-26 request without a session or a version", nil, `{"jsonrpc":"2.0","id":9,"method":"ping"}`, http.StatusBadRequest, -32600, "Mcp-Session-Id"},
		{"notification without a session", map[string]string{protocolVersionHeader: "2025-11-25"}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusBadRequest, -32600, "session"},
		{"body that is not JSON", nil, `{"jsonrpc":"2.0","id":`, http.StatusBadRequest, -32700, "not a JSON-RPC message"},
		{"unknown method, stateless", modernHeader("bogus/method", ""), string(modernBody(t, 10, "bogus/method", `{}`)), http.StatusNotFound, -32601, "bogus/method"},
		{"unknown notification in a session", inSession, `{"jsonrpc":"2.0","method":"notifications/bogus"}`, http.StatusBadRequest, -32601, `"notifications/bogus"`},
		{"call without its params, stateless", modernHeader("tools/call", ""), `{"jsonrpc":"2.0","id":13,"method":"tools/call"}`, http.StatusBadRequest, -32600, "params"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, e.srv.URL, e.token, tc.header, []byte(tc.body))
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %s %s; want %d with a JSON body", resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status)
			}
			var m rpcMessage
			if err := json.Unmarshal(b, &m); err != nil || m.Error == nil {
				t.Fatalf("body %s is not a JSON-RPC error: %v", b, err)
			}
			var req struct{ ID json.RawMessage }
			if json.Unmarshal([]byte(tc.body), &req) == nil && len(req.ID) > 0 && string(m.ID) != string(req.ID) {
				t.Errorf("id %s; want the request's %s", m.ID, req.ID)
			}
			if m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.says) {
				t.Errorf("error %d %q; want %d saying %s", m.Error.Code, m.Error.Message, tc.code, tc.says)
			}
		})
	}
	// The session is still there after its faults, and a lost session is
	// still the SDK's 404 (the client starts a new one), not a call error.
	resp := post(t, e.srv.URL, e.token, inSession, []byte(`{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{}}`))
	if m := answer(t, resp, 11); m.Error != nil || !strings.Contains(string(m.Result), "list_servers") {
		t.Errorf("tools/list after the faults: %+v", m)
	}
	resp = post(t, e.srv.URL, e.token, map[string]string{sessionIDHeader: "no-such-session", protocolVersionHeader: "2025-11-25"}, []byte(`{"jsonrpc":"2.0","id":12,"method":"bogus/method"}`))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %d; want 404", resp.StatusCode)
	}
}

// Without a session, GET and DELETE have no stream or session to serve:
// 405 with the method that is allowed.
func TestGetWithoutSessionIsNotAllowed(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, e.srv.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s: %d Allow %q; want 405 Allow POST", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// sdkServerMethods names only methods the SDK serves: each, sent in a
// session of the SDK's own stateful handler (no router in front), passes
// the SDK's check of the method rather than being refused with a 400.
func TestSDKServerMethodsAreServed(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	srv := NewServer(e.deps, store.ScopeOperate)
	sdk := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer sdk.Close()
	send := func(sid string, body string) *http.Response {
		h := map[string]string{protocolVersionHeader: "2025-11-25"}
		if sid != "" {
			h[sessionIDHeader] = sid
		}
		return post(t, sdk.URL, "", h, []byte(body))
	}
	resp := send("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get(sessionIDHeader)
	answer(t, resp, 1)
	if resp := send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	for i, m := range sdkServerMethods {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"name":"list_servers","uri":"gridcity://servers","ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":"b"},"level":"info","protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, 100+i, m)
		if resp := send(sid, body); resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%s: %d %s; the SDK does not serve it", m, resp.StatusCode, b)
		}
	}
	if resp := send(sid, `{"jsonrpc":"2.0","id":99,"method":"bogus/method","params":{}}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bogus/method: %d; want the SDK's 400 that the router rewrites", resp.StatusCode)
	}
}

// lockedBuffer is a log destination the server's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The log names each client that opens, in either era: a session's
// initialize, or a stateless client's server/discover with its _meta.
func TestClientOpeningIsLoggedInEachEra(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	var log lockedBuffer
	e.deps.Logger = slog.New(slog.NewTextHandler(&log, nil))
	srv := e.replica(t)
	answer(t, post(t, srv.URL, e.token, nil, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"legacy-ide","version":"4"}}}`)), 1)
	answer(t, post(t, srv.URL, e.token, modernHeader("server/discover", ""), modernBody(t, 2, "server/discover", `{}`)), 2)
	for _, want := range []string{
		`msg="mcp client connecting" client=unknown clientInfo=legacy-ide clientVersion=4 protocolVersion=2025-06-18`,
		`msg="mcp client connecting" client=unknown clientInfo=raw-http clientVersion=1 protocolVersion=2026-07-28`,
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
}
