package mcpserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/time/rate"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/oauth"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// GuardConfig bounds what reaches the MCP server.
type GuardConfig struct {
	// MaxBodyBytes: a bigger request body is refused with 413.
	MaxBodyBytes int64
	// RatePerToken and BurstPerToken limit each token's requests (429 past it).
	RatePerToken  rate.Limit
	BurstPerToken int
	// RateFailedAuth and BurstFailedAuth limit requests with a missing or
	// wrong token per remote address, so tokens cannot be guessed quickly.
	RateFailedAuth  rate.Limit
	BurstFailedAuth int
	// AllowedOrigins are browser origins (scheme://host:port) allowed besides
	// loopback ones; browsers are not MCP clients, so normally none.
	AllowedOrigins []string
	// OAuth checks the access tokens the coordinator's own authorization
	// server issued (package oauth); nil: static tokens only.
	OAuth OAuthVerifier
	// ResourceMetadataURL, when set, is named in every 401
	// (WWW-Authenticate: Bearer resource_metadata="…", RFC 9728), so that
	// an MCP client finds where to sign in.
	ResourceMetadataURL string
}

// OAuthVerifier checks an OAuth access token; *oauth.Server is one.
type OAuthVerifier interface {
	Verify(ctx context.Context, token string, now time.Time) (oauth.Grant, error)
}

// DefaultGuardConfig: 1 MiB bodies, 50 requests/s per token (bursts of
// 200, for a client that lists and calls everything at once), 5 failed
// authentications/s per address.
func DefaultGuardConfig() GuardConfig {
	return GuardConfig{
		MaxBodyBytes:    1 << 20,
		RatePerToken:    50,
		BurstPerToken:   200,
		RateFailedAuth:  5,
		BurstFailedAuth: 20,
	}
}

// Caller is who is calling a tool: the token's name and scope and the
// client's own name from X-Agent-Client. With an OAuth token, the token's
// name is "oauth:CLIENT for APPROVER", so that cards name both, and
// OAuthClient and Approver say them apart.
type Caller struct {
	Token  string
	Scope  store.Scope
	Client string
	// OAuthClient is the signed-in client's registered name, Approver
	// the person who granted it; both empty for a static token.
	OAuthClient string
	Approver    string
}

type callerKey struct{}

// CallerFrom returns the caller attached by the guard.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// ClientName cleans the X-Agent-Client header for display and logs: printable,
// at most 64 characters, "unknown" when absent.
func ClientName(h http.Header) string {
	v := strings.TrimSpace(h.Get("X-Agent-Client"))
	v = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, v)
	if len([]rune(v)) > 64 {
		v = string([]rune(v)[:64])
	}
	if v == "" {
		return "unknown"
	}
	return v
}

type limiters struct {
	mu   sync.Mutex
	rate rate.Limit
	b    int
	m    map[string]*limiterEntry
}

type limiterEntry struct {
	l    *rate.Limiter
	used time.Time
}

func newLimiters(r rate.Limit, b int) *limiters {
	return &limiters{rate: r, b: b, m: map[string]*limiterEntry{}}
}

func (ls *limiters) allow(key string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := time.Now()
	e := ls.m[key]
	if e == nil {
		if len(ls.m) > 10000 { // forget idle keys so the map cannot grow without bound
			for k, v := range ls.m {
				if now.Sub(v.used) > time.Minute {
					delete(ls.m, k)
				}
			}
		}
		e = &limiterEntry{l: rate.NewLimiter(ls.rate, ls.b)}
		ls.m[key] = e
	}
	e.used = now
	return e.l.AllowN(now, 1)
}

// TokenStore is what Guard authenticates a bearer token against.
type TokenStore = bearer.Store

// Guard wraps next (the MCP handler) with, in order: Host and Origin checks
// (403), bearer-token authentication against the hashed tokens in the
// store (401), a per-token rate limit (429), and the body limit (413).
// The body is read only for an authenticated caller: a request without a
// valid token is answered from its headers alone, however large or slow
// its body. How long the body may take to arrive is bounded by the
// listener (the coordinator's read deadline); a body that misses it gets
// 408.
func Guard(next http.Handler, st TokenStore, cfg GuardConfig, logger *slog.Logger) http.Handler {
	perToken := newLimiters(cfg.RatePerToken, cfg.BurstPerToken)
	failed := newLimiters(cfg.RateFailedAuth, cfg.BurstFailedAuth)
	known := bearer.NewVerifier(st)
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if cfg.OAuth != nil && oauth.IsToken(token) {
			return verifyOAuth(ctx, cfg.OAuth, token, logger)
		}
		t, err := known.Verify(ctx, token, time.Now())
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: unknown or revoked token; `gridcity mcp` prints a valid one", auth.ErrInvalidToken)
		}
		if errors.Is(err, store.ErrUnavailable) {
			logger.Warn("a token this coordinator has not verified lately cannot be checked: the store is unreachable", "err", err)
			var u *store.UnavailableError
			errors.As(err, &u)
			return nil, errors.New(u.Summary() + ": a token this coordinator has not seen in the last hour cannot be checked until it is back; retry then")
		}
		if err != nil {
			logger.Error("token lookup failed", "err", err)
			return nil, errors.New("token lookup failed")
		}
		if !t.Scope.MCP() {
			return nil, fmt.Errorf("%w: token %q has scope %s, which may scrape /metrics only; AI clients need a token of scope read or operate (`gridcity mcp` prints one)", auth.ErrInvalidToken, t.Name, t.Scope)
		}
		// The session is bound to this token, not only its name: a name
		// reused with another scope after a revocation starts anew.
		return &auth.TokenInfo{UserID: "token:" + t.Name + ":" + hex.EncodeToString(t.Hash[:8]), Scopes: []string{string(t.Scope)}, Extra: map[string]any{"name": t.Name}}, nil
	}
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ResourceMetadataURL: cfg.ResourceMetadataURL})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ti := auth.TokenInfoFromContext(r.Context())
			name, _ := ti.Extra["name"].(string)
			if !perToken.allow(name) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "rate limit exceeded for token "+name+"; slow down and retry", http.StatusTooManyRequests)
				return
			}
			if !readBody(w, r, cfg.MaxBodyBytes, logger) {
				return
			}
			scope := store.ScopeRead
			if len(ti.Scopes) > 0 {
				scope = store.Scope(ti.Scopes[0])
			}
			c := Caller{Token: name, Scope: scope, Client: ClientName(r.Header)}
			c.OAuthClient, _ = ti.Extra["oauthClient"].(string)
			c.Approver, _ = ti.Extra["approver"].(string)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
		}))

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, metadata: cfg.ResourceMetadataURL}
		start := time.Now()
		defer func() {
			logger.Debug("mcp request", "method", r.Method, "status", rec.code(), "client", ClientName(r.Header), "remote", r.RemoteAddr, "took", time.Since(start))
		}()
		// Until the body has been read (after authentication), any answer
		// is a refusal sent without reading it, and an HTTP/1 connection is
		// closed after it: net/http would otherwise read the unread body
		// first, to reuse the connection, and a refused client could make
		// it wait. (HTTP/2 resets the one stream.)
		if r.ProtoMajor == 1 && r.Body != nil && r.Body != http.NoBody {
			w.Header().Set("Connection", "close")
		}
		if msg := checkHostOrigin(r, cfg.AllowedOrigins); msg != "" {
			logger.Warn("mcp request refused", "reason", msg, "remote", r.RemoteAddr, "client", ClientName(r.Header))
			http.Error(rec, msg, http.StatusForbidden)
			return
		}
		// Requests that fail authentication are rate limited per address.
		probe := &statusRecorder{ResponseWriter: rec, metadata: cfg.ResourceMetadataURL}
		if _, ok := bearer.FromHeader(r.Header); !ok {
			if !failed.allow(bearer.RemoteHost(r)) {
				http.Error(rec, "too many unauthenticated requests; retry later", http.StatusTooManyRequests)
				return
			}
		}
		authed.ServeHTTP(probe, r)
		if probe.code() == http.StatusUnauthorized {
			failed.allow(bearer.RemoteHost(r))
			logger.Info("mcp request refused: bad or missing token", "remote", r.RemoteAddr, "client", ClientName(r.Header))
		}
	})
}

// verifyOAuth checks an OAuth access token. The session is bound to the
// grant (client and consent), which refreshes keep.
func verifyOAuth(ctx context.Context, v OAuthVerifier, token string, logger *slog.Logger) (*auth.TokenInfo, error) {
	g, err := v.Verify(ctx, token, time.Now())
	if errors.Is(err, oauth.ErrInvalidToken) {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if err != nil {
		logger.Warn("OAuth token lookup failed", "err", err)
		return nil, errors.New("the OAuth token cannot be checked now (the store is unreachable?); retry")
	}
	name := "oauth:" + g.Name + " for " + g.Approver
	return &auth.TokenInfo{UserID: "oauth:" + g.Client + ":" + g.Family, Scopes: []string{string(g.Scope)}, Expiration: g.Expires,
		Extra: map[string]any{"name": name, "oauthClient": g.Name, "approver": g.Approver}}, nil
}

// readBody reads an authenticated request's body, at most limit bytes,
// into memory for the MCP handler (and the log of a client's initialize).
// It answers 413 past the limit, 408 for a body that did not arrive in
// time and 400 for one that could not be read, and then returns false.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, logger *slog.Logger) bool {
	if r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("request body of %d bytes is over the limit of %d", r.ContentLength, limit), http.StatusRequestEntityTooLarge)
		return false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		logger.Warn("mcp request refused: the body came too slowly", "remote", r.RemoteAddr, "client", ClientName(r.Header), "bytes", len(body))
		http.Error(w, err.Error(), http.StatusRequestTimeout)
		return false
	case err != nil:
		http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		return false
	case int64(len(body)) > limit:
		http.Error(w, fmt.Sprintf("request body is over the limit of %d bytes", limit), http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	w.Header().Del("Connection") // read to its end: the connection can serve another request
	logInitialize(logger, r, body)
	return true
}

// checkHostOrigin returns why a request must be refused, or "".
//
// DNS rebinding: a page on evil.example resolves its name to 127.0.0.1 and
// calls the endpoint; the request arrives on loopback with Host
// evil.example. Cross-origin: any page calls the endpoint with its own
// Origin. Both are refused.
func checkHostOrigin(r *http.Request, allowed []string) string {
	if loopback.Rebound(r) {
		return fmt.Sprintf("Host %q is not a loopback name on a loopback connection (possible DNS rebinding); use http://127.0.0.1 or http://localhost", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	for _, a := range allowed {
		if strings.EqualFold(origin, a) {
			return ""
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Sprintf("Origin %q is not a valid origin", origin)
	}
	if loopback.Host(u.Host) && loopback.Host(r.Host) {
		return ""
	}
	return fmt.Sprintf("Origin %q may not call this endpoint; MCP clients send no Origin, and browsers from other sites are refused", origin)
}

type statusRecorder struct {
	http.ResponseWriter
	status   int
	metadata string // the resource metadata URL, named in a 401
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	// RFC 6750: a 401 names the scheme the client should use.
	if code == http.StatusUnauthorized && s.ResponseWriter.Header().Get("WWW-Authenticate") == "" {
		if s.metadata != "" {
			s.ResponseWriter.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, s.metadata))
		} else {
			s.ResponseWriter.Header().Set("WWW-Authenticate", `Bearer realm="gridcity"`)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// Flush keeps server-sent event streams working through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// logInitialize notes each client that opens: a 2025 session's initialize
// or a 2026-07-28 client's server/discover, with the client's name, so
// that the log says which AI client connected with which token.
func logInitialize(logger *slog.Logger, r *http.Request, body []byte) {
	if len(body) > 64<<10 || !bytes.Contains(body, []byte(`"initialize"`)) && !bytes.Contains(body, []byte(`"server/discover"`)) {
		return
	}
	type clientInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			ClientInfo clientInfo `json:"clientInfo"`
			Meta       struct {
				ClientInfo      clientInfo `json:"io.modelcontextprotocol/clientInfo"`
				ProtocolVersion string     `json:"io.modelcontextprotocol/protocolVersion"`
			} `json:"_meta"`
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return
	}
	ci, version := msg.Params.ClientInfo, msg.Params.ProtocolVersion
	switch msg.Method {
	case "initialize":
	case "server/discover":
		ci, version = msg.Params.Meta.ClientInfo, msg.Params.Meta.ProtocolVersion
	default:
		return
	}
	logger.Info("mcp client connecting", "client", ClientName(r.Header), "clientInfo", clean(ci.Name), "clientVersion", clean(ci.Version),
		"protocolVersion", clean(version), "remote", r.RemoteAddr)
}

// clean bounds a client-supplied string for the log.
func clean(s string) string {
	h := http.Header{}
	h.Set("X-Agent-Client", s)
	return ClientName(h)
}
