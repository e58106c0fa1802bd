package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gridcity/gridcity/coordinator/internal/oauth"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// fakeConsent is the authorization server's consent as the app sees it.
type fakeConsent struct {
	granted, denied, removed []string
	to                       string // where a grant sends the browser
}

func (f *fakeConsent) Clients(context.Context) ([]oauth.Connected, error) {
	return []oauth.Connected{{ID: "https://app.example/client.json", Name: "App", Registration: "cimd", Scope: "read", Approvers: []string{"alice"}}}, nil
}

func (f *fakeConsent) Remove(_ context.Context, id, approver string) error {
	if id != "https://app.example/client.json" {
		return store.ErrNotFound
	}
	f.removed = append(f.removed, approver+":"+id)
	return nil
}

func (f *fakeConsent) Pending(id string) (oauth.Request, error) {
	if id != "r1" {
		return oauth.Request{}, oauth.ErrNoRequest
	}
	return oauth.Request{ClientName: "Claude", ClientID: "gcc_1", RedirectHost: "claude.ai", Scope: "operate"}, nil
}

func (f *fakeConsent) Grant(_ context.Context, id, approver string, scope store.Scope) (string, error) {
	if id != "r1" {
		return "", oauth.ErrNoRequest
	}
	if !scope.MCP() {
		return "", oauth.ErrScope
	}
	f.granted = append(f.granted, approver+":"+string(scope))
	if f.to != "" {
		return f.to, nil
	}
	return "https://claude.ai/cb?code=c&state=s&iss=x", nil
}

func (f *fakeConsent) Deny(id, approver string) (string, error) {
	if id != "r1" {
		return "", oauth.ErrNoRequest
	}
	f.denied = append(f.denied, approver)
	return "https://claude.ai/cb?error=access_denied", nil
}

func TestOAuthConsent(t *testing.T) {
	fc := &fakeConsent{}
	e := newEnv(t, Config{OAuth: fc})
	c := e.login(t)
	r := e.do(t, req{method: "GET", path: "/api/oauth/requests/r1", cookie: c})
	var got oauth.Request
	if r.code != 200 || json.Unmarshal([]byte(r.body), &got) != nil || got.ClientName != "Claude" || got.RedirectHost != "claude.ai" || got.Scope != "operate" {
		t.Fatalf("GET: %d %s", r.code, r.body)
	}
	for _, tt := range []struct {
		name string
		rq   req
		code int
	}{
		{"no session", req{method: "POST", path: "/api/oauth/requests/r1/grant", body: map[string]string{"scope": "read"}}, http.StatusUnauthorized},
		{"cookie without the page's key", req{method: "POST", path: "/api/oauth/requests/r1/grant", body: map[string]string{"scope": "read"}, cookie: c, header: map[string]string{csrfHeader: ""}}, http.StatusUnauthorized},
		{"another origin", req{method: "POST", path: "/api/oauth/requests/r1/grant", body: map[string]string{"scope": "read"}, cookie: c, header: map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
		{"unknown request", req{method: "POST", path: "/api/oauth/requests/r2/grant", body: map[string]string{"scope": "read"}, cookie: c}, http.StatusNotFound},
		{"bad scope", req{method: "POST", path: "/api/oauth/requests/r1/grant", body: map[string]string{"scope": "metrics"}, cookie: c}, http.StatusBadRequest},
		{"unknown field", req{method: "POST", path: "/api/oauth/requests/r1/grant", body: map[string]string{"scopes": "read"}, cookie: c}, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.do(t, tt.rq); r.code != tt.code {
				t.Errorf("got %d %s; want %d", r.code, r.body, tt.code)
			}
		})
	}
	if len(fc.granted) != 0 {
		t.Fatalf("granted %v by refused calls", fc.granted)
	}
	r = e.do(t, req{method: "POST", path: "/api/oauth/requests/r1/grant", body: map[string]string{"scope": "read"}, cookie: c})
	if r.code != 200 || r.body != `{"redirect":"https://claude.ai/cb?code=c\u0026state=s\u0026iss=x"}`+"\n" || len(fc.granted) != 1 || fc.granted[0] != testUser+":read" {
		t.Errorf("grant: %d %s, granted %v", r.code, r.body, fc.granted)
	}
	r = e.do(t, req{method: "POST", path: "/api/oauth/requests/r1/deny", cookie: c})
	if r.code != 200 || len(fc.denied) != 1 || fc.denied[0] != testUser {
		t.Errorf("deny: %d %s, denied %v", r.code, r.body, fc.denied)
	}

	r = e.do(t, req{method: "GET", path: "/api/oauth/clients", cookie: c})
	if r.code != 200 || !strings.Contains(r.body, `"clientId":"https://app.example/client.json"`) {
		t.Errorf("clients: %d %s", r.code, r.body)
	}
	if r := e.do(t, req{method: "POST", path: "/api/oauth/clients/revoke", body: map[string]string{"clientId": "https://app.example/client.json"}}); r.code != http.StatusUnauthorized {
		t.Errorf("revoke without a session: %d", r.code)
	}
	if r := e.do(t, req{method: "POST", path: "/api/oauth/clients/revoke", body: map[string]string{"clientId": "nobody"}, cookie: c}); r.code != http.StatusNotFound {
		t.Errorf("revoke an unknown client: %d %s", r.code, r.body)
	}
	r = e.do(t, req{method: "POST", path: "/api/oauth/clients/revoke", body: map[string]string{"clientId": "https://app.example/client.json"}, cookie: c})
	if r.code != 200 || len(fc.removed) != 1 || fc.removed[0] != testUser+":https://app.example/client.json" {
		t.Errorf("revoke: %d %s, removed %v", r.code, r.body, fc.removed)
	}

	e = newEnv(t, Config{})
	if r := e.do(t, req{method: "GET", path: "/api/oauth/requests/r1", cookie: e.login(t)}); r.code != http.StatusNotFound {
		t.Errorf("without OAuth: got %d; want 404", r.code)
	}
}

// The consent and the connected clients in a real browser: the approver
// sees who asks, grants operate and is sent to the client; then revokes
// the client from the list.
func TestBrowserOAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	fc := &fakeConsent{}
	e := newEnv(t, Config{Now: time.Now, OAuth: fc})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	fc.to = srv.URL + "/callback-of-the-client?code=c&state=s"
	// The authorization endpoint sends a browser with no session here:
	// the login first, then the consent.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	p := &browserPage{t: t, ctx: startChromium(t, ctx, findChromium(t)), url: srv.URL, shots: os.Getenv("GRIDCITY_SCREENSHOTS")}
	p.resize("phone")
	problems := watchConsole(p.ctx)
	p.do("open the consent, logged out", chromedp.Navigate(srv.URL+"/#oauth/r1"), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	p.do("log in",
		chromedp.SendKeys(chromedp.CSS("#login-form [name=username]"), testUser),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=password]"), testPassword),
		chromedp.Click(chromedp.CSS("#login-form button")),
	)
	waitFor(t, p.ctx, "the consent", `!document.querySelector('#oauth-ask').hidden`)
	p.contains("#oauth-ask", "Claude asks to use gridcity for you", "gcc_1", "claude.ai", "read, and ask to run commands")
	p.accessible("consent")
	p.noSidewaysScroll("consent")
	p.shot("oauth-consent", "phone")
	p.do("grant operate", chromedp.Click(chromedp.CSS(`#oauth-scopes input[value=operate]`)), chromedp.Click(chromedp.CSS("#oauth-grant")))
	waitFor(t, p.ctx, "the client's redirect", `location.pathname === '/callback-of-the-client'`)
	if len(fc.granted) != 1 || fc.granted[0] != testUser+":operate" {
		t.Errorf("granted %v; want %s:operate", fc.granted, testUser)
	}

	// Back in the app (the tab keeps its session key): the client listed, revoked.
	p.do("open the clients", chromedp.Navigate(srv.URL+"/#clients"))
	waitFor(t, p.ctx, "the clients", `document.querySelectorAll('#clients-list .card').length === 1`)
	p.contains("#clients-list", "App", "https://app.example/client.json", "read", testUser)
	p.accessible("clients")
	p.do("revoke", chromedp.Click(chromedp.CSS("#clients-list .card button.danger")))
	waitFor(t, p.ctx, "the flash", `!document.querySelector('#flash').hidden`)
	if len(fc.removed) != 1 {
		t.Errorf("removed %v; want the client", fc.removed)
	}
	if pr := problems(); len(pr) > 0 {
		t.Errorf("console: %v", pr)
	}
}
