package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// approverBrowser is the approver's side of a sign-in, driven over HTTP
// as the app's page drives it: logged in, it follows the authorization
// endpoint to the consent and grants scope.
type approverBrowser struct {
	base  string
	hc    *http.Client
	csrf  string
	scope string
}

func loginApprover(t *testing.T, addr, data string) *approverBrowser {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(data, "admin-password"))
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	b := &approverBrowser{base: "http://" + addr, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	var me struct {
		CSRFToken string `json:"csrfToken"`
	}
	if err := b.call("POST", "/api/login", map[string]string{"username": "admin", "password": strings.TrimSpace(string(pw))}, &me); err != nil {
		t.Fatal(err)
	}
	b.csrf = me.CSRFToken
	return b
}

func (b *approverBrowser) call(method, path string, body, out any) error {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, b.base+path, strings.NewReader(string(j)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if b.csrf != "" {
		req.Header.Set("X-Gridcity-Session", b.csrf)
	}
	res, err := b.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// fetch is the go-sdk client's AuthorizationCodeFetcher: the browser opens
// the authorization URL, lands on /#oauth/ID, and the approver grants.
func (b *approverBrowser) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	res, err := b.hc.Get(args.URL)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	id, ok := strings.CutPrefix(res.Header.Get("Location"), "/#oauth/")
	if !ok {
		return nil, fmt.Errorf("authorize: %d to %q; want /#oauth/ID", res.StatusCode, res.Header.Get("Location"))
	}
	var req struct {
		ClientName   string `json:"clientName"`
		RedirectHost string `json:"redirectHost"`
	}
	if err := b.call("GET", "/api/oauth/requests/"+id, nil, &req); err != nil {
		return nil, err
	}
	if req.ClientName != "oauth e2e" || req.RedirectHost != "127.0.0.1:7" {
		return nil, fmt.Errorf("consent shows %+v", req)
	}
	var out struct{ Redirect string }
	if err := b.call("POST", "/api/oauth/requests/"+id+"/grant", map[string]string{"scope": b.scope}, &out); err != nil {
		return nil, err
	}
	u, err := url.Parse(out.Redirect)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// The whole sign-in of an MCP client against a running coordinator, with
// go-sdk's authorization-code handler: discovery from the 401, Dynamic
// Client Registration, consent in the app by a signed-in approver, the
// token, MCP calls within the scope granted, refresh, and the reuse of a
// rotated refresh token revoking the client's tokens; then the CLI lists
// and removes the client.
func TestOAuthSignIn(t *testing.T) {
	addr, data := serveInProcess(t)
	ctx := context.Background()
	endpoint := "http://" + addr + "/mcp"

	res, err := http.Post(endpoint, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if want := `Bearer resource_metadata="http://` + addr + `/.well-known/oauth-protected-resource/mcp"`; res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q; want 401 %s", res.StatusCode, res.Header.Get("WWW-Authenticate"), want)
	}

	browser := loginApprover(t, addr, data)
	browser.scope = "read"
	const redirect = "http://127.0.0.1:7/callback"
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "oauth e2e", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}}},
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: browser.fetch,
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-e2e", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "list_servers" }) ||
		slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "run_command" }) {
		t.Fatalf("a read grant lists %d tools; want list_servers and no run_command", len(tools.Tools))
	}
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"server": "web-1", "command": "id", "reason": "test"}}); err == nil && !r.IsError {
		t.Fatalf("a read grant ran run_command: %+v", r)
	}

	ts, err := h.TokenSource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.AccessToken, "gco_") || tok.RefreshToken == "" {
		t.Fatalf("token %q, refresh %q", tok.AccessToken, tok.RefreshToken)
	}

	// Refresh by hand (the token source would only at expiry).
	clientID := registeredClient(t, data)
	refresh := func(rt string) (map[string]any, int) {
		res, err := http.PostForm("http://"+addr+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {rt}})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		json.NewDecoder(res.Body).Decode(&m)
		return m, res.StatusCode
	}
	next, code := refresh(tok.RefreshToken)
	if code != 200 {
		t.Fatalf("refresh: %d %v", code, next)
	}
	fresh := next["access_token"].(string)
	if err := listWith(ctx, endpoint, fresh); err != nil {
		t.Fatalf("the refreshed token: %v", err)
	}
	if m, code := refresh(tok.RefreshToken); code != 400 || m["error"] != "invalid_grant" {
		t.Fatalf("reuse of the rotated refresh token: %d %v; want 400 invalid_grant", code, m)
	}
	if err := listWith(ctx, endpoint, fresh); err == nil {
		t.Fatal("after the reuse, the client's newest token still works")
	}

	// The CLI lists the client and removes it.
	out, err := gridcity(t, "token", "list", "--json", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if !slices.ContainsFunc(rows, func(r map[string]any) bool {
		return r["kind"] == "oauth" && r["name"] == "oauth e2e" && r["clientId"] == clientID && r["registration"] == "dcr"
	}) || !slices.ContainsFunc(rows, func(r map[string]any) bool { return r["kind"] == "static" && r["name"] == "local" }) {
		t.Fatalf("token list --json: %s", out)
	}
	if out, _ := gridcity(t, "token", "list", "--data", data); !strings.Contains(out, "oauth e2e (OAuth "+clientID+", no live token)") {
		t.Errorf("token list:\n%s", out)
	}
	if _, err := gridcity(t, "token", "revoke", "oauth e2e", "--data", data); err != nil {
		t.Fatal(err)
	}
	if m, code := refresh(next["refresh_token"].(string)); code != 401 || m["error"] != "invalid_client" {
		t.Fatalf("a removed client refreshing: %d %v; want 401 invalid_client", code, m)
	}
}

// registeredClient is the id of the one OAuth client registered.
func registeredClient(t *testing.T, data string) string {
	t.Helper()
	out, err := gridcity(t, "token", "list", "--json", "--data", data)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct{ Kind, ClientID string }
	json.Unmarshal([]byte(out), &rows)
	for _, r := range rows {
		if r.Kind == "oauth" {
			return r.ClientID
		}
	}
	t.Fatalf("no OAuth client in %s", out)
	return ""
}

// listWith lists the tools with a bearer token, in a session of its own.
func listWith(ctx context.Context, endpoint, token string) error {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-e2e-token", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: withToken(token)}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = cs.ListTools(ctx, nil)
	return err
}
