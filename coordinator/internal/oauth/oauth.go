// Package oauth is the coordinator as its own OAuth 2.1 authorization
// server for MCP clients, as the MCP authorization specification
// (2025-11-25) describes, and the check its MCP endpoint makes of the
// access tokens it issues.
//
// What it serves: Protected Resource Metadata (RFC 9728) for /mcp,
// Authorization Server Metadata (RFC 8414), Dynamic Client Registration
// (RFC 7591, public clients only), clients identified by Client ID
// Metadata Documents (an https URL fetched with care, see cimd.go), the
// authorization code flow with PKCE S256 only, the resource parameter
// (RFC 8707) bound into every token's audience, iss in the authorization
// response (RFC 9207), rotating refresh tokens with reuse detection
// (RFC 9700) and revocation (RFC 7009).
//
// The consent is the approval app's: the authorization endpoint keeps the
// request (in memory, a few minutes) and sends the browser to /#oauth/ID,
// where a signed-in approver grants (read or operate) or denies it
// through Grant and Deny.
//
// Why not a library for the server side: go-sdk's auth and oauthex give
// the resource-server check and the metadata types, which are used here;
// for the authorization server itself ory/fosite and zitadel/oidc are
// whole OpenID providers with their own storage interfaces, JWT signing
// keys and consent flows, several times the size of this package, and
// neither supports Client ID Metadata Documents. The protocol parsing
// written here (redirect URIs, client metadata, PKCE) is small and fuzzed.
//
// Codes and tokens are opaque random strings kept only as their sha256,
// like the static MCP tokens (package bearer).
package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TokenPrefix starts every access token, so that the MCP guard knows an
// OAuth token from a static one without a second lookup; refresh tokens
// start with RefreshPrefix.
const (
	TokenPrefix   = "gco_"
	RefreshPrefix = "gcr_"
)

// Scopes the coordinator grants, the same as the static tokens' scopes.
var Scopes = []string{string(store.ScopeRead), string(store.ScopeOperate)}

// Store is the part of the store the authorization server uses.
type Store interface {
	PutOAuthClient(ctx context.Context, c store.OAuthClient, max int) error
	OAuthClient(ctx context.Context, id string) (store.OAuthClient, error)
	CreateOAuthCode(ctx context.Context, c store.OAuthCode) error
	UseOAuthCode(ctx context.Context, hash []byte, now time.Time) (store.OAuthCode, error)
	IssueOAuthTokens(ctx context.Context, now time.Time, ts ...store.OAuthToken) error
	OAuthTokenByHash(ctx context.Context, hash []byte) (store.OAuthToken, error)
	RotateOAuthRefresh(ctx context.Context, hash []byte, next store.OAuthPair, now time.Time) (store.OAuthToken, error)
	RevokeOAuthToken(ctx context.Context, hash []byte, at time.Time) error
	ClientStore
}

// Config tunes the authorization server; DefaultConfig fills the rest.
type Config struct {
	// Issuer is the base URL the coordinator is reached at, without a
	// trailing slash (http://127.0.0.1:4600 on loopback, the public URL
	// off it). The MCP resource is Issuer + "/mcp".
	Issuer string
	// MaxClients bounds the clients registered at once.
	MaxClients int
	// Lifetimes of codes, access and refresh tokens, and of an
	// authorization request waiting for the approver.
	CodeTTL, AccessTTL, RefreshTTL, PendingTTL time.Duration
	// CIMD is how Client ID Metadata Documents are fetched.
	CIMD CIMDConfig
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RateFailures and BurstFailures limit failed token and registration
	// requests per client and per address.
	RateFailures  rate.Limit
	BurstFailures int
	// BurstRegistrations bounds registrations and uncached CIMD fetches
	// per address, at one a minute after the burst.
	BurstRegistrations int
}

// DefaultConfig returns the defaults for an issuer: codes live 60 s,
// access tokens an hour, refresh tokens 30 days, a request waiting for
// consent 10 minutes; 100 clients, 10 registrations per address and then
// one a minute.
func DefaultConfig(issuer string) Config {
	return Config{
		Issuer: strings.TrimSuffix(issuer, "/"), MaxClients: 100,
		CodeTTL: time.Minute, AccessTTL: time.Hour, RefreshTTL: 30 * 24 * time.Hour, PendingTTL: 10 * time.Minute,
		CIMD: DefaultCIMDConfig(), RateFailures: 1, BurstFailures: 20, BurstRegistrations: 10,
	}
}

// Server is the authorization server. Safe for concurrent use.
type Server struct {
	cfg     Config
	st      Store
	log     *slog.Logger
	cimd    *cimdFetcher
	pending *pendingRequests
	failed  *limiters
	// registrations bounds registrations and CIMD fetches per address,
	// successful or not: each takes one of the few client places or
	// makes the coordinator fetch a URL.
	registrations *limiters
	names         struct {
		sync.Mutex
		m map[string]cachedName
	}
}

type cachedName struct {
	name string
	at   time.Time
}

// New returns the authorization server of cfg.Issuer over st.
func New(cfg Config, st Store, logger *slog.Logger) *Server {
	def := DefaultConfig(cfg.Issuer)
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = def.MaxClients
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.CodeTTL, def.CodeTTL}, {&cfg.AccessTTL, def.AccessTTL}, {&cfg.RefreshTTL, def.RefreshTTL}, {&cfg.PendingTTL, def.PendingTTL}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.RateFailures <= 0 {
		cfg.RateFailures, cfg.BurstFailures = def.RateFailures, def.BurstFailures
	}
	if cfg.BurstRegistrations <= 0 {
		cfg.BurstRegistrations = def.BurstRegistrations
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Issuer = strings.TrimSuffix(cfg.Issuer, "/")
	s := &Server{cfg: cfg, st: st, log: logger, cimd: newCIMDFetcher(cfg.CIMD), pending: newPending(), failed: newLimiters(cfg.RateFailures, cfg.BurstFailures),
		registrations: newLimiters(rate.Every(time.Minute), cfg.BurstRegistrations)}
	s.names.m = map[string]cachedName{}
	return s
}

// Issuer is the authorization server's issuer identifier.
func (s *Server) Issuer() string { return s.cfg.Issuer }

// Resource is the MCP endpoint's URL, every token's audience.
func (s *Server) Resource() string { return s.cfg.Issuer + "/mcp" }

// ResourceMetadataURL is where the MCP endpoint's Protected Resource
// Metadata is served, named in every 401 from it.
func (s *Server) ResourceMetadataURL() string {
	return s.cfg.Issuer + "/.well-known/oauth-protected-resource/mcp"
}

// Register adds the authorization server's routes to mux.
func (s *Server) Register(mux *http.ServeMux) {
	// At the root too: clients that miss the WWW-Authenticate hint try
	// it there (MCP authorization, "Protected Resource Metadata Discovery").
	mux.Handle("/.well-known/oauth-protected-resource/mcp", s.resourceMetadata())
	mux.Handle("/.well-known/oauth-protected-resource", s.resourceMetadata())
	mux.Handle("/.well-known/oauth-authorization-server", cors("GET", s.serverMetadata))
	mux.Handle("/oauth/register", cors("POST", s.register))
	mux.HandleFunc("GET /oauth/authorize", s.authorize)
	mux.Handle("/oauth/token", cors("POST", s.token))
	mux.Handle("/oauth/revoke", cors("POST", s.revoke))
}

// cors lets a client running in a browser page (an MCP inspector) call an
// endpoint from another origin: none of them reads a cookie, so any
// origin may, and what it gets is what a client elsewhere would.
func cors(method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		switch r.Method {
		case http.MethodOptions:
			w.Header().Set("Access-Control-Allow-Methods", method+", OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
		case method:
			h(w, r)
		default:
			w.Header().Set("Allow", method+", OPTIONS")
			oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use "+method)
		}
	})
}

// secret returns a random string of 32 bytes with prefix, and its hash.
func secret(prefix string) (string, []byte) {
	b := make([]byte, 32)
	rand.Read(b)
	s := prefix + base64.RawURLEncoding.EncodeToString(b)
	return s, hash(s)
}

func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// limiters are token buckets by key, forgetting idle keys so that the
// map stays bounded.
type limiters struct {
	mu sync.Mutex
	r  rate.Limit
	b  int
	m  map[string]*rate.Limiter
}

func newLimiters(r rate.Limit, b int) *limiters {
	return &limiters{r: r, b: b, m: map[string]*rate.Limiter{}}
}

// blocked reports whether key has no failures left, without spending one.
func (l *limiters) blocked(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[key]
	return lim != nil && lim.TokensAt(now) < 1
}

// fail spends one of key's failures.
func (l *limiters) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[key]
	if lim == nil {
		if len(l.m) >= 10000 {
			for k, v := range l.m {
				if v.TokensAt(now) >= float64(l.b) {
					delete(l.m, k)
				}
			}
		}
		lim = rate.NewLimiter(l.r, l.b)
		l.m[key] = lim
	}
	lim.AllowN(now, 1)
}
