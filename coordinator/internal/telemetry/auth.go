package telemetry

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"golang.org/x/time/rate"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TokenStore looks tokens up by the sha256 of their text.
type TokenStore = bearer.Store

// RequireToken lets a request through to next only with a bearer token of
// scope metrics, for an HTTP listener other machines can reach. Refused
// tokens are rate limited by remote address (a few a second), so that a
// flood of guesses cannot keep the store busy nor lock Prometheus out.
func RequireToken(next http.Handler, st TokenStore, logger *slog.Logger) http.Handler {
	refused := &failures{m: map[string]*rate.Limiter{}}
	deny := func(w http.ResponseWriter, msg string) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gridcity metrics"`)
		http.Error(w, msg, http.StatusUnauthorized)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer.FromHeader(r.Header)
		if !ok {
			deny(w, "this listener is not loopback: /metrics needs a bearer token of scope metrics (`gridcity token create prom --scope metrics`)")
			return
		}
		host := bearer.RemoteHost(r)
		if !refused.left(host) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many refused tokens from this address; retry later", http.StatusTooManyRequests)
			return
		}
		t, err := bearer.Lookup(r.Context(), st, tok)
		switch {
		case errors.Is(err, store.ErrNotFound):
			refused.spend(host)
			logger.Info("metrics scrape refused: unknown or revoked token", "remote", r.RemoteAddr)
			deny(w, "unknown or revoked token: use a token of scope metrics (`gridcity token create prom --scope metrics`)")
			return
		case err != nil:
			logger.Warn("metrics scrape: token lookup failed", "err", err)
			http.Error(w, "the token could not be checked now (the store is unreachable); retry", http.StatusServiceUnavailable)
			return
		case t.Scope != store.ScopeMetrics:
			refused.spend(host)
			deny(w, "token "+t.Name+" has scope "+string(t.Scope)+": /metrics takes a token of scope metrics only (`gridcity token create prom --scope metrics`)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// failures holds a limiter of refused tokens per remote address; at most
// maxFailureHosts addresses are remembered (all are forgotten past that).
type failures struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

const maxFailureHosts = 4096

func (f *failures) limiter(host string) *rate.Limiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.m[host]
	if l == nil {
		if len(f.m) >= maxFailureHosts {
			clear(f.m)
		}
		l = rate.NewLimiter(2, 10)
		f.m[host] = l
	}
	return l
}

// left reports whether host may try a token now.
func (f *failures) left(host string) bool { return f.limiter(host).Tokens() >= 1 }

// spend records a refused token from host.
func (f *failures) spend(host string) { f.limiter(host).Allow() }
