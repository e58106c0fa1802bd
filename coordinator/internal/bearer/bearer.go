// Package bearer is how the coordinator's HTTP faces recognise a bearer
// token: the MCP endpoint's guard, /metrics off loopback, and the commands
// that create, install or check tokens. A token is kept in the store only
// as the sha256 of its text; the text is shown once, when it is made.
package bearer

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Hash is how tokens are kept: the sha256 of the token's text.
func Hash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// FromHeader returns the token of an "Authorization: Bearer TOKEN" header
// (the scheme in any case), or false when there is none.
func FromHeader(h http.Header) (string, bool) {
	f := strings.Fields(h.Get("Authorization"))
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return "", false
	}
	return f[1], true
}

// Store is what tokens are checked against.
type Store interface {
	// TokenByHash returns the live (not revoked) token with that hash;
	// store.ErrNotFound when there is none.
	TokenByHash(ctx context.Context, hash []byte) (store.Token, error)
}

// Lookup returns the live token whose text is token.
func Lookup(ctx context.Context, st Store, token string) (store.Token, error) {
	return st.TokenByHash(ctx, Hash(token))
}

// Verifier looks tokens up and remembers, by hash, those it verified
// within the last verifiedFor. While the store is unreachable they are let
// in as they were, so that a client keeps reading what this coordinator
// holds in memory; it can change nothing, as a request or an approval
// needs the store. A token revoked in the store meanwhile is refused again
// once it is back. Safe for concurrent use.
type Verifier struct {
	st Store
	mu sync.Mutex
	m  map[string]verifiedToken
}

type verifiedToken struct {
	t  store.Token
	at time.Time
}

const (
	verifiedFor = time.Hour
	maxVerified = 1024
)

// NewVerifier returns a verifier of tokens in st.
func NewVerifier(st Store) *Verifier {
	return &Verifier{st: st, m: map[string]verifiedToken{}}
}

// Verify returns the token whose text is token. Its errors are the
// store's: store.ErrNotFound for an unknown or revoked token, and
// store.ErrUnavailable (a *store.UnavailableError) while the store is
// unreachable, unless this verifier verified the token within the hour.
func (v *Verifier) Verify(ctx context.Context, token string, now time.Time) (store.Token, error) {
	hash := Hash(token)
	t, err := v.st.TokenByHash(ctx, hash)
	switch {
	case err == nil:
		v.put(hash, t, now)
	case errors.Is(err, store.ErrUnavailable):
		if known, ok := v.get(hash, now); ok {
			return known, nil
		}
	}
	return t, err
}

func (v *Verifier) put(hash []byte, t store.Token, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[string(hash)]; !ok && len(v.m) >= maxVerified {
		// Those too old to count go; with none, any one (a full map
		// means a thousand tokens in use within the hour: rare).
		for k, e := range v.m {
			if now.Sub(e.at) >= verifiedFor {
				delete(v.m, k)
			}
		}
		for k := range v.m {
			if len(v.m) < maxVerified {
				break
			}
			delete(v.m, k)
		}
	}
	v.m[string(hash)] = verifiedToken{t: t, at: now}
}

func (v *Verifier) get(hash []byte, now time.Time) (store.Token, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[string(hash)]
	if !ok || now.Sub(e.at) >= verifiedFor {
		return store.Token{}, false
	}
	return e.t, true
}

// RemoteHost is the address a request came from, without its port: what
// refused tokens are rate limited by.
func RemoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
