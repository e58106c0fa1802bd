package oauth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Bounds on what a client may register or publish.
const (
	maxClientMetadata = 5 << 10
	maxRedirectURIs   = 8
	maxRedirectURI    = 512
	maxClientName     = 80
)

// register answers RFC 7591 Dynamic Client Registration: public clients
// only, with redirect URIs that checkRedirectURI accepts.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	addr := bearer.RemoteHost(r)
	if s.failed.blocked(addr, now) || s.registrations.blocked(addr, now) {
		oauthError(w, http.StatusTooManyRequests, "slow_down", "too many registrations from this address; retry later")
		return
	}
	s.registrations.fail(addr, now)
	fail := func(code int, kind, desc string) {
		s.failed.fail(addr, now)
		s.log.Info("oauth registration refused", "reason", desc, "remote", r.RemoteAddr)
		oauthError(w, code, kind, desc)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxClientMetadata+1))
	if err != nil || len(body) > maxClientMetadata {
		fail(http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("the client metadata must be JSON of at most %d bytes", maxClientMetadata))
		return
	}
	var m oauthex.ClientRegistrationMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		fail(http.StatusBadRequest, "invalid_client_metadata", "the client metadata is not JSON: "+err.Error())
		return
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "none"
	}
	name, err := checkClientMetadata(m.ClientName, m.RedirectURIs, m.TokenEndpointAuthMethod, m.GrantTypes, m.ResponseTypes)
	if err != nil {
		kind := "invalid_client_metadata"
		if errors.Is(err, errRedirectURI) {
			kind = "invalid_redirect_uri"
		}
		fail(http.StatusBadRequest, kind, err.Error())
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	c := store.OAuthClient{ID: "gcc_" + base64.RawURLEncoding.EncodeToString(b), Name: name, RedirectURIs: m.RedirectURIs, Registration: store.RegisteredDCR, CreatedAt: now}
	if err := s.st.PutOAuthClient(r.Context(), c, s.cfg.MaxClients); err != nil {
		if errors.Is(err, store.ErrTooMany) {
			fail(http.StatusBadRequest, "invalid_client_metadata", err.Error())
			return
		}
		s.log.Error("oauth registration failed", "err", err)
		oauthError(w, http.StatusInternalServerError, "server_error", "the client could not be recorded")
		return
	}
	s.log.Info("oauth client registered", "client", c.ID, "name", c.Name, "redirect_uris", c.RedirectURIs, "remote", r.RemoteAddr)
	m.ClientName = name
	m.GrantTypes = []string{"authorization_code", "refresh_token"}
	m.ResponseTypes = []string{"code"}
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{ClientRegistrationMetadata: m, ClientID: c.ID, ClientIDIssuedAt: now})
}

var errRedirectURI = errors.New("redirect URI refused")

// checkClientMetadata checks what a client registers or publishes and
// returns its name as shown to the approver. Written here rather than
// taken from a library: the rules are this server's (public clients,
// loopback-only http), and no Go library checks CIMD documents.
func checkClientMetadata(name string, redirects []string, authMethod string, grants, responses []string) (string, error) {
	if authMethod != "none" {
		return "", fmt.Errorf("token_endpoint_auth_method %q: only public clients (none) may register; use PKCE", authMethod)
	}
	for _, g := range grants {
		if g != "authorization_code" && g != "refresh_token" {
			return "", fmt.Errorf("grant type %q is not supported; authorization_code and refresh_token are", g)
		}
	}
	for _, rt := range responses {
		if rt != "code" {
			return "", fmt.Errorf("response type %q is not supported; code is", rt)
		}
	}
	if len(redirects) == 0 || len(redirects) > maxRedirectURIs {
		return "", fmt.Errorf("%w: a client needs 1 to %d redirect URIs, not %d", errRedirectURI, maxRedirectURIs, len(redirects))
	}
	for _, u := range redirects {
		if err := checkRedirectURI(u); err != nil {
			return "", err
		}
	}
	name = cleanName(name)
	if name == "" {
		return "", errors.New("client_name is required: the approver is shown it")
	}
	return name, nil
}

// cleanName keeps a client's name printable, on one line and short.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, strings.TrimSpace(s))
	if r := []rune(s); len(r) > maxClientName {
		s = string(r[:maxClientName])
	}
	return s
}

// checkRedirectURI accepts an absolute https URL, or http to a loopback
// host (RFC 8252 §7.3, native apps), without a fragment or credentials.
// Custom schemes (RFC 8252 §7.1) are refused: gridcity's clients are
// web connectors and local programs, and a custom scheme can be claimed
// by any app on the device.
func checkRedirectURI(raw string) error {
	if len(raw) > maxRedirectURI {
		return fmt.Errorf("%w: longer than %d bytes", errRedirectURI, maxRedirectURI)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %q is not a URL", errRedirectURI, raw)
	}
	switch {
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("%w: %q has a fragment", errRedirectURI, raw)
	case u.User != nil:
		return fmt.Errorf("%w: %q carries credentials", errRedirectURI, raw)
	case u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%w: %q is not an absolute URL with a host", errRedirectURI, raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%w: %q must be https, or http to 127.0.0.1, [::1] or localhost", errRedirectURI, raw)
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// redirectMatches says whether got is one of the client's redirect URIs:
// exactly, except that a loopback redirect may name any port (RFC 8252
// §7.3: a native app picks a free port when it starts).
func redirectMatches(registered []string, got string) bool {
	if slices.Contains(registered, got) {
		return true
	}
	g, err := url.Parse(got)
	if err != nil || g.Scheme != "http" || !loopbackHost(g.Hostname()) {
		return false
	}
	for _, r := range registered {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "http" || !loopbackHost(u.Hostname()) {
			continue
		}
		if u.Hostname() == g.Hostname() && u.Path == g.Path && u.RawQuery == g.RawQuery {
			return true
		}
	}
	return false
}

// hostOf is a redirect URI's host (and port) for the approver to read.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if _, _, err := net.SplitHostPort(u.Host); err == nil {
		return u.Host
	}
	return u.Hostname()
}
