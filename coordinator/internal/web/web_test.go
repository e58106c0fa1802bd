package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func TestHashPassword(t *testing.T) {
	h, err := HashPassword("hunter2 hunter2")
	if err != nil {
		t.Fatal(err)
	}
	if cost, _ := bcrypt.Cost([]byte(h)); cost != bcryptCost {
		t.Errorf("cost %d; want %d", cost, bcryptCost)
	}
	if bcrypt.CompareHashAndPassword([]byte(h), []byte("hunter2 hunter2")) != nil {
		t.Error("hash does not match its password")
	}
	if _, err := HashPassword(""); err == nil {
		t.Error("empty password hashed; want an error")
	}
	if _, err := HashPassword(strings.Repeat("x", 73)); err == nil {
		t.Error("73-byte password hashed (bcrypt would cut it); want an error")
	}
	if cost, _ := bcrypt.Cost(dummyHash); cost != bcryptCost {
		t.Errorf("dummy hash cost %d; want %d, or unknown names answer faster", cost, bcryptCost)
	}
}

func TestNewPassword(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		p := NewPassword()
		if len(p) != 20 || strings.Trim(p, passwordAlphabet) != "" {
			t.Fatalf("NewPassword() = %q; want 20 characters of %q", p, passwordAlphabet)
		}
		if seen[p] {
			t.Fatalf("NewPassword() repeated %q", p)
		}
		seen[p] = true
	}
}

func TestLogin(t *testing.T) {
	e := newEnv(t, Config{})
	good := map[string]string{"username": testUser, "password": testPassword}
	tests := []struct {
		name    string
		rq      req
		code    int
		wantErr string
	}{
		{"ok", req{body: good}, 200, ""},
		{"wrong password", req{body: map[string]string{"username": testUser, "password": "nope"}}, 401, "wrong username or password"},
		{"unknown user", req{body: map[string]string{"username": "mallory", "password": testPassword}}, 401, "wrong username or password"},
		{"empty", req{body: map[string]string{"username": testUser}}, 400, "give both"},
		{"not json", req{body: "username=alice", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, "Content-Type: application/json"},
		{"unknown field", req{body: map[string]string{"username": testUser, "password": testPassword, "pass": "x"}}, 400, "unknown field"},
		{"two objects", req{body: `{"username":"alice","password":"x"} {}`}, 400, "after the JSON object"},
		{"other site", req{body: good, header: map[string]string{"Origin": "https://evil.example"}}, 403, "does not match"},
		{"cross-site fetch", req{body: good, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, "another site"},
		{"no origin", req{body: good, header: map[string]string{"Origin": ""}}, 403, "missing Origin"},
		{"too big", req{body: fmt.Sprintf(`{"username":"alice","password":%q}`, strings.Repeat("x", maxLoginBody))}, 413, "over the limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.rq.method, tc.rq.path = "POST", "/api/login"
			r := e.do(t, tc.rq)
			if r.code != tc.code {
				t.Fatalf("got %d %s; want %d", r.code, r.body, tc.code)
			}
			if tc.wantErr != "" {
				if msg := r.errorText(t); !strings.Contains(msg, tc.wantErr) {
					t.Errorf("error %q; want it to contain %q", msg, tc.wantErr)
				}
				if len(r.res.Cookies()) != 0 {
					t.Errorf("a refused login set a cookie: %v", r.res.Cookies())
				}
				return
			}
			var me meResponse
			if err := json.Unmarshal([]byte(r.body), &me); err != nil || me.Username != testUser {
				t.Errorf("body %s; want username %q", r.body, testUser)
			}
		})
	}
	if strings.Contains(e.log.String(), testPassword) || strings.Contains(e.log.String(), "nope") {
		t.Errorf("a password reached the log:\n%s", e.log.String())
	}
	if strings.Contains(e.log.String(), "mallory") {
		t.Errorf("an unknown username (maybe a mistyped password) reached the log:\n%s", e.log.String())
	}
}

func TestLoginCookie(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("secure=%v", secure), func(t *testing.T) {
			e := newEnv(t, Config{Secure: secure, SessionTTL: 2 * time.Hour})
			c := e.login(t)
			wantName := map[bool]string{false: cookiePlain, true: cookieSecure}[secure]
			if c.Name != wantName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != secure || c.Domain != "" {
				t.Errorf("cookie %+v; want %s, HttpOnly, SameSite=Strict, Path=/, Secure=%v, no Domain", c, wantName, secure)
			}
			if c.MaxAge != 7200 {
				t.Errorf("cookie MaxAge %d; want 7200 (the session TTL)", c.MaxAge)
			}
			// 32 random bytes, and only their hash is stored.
			hash, ok := sessionHash(c.Value)
			if !ok {
				t.Fatalf("cookie value %q is not 32 bytes in base64url", c.Value)
			}
			se, err := e.st.SessionByHash(context.Background(), hash, e.clock.now())
			if err != nil || se.Approver != testUser {
				t.Fatalf("session by hash: %+v %v; want alice's", se, err)
			}
			if _, err := e.st.SessionByHash(context.Background(), []byte(c.Value), e.clock.now()); err == nil {
				t.Error("the raw cookie value is stored; want only its hash")
			}
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, Config{SessionTTL: time.Hour})
	c := e.login(t)
	if r := e.do(t, req{method: "GET", path: "/api/me", cookie: c}); r.code != 200 || !strings.Contains(r.body, `"username":"alice"`) {
		t.Fatalf("me: got %d %s; want 200 with alice", r.code, r.body)
	}
	e.clock.add(time.Hour + time.Second)
	r := e.do(t, req{method: "GET", path: "/api/me", cookie: c})
	if r.code != 401 || !strings.Contains(r.errorText(t), "expired") {
		t.Fatalf("me after the TTL: got %d %s; want 401 saying it expired", r.code, r.body)
	}
}

func TestLogout(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	r := e.do(t, req{method: "POST", path: "/api/logout", cookie: c})
	if r.code != 204 {
		t.Fatalf("logout: got %d %s; want 204", r.code, r.body)
	}
	cleared := false
	for _, k := range r.res.Cookies() {
		cleared = cleared || (k.Name == c.Name && k.MaxAge < 0)
	}
	if !cleared {
		t.Errorf("logout did not clear the cookie: %v", r.res.Cookies())
	}
	if r := e.do(t, req{method: "GET", path: "/api/me", cookie: c}); r.code != 401 {
		t.Errorf("old cookie after logout: got %d; want 401", r.code)
	}
}

// appEndpoints is every endpoint behind the login.
func appEndpoints(id string) []req {
	return []req{
		{method: "GET", path: "/api/me"},
		{method: "POST", path: "/api/logout"},
		{method: "GET", path: "/api/requests?status=pending"},
		{method: "GET", path: "/api/requests?status=all"},
		{method: "GET", path: "/api/history"},
		{method: "GET", path: "/api/requests/" + id},
		{method: "POST", path: "/api/requests/" + id + "/approve", body: map[string]string{"note": "ok"}},
		{method: "POST", path: "/api/requests/" + id + "/deny", body: map[string]string{"note": "no"}},
		{method: "GET", path: "/api/events"},
		{method: "GET", path: "/api/nothing-here"},
	}
}

// An MCP token, even a live operate token, opens nothing in the app.
func TestMCPTokenOpensNothing(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	const token = "gct_live_operate_token"
	if err := e.st.CreateToken(ctx, store.Token{Name: "laptop", Scope: store.ScopeOperate, Hash: bearer.Hash(token), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r := e.submit(t, command.Submission{})
	for _, ep := range appEndpoints(r.ID) {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			ep.header = map[string]string{"Authorization": "Bearer " + token}
			got := e.do(t, ep)
			if got.code != 401 {
				t.Fatalf("got %d %s; want 401", got.code, got.body)
			}
			if msg := got.errorText(t); !strings.Contains(msg, "MCP token") {
				t.Errorf("error %q; want it to say MCP tokens are not accepted", msg)
			}
		})
	}
	if got, _ := e.svc.Get(ctx, r.ID); got.Status != command.StatusPending {
		t.Errorf("request is %s after the token's tries; want pending", got.Status)
	}
}

// A logged-in browser tricked by another site cannot act.
func TestCrossSiteRefused(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	r := e.submit(t, command.Submission{})
	bad := []map[string]string{
		{"Origin": "https://evil.example"},
		{"Origin": "http://gridcity.test:4601"}, // same host, another port: another origin
		{"Origin": "null"},
		{"Origin": ""},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
	}
	for _, ep := range appEndpoints(r.ID) {
		for _, h := range bad {
			if ep.method != "POST" && h["Sec-Fetch-Site"] == "" {
				continue // reads carry no Origin; Sec-Fetch-Site guards them
			}
			t.Run(fmt.Sprint(ep.method, " ", ep.path, " ", h), func(t *testing.T) {
				ep.cookie, ep.header = c, h
				if got := e.do(t, ep); got.code != 403 {
					t.Fatalf("got %d %s; want 403", got.code, got.body)
				}
			})
		}
	}
	if got, _ := e.svc.Get(context.Background(), r.ID); got.Status != command.StatusPending {
		t.Errorf("request is %s after cross-site tries; want pending", got.Status)
	}
	// Typing the app's address is a same-origin read.
	if got := e.do(t, req{method: "GET", path: "/api/me", cookie: c, header: map[string]string{"Sec-Fetch-Site": "none"}}); got.code != 200 {
		t.Errorf("GET /api/me from the address bar: got %d; want 200", got.code)
	}
}

func TestPendingAndHistory(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	first := e.submit(t, command.Submission{Command: "journalctl -u nginx | tail", Risky: false})
	e.clock.add(time.Second)
	second := e.submit(t, command.Submission{Server: "app-1", Command: "sudo docker login --password-stdin", Risky: true,
		Input: &command.Input{Prompt: "registry token", Secret: true}})

	r := e.do(t, req{method: "GET", path: "/api/requests?status=pending", cookie: c})
	if r.code != 200 {
		t.Fatalf("pending: got %d %s", r.code, r.body)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.body), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0]["id"] != first.ID || list[1]["id"] != second.ID {
		t.Fatalf("pending %s; want the two requests oldest first", r.body)
	}
	for _, k := range []string{"id", "server", "command", "reason", "client", "token", "risky", "input", "sudo", "createdAt", "expiresAt"} {
		if _, ok := list[1][k]; !ok {
			t.Errorf("pending item lacks %q (docs/app.md, The API): %v", k, list[1])
		}
	}
	if in, _ := list[1]["input"].(map[string]any); in["prompt"] != "registry token" || in["secret"] != true {
		t.Errorf("input %v; want the declared prompt, secret", list[1]["input"])
	}
	if list[1]["sudo"] != true || list[1]["risky"] != true || list[0]["input"] != nil {
		t.Errorf("sudo/risky/input wrong: %v / %v", list[1], list[0])
	}
	// Listing shows the cards to a person: one "shown" audit row each.
	e.do(t, req{method: "GET", path: "/api/requests", cookie: c})
	audit, _ := e.st.Audit(context.Background(), first.ID, 100)
	shown := 0
	for _, a := range audit {
		if a.Step == "shown" {
			shown++
			if a.Actor != "approver:alice" {
				t.Errorf("shown by %q; want approver:alice", a.Actor)
			}
		}
	}
	if shown != 1 {
		t.Errorf("%d shown rows; want 1", shown)
	}

	// Finish one, then the history has its decision and result.
	e.do(t, req{method: "POST", path: "/api/requests/" + first.ID + "/approve", cookie: c, body: map[string]string{"note": "go ahead"}})
	finish(e.svc, "web-1", first.ID, "nginx: ok\n", 0)
	for _, path := range []string{"/api/history", "/api/requests?status=all", "/api/history?limit=1"} {
		r = e.do(t, req{method: "GET", path: path, cookie: c})
		var hist []requestView
		if err := json.Unmarshal([]byte(r.body), &hist); err != nil || r.code != 200 {
			t.Fatalf("%s: %d %s", path, r.code, r.body)
		}
		want := 2
		if strings.Contains(path, "limit=1") {
			want = 1
		}
		if len(hist) != want {
			t.Fatalf("%s: %d items; want %d", path, len(hist), want)
		}
		if want == 1 {
			continue
		}
		h := hist[1] // newest first
		if h.ID != first.ID || h.Status != command.StatusCompleted || h.Decision != "approved" || h.DecidedBy != testUser ||
			h.Note != "go ahead" || h.ExitCode == nil || *h.ExitCode != 0 || h.Stdout.Text != "nginx: ok\n" || h.DurationMs != 1234 || h.DecidedAt == nil {
			t.Errorf("%s: history item %+v; want completed, approved by alice with the note, exit 0, stdout", path, h)
		}
	}
	for _, bad := range []string{"/api/requests?status=weird", "/api/history?limit=0", "/api/history?limit=x"} {
		if r := e.do(t, req{method: "GET", path: bad, cookie: c}); r.code != 400 {
			t.Errorf("%s: got %d; want 400", bad, r.code)
		}
	}
	if r := e.do(t, req{method: "GET", path: "/api/requests/cmd_nope", cookie: c}); r.code != 404 {
		t.Errorf("unknown request: got %d; want 404", r.code)
	}
}

func TestApproveAndDeny(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	post := func(id, action string, body any) resp {
		return e.do(t, req{method: "POST", path: "/api/requests/" + id + "/" + action, cookie: c, body: body})
	}
	const secret, sudoPW = "s3cr3t-registry-token", "sudo-pa55word"

	t.Run("approve with input and sudo password", func(t *testing.T) {
		r := e.submit(t, command.Submission{Server: "app-1", Command: "sudo docker login --password-stdin", Input: &command.Input{Prompt: "token", Secret: true}})
		got := post(r.ID, "approve", map[string]string{"note": "fine", "input": secret, "sudoPassword": sudoPW})
		if got.code != 200 {
			t.Fatalf("got %d %s; want 200", got.code, got.body)
		}
		var v requestView
		json.Unmarshal([]byte(got.body), &v)
		if v.Status != command.StatusDispatched || v.DecidedBy != testUser || v.Note != "fine" {
			t.Errorf("answer %+v; want dispatched, by alice, with the note", v)
		}
		rc := e.agent.last()
		if rc.GetRequestId() != r.ID || string(rc.GetStdinSecret()) != secret || string(rc.GetSudoPassword()) != sudoPW {
			t.Errorf("agent got %v; want the input and sudo password passed through", rc)
		}
		// The secrets went to the agent only.
		if strings.Contains(got.body, secret) || strings.Contains(got.body, sudoPW) {
			t.Errorf("the answer echoes a secret: %s", got.body)
		}
		if strings.Contains(e.log.String(), secret) || strings.Contains(e.log.String(), sudoPW) {
			t.Errorf("a secret reached the log")
		}
		rec, _ := e.st.Request(context.Background(), r.ID)
		audit, _ := e.st.Audit(context.Background(), r.ID, 100)
		all := string(rec.Body)
		for _, a := range audit {
			all += string(a.Detail)
		}
		if strings.Contains(all, secret) || strings.Contains(all, sudoPW) {
			t.Errorf("a secret reached the store")
		}
		if got := post(r.ID, "approve", map[string]string{}); got.code != 409 {
			t.Errorf("approving twice: got %d %s; want 409", got.code, got.body)
		}
		if got := post(r.ID, "deny", map[string]string{}); got.code != 409 {
			t.Errorf("denying an approved request: got %d %s; want 409", got.code, got.body)
		}
	})

	t.Run("input required", func(t *testing.T) {
		r := e.submit(t, command.Submission{Input: &command.Input{Prompt: "token"}})
		for _, body := range []any{map[string]string{}, map[string]string{"input": ""}} {
			got := post(r.ID, "approve", body)
			if got.code != 422 || !strings.Contains(got.errorText(t), "type its value") {
				t.Errorf("approve without the input: got %d %s; want 422", got.code, got.body)
			}
		}
		if got, _ := e.svc.Get(context.Background(), r.ID); got.Status != command.StatusPending {
			t.Errorf("request is %s; want still pending", got.Status)
		}
	})

	t.Run("deny with note", func(t *testing.T) {
		r := e.submit(t, command.Submission{})
		got := post(r.ID, "deny", map[string]string{"note": "not during the sale"})
		var v requestView
		json.Unmarshal([]byte(got.body), &v)
		if got.code != 200 || v.Status != command.StatusDenied || v.Decision != "denied" || v.Note != "not during the sale" || v.DecidedBy != testUser {
			t.Fatalf("got %d %+v; want 200, denied by alice with the note", got.code, v)
		}
		if got := post(r.ID, "approve", map[string]string{}); got.code != 409 {
			t.Errorf("approving a denied request: got %d; want 409", got.code)
		}
	})

	t.Run("expired", func(t *testing.T) {
		r := e.submit(t, command.Submission{})
		e.clock.add(command.Expiry)
		got := post(r.ID, "approve", map[string]string{})
		if got.code != 409 {
			t.Fatalf("approving an expired request: got %d %s; want 409", got.code, got.body)
		}
		if v, _ := e.svc.Get(context.Background(), r.ID); viewOf(v).Decision != "expired" {
			t.Errorf("decision %q; want expired", viewOf(v).Decision)
		}
	})

	t.Run("bad bodies", func(t *testing.T) {
		r := e.submit(t, command.Submission{})
		cases := []struct {
			action string
			body   any
			code   int
		}{
			{"approve", map[string]string{"secret": "x"}, 400}, // a misspelt field fails loudly
			{"approve", "not json", 400},
			{"approve", map[string]string{"input": strings.Repeat("x", maxApproveBody)}, 413},
			{"deny", map[string]string{"note": strings.Repeat("é", maxNoteRunes+1)}, 400},
			{"deny", map[string]string{"note": strings.Repeat("x", maxDenyBody)}, 413},
		}
		for _, tc := range cases {
			if got := post(r.ID, tc.action, tc.body); got.code != tc.code {
				t.Errorf("%s %.40v: got %d %s; want %d", tc.action, tc.body, got.code, got.body, tc.code)
			}
		}
		if got := post("cmd_nope", "approve", map[string]string{}); got.code != 404 {
			t.Errorf("unknown id: got %d; want 404", got.code)
		}
		if got, _ := e.svc.Get(context.Background(), r.ID); got.Status != command.StatusPending {
			t.Errorf("request is %s after bad bodies; want pending", got.Status)
		}
	})
}

func TestPageAndHeaders(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `src="/static/app.js"`},
		// The login page says where a local install keeps the first password.
		{"/", "text/html", "<code>.run/coordinator/admin-password</code>"},
		{"/", "text/html", "<code>sudo cat /var/lib/gridcity/admin-password</code>"},
		{"/static/app.js", "javascript", "textContent"},
		{"/static/app.css", "text/css", "prefers-color-scheme"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
	} {
		r := e.do(t, req{method: "GET", path: tc.path})
		if r.code != 200 || !strings.Contains(r.header.Get("Content-Type"), tc.ctype) || !strings.Contains(r.body, tc.contains) {
			t.Errorf("GET %s: %d %q; want 200 %s containing %q", tc.path, r.code, r.header.Get("Content-Type"), tc.ctype, tc.contains)
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("CSP allows inline script or eval: %q", csp)
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
			if r.header.Get(k) != v {
				t.Errorf("GET %s: %s %q; want %q", tc.path, k, r.header.Get(k), v)
			}
		}
	}
	if r := e.do(t, req{method: "GET", path: "/api/me"}); r.header.Get("Cache-Control") != "no-store" || r.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("API answers lack no-store or the security headers: %v", r.header)
	}
	for _, path := range []string{"/nothing", "/static/", "/static/nothing.js"} {
		if r := e.do(t, req{method: "GET", path: path}); r.code != 404 {
			t.Errorf("GET %s: %d; want 404", path, r.code)
		}
	}
}

// The page runs under a CSP that forbids inline script; these checks catch
// a change that would break it (or load something from elsewhere) before a
// browser does.
func TestAssetsSelfContained(t *testing.T) {
	inlineScript := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]`)
	handlerAttr := regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(assets, path)
		text := string(b)
		if strings.HasSuffix(path, ".html") && (inlineScript.MatchString(text) || handlerAttr.MatchString(text) || strings.Contains(text, "style=")) {
			t.Errorf("%s has inline script, handlers or styles, which the CSP blocks", path)
		}
		// The SVG namespace is a name, not something loaded.
		if m := external.FindString(strings.ReplaceAll(text, "http://www.w3.org/2000/svg", "")); m != "" {
			t.Errorf("%s refers to %q; the app loads nothing from elsewhere", path, m)
		}
		if strings.HasSuffix(path, ".js") && (strings.Contains(text, "innerHTML") || strings.Contains(text, "insertAdjacentHTML") || strings.Contains(text, "eval(")) {
			t.Errorf("%s builds HTML from strings; use textContent", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"assets/index.html", "assets/app.js", "assets/app.css"} {
		if _, err := fs.Stat(assets, name); err != nil {
			t.Errorf("%s missing from the embedded assets", name)
		}
	}
}

// With replicas, an approval for a server whose replica died (its agent is
// moving to another) is refused with 503, saying that nothing was
// recorded and the request still waits; it can be approved once the
// agent is back.
func TestApproveWhileTheAgentMoves(t *testing.T) {
	e := newEnv(t, Config{})
	e.svc.Share(command.Shared{Replica: "here", LiveFor: 15 * time.Second})
	c := e.login(t)
	r := e.submit(t, command.Submission{Server: "moving-1"})
	got := e.do(t, req{method: "POST", path: "/api/requests/" + r.ID + "/approve", cookie: c, body: map[string]string{}})
	if got.code != 503 || !strings.Contains(got.body, "has stopped") || !strings.Contains(got.body, "the request still waits: approve it again in a few seconds") {
		t.Fatalf("got %d %s; want 503 saying the request still waits", got.code, got.body)
	}
	if cur, err := e.svc.Get(context.Background(), r.ID); err != nil || cur.Status != command.StatusPending {
		t.Fatalf("after the refusal: %s, %v; want pending", cur.Status, err)
	}
	if n := len(e.agent.sent); n != 0 {
		t.Fatalf("%d commands sent; want none", n)
	}
}
