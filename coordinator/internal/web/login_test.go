package web

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// loginFrom posts a login for user with password from the remote address.
func (e *testEnv) loginFrom(t *testing.T, user, password, remote string) resp {
	t.Helper()
	return e.do(t, req{method: "POST", path: "/api/login", body: map[string]string{"username": user, "password": password}, remote: remote})
}

// want429 checks that r is a 429 that says how long to wait.
func want429(t *testing.T, r resp, what string) {
	t.Helper()
	if r.code != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("%s: got %d %s (Retry-After %q); want 429 with Retry-After", what, r.code, r.body, r.header.Get("Retry-After"))
	}
	if msg := r.errorText(t); !strings.Contains(msg, "wait") {
		t.Errorf("%s: 429 says %q; want how long to wait", what, msg)
	}
}

// Someone else's wrong passwords never lock an approver out: the attacking
// source is throttled, and the right password from anywhere else logs in.
func TestLoginNotLockedOutByOthers(t *testing.T) {
	e := newEnv(t, Config{})
	const attacker, approver = "198.51.100.7:1000", "203.0.113.9:2000"
	for i := range 3 * loginBurst {
		r := e.loginFrom(t, testUser, fmt.Sprintf("guess-%d", i), attacker)
		if r.code != 401 && r.code != 429 {
			t.Fatalf("guess %d: got %d %s; want 401 or 429", i+1, r.code, r.body)
		}
	}
	if r := e.loginFrom(t, testUser, testPassword, approver); r.code != 200 {
		t.Fatalf("the right password from another address after %d wrong ones elsewhere: got %d %s; want 200", 3*loginBurst, r.code, r.body)
	}
	// The attacker's source is throttled even with the right password, so
	// that its answers tell it nothing about a guess.
	want429(t, e.loginFrom(t, testUser, testPassword, attacker), "the attacking address")
}

// A name guessed from many sources at once slows every guessing source to
// one try per interval, and still lets the right password in from a source
// that is not throttled. (Unknown names are counted by the same calls, with
// the name as typed, so the answers do not tell which names are approvers;
// each costs a full bcrypt at cost 12, too slow to repeat this test with.)
func TestLoginUnderAttackFromManySources(t *testing.T) {
	e := newEnv(t, Config{})
	source := func(i int) string { return fmt.Sprintf("198.51.100.%d:4000", i+1) }
	// Sources guess within their own limits until the name's total
	// reaches its limit: every answer is a 401, none a 429.
	const each = loginPairBurst - 1
	for n := range loginUserBurst {
		if r := e.loginFrom(t, testUser, fmt.Sprintf("guess-%d", n), source(n/each)); r.code != 401 {
			t.Fatalf("guess %d from source %d: got %d %s; want 401", n, n/each, r.code, r.body)
		}
	}
	// The name is now under attack: a wrong password spends the rest
	// of that source's budget for it, and the source waits an
	// interval, even with the right password.
	if r := e.loginFrom(t, testUser, "one-more", source(0)); r.code != 401 {
		t.Fatalf("a source with budget left: got %d %s; want 401", r.code, r.body)
	}
	want429(t, e.loginFrom(t, testUser, testPassword, source(0)), "a guessing source while the name is under attack")
	fresh := "203.0.113.50:5000"
	if r := e.loginFrom(t, testUser, "wrong-once", fresh); r.code != 401 {
		t.Fatalf("a fresh source's first wrong password: got %d %s; want 401", r.code, r.body)
	}
	want429(t, e.loginFrom(t, testUser, "again", fresh), "a source's second try while the name is under attack")
	e.clock.add(loginPerPairEvery + time.Second)
	if r := e.loginFrom(t, testUser, "after-the-interval", fresh); r.code != 401 {
		t.Fatalf("after one interval: got %d %s; want 401 (one more try)", r.code, r.body)
	}
	if r := e.loginFrom(t, testUser, testPassword, "192.0.2.77:6000"); r.code != 200 {
		t.Fatalf("the right password from an untouched source while the name is under attack: got %d %s; want 200", r.code, r.body)
	}
}

// One source is limited per name and over all names; the limits refill.
func TestLoginRateLimited(t *testing.T) {
	e := newEnv(t, Config{})
	const remote = "198.51.100.7:1000"
	for i := range loginPairBurst {
		if r := e.loginFrom(t, testUser, "wrong", remote); r.code != 401 {
			t.Fatalf("failure %d: got %d; want 401", i+1, r.code)
		}
	}
	want429(t, e.loginFrom(t, testUser, testPassword, remote), "the same name from the same address after a burst")
	// The limit refills: one more try after the interval.
	e.clock.add(16 * time.Second)
	if r := e.loginFrom(t, testUser, testPassword, remote); r.code != 200 {
		t.Fatalf("after waiting: got %d %s; want 200", r.code, r.body)
	}

	// An address guessing many names is limited too. Known names only:
	// unknown ones cost a full bcrypt each.
	const guesser = "192.0.2.50:3000"
	for i := range loginBurst {
		name := fmt.Sprintf("bob%d", i)
		hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
		if err := e.st.CreateApprover(context.Background(), store.Approver{Name: name, PasswordHash: string(hash)}); err != nil {
			t.Fatal(err)
		}
		if r := e.loginFrom(t, name, "wrong", guesser); r.code != 401 {
			t.Fatalf("failure %d: got %d; want 401", i+1, r.code)
		}
	}
	want429(t, e.loginFrom(t, "bob0", "pw", guesser), "an address after a burst over many names")
	if r := e.loginFrom(t, "bob0", "pw", "192.0.2.51:3000"); r.code != 200 {
		t.Fatalf("another address: got %d %s; want 200", r.code, r.body)
	}
}

// Guesses sent in parallel are charged before their passwords are
// checked, so they cannot all pass the source's limit together.
func TestLoginParallelGuessesCounted(t *testing.T) {
	e := newEnv(t, Config{})
	codes := make(chan int, 4*loginPairBurst)
	var wg sync.WaitGroup
	for i := range cap(codes) {
		wg.Go(func() { codes <- e.loginFrom(t, testUser, fmt.Sprintf("guess-%d", i), "198.51.100.7:1000").code })
	}
	wg.Wait()
	close(codes)
	n := map[int]int{}
	for c := range codes {
		n[c]++
	}
	if n[401] != loginPairBurst || n[429] != cap(codes)-loginPairBurst {
		t.Fatalf("%d parallel guesses from one address: %v; want %d answered 401 and the rest 429", cap(codes), n, loginPairBurst)
	}
}

// The addresses of one IPv6 /64 are one source: a host holds the whole
// prefix and would otherwise get a fresh budget per address.
func TestLoginIPv6PrefixIsOneSource(t *testing.T) {
	e := newEnv(t, Config{})
	for i := range loginPairBurst {
		if r := e.loginFrom(t, testUser, "wrong", fmt.Sprintf("[2001:db8:1:2::%x]:1000", i+1)); r.code != 401 {
			t.Fatalf("failure %d: got %d; want 401", i+1, r.code)
		}
	}
	want429(t, e.loginFrom(t, testUser, testPassword, "[2001:db8:1:2:ffff::1]:1000"), "another address of the same /64")
	if r := e.loginFrom(t, testUser, testPassword, "[2001:db8:1:3::1]:1000"); r.code != 200 {
		t.Fatalf("an address of another /64: got %d %s; want 200", r.code, r.body)
	}
}

// However many names and addresses are sprayed, the limiter's maps stay
// bounded.
func TestLoginLimiterBounded(t *testing.T) {
	l := newLoginLimiter()
	now := time.Now()
	for i := range maxLimiterKeys + 500 {
		_, try := l.begin(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), fmt.Sprintf("user%d", i), now)
		try.failed(now)
	}
	if n := len(l.bySource.m); n > maxLimiterKeys {
		t.Errorf("%d sources kept; want at most %d", n, maxLimiterKeys)
	}
	if n := len(l.byPair.m); n > maxLimiterKeys {
		t.Errorf("%d (name, source) pairs kept; want at most %d", n, maxLimiterKeys)
	}
	if n := len(l.byUser.m); n > maxLimiterKeys {
		t.Errorf("%d names kept; want at most %d", n, maxLimiterKeys)
	}
}
