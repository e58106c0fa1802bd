package web

// How a request proves it comes from a logged-in approver's page
//
// Every /api/* call except POST /api/login must carry both:
//
//   - the session cookie (gridcity_session, or __Host-gridcity_session with
//     TLS): HttpOnly, SameSite=Strict, set by the login; and
//   - the header X-Gridcity-Session: <csrfToken>, where csrfToken is the
//     value the login answered with ({"username", "expiresAt", "csrfToken"};
//     32 random bytes in unpadded base64url).
//
// A missing, malformed or wrong header is refused with 401 and a JSON error,
// exactly like a missing cookie, on every endpoint: GET /api/me and the
// event stream GET /api/events included, so that nothing can be learnt, and
// the token never be fetched again, with the cookie alone. The store keeps
// only the sha256 of each secret.
//
// Why two secrets: browsers do not isolate cookies by port (RFC 6265 §8.5),
// so once an approver logs in at http://127.0.0.1:4600/ any other local
// server the browser visits on that host (say an AI agent's dev server on
// 127.0.0.1:3000) receives the session cookie, and can replay it from curl
// with whatever Origin it likes. The token, by contrast, lives only in the
// page's sessionStorage, which is per origin (scheme, host and port) and
// which no other port's page, nor any server, can read.
//
// On top of that, state-changing requests must come from the app's own
// origin (Origin, Sec-Fetch-Site; 403 otherwise), and on a loopback
// connection the Host must be a loopback name (403 otherwise; DNS
// rebinding). An Authorization header is never read: an MCP token is not a
// way in.

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// bcryptCost is the work factor for approver passwords: about a quarter of
// a second per check on a small server, slow enough that a stolen store is
// costly to attack and fast enough for a login.
const bcryptCost = 12

// HashPassword returns the bcrypt hash under which an approver's password is
// kept. bcrypt reads at most 72 bytes, so longer passwords are refused
// rather than silently cut.
func HashPassword(pw string) (string, error) {
	if pw == "" {
		return "", errors.New("hash password: the password is empty")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcryptCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// passwordAlphabet leaves out characters that are easily misread when a
// password is copied from a terminal by hand (0/O, 1/l/I).
const passwordAlphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// NewPassword returns a generated password of 20 characters (about 116
// bits), for `gridcity approver add` and the admin created on first start.
func NewPassword() string {
	max := big.NewInt(int64(len(passwordAlphabet)))
	var b strings.Builder
	for range 20 {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand does not fail on supported systems
		}
		b.WriteByte(passwordAlphabet[n.Int64()])
	}
	return b.String()
}

// dummyHash is checked against when the username is unknown, so that a
// login for a name that does not exist takes as long as one that does and
// timing does not tell which names are approvers. Its password was random
// and thrown away; the cost matches bcryptCost.
var dummyHash = []byte("$2a$12$b099dwbgzdaWtJfe78nNvO.vghFFgrW.WVHIoPbkBg2CwcEESJtbO")

// Cookie names. With TLS the __Host- prefix makes the browser refuse a
// cookie that was set without Secure, with a Domain, or for a narrower Path,
// so a sibling subdomain cannot plant a session.
const (
	cookiePlain  = "gridcity_session"
	cookieSecure = "__Host-gridcity_session"
)

func (a *app) cookieName() string {
	if a.cfg.Secure {
		return cookieSecure
	}
	return cookiePlain
}

func (a *app) setCookie(w http.ResponseWriter, value string, expires time.Time, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     a.cookieName(),
		Value:    value,
		Path:     "/",
		Expires:  expires,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   a.cfg.Secure,
		SameSite: http.SameSiteStrictMode,
	})
}

// sessionHash is how a cookie value or a CSRF token is kept in the store:
// only the sha256 of its 32 bytes, so that a copy of the store cannot be
// replayed as a login. ok is false when the value is not 32 bytes in
// unpadded base64url.
func sessionHash(value string) (hash []byte, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) != 32 {
		return nil, false
	}
	sum := sha256.Sum256(raw)
	return sum[:], true
}

// newSecret returns 32 random bytes in unpadded base64url and their hash.
func newSecret() (value string, hash []byte) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	value = base64.RawURLEncoding.EncodeToString(raw)
	hash, _ = sessionHash(value)
	return value, hash
}

// csrfHeader carries the session's second secret; see the top of this file.
const csrfHeader = "X-Gridcity-Session"

// checkCSRF returns why the request's X-Gridcity-Session header does not
// belong to the session, or "". The comparison takes the same time
// wherever the hashes differ.
func checkCSRF(r *http.Request, se store.Session) string {
	vals := r.Header.Values(csrfHeader)
	if len(vals) == 0 || vals[0] == "" {
		return "missing the " + csrfHeader + " header; the app's page sends the csrfToken its login answered with (scripts: read csrfToken from POST /api/login and send it on every call)"
	}
	if len(se.CSRFHash) != sha256.Size {
		// A session from before the header existed; the migration removes
		// them, so this is only a guard.
		return "this session predates the " + csrfHeader + " header; log in again"
	}
	got, ok := sessionHash(vals[0])
	if len(vals) != 1 || !ok {
		return "the " + csrfHeader + " header is malformed; send the csrfToken from the login once, as is"
	}
	if subtle.ConstantTimeCompare(got, se.CSRFHash) != 1 {
		return "the " + csrfHeader + " header does not belong to this session (logged in again elsewhere?); log in again"
	}
	return ""
}

// authedHandler serves a request that carries a valid session.
type authedHandler func(w http.ResponseWriter, r *http.Request, se store.Session)

// authed requires a valid session cookie and its X-Gridcity-Session header
// (401) and, for anything but a read, a request from the app's own origin
// (403). The Authorization header is never read: an MCP token is not a way
// in.
func (a *app) authed(h authedHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		se, code, msg := a.session(r)
		if code != 0 {
			if code == http.StatusUnauthorized && se.Approver != "" {
				a.log.Warn("app request refused", "reason", msg, "path", r.URL.Path, "approver", se.Approver, "remote", r.RemoteAddr)
			}
			if code == http.StatusUnauthorized && r.Header.Get("Authorization") != "" {
				msg = "the approval app does not accept MCP tokens or any Authorization header; log in with an approver account (gridcity approver add NAME)"
			}
			writeError(w, code, msg)
			return
		}
		if msg := checkOrigin(r); msg != "" {
			a.log.Warn("app request refused", "reason", msg, "path", r.URL.Path, "approver", se.Approver, "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, msg)
			return
		}
		h(w, r, se)
	})
}

// session returns the request's session, or the status and message to
// send: 401 without the cookie, or without the header that goes with it.
// On a refused header the session is returned too, for the log only.
func (a *app) session(r *http.Request) (store.Session, int, string) {
	c, err := r.Cookie(a.cookieName())
	if err != nil {
		return store.Session{}, http.StatusUnauthorized, "not logged in; POST /api/login with an approver's username and password"
	}
	hash, ok := sessionHash(c.Value)
	if !ok {
		return store.Session{}, http.StatusUnauthorized, "the session cookie is malformed; log in again"
	}
	se, err := a.st.SessionByHash(r.Context(), hash, a.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return store.Session{}, http.StatusUnauthorized, "the session has expired or was ended; log in again"
	}
	if msg, down := storeDownMessage(r, err); down {
		a.log.Warn("app: the store is unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
		return store.Session{}, http.StatusServiceUnavailable, msg
	}
	if err != nil {
		a.log.Error("session lookup failed", "err", err)
		return store.Session{}, http.StatusServiceUnavailable, "the coordinator's store did not answer; retry in a moment"
	}
	if msg := checkCSRF(r, se); msg != "" {
		return store.Session{Approver: se.Approver}, http.StatusUnauthorized, msg
	}
	return se, 0, ""
}

// checkOrigin returns why a request may not act on the app, or "".
//
// A state-changing request must carry an Origin naming the host it was sent
// to: browsers always send Origin on POST, and a page on another site cannot
// forge it. Sec-Fetch-Site, when the browser sends it, must say the request
// came from the app itself (or, for a read, from the address bar). The Host
// is compared as given: behind a TLS proxy, pass the original Host through.
func checkOrigin(r *http.Request) string {
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch site := r.Header.Get("Sec-Fetch-Site"); {
	case site == "", site == "same-origin", site == "none" && read:
	default:
		return fmt.Sprintf("request from another site (Sec-Fetch-Site: %s); use the app's own page", site)
	}
	if read {
		return ""
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "missing Origin header; state-changing requests must come from the app's page (scripts: send Origin: http://" + r.Host + ")"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Sprintf("Origin %q is not a valid origin; use the app's own page", origin)
	}
	if !strings.EqualFold(u.Host, r.Host) {
		return fmt.Sprintf("Origin %q does not match this app (%s); approvals are accepted only from the app's own page", origin, r.Host)
	}
	return ""
}

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type meResponse struct {
	Username  string    `json:"username"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// loginResponse is what only the login answers: the session's second
// secret, which the page keeps in sessionStorage and sends as
// X-Gridcity-Session. No other endpoint ever returns it.
type loginResponse struct {
	meResponse
	CSRFToken string `json:"csrfToken"`
}

func (a *app) login(w http.ResponseWriter, r *http.Request) {
	// A login form on another site must not log the browser into this app
	// (login CSRF), so login is held to the same origin rule as the rest.
	if msg := checkOrigin(r); msg != "" {
		writeError(w, http.StatusForbidden, msg)
		return
	}
	var in loginRequest
	if code, msg := decodeJSON(w, r, maxLoginBody, &in); code != 0 {
		writeError(w, code, msg)
		return
	}
	if in.Username == "" || in.Password == "" {
		writeError(w, http.StatusBadRequest, "give both username and password")
		return
	}
	// A source that is itself throttled is refused before its password is
	// checked, so that it cannot learn from the answer whether a guess was
	// right. Any other source's password is checked, whatever others have
	// tried for the same name (see loginLimiter).
	source := loginSource(r)
	now := a.cfg.Now()
	wait, try := a.logins.begin(source, in.Username, now)
	if try == nil {
		secs := int(wait.Seconds()) + 1
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed logins from this address; wait %d seconds and try again", secs))
		return
	}

	ap, err := a.st.Approver(r.Context(), in.Username)
	known := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		try.abandoned(now)
		if a.storeDown(w, r, err) {
			return
		}
		a.log.Error("approver lookup failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "the coordinator's store did not answer; retry in a moment")
		return
	}
	hash := dummyHash
	if known {
		hash = []byte(ap.PasswordHash)
	}
	// Compare even for unknown names so that both take a bcrypt's time.
	match := bcrypt.CompareHashAndPassword(hash, []byte(in.Password)) == nil
	if !known || !match {
		underAttack := try.failed(now)
		if known {
			a.log.Warn("app login failed: wrong password", "approver", in.Username, "remote", r.RemoteAddr, "manySources", underAttack)
		} else {
			// The attempted name is not logged: people type passwords into
			// the username field.
			a.log.Warn("app login failed: unknown username", "remote", r.RemoteAddr, "manySources", underAttack)
		}
		writeError(w, http.StatusUnauthorized, "wrong username or password")
		return
	}
	try.succeeded(now)

	// A fresh session on every login; one the browser still held is ended.
	if c, err := r.Cookie(a.cookieName()); err == nil {
		if old, ok := sessionHash(c.Value); ok {
			_ = a.st.DeleteSession(r.Context(), old)
			a.streams.end(old, "logged in again, in another tab or window; this page's login ended")
		}
	}
	value, hashed := newSecret()
	token, tokenHash := newSecret()
	se := store.Session{Hash: hashed, CSRFHash: tokenHash, Approver: ap.Name, CreatedAt: now, ExpiresAt: now.Add(a.cfg.SessionTTL)}
	if err := a.st.CreateSession(r.Context(), se); err != nil {
		if a.storeDown(w, r, err) {
			return
		}
		a.log.Error("recording session failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "could not record the session; retry in a moment")
		return
	}
	a.setCookie(w, value, se.ExpiresAt, int(a.cfg.SessionTTL.Seconds()))
	a.log.Info("app login", "approver", ap.Name, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, loginResponse{meResponse: meResponse{Username: ap.Name, ExpiresAt: se.ExpiresAt}, CSRFToken: token})
}

func (a *app) logout(w http.ResponseWriter, r *http.Request, se store.Session) {
	if err := a.st.DeleteSession(r.Context(), se.Hash); err != nil {
		a.log.Error("ending session failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, "could not end the session; retry in a moment")
		return
	}
	a.streams.end(se.Hash, "logged out")
	a.setCookie(w, "", time.Unix(0, 0), -1)
	a.log.Info("app logout", "approver", se.Approver, "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

func (a *app) me(w http.ResponseWriter, r *http.Request, se store.Session) {
	writeJSON(w, http.StatusOK, meResponse{Username: se.Approver, ExpiresAt: se.ExpiresAt})
}

// Login limits. Failures are counted three ways, and each is used only for
// what it can do without locking a person out with someone else's guesses:
//
//   - per source (an IPv4 address, or an IPv6 /64, which one host usually
//     holds whole): a source guessing many names, or one name many times,
//     is refused with 429 before its password is checked;
//   - per (username, source): a source guessing one name is refused sooner;
//   - per username, from every source together: a name guessed from many
//     sources is "under attack", and then each wrong password empties that
//     source's budget for the name, so every source gets one guess per
//     interval. The per-username count never refuses anything by itself:
//     the right password from a source that is not itself throttled always
//     logs in, however many wrong ones others sent for the same name.
//
// The limits are the same for names that exist and names that do not, and
// a refused source is refused before any bcrypt for both, so neither the
// status nor the timing tells which names are approvers.
const (
	loginBurst          = 10              // failures from one source, any names
	loginPerSourceEvery = 6 * time.Second // then a try every 6 s
	loginPairBurst      = 5               // failures for one name from one source
	loginPerPairEvery   = 15 * time.Second
	loginUserBurst      = 20 // failures for one name from all sources before it is under attack
	loginPerUserEvery   = 15 * time.Second
	maxLimiterKeys      = 10000
	loginIPv6PrefixBits = 64
)

type loginLimiter struct {
	mu       sync.Mutex
	bySource buckets
	byPair   buckets
	byUser   buckets
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{
		bySource: buckets{m: map[string]*bucket{}, every: loginPerSourceEvery, burst: loginBurst},
		byPair:   buckets{m: map[string]*bucket{}, every: loginPerPairEvery, burst: loginPairBurst},
		byUser:   buckets{m: map[string]*bucket{}, every: loginPerUserEvery, burst: loginUserBurst},
	}
}

func pairKey(user, source string) string { return strings.ToLower(user) + "\x00" + source }

// begin starts a try for user from source. When the source is throttled
// (over every name, or for this one) it returns how long to wait and no
// try. Otherwise the try is charged to the source at once, before the
// password is checked, so that parallel guesses cannot all pass the check
// together; the try's outcome settles it. The username's total across
// sources never refuses a try (see above).
func (l *loginLimiter) begin(source, user string, now time.Time) (time.Duration, *loginTry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &loginTry{l: l, source: source, user: strings.ToLower(user), pair: pairKey(user, source)}
	if wait := max(l.bySource.wait(source, now), l.byPair.wait(t.pair, now)); wait > 0 {
		return wait, nil
	}
	l.bySource.spend(source, 1, now)
	l.byPair.spend(t.pair, 1, now)
	return 0, t
}

// loginTry is one password check under way, charged to its source.
type loginTry struct {
	l                  *loginLimiter
	source, user, pair string
}

// failed counts a wrong password (or an unknown name) against the username
// too. It reports whether the name is under attack from many sources, in
// which case the source's budget for the name is spent.
func (t *loginTry) failed(now time.Time) (underAttack bool) {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	t.l.byUser.spend(t.user, 1, now)
	if t.l.byUser.wait(t.user, now) == 0 {
		return false
	}
	// Spend what is left, down to under one try: the source's next try for
	// this name waits an interval.
	if left := math.Floor(t.l.byPair.level(t.pair, now)); left > 0 {
		t.l.byPair.spend(t.pair, left, now)
	}
	return true
}

// succeeded gives the try back to the source, and forgets the source's
// failures for the name: a person who mistyped and then got it right
// starts again with a full budget from that place.
func (t *loginTry) succeeded(now time.Time) {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	t.l.bySource.spend(t.source, -1, now)
	delete(t.l.byPair.m, t.pair)
}

// abandoned gives the try back: the password could not be checked.
func (t *loginTry) abandoned(now time.Time) {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	t.l.bySource.spend(t.source, -1, now)
	t.l.byPair.spend(t.pair, -1, now)
}

// buckets holds one token bucket per key: burst tries, then one more per
// interval. A key without a bucket has a full one. Callers hold
// loginLimiter.mu.
type buckets struct {
	m     map[string]*bucket
	every time.Duration
	burst int
}

type bucket struct {
	tokens float64
	at     time.Time
}

// level is how many tries key has at now.
func (bs *buckets) level(key string, now time.Time) float64 {
	b := bs.m[key]
	if b == nil {
		return float64(bs.burst)
	}
	if now.Before(b.at) {
		return b.tokens
	}
	return min(float64(bs.burst), b.tokens+float64(now.Sub(b.at))/float64(bs.every))
}

// wait is how long key must wait for its next try, or 0.
func (bs *buckets) wait(key string, now time.Time) time.Duration {
	if l := bs.level(key, now); l < 1 {
		return time.Duration((1 - l) * float64(bs.every))
	}
	return 0
}

// spend takes n tries from key's bucket (a negative n gives them back, up
// to the burst). The map is bounded: at the bound, full buckets are
// forgotten, then any, down to nine tenths of the bound, so that a spray
// of names or addresses can neither grow it without end nor make every
// failure walk the whole map.
func (bs *buckets) spend(key string, n float64, now time.Time) {
	level := bs.level(key, now)
	b := bs.m[key]
	if b == nil {
		if len(bs.m) >= maxLimiterKeys {
			for k := range bs.m {
				if bs.level(k, now) >= float64(bs.burst) {
					delete(bs.m, k)
				}
			}
			for k := range bs.m {
				if len(bs.m) <= maxLimiterKeys*9/10 {
					break
				}
				delete(bs.m, k)
			}
		}
		b = &bucket{}
		bs.m[key] = b
	}
	b.tokens = min(float64(bs.burst), level-n)
	if now.After(b.at) {
		b.at = now
	}
}

// loginSource is the source a login's failures are counted against: the
// remote IPv4 address, or the /64 an IPv6 address is in (one host usually
// holds a whole /64, and would otherwise get a fresh budget per address).
// Forwarded-for headers are not trusted: anyone can send them.
func loginSource(r *http.Request) string {
	host := remoteHost(r)
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(loginIPv6PrefixBits, 128)), Mask: net.CIDRMask(loginIPv6PrefixBits, 128)}).String()
}

func remoteHost(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return h
}

// checkHost returns why the request's Host may not be served, or "".
//
// DNS rebinding: a page on evil.example makes its name resolve to
// 127.0.0.1 and then calls the app as its own origin, so Origin and
// Sec-Fetch-Site look same-origin; only the Host (evil.example) tells.
// On a connection that arrived on a loopback address, the Host must
// therefore be a loopback name. This mirrors the MCP endpoint's guard.
func checkHost(r *http.Request) string {
	if loopback.Rebound(r) {
		return fmt.Sprintf("Host %q is not a loopback name on a loopback connection (possible DNS rebinding); open the app at http://127.0.0.1 or http://localhost", r.Host)
	}
	return ""
}
