package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestOAuthClients(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_800_000_000_000).UTC()
		a := OAuthClient{ID: "c1", Name: "Claude", RedirectURIs: []string{"https://claude.ai/cb"}, Registration: RegisteredDCR, CreatedAt: now}
		if err := s.PutOAuthClient(ctx, a, 2); err != nil {
			t.Fatal(err)
		}
		b := OAuthClient{ID: "https://app.example/client.json", Name: "App", RedirectURIs: []string{"http://127.0.0.1:9/cb"}, Registration: RegisteredCIMD, CreatedAt: now.Add(time.Second)}
		if err := s.PutOAuthClient(ctx, b, 2); err != nil {
			t.Fatal(err)
		}
		// The cap counts the others: replacing one is allowed, a third is not.
		if err := s.PutOAuthClient(ctx, b, 2); err != nil {
			t.Fatalf("replace at the cap: %v", err)
		}
		if err := s.PutOAuthClient(ctx, OAuthClient{ID: "c3", Name: "x", RedirectURIs: []string{"https://x/cb"}, Registration: RegisteredDCR, CreatedAt: now}, 2); !errors.Is(err, ErrTooMany) {
			t.Fatalf("third client: got %v; want ErrTooMany", err)
		}
		got, err := s.OAuthClient(ctx, "c1")
		if err != nil || got.Name != "Claude" || len(got.RedirectURIs) != 1 || got.RedirectURIs[0] != "https://claude.ai/cb" || !got.CreatedAt.Equal(now) || got.Removed() {
			t.Fatalf("got %+v, %v", got, err)
		}
		if _, err := s.OAuthClient(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown client: got %v; want ErrNotFound", err)
		}
		all, err := s.OAuthClients(ctx)
		if err != nil || len(all) != 2 || all[0].ID != "c1" {
			t.Fatalf("got %+v, %v", all, err)
		}
		tok := OAuthToken{Hash: []byte("a1"), Kind: OAuthAccess, Client: "c1", Family: "f1", Scope: ScopeRead, Resource: "r", Approver: "ann", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		if err := s.IssueOAuthTokens(ctx, now, tok); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveOAuthClient(ctx, "c1", now); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveOAuthClient(ctx, "c1", now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("remove twice: got %v; want ErrNotFound", err)
		}
		if _, err := s.OAuthTokenByHash(ctx, []byte("a1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("token of a removed client: got %v; want ErrNotFound", err)
		}
		if got, _ := s.OAuthClient(ctx, "c1"); !got.Removed() {
			t.Fatalf("client not removed: %+v", got)
		}
		// A removed client frees its place.
		if err := s.PutOAuthClient(ctx, OAuthClient{ID: "c3", Name: "x", RedirectURIs: []string{"https://x/cb"}, Registration: RegisteredDCR, CreatedAt: now}, 2); err != nil {
			t.Fatal(err)
		}
		// A day later, c3 (DCR, never a token) is forgotten; b (CIMD) is
		// kept, and so is c1 (removed, listed as such).
		later := now.Add(OAuthUnusedKept + time.Minute)
		if err := s.PutOAuthClient(ctx, OAuthClient{ID: "c4", Name: "y", RedirectURIs: []string{"https://y/cb"}, Registration: RegisteredDCR, CreatedAt: later}, 2); err != nil {
			t.Fatalf("after a day: %v", err)
		}
		if _, err := s.OAuthClient(ctx, "c3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unused client after a day: got %v; want it forgotten", err)
		}
		for _, id := range []string{"c1", b.ID, "c4"} {
			if _, err := s.OAuthClient(ctx, id); err != nil {
				t.Errorf("client %s: %v", id, err)
			}
		}
	})
}

func TestOAuthCodes(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_800_000_000_000).UTC()
		c := OAuthCode{Hash: []byte("code"), Client: "c1", Family: "f1", RedirectURI: "https://x/cb", Challenge: "ch", Scope: ScopeOperate,
			Resource: "http://127.0.0.1:1/mcp", Approver: "ann", CreatedAt: now, ExpiresAt: now.Add(time.Minute)}
		if err := s.CreateOAuthCode(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := s.UseOAuthCode(ctx, []byte("code"), now)
		if err != nil || got.Client != "c1" || got.Challenge != "ch" || got.Scope != ScopeOperate || got.Approver != "ann" || !got.ExpiresAt.Equal(c.ExpiresAt) {
			t.Fatalf("got %+v, %v", got, err)
		}
		issued := []OAuthToken{
			{Hash: []byte("a"), Kind: OAuthAccess, Client: "c1", Family: "f1", Scope: ScopeOperate, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
			{Hash: []byte("r"), Kind: OAuthRefresh, Client: "c1", Family: "f1", Scope: ScopeOperate, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)},
			{Hash: []byte("other"), Kind: OAuthAccess, Client: "c1", Family: "f2", Scope: ScopeOperate, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		}
		if err := s.IssueOAuthTokens(ctx, now, issued...); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UseOAuthCode(ctx, []byte("code"), now); !errors.Is(err, ErrReused) {
			t.Fatalf("code reused: got %v; want ErrReused", err)
		}
		for _, h := range []string{"a", "r"} {
			if _, err := s.OAuthTokenByHash(ctx, []byte(h)); !errors.Is(err, ErrNotFound) {
				t.Errorf("token %s of a reused code: got %v; want revoked", h, err)
			}
		}
		if _, err := s.OAuthTokenByHash(ctx, []byte("other")); err != nil {
			t.Errorf("token of another grant: %v", err)
		}
		if _, err := s.UseOAuthCode(ctx, []byte("nope"), now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown code: got %v; want ErrNotFound", err)
		}
	})
}

func TestOAuthRefreshRotation(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_800_000_000_000).UTC()
		base := OAuthToken{Client: "c1", Family: "f1", Scope: ScopeRead, Resource: "res", Approver: "ann", CreatedAt: now}
		a, r := base, base
		a.Hash, a.Kind, a.ExpiresAt = []byte("a0"), OAuthAccess, now.Add(time.Hour)
		r.Hash, r.Kind, r.ExpiresAt = []byte("r0"), OAuthRefresh, now.Add(24*time.Hour)
		other := base
		other.Hash, other.Kind, other.Family, other.ExpiresAt = []byte("x0"), OAuthAccess, "f2", now.Add(time.Hour)
		if err := s.IssueOAuthTokens(ctx, now, a, r, other); err != nil {
			t.Fatal(err)
		}
		later := now.Add(2 * time.Hour)
		next := OAuthPair{AccessHash: []byte("a1"), RefreshHash: []byte("r1"), AccessExpires: later.Add(time.Hour), RefreshExpires: later.Add(24 * time.Hour)}
		old, err := s.RotateOAuthRefresh(ctx, []byte("r0"), next, later)
		if err != nil || old.Approver != "ann" {
			t.Fatalf("rotate: %+v, %v", old, err)
		}
		got, err := s.OAuthTokenByHash(ctx, []byte("a1"))
		if err != nil || got.Kind != OAuthAccess || got.Scope != ScopeRead || got.Resource != "res" || got.Approver != "ann" || got.Family != "f1" || !got.ExpiresAt.Equal(next.AccessExpires) {
			t.Fatalf("new access token: %+v, %v", got, err)
		}
		if _, err := s.RotateOAuthRefresh(ctx, []byte("a1"), OAuthPair{AccessHash: []byte("z"), RefreshHash: []byte("zz")}, later); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an access token as refresh: got %v; want ErrNotFound", err)
		}
		// The old refresh token again: every token of the client goes.
		if _, err := s.RotateOAuthRefresh(ctx, []byte("r0"), OAuthPair{AccessHash: []byte("a2"), RefreshHash: []byte("r2"), AccessExpires: later, RefreshExpires: later}, later); !errors.Is(err, ErrReused) {
			t.Fatalf("reuse: got %v; want ErrReused", err)
		}
		for _, h := range []string{"a1", "r1", "x0", "a2"} {
			if _, err := s.OAuthTokenByHash(ctx, []byte(h)); !errors.Is(err, ErrNotFound) {
				t.Errorf("token %s after reuse: got %v; want revoked", h, err)
			}
		}
		ts, err := s.OAuthTokens(ctx, "c1")
		if err != nil || len(ts) != 5 {
			t.Fatalf("tokens: %d, %v", len(ts), err)
		}
	})
}

func TestOAuthRefreshExpiredAndRevoked(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.UnixMilli(1_800_000_000_000).UTC()
		mk := func(h, kind, fam string) OAuthToken {
			return OAuthToken{Hash: []byte(h), Kind: kind, Client: "c1", Family: fam, Scope: ScopeRead, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		}
		if err := s.IssueOAuthTokens(ctx, now, mk("a", OAuthAccess, "f1"), mk("r", OAuthRefresh, "f1"), mk("b", OAuthAccess, "f2")); err != nil {
			t.Fatal(err)
		}
		next := OAuthPair{AccessHash: []byte("n"), RefreshHash: []byte("m"), AccessExpires: now, RefreshExpires: now}
		if _, err := s.RotateOAuthRefresh(ctx, []byte("r"), next, now.Add(time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired refresh: got %v; want ErrNotFound", err)
		}
		// RFC 7009: revoking the refresh token revokes its grant only.
		if err := s.RevokeOAuthToken(ctx, []byte("r"), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.OAuthTokenByHash(ctx, []byte("a")); !errors.Is(err, ErrNotFound) {
			t.Errorf("access token of a revoked grant: got %v", err)
		}
		if _, err := s.OAuthTokenByHash(ctx, []byte("b")); err != nil {
			t.Errorf("another grant: %v", err)
		}
		if err := s.RevokeOAuthToken(ctx, []byte("unknown"), now); err != nil {
			t.Errorf("unknown token: %v", err)
		}
		if err := s.RevokeOAuthToken(ctx, []byte("b"), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.OAuthTokenByHash(ctx, []byte("b")); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked access token: got %v", err)
		}
	})
}
