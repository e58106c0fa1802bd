package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
)

type sseEvent struct {
	name, data string
}

// openEvents opens /api/events on a real server, with the cookie and its
// X-Gridcity-Session header, and returns its events as they arrive;
// comments (heartbeats) arrive as events named ":".
func (e *testEnv) openEvents(t *testing.T, srv *httptest.Server, c *http.Cookie) (<-chan sseEvent, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rq, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events", nil)
	rq.AddCookie(c)
	rq.Header.Set(csrfHeader, e.token(c))
	res, err := srv.Client().Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %q; want 200 text/event-stream", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.name = ":"
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch, res
}

// next returns the next event that is not a heartbeat, or fails.
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("event stream ended; want another event")
			}
			if ev.name != ":" {
				return ev
			}
		case <-timeout:
			t.Fatal("no event within 5 s")
		}
	}
}

func TestEvents(t *testing.T) {
	e := newEnv(t, Config{heartbeat: 50 * time.Millisecond})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close) // registered first, so it runs after the streams are cancelled
	c := e.login(t)
	waiting := e.submit(t, command.Submission{Command: "uptime"})

	ch, _ := e.openEvents(t, srv, c)
	ev := next(t, ch)
	var snap snapshot
	if err := json.Unmarshal([]byte(ev.data), &snap); ev.name != "pending" || err != nil || len(snap.Requests) != 1 || snap.Requests[0].ID != waiting.ID || snap.Now.IsZero() {
		t.Fatalf("first event %s %s; want a pending snapshot with %s", ev.name, ev.data, waiting.ID)
	}

	// A new request reaches the open page.
	r := e.submit(t, command.Submission{Server: "app-1", Command: "sudo systemctl restart app", Input: &command.Input{Prompt: "pin", Secret: true}})
	ev = next(t, ch)
	var v requestView
	if err := json.Unmarshal([]byte(ev.data), &v); ev.name != "created" || err != nil || v.ID != r.ID || v.Command != r.Command || !v.Sudo || v.Input == nil {
		t.Fatalf("got %s %s; want created with the request", ev.name, ev.data)
	}

	// A decision, dispatch and end reach it too, without the secret.
	if got := e.do(t, req{method: "POST", path: "/api/requests/" + r.ID + "/approve", cookie: c, body: map[string]string{"input": "4242"}}); got.code != 200 {
		t.Fatalf("approve: %d %s", got.code, got.body)
	}
	finish(e.svc, "app-1", r.ID, "restarted\n", 0)
	var kinds []string
	for len(kinds) < 4 {
		ev = next(t, ch)
		if strings.Contains(ev.data, "4242") {
			t.Fatalf("event carries the secret: %s", ev.data)
		}
		kinds = append(kinds, ev.name)
	}
	if strings.Join(kinds, " ") != "decided updated updated finished" {
		t.Errorf("events %v; want decided, updated (dispatched), updated (started), finished", kinds)
	}
	json.Unmarshal([]byte(ev.data), &v)
	if v.Status != command.StatusCompleted || v.Stdout.Text != "restarted\n" {
		t.Errorf("finished %+v; want completed with its output", v)
	}

	// Heartbeats keep the stream alive.
	deadline := time.After(5 * time.Second)
	for beat := false; !beat; {
		select {
		case ev := <-ch:
			beat = ev.name == ":"
		case <-deadline:
			t.Fatal("no heartbeat comment")
		}
	}

	// Logging out ends the stream with an end event.
	if got := e.do(t, req{method: "POST", path: "/api/logout", cookie: c}); got.code != 204 {
		t.Fatalf("logout: %d", got.code)
	}
	if ev = next(t, ch); ev.name != "end" || !strings.Contains(ev.data, "logged out") {
		t.Errorf("after logout: %s %s; want end", ev.name, ev.data)
	}
	if ev, ok := <-ch; ok {
		t.Errorf("stream goes on after the end event: %v", ev)
	}
}

func TestEventsEndWithSession(t *testing.T) {
	e := newEnv(t, Config{heartbeat: 20 * time.Millisecond, SessionTTL: time.Hour})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close) // registered first, so it runs after the streams are cancelled
	c := e.login(t)
	ch, _ := e.openEvents(t, srv, c)
	if ev := next(t, ch); ev.name != "pending" {
		t.Fatalf("first event %s; want pending", ev.name)
	}
	e.clock.add(time.Hour + time.Second)
	if ev := next(t, ch); ev.name != "end" || !strings.Contains(ev.data, "log in again") {
		t.Errorf("after the session expired: %s %s; want end", ev.name, ev.data)
	}
}

func TestEventsLimitPerSession(t *testing.T) {
	e := newEnv(t, Config{})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close) // registered first, so it runs after the streams are cancelled
	c := e.login(t)
	for range maxStreamsPerSession {
		ch, _ := e.openEvents(t, srv, c)
		next(t, ch)
	}
	rq, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
	rq.AddCookie(c)
	rq.Header.Set(csrfHeader, e.token(c))
	res, err := srv.Client().Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 429 {
		t.Errorf("stream %d: got %d; want 429", maxStreamsPerSession+1, res.StatusCode)
	}
}
