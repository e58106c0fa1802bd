package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// clock is a settable time for the server under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	s     *Server
	mux   *http.ServeMux // the server's routes, for a test to add the resource's
	st    store.Store
	ts    *httptest.Server
	clock *clock
	hc    *http.Client // follows no redirects
}

func newFixture(t *testing.T, tune ...func(*Config)) *fixture {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mux := http.NewServeMux()
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	c := &clock{t: time.Now()}
	cfg := DefaultConfig(ts.URL)
	cfg.Now = c.now
	for _, f := range tune {
		f(&cfg)
	}
	s := New(cfg, st, nil)
	s.Register(mux)
	return &fixture{s: s, mux: mux, st: st, ts: ts, clock: c, hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (f *fixture) postJSON(t *testing.T, path string, body any) (*http.Response, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := f.hc.Post(f.ts.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return res, decode(t, res)
}

func (f *fixture) postForm(t *testing.T, path string, form url.Values) (*http.Response, map[string]any) {
	t.Helper()
	res, err := f.hc.PostForm(f.ts.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	return res, decode(t, res)
}

func decode(t *testing.T, res *http.Response) map[string]any {
	t.Helper()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	if len(b) > 0 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
	}
	return m
}

const redirect = "http://127.0.0.1:9999/callback"

// register registers a public client and returns its id.
func (f *fixture) register(t *testing.T) string {
	t.Helper()
	res, m := f.postJSON(t, "/oauth/register", map[string]any{"client_name": "Test client", "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none"})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %v", res.StatusCode, m)
	}
	return m["client_id"].(string)
}

var verifier = strings.Repeat("v", 43)

func challenge(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func (f *fixture) authorizeQuery(client string) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {redirect}, "state": {"st8"},
		"code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {f.s.Resource()}, "scope": {"read operate"}}
}

func (f *fixture) authorize(t *testing.T, q url.Values) *http.Response {
	t.Helper()
	res, err := f.hc.Get(f.ts.URL + "/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// code runs the authorization and an approver's grant, and returns the code.
func (f *fixture) code(t *testing.T, client string, scope store.Scope) string {
	t.Helper()
	res := f.authorize(t, f.authorizeQuery(client))
	loc := res.Header.Get("Location")
	id, ok := strings.CutPrefix(loc, "/#oauth/")
	if res.StatusCode != http.StatusFound || !ok {
		t.Fatalf("authorize: %d to %q; want 302 to /#oauth/ID", res.StatusCode, loc)
	}
	to, err := f.s.Grant(context.Background(), id, "ann", scope)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(to)
	q := u.Query()
	if q.Get("state") != "st8" || q.Get("iss") != f.s.Issuer() || !strings.HasPrefix(to, redirect+"?") {
		t.Fatalf("grant redirect %q; want %s with state and iss", to, redirect)
	}
	return q.Get("code")
}

func (f *fixture) exchange(t *testing.T, client, code string, tune ...func(url.Values)) (*http.Response, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}, "resource": {f.s.Resource()}}
	for _, tf := range tune {
		tf(form)
	}
	return f.postForm(t, "/oauth/token", form)
}

func (f *fixture) refresh(t *testing.T, client, refresh string) (*http.Response, map[string]any) {
	t.Helper()
	return f.postForm(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}})
}

func TestMetadata(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		res, err := http.Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		prm := decode(t, res)
		if prm["resource"] != f.ts.URL+"/mcp" || prm["authorization_servers"].([]any)[0] != f.ts.URL || jsonOf(prm["scopes_supported"]) != `["read","operate"]` {
			t.Errorf("%s: %v", path, prm)
		}
	}
	res, err := http.Get(f.ts.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	as := decode(t, res)
	for k, want := range map[string]any{
		"issuer": f.ts.URL, "authorization_endpoint": f.ts.URL + "/oauth/authorize", "token_endpoint": f.ts.URL + "/oauth/token",
		"registration_endpoint": f.ts.URL + "/oauth/register", "revocation_endpoint": f.ts.URL + "/oauth/revoke",
		"client_id_metadata_document_supported": true, "authorization_response_iss_parameter_supported": true,
	} {
		if as[k] != want {
			t.Errorf("%s: got %v; want %v", k, as[k], want)
		}
	}
	for k, want := range map[string]string{"code_challenge_methods_supported": `["S256"]`, "response_types_supported": `["code"]`,
		"grant_types_supported": `["authorization_code","refresh_token"]`, "token_endpoint_auth_methods_supported": `["none"]`, "scopes_supported": `["read","operate"]`} {
		if got := jsonOf(as[k]); got != want {
			t.Errorf("%s: got %s; want %s", k, got, want)
		}
	}
	if _, ok := as["jwks_uri"]; ok {
		t.Errorf("jwks_uri is served: %v", as)
	}
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestRegisterRefusals(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxClients = 2; c.BurstRegistrations = 100 })
	for _, tt := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"confidential", map[string]any{"client_name": "x", "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"},
		{"http off loopback", map[string]any{"client_name": "x", "redirect_uris": []string{"http://example.com/cb"}}, "invalid_redirect_uri"},
		{"fragment", map[string]any{"client_name": "x", "redirect_uris": []string{"https://example.com/cb#x"}}, "invalid_redirect_uri"},
		{"custom scheme", map[string]any{"client_name": "x", "redirect_uris": []string{"myapp://cb"}}, "invalid_redirect_uri"},
		{"no redirect", map[string]any{"client_name": "x", "redirect_uris": []string{}}, "invalid_redirect_uri"},
		{"no name", map[string]any{"redirect_uris": []string{redirect}}, "invalid_client_metadata"},
		{"implicit", map[string]any{"client_name": "x", "redirect_uris": []string{redirect}, "grant_types": []string{"implicit"}}, "invalid_client_metadata"},
		{"too big", map[string]any{"client_name": strings.Repeat("x", 6000), "redirect_uris": []string{redirect}}, "invalid_client_metadata"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, m := f.postJSON(t, "/oauth/register", tt.body)
			if res.StatusCode != http.StatusBadRequest || m["error"] != tt.want {
				t.Errorf("got %d %v; want 400 %s", res.StatusCode, m, tt.want)
			}
		})
	}
	f.register(t)
	f.register(t)
	if res, m := f.postJSON(t, "/oauth/register", map[string]any{"client_name": "third", "redirect_uris": []string{redirect}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("past the cap: got %d %v; want 400", res.StatusCode, m)
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	f := newFixture(t)
	client := f.register(t)
	for _, tt := range []struct {
		name  string
		tune  func(url.Values)
		error string // "" for a 400 page (not redirected)
	}{
		{"missing PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"no method", func(q url.Values) { q.Del("code_challenge_method") }, "invalid_request"},
		{"wrong resource", func(q url.Values) { q.Set("resource", "https://elsewhere.example/mcp") }, "invalid_target"},
		{"no resource", func(q url.Values) { q.Del("resource") }, "invalid_target"},
		{"token response", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"unknown scope", func(q url.Values) { q.Set("scope", "admin") }, "invalid_scope"},
		{"unknown client", func(q url.Values) { q.Set("client_id", "gcc_nobody") }, ""},
		{"wrong redirect", func(q url.Values) { q.Set("redirect_uri", "https://attacker.example/cb") }, ""},
		{"redirect on another loopback path", func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:9999/other") }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := f.authorizeQuery(client)
			tt.tune(q)
			res := f.authorize(t, q)
			if tt.error == "" {
				if res.StatusCode != http.StatusBadRequest {
					t.Errorf("got %d to %q; want 400 without a redirect", res.StatusCode, res.Header.Get("Location"))
				}
				return
			}
			u, _ := url.Parse(res.Header.Get("Location"))
			if res.StatusCode != http.StatusFound || !strings.HasPrefix(u.String(), redirect) || u.Query().Get("error") != tt.error || u.Query().Get("state") != "st8" || u.Query().Get("iss") != f.s.Issuer() {
				t.Errorf("got %d to %q; want a redirect with error %s, state and iss", res.StatusCode, u, tt.error)
			}
		})
	}
	t.Run("loopback redirect on another port", func(t *testing.T) {
		q := f.authorizeQuery(client)
		q.Set("redirect_uri", "http://127.0.0.1:1234/callback")
		if res := f.authorize(t, q); res.StatusCode != http.StatusFound || !strings.HasPrefix(res.Header.Get("Location"), "/#oauth/") {
			t.Errorf("got %d to %q; want the consent (RFC 8252 §7.3)", res.StatusCode, res.Header.Get("Location"))
		}
	})
}

func TestConsent(t *testing.T) {
	f := newFixture(t)
	client := f.register(t)
	q := f.authorizeQuery(client)
	q.Set("scope", "read")
	id := strings.TrimPrefix(f.authorize(t, q).Header.Get("Location"), "/#oauth/")
	r, err := f.s.Pending(id)
	if err != nil || r.ClientName != "Test client" || r.RedirectHost != "127.0.0.1:9999" || r.Scope != "read" || r.ClientID != client {
		t.Fatalf("pending: %+v, %v", r, err)
	}
	if _, err := f.s.Grant(context.Background(), id, "ann", store.ScopeOperate); !errors.Is(err, ErrScope) {
		t.Errorf("grant of more than asked: got %v; want ErrScope", err)
	}
	if _, err := f.s.Grant(context.Background(), id, "ann", "metrics"); !errors.Is(err, ErrScope) {
		t.Errorf("grant of scope metrics: got %v; want ErrScope", err)
	}
	to, err := f.s.Deny(id, "ann")
	if err != nil || !strings.Contains(to, "error=access_denied") || !strings.Contains(to, "state=st8") {
		t.Errorf("deny: %q, %v", to, err)
	}
	if _, err := f.s.Grant(context.Background(), id, "ann", store.ScopeRead); !errors.Is(err, ErrNoRequest) {
		t.Errorf("grant after deny: got %v; want ErrNoRequest", err)
	}
	id = strings.TrimPrefix(f.authorize(t, q).Header.Get("Location"), "/#oauth/")
	f.clock.add(11 * time.Minute)
	if _, err := f.s.Pending(id); !errors.Is(err, ErrNoRequest) {
		t.Errorf("expired request: got %v; want ErrNoRequest", err)
	}
}

func TestTokenRefusals(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.BurstFailures = 1000 })
	client := f.register(t)
	other := f.register(t)
	for _, tt := range []struct {
		name string
		tune func(url.Values)
		code int
		want string
	}{
		{"wrong verifier", func(v url.Values) { v.Set("code_verifier", strings.Repeat("w", 43)) }, 400, "invalid_grant"},
		{"short verifier", func(v url.Values) { v.Set("code_verifier", "abc") }, 400, "invalid_grant"},
		{"no verifier", func(v url.Values) { v.Del("code_verifier") }, 400, "invalid_request"},
		{"wrong redirect", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9999/other") }, 400, "invalid_grant"},
		{"wrong resource", func(v url.Values) { v.Set("resource", "https://elsewhere.example/mcp") }, 400, "invalid_target"},
		{"other client", func(v url.Values) { v.Set("client_id", other) }, 400, "invalid_grant"},
		{"unknown client", func(v url.Values) { v.Set("client_id", "gcc_nobody") }, 401, "invalid_client"},
		{"unknown code", func(v url.Values) { v.Set("code", "gcac_nothing") }, 400, "invalid_grant"},
		{"grant type", func(v url.Values) { v.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code := f.code(t, client, store.ScopeRead)
			res, m := f.exchange(t, client, code, tt.tune)
			if res.StatusCode != tt.code || m["error"] != tt.want {
				t.Errorf("got %d %v; want %d %s", res.StatusCode, m, tt.code, tt.want)
			}
		})
	}
	t.Run("expired code", func(t *testing.T) {
		code := f.code(t, client, store.ScopeRead)
		f.clock.add(61 * time.Second)
		if res, m := f.exchange(t, client, code); res.StatusCode != 400 || m["error"] != "invalid_grant" {
			t.Errorf("got %d %v; want 400 invalid_grant", res.StatusCode, m)
		}
	})
	t.Run("a code is spent by a failed try", func(t *testing.T) {
		code := f.code(t, client, store.ScopeRead)
		f.exchange(t, client, code, func(v url.Values) { v.Set("code_verifier", strings.Repeat("w", 43)) })
		if res, m := f.exchange(t, client, code); res.StatusCode != 400 || m["error"] != "invalid_grant" {
			t.Errorf("got %d %v; want 400 invalid_grant", res.StatusCode, m)
		}
	})
}

func TestTokenLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := f.register(t)
	code := f.code(t, client, store.ScopeRead)
	res, m := f.exchange(t, client, code)
	if res.StatusCode != 200 || m["token_type"] != "Bearer" || m["scope"] != "read" || m["expires_in"] != 3600.0 || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("exchange: %d %v", res.StatusCode, m)
	}
	access, refresh := m["access_token"].(string), m["refresh_token"].(string)
	g, err := f.s.Verify(ctx, access, f.clock.now())
	if err != nil || g.Scope != store.ScopeRead || g.Approver != "ann" || g.Name != "Test client" || g.Client != client {
		t.Fatalf("verify: %+v, %v", g, err)
	}
	if _, err := f.s.Verify(ctx, refresh, f.clock.now()); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a refresh token as access token: got %v", err)
	}
	if _, err := f.s.Verify(ctx, access, f.clock.now().Add(time.Hour)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("expired access token: got %v", err)
	}

	// The code again: refused, and the tokens issued from it revoked.
	if res, m := f.exchange(t, client, code); res.StatusCode != 400 || m["error"] != "invalid_grant" {
		t.Errorf("code reuse: got %d %v", res.StatusCode, m)
	}
	if _, err := f.s.Verify(ctx, access, f.clock.now()); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("access token after code reuse: got %v; want revoked", err)
	}

	// A new grant; refresh rotates; the old refresh token again revokes all.
	_, m = f.exchange(t, client, f.code(t, client, store.ScopeOperate))
	access, refresh = m["access_token"].(string), m["refresh_token"].(string)
	res, m = f.refresh(t, client, refresh)
	if res.StatusCode != 200 || m["refresh_token"] == refresh || m["scope"] != "operate" {
		t.Fatalf("refresh: %d %v", res.StatusCode, m)
	}
	access2 := m["access_token"].(string)
	if g, err := f.s.Verify(ctx, access2, f.clock.now()); err != nil || g.Approver != "ann" || g.Scope != store.ScopeOperate {
		t.Fatalf("refreshed token: %+v, %v", g, err)
	}
	if res, m := f.postForm(t, "/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {m["refresh_token"].(string)}, "resource": {"https://elsewhere.example/mcp"}}); res.StatusCode != 400 || m["error"] != "invalid_target" {
		t.Errorf("refresh for another resource: got %d %v", res.StatusCode, m)
	}
	if res, m := f.refresh(t, f.register(t), m["refresh_token"].(string)); res.StatusCode != 400 || m["error"] != "invalid_grant" {
		t.Errorf("another client's refresh token: got %d %v", res.StatusCode, m)
	}
	if res, m := f.refresh(t, client, refresh); res.StatusCode != 400 || m["error"] != "invalid_grant" {
		t.Errorf("refresh reuse: got %d %v", res.StatusCode, m)
	}
	for _, tok := range []string{access, access2} {
		if _, err := f.s.Verify(ctx, tok, f.clock.now()); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("token after refresh reuse: got %v; want revoked", err)
		}
	}

	// Revocation (RFC 7009), and a removed client.
	_, m = f.exchange(t, client, f.code(t, client, store.ScopeRead))
	if res, _ := f.postForm(t, "/oauth/revoke", url.Values{"token": {m["refresh_token"].(string)}, "client_id": {client}}); res.StatusCode != 200 {
		t.Errorf("revoke: %d", res.StatusCode)
	}
	if _, err := f.s.Verify(ctx, m["access_token"].(string), f.clock.now()); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("access token of a revoked grant: got %v", err)
	}
	_, m = f.exchange(t, client, f.code(t, client, store.ScopeRead))
	if err := f.st.RemoveOAuthClient(ctx, client, f.clock.now()); err != nil {
		t.Fatal(err)
	}
	if res, m := f.refresh(t, client, m["refresh_token"].(string)); res.StatusCode != 401 || m["error"] != "invalid_client" {
		t.Errorf("removed client: got %d %v; want 401 invalid_client", res.StatusCode, m)
	}
	if res := f.authorize(t, f.authorizeQuery(client)); res.StatusCode != 400 {
		t.Errorf("authorize a removed client: got %d; want 400", res.StatusCode)
	}
}

func TestRegistrationRateLimit(t *testing.T) {
	f := newFixture(t)
	for range 10 {
		f.register(t)
	}
	if res, m := f.postJSON(t, "/oauth/register", map[string]any{"client_name": "x", "redirect_uris": []string{redirect}}); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("11th registration: got %d %v; want 429", res.StatusCode, m)
	}
	f.clock.add(time.Minute)
	f.register(t)
}

// A client that names itself in HTTP Basic (an empty secret) is the
// client of the form's client_id.
func TestTokenClientInBasicAuth(t *testing.T) {
	f := newFixture(t)
	client := f.register(t)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {f.code(t, client, store.ScopeRead)}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	req, _ := http.NewRequest("POST", f.ts.URL+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client), "")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, res); res.StatusCode != 200 || m["access_token"] == nil {
		t.Errorf("got %d %v; want a token", res.StatusCode, m)
	}
}

func TestTokenRateLimit(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.BurstFailures = 3 })
	client := f.register(t)
	for range 3 {
		f.exchange(t, client, "gcac_wrong")
	}
	if res, m := f.exchange(t, client, "gcac_wrong"); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("got %d %v; want 429", res.StatusCode, m)
	}
}

// The endpoints a browser-based client calls answer CORS preflights, and
// refuse other methods.
func TestCORS(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/oauth/token", "/oauth/register", "/oauth/revoke", "/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"} {
		r, _ := http.NewRequest("OPTIONS", f.ts.URL+path, nil)
		r.Header.Set("Origin", "http://localhost:6274")
		r.Header.Set("Access-Control-Request-Method", "POST")
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("OPTIONS %s: %d, allow origin %q", path, res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	res, err := http.Get(f.ts.URL + "/oauth/token")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /oauth/token: %d; want 405", res.StatusCode)
	}
}
