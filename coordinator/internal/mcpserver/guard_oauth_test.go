package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/oauth"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// oauthGrants is an authorization server's verifier with fixed grants.
type oauthGrants map[string]oauth.Grant

func (g oauthGrants) Verify(_ context.Context, tok string, now time.Time) (oauth.Grant, error) {
	gr, ok := g[tok]
	if !ok || !now.Before(gr.Expires) {
		return oauth.Grant{}, fmt.Errorf("%w: unknown or expired", oauth.ErrInvalidToken)
	}
	return gr, nil
}

// noStaticTokens knows no static token.
type noStaticTokens struct{}

func (noStaticTokens) TokenByHash(context.Context, []byte) (store.Token, error) {
	return store.Token{}, store.ErrNotFound
}

// OAuth access tokens pass the guard with their scope, client and
// approver; refused ones, like a missing token, get a 401 that names the
// resource metadata.
func TestGuardOAuth(t *testing.T) {
	const meta = "http://127.0.0.1:4600/.well-known/oauth-protected-resource/mcp"
	cfg := DefaultGuardConfig()
	cfg.OAuth = oauthGrants{
		"gco_read":    {Client: "gcc_1", Name: "Claude", Approver: "ann", Family: "f1", Scope: store.ScopeRead, Expires: time.Now().Add(time.Hour)},
		"gco_expired": {Client: "gcc_1", Name: "Claude", Approver: "ann", Family: "f2", Scope: store.ScopeOperate, Expires: time.Now().Add(-time.Second)},
	}
	cfg.ResourceMetadataURL = meta
	var got Caller
	h := Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = CallerFrom(r.Context()) }), noStaticTokens{}, cfg, slog.New(slog.DiscardHandler))
	for _, tt := range []struct {
		name, auth string
		code       int
	}{
		{"no token", "", 401},
		{"unknown OAuth token", "Bearer gco_nothing", 401},
		{"expired OAuth token", "Bearer gco_expired", 401},
		{"unknown static token", "Bearer gc_nothing", 401},
		{"read grant", "Bearer gco_read", 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://127.0.0.1:4600/mcp", nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.code {
				t.Fatalf("got %d %s; want %d", w.Code, w.Body, tt.code)
			}
			if want := fmt.Sprintf("Bearer resource_metadata=%q", meta); tt.code == 401 && w.Header().Get("WWW-Authenticate") != want {
				t.Errorf("WWW-Authenticate %q; want %s", w.Header().Values("WWW-Authenticate"), want)
			}
		})
	}
	if got.Scope != store.ScopeRead || got.OAuthClient != "Claude" || got.Approver != "ann" || got.Token != "oauth:Claude for ann" {
		t.Errorf("caller %+v", got)
	}
}
