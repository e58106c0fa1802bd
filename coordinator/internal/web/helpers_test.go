package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The agent boundary is one users never see, so tests stand in for it: the
// fleet answers that the servers are online, and the "agent" records every
// RunCommand and can report an exit back through the service.

type fakeServers map[string]command.ServerInfo

func (f fakeServers) ServerInfo(n string) command.ServerInfo { return f[n] }
func (f fakeServers) Names() []string {
	var out []string
	for n := range f {
		out = append(out, n)
	}
	return out
}

var testServers = fakeServers{
	"web-1": {Known: true, Online: true, CommandsEnabled: true, RunAs: "root"},
	"app-1": {Known: true, Online: true, CommandsEnabled: true, RunAs: "deploy"},
	// Held, as far as this replica last read, by a replica that died.
	"moving-1": {Known: true, CommandsEnabled: true, RunAs: "root", HeldBy: "10.0.0.9:4600", Replica: "gone"},
}

type fakeAgent struct {
	mu   sync.Mutex
	sent []*gridcityv1.RunCommand
	// exit, when set, is called (off the service's lock) for each command
	// received, as an agent would report back.
	exit func(rc *gridcityv1.RunCommand)
}

func (a *fakeAgent) Send(server string, m *gridcityv1.CoordinatorMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	rc := m.GetRunCommand()
	a.sent = append(a.sent, rc)
	if a.exit != nil {
		go a.exit(rc) // Send runs under the service's lock; events must not
	}
	return nil
}

func (a *fakeAgent) last() *gridcityv1.RunCommand {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sent) == 0 {
		return nil
	}
	return a.sent[len(a.sent)-1]
}

// finish reports a command's output and exit as the agent would.
func finish(svc *command.Service, server, id, stdout string, code int32) {
	ctx := context.Background()
	svc.HandleEvent(ctx, server, &gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_STARTED})
	svc.HandleEvent(ctx, server, &gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_OUTPUT, Stream: gridcityv1.CommandEvent_STREAM_STDOUT, Data: []byte(stdout)})
	svc.HandleEvent(ctx, server, &gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_EXITED, ExitCode: code, DurationMs: 1234, StdoutTotal: uint64(len(stdout))})
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer collects the log, to check that no secret reaches it.
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

type testEnv struct {
	st    store.Store
	svc   *command.Service
	agent *fakeAgent
	clock *testClock
	log   *syncBuffer
	h     http.Handler
	dir   string // the store's directory

	// tokens maps a session cookie's value to the csrfToken its login
	// answered with, so that a request with that cookie carries the token
	// as the page would (see req.cookie).
	mu     sync.Mutex
	tokens map[string]string
}

const (
	testUser     = "alice"
	testPassword = "correct horse battery"
	testHost     = "gridcity.test:4600"
	testOrigin   = "http://gridcity.test:4600"
)

// newEnv builds the app on a real store and a real command service. The
// approver's hash uses bcrypt's minimum cost: the cost is bcrypt's business
// and would only slow the tests (HashPassword's own test checks cost 12).
func newEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := store.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnvOn(t, cfg, st)
	e.dir = dir
	return e
}

// newEnvOn is newEnv on a store of the test's choosing.
func newEnvOn(t *testing.T, cfg Config, st store.Store) *testEnv {
	t.Helper()
	ctx := context.Background()
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateApprover(ctx, store.Approver{Name: testUser, PasswordHash: string(hash), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{st: st, agent: &fakeAgent{}, clock: &testClock{t: time.Now().UTC().Truncate(time.Second)}, log: &syncBuffer{}, tokens: map[string]string{}}
	logger := slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Now == nil {
		cfg.Now = e.clock.now
	}
	e.svc = command.New(command.Config{Now: cfg.Now}, st, testServers, e.agent, logger)
	e.h = New(cfg, e.svc, st, logger)
	return e
}

func (e *testEnv) submit(t *testing.T, sub command.Submission) command.Request {
	t.Helper()
	if sub.Server == "" {
		sub.Server = "web-1"
	}
	if sub.Command == "" {
		sub.Command = "systemctl restart nginx"
	}
	if sub.Reason == "" {
		sub.Reason = "nginx stopped answering"
	}
	if sub.TimeoutSeconds == 0 {
		sub.TimeoutSeconds = 30
	}
	if sub.Client == "" {
		sub.Client = "claude-code"
	}
	if sub.Token == "" {
		sub.Token = "laptop"
	}
	r, err := e.svc.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// req is one request to the app; the zero value is a same-origin browser
// request without a session.
type req struct {
	method, path string
	body         any // string: sent as is; else JSON
	// cookie is sent with the X-Gridcity-Session header of its login, as
	// the page sends it; header can replace it, or remove it with "".
	cookie *http.Cookie
	header map[string]string
	remote string
}

type resp struct {
	code   int
	header http.Header
	body   string
	res    *http.Response
}

func (r resp) errorText(t *testing.T) string {
	t.Helper()
	var e apiError
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" {
		t.Fatalf("body %q is not a JSON error", r.body)
	}
	return e.Error
}

func (e *testEnv) do(t *testing.T, rq req) resp {
	t.Helper()
	var body io.Reader
	switch b := rq.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	r := httptest.NewRequest(rq.method, "http://"+testHost+rq.path, body)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if rq.method == http.MethodPost {
		r.Header.Set("Origin", testOrigin)
	}
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if rq.cookie != nil {
		r.AddCookie(rq.cookie)
		if tok := e.token(rq.cookie); tok != "" {
			r.Header.Set(csrfHeader, tok)
		}
	}
	for k, v := range rq.header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	if rq.remote != "" {
		r.RemoteAddr = rq.remote
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	res := w.Result()
	return resp{code: w.Code, header: w.Header(), body: w.Body.String(), res: res}
}

// token returns the csrfToken of the login that set the cookie, or "".
func (e *testEnv) token(c *http.Cookie) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tokens[c.Value]
}

// login logs the test approver in and returns the session cookie; the
// csrfToken of the answer is remembered for the cookie (see e.token).
func (e *testEnv) login(t *testing.T) *http.Cookie {
	t.Helper()
	c, _ := e.loginAnswer(t)
	return c
}

// loginAnswer logs the test approver in and returns the session cookie and
// the answer's body.
func (e *testEnv) loginAnswer(t *testing.T) (*http.Cookie, loginResponse) {
	t.Helper()
	r := e.do(t, req{method: "POST", path: "/api/login", body: map[string]string{"username": testUser, "password": testPassword}})
	if r.code != http.StatusOK {
		t.Fatalf("login: got %d %s; want 200", r.code, r.body)
	}
	var ans loginResponse
	if err := json.Unmarshal([]byte(r.body), &ans); err != nil || ans.CSRFToken == "" {
		t.Fatalf("login answered %s; want a csrfToken", r.body)
	}
	for _, c := range r.res.Cookies() {
		if c.Name == cookiePlain || c.Name == cookieSecure {
			e.mu.Lock()
			e.tokens[c.Value] = ans.CSRFToken
			e.mu.Unlock()
			return c, ans
		}
	}
	t.Fatalf("login set no session cookie: %v", r.header)
	return nil, ans
}
