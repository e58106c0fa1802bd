package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

const maxTokenForm = 8 << 10

// tokenError is an RFC 6749 §5.2 error of the token endpoint.
type tokenError struct {
	code       int
	kind, desc string
}

func (e *tokenError) Error() string { return e.kind + ": " + e.desc }

func invalidGrant(desc string) error {
	return &tokenError{http.StatusBadRequest, "invalid_grant", desc}
}

// token is the token endpoint.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenForm)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body must be a form of at most 8 KB")
		return
	}
	basicClient(r)
	addr, clientID := bearer.RemoteHost(r), r.PostForm.Get("client_id")
	if s.failed.blocked("addr:"+addr, now) || s.failed.blocked("client:"+clientID, now) {
		oauthError(w, http.StatusTooManyRequests, "slow_down", "too many refused token requests; retry later")
		return
	}
	var res tokenResponse
	var err error
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		res, err = s.exchangeCode(r.Context(), r, now)
	case "refresh_token":
		res, err = s.refresh(r.Context(), r, now)
	default:
		err = &tokenError{http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token"}
	}
	var te *tokenError
	switch {
	case errors.As(err, &te):
		s.failed.fail("addr:"+addr, now)
		s.failed.fail("client:"+clientID, now)
		s.log.Info("oauth token refused", "client", clientID, "error", te.kind, "reason", te.desc, "remote", r.RemoteAddr)
		oauthError(w, te.code, te.kind, te.desc)
	case err != nil:
		s.log.Error("oauth token endpoint failed", "client", clientID, "err", err)
		oauthError(w, http.StatusInternalServerError, "server_error", "the token could not be issued")
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// basicClient takes the client id from HTTP Basic when the form has none:
// a public client may name itself there with an empty secret (RFC 6749
// §2.3.1, form-encoded), as some libraries try first.
func basicClient(r *http.Request) {
	if u, _, ok := r.BasicAuth(); ok && r.PostForm.Get("client_id") == "" {
		if id, err := url.QueryUnescape(u); err == nil {
			r.PostForm.Set("client_id", id)
		}
	}
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// liveClient returns the form's client unless it is unknown or removed
// (401 invalid_client: the client registers again).
func (s *Server) liveClient(ctx context.Context, r *http.Request) (store.OAuthClient, error) {
	id := r.PostForm.Get("client_id")
	if id == "" {
		return store.OAuthClient{}, &tokenError{http.StatusUnauthorized, "invalid_client", "client_id is missing"}
	}
	c, err := s.st.OAuthClient(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && c.Removed() {
		return c, &tokenError{http.StatusUnauthorized, "invalid_client", fmt.Sprintf("client %q is not registered or was removed; register again", id)}
	}
	return c, err
}

func (s *Server) exchangeCode(ctx context.Context, r *http.Request, now time.Time) (tokenResponse, error) {
	c, err := s.liveClient(ctx, r)
	if err != nil {
		return tokenResponse{}, err
	}
	f := r.PostForm
	if f.Get("code") == "" || f.Get("code_verifier") == "" {
		return tokenResponse{}, &tokenError{http.StatusBadRequest, "invalid_request", "code and code_verifier are required"}
	}
	code, err := s.st.UseOAuthCode(ctx, hash(f.Get("code")), now)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalidGrant("unknown authorization code")
	case errors.Is(err, store.ErrReused):
		s.log.Warn("oauth authorization code used twice: the tokens issued from it are revoked", "client", code.Client, "approver", code.Approver, "remote", r.RemoteAddr)
		return tokenResponse{}, invalidGrant("the authorization code was used already; the tokens issued from it are revoked")
	case err != nil:
		return tokenResponse{}, err
	}
	// The code is spent whatever follows: a wrong verifier must not be
	// retried against it.
	switch {
	case code.Client != c.ID:
		return tokenResponse{}, invalidGrant("the code was issued to another client")
	case !now.Before(code.ExpiresAt):
		return tokenResponse{}, invalidGrant("the authorization code expired")
	case f.Get("redirect_uri") != code.RedirectURI:
		return tokenResponse{}, invalidGrant("redirect_uri differs from the authorization request's")
	case f.Get("resource") != "" && f.Get("resource") != code.Resource:
		return tokenResponse{}, &tokenError{http.StatusBadRequest, "invalid_target", "resource must be " + code.Resource}
	case !pkceMatches(f.Get("code_verifier"), code.Challenge):
		return tokenResponse{}, invalidGrant("code_verifier does not match the code_challenge")
	}
	access, ah := secret(TokenPrefix)
	refresh, rh := secret(RefreshPrefix)
	base := store.OAuthToken{Client: c.ID, Family: code.Family, Scope: code.Scope, Resource: code.Resource, Approver: code.Approver, CreatedAt: now}
	at, rt := base, base
	at.Hash, at.Kind, at.ExpiresAt = ah, store.OAuthAccess, now.Add(s.cfg.AccessTTL)
	rt.Hash, rt.Kind, rt.ExpiresAt = rh, store.OAuthRefresh, now.Add(s.cfg.RefreshTTL)
	if err := s.st.IssueOAuthTokens(ctx, now, at, rt); err != nil {
		return tokenResponse{}, err
	}
	s.log.Info("oauth tokens issued", "client", c.ID, "name", c.Name, "scope", code.Scope, "approver", code.Approver)
	return tokenResponse{access, "Bearer", int64(s.cfg.AccessTTL / time.Second), refresh, string(code.Scope)}, nil
}

// pkceMatches checks an S256 verifier (RFC 7636 §4.6), its length and
// alphabet first.
func pkceMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	for _, c := range verifier {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return false
		}
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

func (s *Server) refresh(ctx context.Context, r *http.Request, now time.Time) (tokenResponse, error) {
	c, err := s.liveClient(ctx, r)
	if err != nil {
		return tokenResponse{}, err
	}
	f := r.PostForm
	if f.Get("refresh_token") == "" {
		return tokenResponse{}, &tokenError{http.StatusBadRequest, "invalid_request", "refresh_token is required"}
	}
	if f.Get("resource") != "" && f.Get("resource") != s.Resource() {
		return tokenResponse{}, &tokenError{http.StatusBadRequest, "invalid_target", "resource must be " + s.Resource()}
	}
	h := hash(f.Get("refresh_token"))
	// The client is checked before rotating: a token of another client
	// must neither rotate nor, replayed, revoke that client's tokens.
	if t, err := s.st.OAuthTokenByHash(ctx, h); err == nil && t.Client != c.ID {
		return tokenResponse{}, invalidGrant("the refresh token was issued to another client")
	}
	access, ah := secret(TokenPrefix)
	refresh, rh := secret(RefreshPrefix)
	old, err := s.st.RotateOAuthRefresh(ctx, h, store.OAuthPair{AccessHash: ah, RefreshHash: rh, AccessExpires: now.Add(s.cfg.AccessTTL), RefreshExpires: now.Add(s.cfg.RefreshTTL)}, now)
	switch {
	case errors.Is(err, store.ErrReused):
		s.log.Warn("oauth refresh token used after rotation: every token of the client is revoked", "client", old.Client, "approver", old.Approver, "remote", r.RemoteAddr)
		return tokenResponse{}, invalidGrant("the refresh token was used already; every token of this client is revoked, sign in again")
	case errors.Is(err, store.ErrNotFound):
		return tokenResponse{}, invalidGrant("unknown or expired refresh token")
	case err != nil:
		return tokenResponse{}, err
	}
	if old.Client != c.ID { // a revoked token of another client, replayed
		return tokenResponse{}, invalidGrant("the refresh token was issued to another client")
	}
	return tokenResponse{access, "Bearer", int64(s.cfg.AccessTTL / time.Second), refresh, string(old.Scope)}, nil
}

// revoke is the RFC 7009 revocation endpoint: 200 whether or not the
// token was known.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenForm)
	if err := r.ParseForm(); err != nil || r.PostForm.Get("token") == "" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "token is required")
		return
	}
	basicClient(r)
	h := hash(r.PostForm.Get("token"))
	if t, err := s.st.OAuthTokenByHash(r.Context(), h); err == nil && t.Client != r.PostForm.Get("client_id") {
		// RFC 7009 §2.1: a client revokes only its own tokens.
		oauthError(w, http.StatusUnauthorized, "invalid_client", "the token was issued to another client")
		return
	}
	if err := s.st.RevokeOAuthToken(r.Context(), h, s.cfg.Now()); err != nil {
		s.log.Error("oauth revocation failed", "err", err)
		oauthError(w, http.StatusServiceUnavailable, "server_error", "the token could not be revoked; retry")
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Grant is who an access token speaks for.
type Grant struct {
	Client   string // the client's id
	Name     string // the client's name
	Approver string // who granted it
	Family   string // the grant: stable across refreshes
	Scope    store.Scope
	Expires  time.Time
}

// ErrInvalidToken is an access token that is unknown, revoked, expired,
// or for another resource.
var ErrInvalidToken = errors.New("invalid OAuth access token")

// IsToken says whether a bearer token is one of this server's access
// tokens (by its prefix).
func IsToken(tok string) bool { return strings.HasPrefix(tok, TokenPrefix) }

// Verify checks an access token for the MCP endpoint at now. Its store
// errors other than not-found are returned as they are.
func (s *Server) Verify(ctx context.Context, tok string, now time.Time) (Grant, error) {
	t, err := s.st.OAuthTokenByHash(ctx, hash(tok))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Grant{}, fmt.Errorf("%w: unknown or revoked; sign in again", ErrInvalidToken)
	case err != nil:
		return Grant{}, err
	case t.Kind != store.OAuthAccess:
		return Grant{}, fmt.Errorf("%w: a refresh token is not an access token", ErrInvalidToken)
	case t.Resource != s.Resource():
		return Grant{}, fmt.Errorf("%w: issued for %s, not %s", ErrInvalidToken, t.Resource, s.Resource())
	case !now.Before(t.ExpiresAt):
		return Grant{}, fmt.Errorf("%w: expired at %s; refresh it", ErrInvalidToken, t.ExpiresAt.UTC().Format(time.RFC3339))
	case !t.Scope.MCP():
		return Grant{}, fmt.Errorf("%w: scope %q", ErrInvalidToken, t.Scope)
	}
	name, err := s.clientName(ctx, t.Client, now)
	if err != nil {
		return Grant{}, err
	}
	return Grant{Client: t.Client, Name: name, Approver: t.Approver, Family: t.Family, Scope: t.Scope, Expires: t.ExpiresAt}, nil
}

// clientName is a client's name, read again after a minute: it is shown,
// never trusted (a removed client's tokens are revoked with it), so one
// query per MCP call is saved.
func (s *Server) clientName(ctx context.Context, id string, now time.Time) (string, error) {
	s.names.Lock()
	n, ok := s.names.m[id]
	s.names.Unlock()
	if ok && now.Sub(n.at) < time.Minute {
		return n.name, nil
	}
	c, err := s.st.OAuthClient(ctx, id)
	if err != nil {
		return "", err
	}
	s.names.Lock()
	defer s.names.Unlock()
	if len(s.names.m) >= 1000 {
		clear(s.names.m)
	}
	s.names.m[id] = cachedName{c.Name, now}
	return c.Name, nil
}
