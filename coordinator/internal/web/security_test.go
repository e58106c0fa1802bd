package web

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The login answers the session's second secret, and the store keeps only
// its hash, next to (and different from) the cookie's.
func TestLoginAnswersSessionToken(t *testing.T) {
	e := newEnv(t, Config{})
	c, ans := e.loginAnswer(t)
	if ans.Username != testUser || ans.ExpiresAt.IsZero() {
		t.Errorf("login answer %+v; want alice and the expiry", ans)
	}
	raw, err := base64.RawURLEncoding.DecodeString(ans.CSRFToken)
	if err != nil || len(raw) != 32 {
		t.Fatalf("csrfToken %q is not 32 bytes in unpadded base64url", ans.CSRFToken)
	}
	if ans.CSRFToken == c.Value {
		t.Fatal("the csrfToken is the cookie's value; it must be a second secret")
	}
	cookieHash, _ := sessionHash(c.Value)
	se, err := e.st.SessionByHash(context.Background(), cookieHash, e.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(raw)
	if string(se.CSRFHash) != string(want[:]) {
		t.Errorf("stored CSRF hash %x; want sha256 of the token's bytes %x", se.CSRFHash, want)
	}
	// Nothing in the sessions table is the token, in any form.
	db := rawDB(t, e.dir)
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sessions WHERE csrf_hash IN (?, ?) OR hash IN (?, ?)`, []byte(ans.CSRFToken), raw, []byte(ans.CSRFToken), raw).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d sessions hold the token itself (err %v); want only its hash", n, err)
	}
	if _, ans2 := e.loginAnswer(t); ans2.CSRFToken == ans.CSRFToken {
		t.Error("two logins got the same csrfToken")
	}
	// The token is answered by the login only, never again.
	for _, ep := range []req{{method: "GET", path: "/api/me"}, {method: "GET", path: "/api/requests"}, {method: "GET", path: "/api/history"}} {
		ep.cookie = c
		r := e.do(t, ep)
		if r.code != 200 || strings.Contains(r.body, ans.CSRFToken) || strings.Contains(r.body, "csrfToken") {
			t.Errorf("%s %s: %d %s; want 200 without the token", ep.method, ep.path, r.code, r.body)
		}
	}
	if strings.Contains(e.log.String(), ans.CSRFToken) || strings.Contains(e.log.String(), c.Value) {
		t.Error("a session secret reached the log")
	}
}

// The session cookie reaches every port of the host (RFC 6265 §8.5), so a
// local server that got it must still be unable to use it: every endpoint
// behind the login wants the header too, the event stream and /api/me
// included, and a refused one changes nothing.
func TestCookieAloneOpensNothing(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	other := e.login(t) // another valid session: its token is no key to c's
	r := e.submit(t, command.Submission{})
	random, _ := newSecret()
	bad := []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"no header", map[string]string{csrfHeader: ""}, "missing the X-Gridcity-Session header"},
		{"random token", map[string]string{csrfHeader: random}, "does not belong to this session"},
		{"another session's token", map[string]string{csrfHeader: e.token(other)}, "does not belong to this session"},
		{"the cookie's value", map[string]string{csrfHeader: c.Value}, "does not belong to this session"},
		{"malformed", map[string]string{csrfHeader: "not-a-token"}, "malformed"},
		{"padded", map[string]string{csrfHeader: e.token(c) + "="}, "malformed"},
		{"as a query", map[string]string{csrfHeader: ""}, "missing"},
	}
	for _, ep := range appEndpoints(r.ID) {
		for _, b := range bad {
			t.Run(fmt.Sprint(ep.method, " ", ep.path, " ", b.name), func(t *testing.T) {
				ep.cookie, ep.header = c, b.header
				if b.name == "as a query" {
					sep := "?"
					if strings.Contains(ep.path, "?") {
						sep = "&"
					}
					ep.path += sep + "X-Gridcity-Session=" + url.QueryEscape(e.token(c))
				}
				got := e.do(t, ep)
				if got.code != http.StatusUnauthorized {
					t.Fatalf("got %d %s; want 401", got.code, got.body)
				}
				if msg := got.errorText(t); !strings.Contains(msg, b.want) {
					t.Errorf("error %q; want it to contain %q", msg, b.want)
				}
				if strings.Contains(got.header.Get("Content-Type"), "event-stream") {
					t.Error("a refused request got an event stream")
				}
				if len(got.res.Cookies()) != 0 {
					t.Errorf("a refused request changed cookies: %v", got.res.Cookies())
				}
			})
		}
	}
	// A second header, even with the right value first, is refused.
	rq := httptest.NewRequest("GET", "http://"+testHost+"/api/me", nil)
	rq.AddCookie(c)
	rq.Header.Add(csrfHeader, e.token(c))
	rq.Header.Add(csrfHeader, random)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, rq)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("two headers: got %d; want 401", w.Code)
	}

	// Nothing was decided and no session was ended.
	if got, _ := e.svc.Get(context.Background(), r.ID); got.Status != command.StatusPending {
		t.Errorf("request is %s after the tries; want pending", got.Status)
	}
	for _, s := range []*http.Cookie{c, other} {
		if got := e.do(t, req{method: "GET", path: "/api/me", cookie: s}); got.code != 200 {
			t.Errorf("a session after the refused tries: got %d %s; want 200", got.code, got.body)
		}
	}
	if !strings.Contains(e.log.String(), "does not belong to this session") || !strings.Contains(e.log.String(), "approver=alice") {
		t.Error("refused headers for a live session are not logged as warnings")
	}

	// The same over a real connection, for the stream a page reads.
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	for _, tok := range []string{"", random} {
		rq, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
		rq.AddCookie(c)
		if tok != "" {
			rq.Header.Set(csrfHeader, tok)
		}
		res, err := srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Errorf("events with token %q: %d %s; want a 401 JSON error", tok, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
}

// Sessions from before the header existed cannot be used: the migration
// removes them, and one without a hash is refused all the same.
func TestSessionsFromBeforeTheHeader(t *testing.T) {
	// A store at schema version 2, with a session in the old shape.
	dir := t.TempDir()
	db := rawDB(t, dir)
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version(version) VALUES (1), (2)`,
		`CREATE TABLE sessions (hash BLOB PRIMARY KEY, approver TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL)`,
		`INSERT INTO sessions VALUES (x'0102', 'alice', 0, 99999999999999)`,
		// The version-1 agents table, which a later migration alters.
		`CREATE TABLE agents (name TEXT PRIMARY KEY, serial TEXT NOT NULL, enrolled_at INTEGER NOT NULL, revoked_at INTEGER NOT NULL DEFAULT 0)`,
		// The version-2 requests table, which a later migration alters.
		`CREATE TABLE requests (id TEXT PRIMARY KEY, server TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL, body BLOB NOT NULL)`,
		// The version-1 servers table, which a later migration indexes.
		`CREATE TABLE servers (name TEXT PRIMARY KEY, state BLOB NOT NULL, hello BLOB NOT NULL, last_seen INTEGER NOT NULL)`,
		// The version-1 metrics table, which a later migration turns into buckets.
		`CREATE TABLE metrics (server TEXT NOT NULL, at INTEGER NOT NULL, cpu REAL NOT NULL, mem REAL NOT NULL, load1 REAL NOT NULL)`,
		// The version-1 audit table, which a later migration chains.
		`CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, request_id TEXT NOT NULL, step TEXT NOT NULL, actor TEXT NOT NULL, detail BLOB NOT NULL)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	st, err := store.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatalf("migrating a version-2 store: %v", err)
	}
	defer st.Close()
	if _, err := st.SessionByHash(context.Background(), []byte{1, 2}, time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an old session after the migration: %v; want ErrNotFound", err)
	}

	// A session row without a CSRF hash (as the column's default).
	e := newEnv(t, Config{})
	c := e.login(t)
	if _, err := rawDB(t, e.dir).Exec(`UPDATE sessions SET csrf_hash = x''`); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, req{method: "GET", path: "/api/me", cookie: c})
	if r.code != http.StatusUnauthorized || !strings.Contains(r.errorText(t), "log in again") {
		t.Errorf("a session without a CSRF hash: %d %s; want 401 saying to log in again", r.code, r.body)
	}
	if err := e.st.CreateSession(context.Background(), store.Session{Hash: []byte("h"), Approver: testUser, ExpiresAt: time.Now().Add(time.Hour)}); err == nil {
		t.Error("the store recorded a session without a CSRF hash")
	}
}

// DNS rebinding: a page on evil.example whose name resolves to 127.0.0.1
// is the app's "own origin" to the browser; the Host gives it away.
func TestHostRebinding(t *testing.T) {
	e := newEnv(t, Config{})
	srv := httptest.NewServer(e.h) // on 127.0.0.1
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	send := func(method, host, path string, c *http.Cookie, body string) *http.Response {
		t.Helper()
		rq, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		rq.Host = host
		if method == "POST" {
			rq.Header.Set("Content-Type", "application/json")
			rq.Header.Set("Origin", "http://"+host) // what the rebound page sends
		}
		if c != nil {
			rq.AddCookie(c)
			rq.Header.Set(csrfHeader, e.token(c))
		}
		res, err := srv.Client().Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	login := fmt.Sprintf(`{"username":%q,"password":%q}`, testUser, testPassword)

	c := e.login(t)
	for _, host := range []string{"evil.example", fmt.Sprintf("evil.example:%d", port), fmt.Sprintf("127.0.0.1.evil.example:%d", port), "localhost.evil.example", "0.0.0.0", "192.0.2.1"} {
		for _, tc := range []struct {
			method, path string
			c            *http.Cookie
			body         string
		}{
			{"GET", "/", nil, ""},
			{"GET", "/static/app.js", nil, ""},
			{"POST", "/api/login", nil, login},
			{"GET", "/api/me", c, ""},
			{"GET", "/api/requests", c, ""},
		} {
			res := send(tc.method, host, tc.path, tc.c, tc.body)
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s with Host %s: %d; want 403", tc.method, tc.path, host, res.StatusCode)
			}
			if len(res.Cookies()) != 0 {
				t.Errorf("%s %s with Host %s set a cookie", tc.method, tc.path, host)
			}
			if res.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s %s with Host %s: the refusal lacks the security headers", tc.method, tc.path, host)
			}
		}
	}
	if !strings.Contains(e.log.String(), "DNS rebinding") {
		t.Error("refused Hosts are not logged")
	}
	// Loopback names, with any port or none, are the app.
	for _, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), "LocalHost", fmt.Sprintf("[::1]:%d", port), "127.0.0.2:80"} {
		if res := send("GET", host, "/", nil, ""); res.StatusCode != http.StatusOK {
			t.Errorf("GET / with Host %s: %d; want 200", host, res.StatusCode)
		}
		if res := send("GET", host, "/api/me", c, ""); res.StatusCode != http.StatusOK {
			t.Errorf("GET /api/me with Host %s: %d; want 200", host, res.StatusCode)
		}
	}

	// Off loopback (TLS, or --public-http behind a proxy) any Host is
	// served; the Origin rules still hold.
	for _, local := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 4600},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 4600},
	} {
		rq := httptest.NewRequest("GET", "http://gridcity.example.com/", nil)
		rq = rq.WithContext(context.WithValue(rq.Context(), http.LocalAddrContextKey, local))
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, rq)
		if w.Code != http.StatusOK {
			t.Errorf("GET / on %s with Host gridcity.example.com: %d; want 200", local, w.Code)
		}
	}
	// On [::1] the same rule as on 127.0.0.1.
	rq := httptest.NewRequest("GET", "http://evil.example/api/me", nil)
	rq = rq.WithContext(context.WithValue(rq.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv6loopback, Port: 4600}))
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, rq)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "DNS rebinding") {
		t.Errorf("Host evil.example on [::1]: %d %s; want a 403 JSON error", w.Code, w.Body.String())
	}
}

func TestLoopbackNames(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:4600": true, "127.0.0.1": true, "127.1.2.3:1": true, "[::1]:4600": true, "[::1]": true, "::1": true,
		"": false, "evil.example": false, "localhost.evil.example": false, "127.0.0.1.nip.io": false, "0.0.0.0": false, "[::]:80": false, "10.0.0.1": false,
	} {
		if got := loopback.Host(host); got != want {
			t.Errorf("loopback.Host(%q) = %v; want %v", host, got, want)
		}
	}
}

// rawDB opens the store's database file directly, for what the store's
// methods do not do.
func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "gridcity.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
