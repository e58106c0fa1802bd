// Package notifytest is test-only: real receivers for the notifiers, on
// loopback, as the notify package's tests, the end-to-end tests and the
// benchmark meet them — a webhook receiver that checks the signature, a
// Slack-shaped and an ntfy-shaped receiver, and an SMTP server that
// insists on STARTTLS. Each can be told to fail, hang or refuse its next
// requests, to show delivery through a receiver that fails and recovers.
// As harness it lives under coordinator/harness, and no product binary may
// import it (deps_test.go in coordinator/cmd/gridcity checks).
package notifytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Mode is how a receiver answers one request.
type Mode int

const (
	OK     Mode = iota // records it, 200
	Fail               // 503, not recorded
	Hang               // holds the request until the sender gives up, not recorded
	Refuse             // 400, not recorded
)

// Delivery is one request a receiver accepted.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// Receiver is an HTTP receiver on 127.0.0.1.
type Receiver struct {
	URL string

	check func(r *http.Request, body []byte) error
	mu    sync.Mutex
	got   []Delivery
	modes []Mode
	seen  int // requests, accepted or not
	bad   []string
	hung  chan struct{}
	more  chan struct{}
}

func newReceiver(t testing.TB, check func(*http.Request, []byte) error) *Receiver {
	t.Helper()
	rc := &Receiver{check: check, hung: make(chan struct{}), more: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve)) // 127.0.0.1
	t.Cleanup(func() {
		close(rc.hung)
		srv.Close()
	})
	rc.URL = srv.URL
	return rc
}

// Script sets how the next requests are answered, in order; after them,
// OK.
func (rc *Receiver) Script(modes ...Mode) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.modes = append(rc.modes, modes...)
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rc.mu.Lock()
	rc.seen++
	mode := OK
	if len(rc.modes) > 0 {
		mode, rc.modes = rc.modes[0], rc.modes[1:]
	}
	rc.mu.Unlock()
	switch mode {
	case Fail:
		http.Error(w, "down for a moment", http.StatusServiceUnavailable)
		return
	case Refuse:
		http.Error(w, "no", http.StatusBadRequest)
		return
	case Hang:
		select {
		case <-r.Context().Done():
		case <-rc.hung:
		}
		return
	}
	if err := rc.check(r, body); err != nil {
		rc.mu.Lock()
		rc.bad = append(rc.bad, err.Error())
		rc.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	rc.mu.Lock()
	rc.got = append(rc.got, Delivery{Header: r.Header.Clone(), Body: body})
	rc.mu.Unlock()
	select {
	case rc.more <- struct{}{}:
	default:
	}
}

// Got returns the requests accepted so far.
func (rc *Receiver) Got() []Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Delivery(nil), rc.got...)
}

// Seen is how many requests arrived, accepted or not.
func (rc *Receiver) Seen() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.seen
}

// Bad lists why requests were refused by the receiver's own check (a bad
// signature, a malformed body).
func (rc *Receiver) Bad() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.bad...)
}

// Wait waits until f holds for the deliveries, or within passes.
func (rc *Receiver) Wait(within time.Duration, f func([]Delivery) bool) ([]Delivery, bool) {
	return wait(within, rc.more, rc.Got, f)
}

// wait calls get until f holds for what it returns, again each time more
// says something arrived, for at most within.
func wait[T any](within time.Duration, more <-chan struct{}, get func() []T, f func([]T) bool) ([]T, bool) {
	deadline := time.After(within)
	for {
		if got := get(); f(got) {
			return got, true
		}
		select {
		case <-more:
		case <-deadline:
			return get(), false
		}
	}
}

// Always is n of mode, for a receiver that stays down.
func Always(mode Mode, n int) []Mode {
	modes := make([]Mode, n)
	for i := range modes {
		modes[i] = mode
	}
	return modes
}

// Webhook is a generic webhook receiver that accepts only bodies signed
// with key, whose "at" is within maxAge of now and agrees with the
// timestamp header: what docs/notifications.md tells receivers to check, written as
// a receiver would, apart from the sender's code.
func Webhook(t testing.TB, key []byte, maxAge time.Duration) *Receiver {
	return newReceiver(t, func(r *http.Request, body []byte) error {
		mac := hmac.New(sha256.New, key)
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if got := r.Header.Get("X-Gridcity-Signature"); !hmac.Equal([]byte(got), []byte(want)) {
			return fmt.Errorf("bad signature %q", got)
		}
		var p struct {
			Event string    `json:"event"`
			At    time.Time `json:"at"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Event == "" {
			return fmt.Errorf("body is not an event: %v", err)
		}
		ts, err := strconv.ParseInt(r.Header.Get("X-Gridcity-Timestamp"), 10, 64)
		if err != nil || ts != p.At.Unix() {
			return fmt.Errorf("timestamp header %q does not match at %s", r.Header.Get("X-Gridcity-Timestamp"), p.At)
		}
		if age := time.Since(p.At); age > maxAge || age < -maxAge {
			return fmt.Errorf("at %s is %s old: a replay", p.At, age)
		}
		return nil
	})
}

// Slack is an incoming-webhook receiver: a JSON object with a text, and
// blocks that are a list when present.
func Slack(t testing.TB) *Receiver {
	return newReceiver(t, func(r *http.Request, body []byte) error {
		var p struct {
			Text   *string          `json:"text"`
			Blocks []map[string]any `json:"blocks"`
		}
		if err := json.Unmarshal(body, &p); err != nil || p.Text == nil || *p.Text == "" {
			return fmt.Errorf("not a Slack message (want {\"text\": …}): %v", err)
		}
		if r.Header.Get("Content-Type") != "application/json" {
			return fmt.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		return nil
	})
}

// Ntfy is an ntfy topic: a POST with a text body and a Title; when token
// is set, only with Authorization: Bearer token.
func Ntfy(t testing.TB, token string) *Receiver {
	return newReceiver(t, func(r *http.Request, body []byte) error {
		if r.Method != http.MethodPost || len(body) == 0 || r.Header.Get("Title") == "" {
			return fmt.Errorf("not an ntfy publish: %s with %d bytes, title %q", r.Method, len(body), r.Header.Get("Title"))
		}
		if p, err := strconv.Atoi(r.Header.Get("Priority")); err != nil || p < 1 || p > 5 {
			return fmt.Errorf("priority %q", r.Header.Get("Priority"))
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			return fmt.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		return nil
	})
}
