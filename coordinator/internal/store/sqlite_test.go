package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func open(t testing.TB, dir string) *SQLite {
	t.Helper()
	s, err := OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestTokens(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		tok := Token{Name: "cursor", Scope: ScopeRead, Hash: []byte("h1"), CreatedAt: time.Now()}
		if err := s.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateToken(ctx, tok); !errors.Is(err, ErrExists) {
			t.Fatalf("got %v; want ErrExists", err)
		}
		got, err := s.TokenByHash(ctx, []byte("h1"))
		if err != nil || got.Name != "cursor" || got.Scope != ScopeRead {
			t.Fatalf("got %+v, %v", got, err)
		}
		if err := s.RevokeToken(ctx, "cursor", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TokenByHash(ctx, []byte("h1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revoked token: got %v; want ErrNotFound", err)
		}
		// The name may be reused after a revocation; the old hash stays dead.
		if err := s.CreateToken(ctx, Token{Name: "cursor", Scope: ScopeOperate, Hash: []byte("h2"), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TokenByHash(ctx, []byte("h1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("old hash: got %v; want ErrNotFound", err)
		}
	})
}

func TestSurvivesReopen(t *testing.T) {
	eachPlace(t, func(t *testing.T, open func(testing.TB) Store) {
		ctx := context.Background()
		s := open(t)
		s.SaveServers(ctx, []ServerRecord{{Name: "web-1", State: []byte{1}, Hello: []byte{2}, LastSeen: time.UnixMilli(1234)}})
		v, _ := s.PutBlobIfAbsent(ctx, "ca.pem", []byte("first"))
		s.Close()
		s2 := open(t)
		recs, err := s2.Servers(ctx)
		if err != nil || len(recs) != 1 || recs[0].LastSeen.UnixMilli() != 1234 {
			t.Fatalf("got %+v, %v", recs, err)
		}
		// A second writer of the CA gets the first one's value.
		v2, _ := s2.PutBlobIfAbsent(ctx, "ca.pem", []byte("second"))
		if string(v) != "first" || string(v2) != "first" {
			t.Fatalf("got %q, %q; want first twice", v, v2)
		}
	})
}

func TestEnrollIsAtomic(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.Now()
		for i := range 3 {
			s.CreateJoinToken(ctx, JoinToken{Hash: []byte(fmt.Sprint(i)), CreatedAt: now, ExpiresAt: now.Add(time.Hour), SingleUse: true})
		}
		if _, err := s.Enroll(ctx, []byte("0"), now, Agent{Name: "web-1", Serial: "aa", EnrolledAt: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Enroll(ctx, []byte("1"), now, Agent{Name: "web-1", Serial: "bb", EnrolledAt: now}); !errors.Is(err, ErrNameTaken) {
			t.Fatalf("got %v; want ErrNameTaken", err)
		}
		a, _ := s.Agent(ctx, "web-1")
		if a.Serial != "aa" {
			t.Fatalf("serial %q; want aa (the refused enrollment changed nothing)", a.Serial)
		}
		// After a revocation the name can be enrolled again, with the new serial.
		s.RevokeAgent(ctx, "web-1", now)
		if _, err := s.Enroll(ctx, []byte("1"), now, Agent{Name: "web-1", Serial: "bb", EnrolledAt: now}); err != nil {
			t.Fatal(err)
		}
		if a, _ := s.Agent(ctx, "web-1"); a.Serial != "bb" || a.Revoked() {
			t.Fatalf("got %+v; want serial bb, valid", a)
		}
	})
}

// An agent whose first answer was lost asks again with the same key and
// is enrolled again, with the new serial, whether its token was a one-time
// token it used or a reusable one. Another key, a revoked agent, or a
// one-time token used by another name is refused as before.
func TestEnrollAgainWithTheSameKey(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.Now()
		for _, tok := range []JoinToken{
			{Hash: []byte("once"), CreatedAt: now, ExpiresAt: now.Add(time.Hour), SingleUse: true},
			{Hash: []byte("once-2"), CreatedAt: now, ExpiresAt: now.Add(time.Hour), SingleUse: true},
			{Hash: []byte("fleet"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		} {
			if err := s.CreateJoinToken(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}
		keyA, keyB := []byte("key-a-sha256"), []byte("key-b-sha256")
		enroll := func(token, name, serial string, key []byte) (bool, error) {
			return s.Enroll(ctx, []byte(token), now, Agent{Name: name, Serial: serial, EnrolledAt: now, Key: key})
		}
		serial := func(name string) string {
			a, err := s.Agent(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			return a.Serial
		}
		if again, err := enroll("once", "web-1", "01", keyA); err != nil || again {
			t.Fatalf("first enrollment: %v, again %v", err, again)
		}
		if again, err := enroll("once", "web-1", "02", keyA); err != nil || !again || serial("web-1") != "02" {
			t.Fatalf("the same agent again: %v, again %v, serial %s; want enrolled again with serial 02", err, again, serial("web-1"))
		}
		if _, err := enroll("once", "web-1", "03", keyB); !errors.Is(err, ErrTokenUsed) || serial("web-1") != "02" {
			t.Fatalf("another key with the used token: %v; want ErrTokenUsed and nothing changed", err)
		}
		if _, err := enroll("once", "web-2", "04", keyA); !errors.Is(err, ErrTokenUsed) {
			t.Fatalf("the used token for another name: %v; want ErrTokenUsed", err)
		}
		if _, err := enroll("fleet", "web-1", "05", keyB); !errors.Is(err, ErrNameTaken) {
			t.Fatalf("another key for the name: %v; want ErrNameTaken", err)
		}
		if again, err := enroll("fleet", "web-1", "06", keyA); err != nil || !again || serial("web-1") != "06" {
			t.Fatalf("the same agent with a reusable token: %v, again %v, serial %s", err, again, serial("web-1"))
		}
		if _, err := enroll("fleet", "web-1", "07", nil); !errors.Is(err, ErrNameTaken) {
			t.Fatalf("no key: %v; want ErrNameTaken (nothing to match)", err)
		}
		// A revoked agent does not come back by asking again: it enrolls anew,
		// which takes a token of its own.
		if err := s.RevokeAgent(ctx, "web-1", now); err != nil {
			t.Fatal(err)
		}
		if _, err := enroll("once", "web-1", "08", keyA); !errors.Is(err, ErrTokenUsed) {
			t.Fatalf("revoked, with its used token: %v; want ErrTokenUsed", err)
		}
		if again, err := enroll("once-2", "web-1", "09", keyA); err != nil || again {
			t.Fatalf("revoked, with a new token: %v, again %v; want a new enrollment", err, again)
		}
		if a, _ := s.Agent(ctx, "web-1"); a.Serial != "09" || a.Revoked() || string(a.Key) != string(keyA) {
			t.Fatalf("got %+v; want serial 09, valid, key a", a)
		}
	})
}

// A fleet enrolling at once while the coordinator saves server state and
// audits: every write gets through, none with "database is locked" (with
// writers racing for SQLite's lock, some waited out busy_timeout and failed).
func TestConcurrentWritersAllSucceed(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		now := time.Now()
		if err := s.CreateJoinToken(ctx, JoinToken{Hash: []byte("fleet"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		const n = 200
		errs := make(chan error, 3*n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(3)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("web-%03d", i)
				_, err := s.Enroll(ctx, []byte("fleet"), now, Agent{Name: name, Serial: name, EnrolledAt: now})
				errs <- err
			}()
			go func() {
				defer wg.Done()
				errs <- s.SaveServers(ctx, []ServerRecord{{Name: fmt.Sprintf("web-%03d", i), State: []byte{1}, Hello: []byte{2}, LastSeen: now}})
			}()
			go func() {
				defer wg.Done()
				errs <- s.AppendAudit(ctx, AuditEntry{At: now, RequestID: fmt.Sprint(i), Step: "requested", Actor: "test", Detail: []byte("{}")})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		agents, err := s.Agents(ctx)
		if err != nil || len(agents) != n {
			t.Fatalf("%d agents enrolled (%v); want %d", len(agents), err, n)
		}
	})
}
