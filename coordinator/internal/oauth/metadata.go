package oauth

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// resourceMetadata answers RFC 9728 for the MCP endpoint, through
// go-sdk's handler (which also answers CORS preflights).
func (s *Server) resourceMetadata() http.Handler {
	return auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.Resource(),
		AuthorizationServers:   []string{s.cfg.Issuer},
		ScopesSupported:        Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "gridcity",
	})
}

// serverMetadata answers RFC 8414.
func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	m := oauthex.AuthServerMeta{
		Issuer:                                     s.cfg.Issuer,
		AuthorizationEndpoint:                      s.cfg.Issuer + "/oauth/authorize",
		TokenEndpoint:                              s.cfg.Issuer + "/oauth/token",
		RegistrationEndpoint:                       s.cfg.Issuer + "/oauth/register",
		RevocationEndpoint:                         s.cfg.Issuer + "/oauth/revoke",
		ScopesSupported:                            Scopes,
		ResponseTypesSupported:                     []string{"code"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported:          []string{"none"},
		RevocationEndpointAuthMethodsSupported:     []string{"none"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		ClientIDMetadataDocumentSupported:          true,
		AuthorizationResponseIssParameterSupported: true,
	}
	// oauthex writes jwks_uri even when empty; there are no keys to name.
	b, err := json.Marshal(m)
	var out map[string]any
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	delete(out, "jwks_uri")
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// oauthError answers an RFC 6749 §5.2 error.
func oauthError(w http.ResponseWriter, code int, kind, desc string) {
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="`+kind+`"`)
	}
	writeJSON(w, code, map[string]string{"error": kind, "error_description": desc})
}
