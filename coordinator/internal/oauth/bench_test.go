package oauth

import (
	"context"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The cost of checking a token on the MCP call path: an OAuth access
// token (Verify: the token and its client from the store) next to a
// static one (bearer.Verifier), on the same SQLite store.
func BenchmarkVerify(b *testing.B) {
	st, err := store.OpenSQLite(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx, now := context.Background(), time.Now()
	s := New(DefaultConfig("http://127.0.0.1:4600"), st, nil)
	if err := st.PutOAuthClient(ctx, store.OAuthClient{ID: "gcc_1", Name: "bench", RedirectURIs: []string{redirect}, Registration: store.RegisteredDCR, CreatedAt: now}, 10); err != nil {
		b.Fatal(err)
	}
	access, h := secret(TokenPrefix)
	if err := st.IssueOAuthTokens(ctx, now, store.OAuthToken{Hash: h, Kind: store.OAuthAccess, Client: "gcc_1", Family: "f", Scope: store.ScopeRead,
		Resource: s.Resource(), Approver: "ann", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	static := "gc_benchmark-static-token"
	if err := st.CreateToken(ctx, store.Token{Name: "bench", Scope: store.ScopeRead, Hash: bearer.Hash(static), CreatedAt: now}); err != nil {
		b.Fatal(err)
	}
	b.Run("oauth", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Verify(ctx, access, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("static", func(b *testing.B) {
		v := bearer.NewVerifier(st)
		for b.Loop() {
			if _, err := v.Verify(ctx, static, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
