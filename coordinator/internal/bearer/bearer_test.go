package bearer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func TestHash(t *testing.T) {
	want := sha256.Sum256([]byte("gc_abc"))
	if got := Hash("gc_abc"); !bytes.Equal(got, want[:]) {
		t.Fatalf("Hash = %x; want %x", got, want)
	}
}

func TestFromHeader(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer gc_abc", "gc_abc", true},
		{"bearer gc_abc", "gc_abc", true},
		{"BEARER   gc_abc  ", "gc_abc", true},
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearer a b", "", false},
		{"Bearergc_abc", "", false},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("Authorization", tc.header)
		}
		got, ok := FromHeader(h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("FromHeader(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzFromHeader(f *testing.F) {
	for _, s := range []string{"Bearer gc_abc", "bearer  x", "Basic y", "", "Bearer a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		h := http.Header{"Authorization": {header}}
		tok, ok := FromHeader(h)
		if ok != (tok != "") || strings.ContainsAny(tok, " \t\r\n") {
			t.Fatalf("FromHeader(%q) = %q, %v", header, tok, ok)
		}
	})
}

// fakeStore holds tokens by hash and can be made unreachable.
type fakeStore struct {
	tokens map[string]store.Token
	down   bool
	reads  int
}

func (s *fakeStore) TokenByHash(_ context.Context, hash []byte) (store.Token, error) {
	s.reads++
	if s.down {
		return store.Token{}, &store.UnavailableError{Addr: "127.0.0.1:5432", Err: errors.New("connection refused")}
	}
	t, ok := s.tokens[string(hash)]
	if !ok {
		return store.Token{}, store.ErrNotFound
	}
	return t, nil
}

func TestVerifierRemembersThroughAnOutage(t *testing.T) {
	ctx := context.Background()
	st := &fakeStore{tokens: map[string]store.Token{string(Hash("gc_known")): {Name: "laptop", Scope: store.ScopeRead}}}
	v := NewVerifier(st)
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

	if tok, err := v.Verify(ctx, "gc_known", now); err != nil || tok.Name != "laptop" {
		t.Fatalf("Verify known = %+v, %v; want laptop", tok, err)
	}
	if _, err := v.Verify(ctx, "gc_other", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Verify unknown: %v; want store.ErrNotFound", err)
	}

	st.down = true
	if tok, err := v.Verify(ctx, "gc_known", now.Add(59*time.Minute)); err != nil || tok.Name != "laptop" {
		t.Fatalf("Verify known while the store is down = %+v, %v; want laptop, as verified within the hour", tok, err)
	}
	if _, err := v.Verify(ctx, "gc_other", now.Add(time.Minute)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Verify never-verified while the store is down: %v; want store.ErrUnavailable", err)
	}
	if _, err := v.Verify(ctx, "gc_known", now.Add(time.Hour)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Verify known an hour later while the store is down: %v; want store.ErrUnavailable", err)
	}

	// Revoked while the store was down: refused once it is back.
	st.down = false
	delete(st.tokens, string(Hash("gc_known")))
	if _, err := v.Verify(ctx, "gc_known", now.Add(2*time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Verify revoked token once the store is back: %v; want store.ErrNotFound", err)
	}
}

func TestVerifierIsBounded(t *testing.T) {
	now := time.Now()
	v := NewVerifier(&fakeStore{})
	for i := range maxVerified + 100 {
		v.put(Hash(string(rune(i))), store.Token{}, now)
	}
	if len(v.m) > maxVerified {
		t.Fatalf("%d tokens remembered; want at most %d", len(v.m), maxVerified)
	}
}
