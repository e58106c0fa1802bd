package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// ErrNoRequest is an authorization request that is unknown, answered or
// expired.
var ErrNoRequest = errors.New("no such authorization request: it expired or was answered; start the sign-in again from the client")

// pending is an authorization request waiting for an approver.
type pending struct {
	client      store.OAuthClient
	redirectURI string
	state       string
	challenge   string
	scope       store.Scope // the most the client asked for
	expires     time.Time
}

// pendingRequests are kept in memory: they live minutes, and the
// approver's browser comes back to the coordinator that sent it.
type pendingRequests struct {
	mu sync.Mutex
	m  map[string]pending
}

const maxPending = 1000

func newPending() *pendingRequests { return &pendingRequests{m: map[string]pending{}} }

func (p *pendingRequests) add(r pending, now time.Time) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, e := range p.m {
		if !now.Before(e.expires) {
			delete(p.m, id)
		}
	}
	if len(p.m) >= maxPending {
		return "", false
	}
	b := make([]byte, 18)
	rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	p.m[id] = r
	return id, true
}

func (p *pendingRequests) get(id string, now time.Time) (pending, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.m[id]
	return r, ok && now.Before(r.expires)
}

func (p *pendingRequests) take(id string, now time.Time) (pending, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.m[id]
	delete(p.m, id)
	return r, ok && now.Before(r.expires)
}

// parseScope reads a requested scope: the most it asks of read and
// operate; none asks for operate, the approver choosing.
func parseScope(s string) (store.Scope, error) {
	max := store.ScopeRead
	f := strings.Fields(s)
	if len(f) == 0 {
		return store.ScopeOperate, nil
	}
	for _, v := range f {
		switch store.Scope(v) {
		case store.ScopeRead:
		case store.ScopeOperate:
			max = store.ScopeOperate
		default:
			return "", fmt.Errorf("scope %q is not read or operate", v)
		}
	}
	return max, nil
}

// authorize is the authorization endpoint. Problems with the client or
// its redirect URI are shown to the browser (redirecting would send the
// person to an unchecked address); the others go back to the client.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	q := r.URL.Query()
	addr := bearer.RemoteHost(r)
	if isCIMD(q.Get("client_id")) {
		// A document not cached costs a fetch: bounded per address.
		if s.registrations.blocked(addr, now) {
			page(w, http.StatusTooManyRequests, "too many sign-ins from this address; retry in a minute")
			return
		}
		if !s.cimd.cached(q.Get("client_id"), now) {
			s.registrations.fail(addr, now)
		}
	}
	c, err := s.client(r.Context(), q.Get("client_id"), now)
	if err != nil {
		s.log.Info("oauth authorization refused", "reason", err.Error(), "remote", r.RemoteAddr)
		page(w, http.StatusBadRequest, err.Error())
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(c.RedirectURIs) == 1 {
		redirect = c.RedirectURIs[0]
	}
	if !redirectMatches(c.RedirectURIs, redirect) {
		page(w, http.StatusBadRequest, fmt.Sprintf("redirect_uri %q is not one that client %q registered", redirect, c.Name))
		return
	}
	state := q.Get("state")
	back := func(kind, desc string) {
		s.log.Info("oauth authorization refused", "client", c.ID, "error", kind, "reason", desc, "remote", r.RemoteAddr)
		http.Redirect(w, r, s.redirectWith(redirect, url.Values{"error": {kind}, "error_description": {desc}}, state), http.StatusFound)
	}
	scope, err := parseScope(q.Get("scope"))
	switch {
	case q.Get("response_type") != "code":
		back("unsupported_response_type", "response_type must be code")
	case q.Get("code_challenge") == "":
		back("invalid_request", "PKCE is required: send code_challenge with code_challenge_method S256")
	case q.Get("code_challenge_method") != "S256":
		back("invalid_request", "code_challenge_method must be S256")
	case len(q.Get("code_challenge")) != 43:
		back("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the verifier")
	case q.Get("resource") != s.Resource():
		back("invalid_target", "resource must be "+s.Resource())
	case err != nil:
		back("invalid_scope", err.Error())
	case len(state) > 1024:
		back("invalid_request", "state is over 1024 bytes")
	default:
		id, ok := s.pending.add(pending{client: c, redirectURI: redirect, state: state, challenge: q.Get("code_challenge"), scope: scope, expires: now.Add(s.cfg.PendingTTL)}, now)
		if !ok {
			back("temporarily_unavailable", "too many sign-ins wait for an approver; retry later")
			return
		}
		// The app shows the login first when the browser has no session,
		// then this request: the consent needs the page's second secret,
		// which only the app's own page holds.
		http.Redirect(w, r, "/#oauth/"+id, http.StatusFound)
	}
}

// client returns the client of a client_id: registered, or described by
// the document at its URL (recorded, so that the token endpoint knows it).
func (s *Server) client(ctx context.Context, id string, now time.Time) (store.OAuthClient, error) {
	if id == "" {
		return store.OAuthClient{}, errors.New("client_id is missing")
	}
	if isCIMD(id) {
		c, err := s.cimd.fetch(ctx, id, now)
		if err != nil {
			return c, err
		}
		if err := s.st.PutOAuthClient(ctx, c, s.cfg.MaxClients); err != nil {
			return c, err
		}
		return c, nil
	}
	c, err := s.st.OAuthClient(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && c.Removed() {
		return c, fmt.Errorf("client %q is not registered (or was removed): register it again", id)
	}
	return c, err
}

// redirectWith is the client's redirect URI with params, state and iss.
func (s *Server) redirectWith(redirect string, params url.Values, state string) string {
	u, _ := url.Parse(redirect) // checked when registered
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.cfg.Issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// page answers the browser a short HTML page saying what went wrong.
func page(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!doctype html><title>gridcity sign-in</title><p>The sign-in cannot go on: %s</p>", html.EscapeString(msg))
}

// Request is an authorization request as the approver is shown it.
type Request struct {
	ClientName   string `json:"clientName"`
	ClientID     string `json:"clientId"`
	Registration string `json:"registration"` // dcr or cimd
	RedirectHost string `json:"redirectHost"`
	Scope        string `json:"scope"` // the most the client asked for
	ExpiresAt    string `json:"expiresAt"`
}

// Pending returns the authorization request id, for the consent page.
func (s *Server) Pending(id string) (Request, error) {
	p, ok := s.pending.get(id, s.cfg.Now())
	if !ok {
		return Request{}, ErrNoRequest
	}
	return Request{ClientName: p.client.Name, ClientID: p.client.ID, Registration: p.client.Registration, RedirectHost: hostOf(p.redirectURI),
		Scope: string(p.scope), ExpiresAt: p.expires.UTC().Format(time.RFC3339)}, nil
}

// ErrScope is a grant of more than the client asked for, or of no scope
// the coordinator knows.
var ErrScope = errors.New("scope must be read or operate, and no more than the client asked for")

// Grant records approver's consent to request id with scope and returns
// where to send the browser: the client's redirect URI with the code.
func (s *Server) Grant(ctx context.Context, id, approver string, scope store.Scope) (string, error) {
	now := s.cfg.Now()
	p, ok := s.pending.get(id, now)
	if !ok {
		return "", ErrNoRequest
	}
	if !scope.MCP() || scope == store.ScopeOperate && p.scope != store.ScopeOperate {
		return "", ErrScope
	}
	if p, ok = s.pending.take(id, now); !ok {
		return "", ErrNoRequest
	}
	code, h := secret("gcac_")
	fam := make([]byte, 16)
	rand.Read(fam)
	err := s.st.CreateOAuthCode(ctx, store.OAuthCode{Hash: h, Client: p.client.ID, Family: base64.RawURLEncoding.EncodeToString(fam), RedirectURI: p.redirectURI,
		Challenge: p.challenge, Scope: scope, Resource: s.Resource(), Approver: approver, CreatedAt: now, ExpiresAt: now.Add(s.cfg.CodeTTL)})
	if err != nil {
		return "", err
	}
	s.log.Info("oauth client granted", "client", p.client.ID, "name", p.client.Name, "scope", scope, "approver", approver, "redirect_host", hostOf(p.redirectURI))
	return s.redirectWith(p.redirectURI, url.Values{"code": {code}}, p.state), nil
}

// Clients lists the clients that may sign in (not removed), for the app.
func (s *Server) Clients(ctx context.Context) ([]Connected, error) {
	all, err := Clients(ctx, s.st, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(c Connected) bool { return !c.RemovedAt.IsZero() }), nil
}

// Remove removes client id and revokes its tokens, as approver asked.
func (s *Server) Remove(ctx context.Context, id, approver string) error {
	if err := Remove(ctx, s.st, id, s.cfg.Now()); err != nil {
		return err
	}
	s.log.Info("oauth client removed", "client", id, "approver", approver)
	return nil
}

// Deny refuses request id and returns where to send the browser.
func (s *Server) Deny(id, approver string) (string, error) {
	p, ok := s.pending.take(id, s.cfg.Now())
	if !ok {
		return "", ErrNoRequest
	}
	s.log.Info("oauth client denied", "client", p.client.ID, "name", p.client.Name, "approver", approver)
	return s.redirectWith(p.redirectURI, url.Values{"error": {"access_denied"}, "error_description": {"the approver refused"}}, p.state), nil
}
