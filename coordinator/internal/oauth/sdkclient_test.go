package oauth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// go-sdk's authorization-code handler, identified by a Client ID Metadata
// Document, signs in to a resource server that checks tokens with Verify:
// discovery from the 401, the document fetched, consent, token, a call.
func TestGoSDKClientWithCIMD(t *testing.T) {
	ts, pool := documentServer(t, func(id string) any {
		return map[string]any{"client_id": id, "client_name": "go-sdk", "redirect_uris": []string{redirect}, "grant_types": []string{"authorization_code", "refresh_token"}}
	})
	f := newFixture(t, func(c *Config) { c.CIMD.AllowPrivate, c.CIMD.RootCAs = true, pool })
	srv := mcp.NewServer(&mcp.Implementation{Name: "resource", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		ti := req.Extra.TokenInfo
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: ti.UserID + " " + strings.Join(ti.Scopes, ",")}}}, struct{}{}, nil
	})
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		g, err := f.s.Verify(ctx, tok, f.clock.now())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: g.Client, Scopes: []string{string(g.Scope)}, Expiration: g.Expires}, nil
	}
	f.mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: f.s.ResourceMetadataURL()})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))

	id := ts.URL + "/client.json"
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		res, err := f.hc.Get(args.URL)
		if err != nil {
			return nil, err
		}
		res.Body.Close()
		rid, ok := strings.CutPrefix(res.Header.Get("Location"), "/#oauth/")
		if !ok {
			return nil, fmt.Errorf("authorize: %d to %q", res.StatusCode, res.Header.Get("Location"))
		}
		if r, err := f.s.Pending(rid); err != nil || r.ClientName != "go-sdk" || r.Registration != store.RegisteredCIMD {
			return nil, fmt.Errorf("pending %+v, %v", r, err)
		}
		to, err := f.s.Grant(ctx, rid, "ann", store.ScopeRead)
		if err != nil {
			return nil, err
		}
		u, _ := url.Parse(to)
		return &auth.AuthorizationResult{Code: u.Query().Get("code"), State: u.Query().Get("state"), Iss: u.Query().Get("iss")}, nil
	}
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: id},
		RedirectURL:                    redirect,
		AuthorizationCodeFetcher:       fetch,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.s.Resource(), OAuthHandler: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != id+" read" {
		t.Errorf("whoami: %q; want %q", got, id+" read")
	}
}
