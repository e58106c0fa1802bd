package web

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
)

// fakeViews stands in for the fleet's pages (mcpserver.App, tested there):
// here what matters is the session, the routes and the error statuses.
type fakeViews struct {
	err     error
	version *atomic.Value // string
}

func newFakeViews(err error) fakeViews {
	v := &atomic.Value{}
	v.Store("1")
	return fakeViews{err: err, version: v}
}

func (f fakeViews) Fleet(_ context.Context, after string) (fleetview.AppFleet, error) {
	return fleetview.AppFleet{NextAfter: "after:" + after}, f.err
}

func (f fakeViews) Server(_ context.Context, name string) (fleetview.AppServer, error) {
	if name != "web-1" {
		return fleetview.AppServer{}, fmt.Errorf("%w: no server is named %q", fleetview.ErrNotFound, name)
	}
	return fleetview.AppServer{Server: fleetview.ServerView{Name: name}}, f.err
}

func (f fakeViews) ServerMetrics(_ context.Context, name, since string) (fleetview.MetricsOutput, error) {
	if since == "forever" {
		return fleetview.MetricsOutput{}, fmt.Errorf("%w: since %q", fleetview.ErrBadRequest, since)
	}
	return fleetview.MetricsOutput{Target: name}, f.err
}

func (f fakeViews) Version() string { return f.version.Load().(string) }

func (f fakeViews) Incidents(context.Context) (fleetview.AppIncidents, error) {
	return fleetview.AppIncidents{}, f.err
}

func (f fakeViews) Security(context.Context, string) (fleetview.SecurityOutput, error) {
	return fleetview.SecurityOutput{}, f.err
}

// The fleet's pages are read-only and need a session like every other
// call; an unknown server is 404, a bad argument 400, a failure 500 that
// says what failed.
func TestFleetPagesNeedASession(t *testing.T) {
	e := newEnv(t, Config{Views: newFakeViews(nil)})
	c := e.login(t)
	paths := []string{"/api/fleet", "/api/servers/web-1", "/api/servers/web-1/metrics?since=1h", "/api/incidents", "/api/security", "/api/audit"}
	for _, p := range paths {
		if r := e.do(t, req{method: "GET", path: p}); r.code != http.StatusUnauthorized {
			t.Errorf("GET %s without a session: %d; want 401", p, r.code)
		}
		if r := e.do(t, req{method: "GET", path: p, cookie: c}); r.code != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d %s (Cache-Control %q); want 200, no-store", p, r.code, r.body, r.header.Get("Cache-Control"))
		}
		if r := e.do(t, req{method: "POST", path: p, cookie: c, body: map[string]string{}}); r.code != http.StatusMethodNotAllowed && r.code != http.StatusNotFound {
			t.Errorf("POST %s: %d; want it refused: the pages are read-only", p, r.code)
		}
	}
	if r := e.do(t, req{method: "GET", path: "/api/fleet?after=web-9", cookie: c}); !strings.Contains(r.body, `"nextAfter":"after:web-9"`) {
		t.Errorf("after is passed on: %s", r.body)
	}
	for path, want := range map[string]int{"/api/servers/nope": 404, "/api/servers/web-1/metrics?since=forever": 400} {
		if r := e.do(t, req{method: "GET", path: path, cookie: c}); r.code != want || r.errorText(t) == "" {
			t.Errorf("GET %s: %d %s; want %d with why", path, r.code, r.body, want)
		}
	}
	failing := newEnv(t, Config{Views: newFakeViews(errors.New("the topology cannot be built"))})
	if r := failing.do(t, req{method: "GET", path: "/api/fleet", cookie: failing.login(t)}); r.code != 500 || !strings.Contains(r.errorText(t), "topology") {
		t.Errorf("a failing page: %d %s; want 500 saying why", r.code, r.body)
	}
	none := newEnv(t, Config{})
	if r := none.do(t, req{method: "GET", path: "/api/fleet", cookie: none.login(t)}); r.code != 503 {
		t.Errorf("no views: %d; want 503", r.code)
	}
}

// The audit page: every request with its steps, newest first, filtered by
// server, client, token, approver, outcome and text, and paged.
func TestAuditPage(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.login(t)
	a := e.submit(t, command.Submission{Server: "web-1", Command: "uptime", Reason: "how long up", Client: "claude-code"})
	e.clock.add(time.Second)
	b := e.submit(t, command.Submission{Server: "app-1", Command: "df -h", Reason: "disk filling", Client: "cursor", Token: "desk"})
	e.clock.add(time.Second)
	d := e.submit(t, command.Submission{Server: "web-1", Command: "reboot", Reason: "kernel update", Client: "cursor"})
	if r := e.do(t, req{method: "POST", path: "/api/requests/" + a.ID + "/approve", cookie: c, body: map[string]string{}}); r.code != 200 {
		t.Fatalf("approve: %d %s", r.code, r.body)
	}
	finish(e.svc, "web-1", a.ID, "up 3 days\n", 0)
	if r := e.do(t, req{method: "POST", path: "/api/requests/" + d.ID + "/deny", cookie: c, body: map[string]string{"note": "not now"}}); r.code != 200 {
		t.Fatalf("deny: %d %s", r.code, r.body)
	}
	page := func(q string) auditPage {
		t.Helper()
		r := e.do(t, req{method: "GET", path: "/api/audit" + q, cookie: c})
		if r.code != 200 {
			t.Fatalf("GET /api/audit%s: %d %s", q, r.code, r.body)
		}
		var p auditPage
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ids := func(p auditPage) string {
		var s []string
		for _, r := range p.Requests {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	all := page("")
	if ids(all) != strings.Join([]string{d.ID, b.ID, a.ID}, ",") || all.Matched != 3 || all.Scanned != 3 {
		t.Fatalf("all: %s (%+v)", ids(all), all)
	}
	var steps []string
	for _, s := range all.Requests[2].Steps {
		steps = append(steps, s.Step)
	}
	if got := strings.Join(steps, ","); !strings.HasPrefix(got, "requested,") || !strings.Contains(got, "approved") || !strings.Contains(got, "finished") {
		t.Errorf("steps of the approved request: %s", got)
	}
	for q, want := range map[string]string{
		"?server=web-1":                        d.ID + "," + a.ID,
		"?server=WEB-1&outcome=denied":         d.ID,
		"?client=cursor":                       d.ID + "," + b.ID,
		"?token=desk":                          b.ID,
		"?approver=" + testUser:                d.ID + "," + a.ID,
		"?q=FILLING":                           b.ID,
		"?outcome=completed":                   a.ID,
		"?limit=1":                             d.ID,
		"?limit=1&after=" + d.ID:               b.ID,
		"?client=cursor&limit=1&after=" + d.ID: b.ID,
	} {
		if got := ids(page(q)); got != want {
			t.Errorf("%s: %s; want %s", q, got, want)
		}
	}
	if p := page("?limit=1"); p.NextAfter != d.ID || p.Matched != 3 {
		t.Errorf("a first page of one: next %q, matched %d", p.NextAfter, p.Matched)
	}
	for _, q := range []string{"?outcome=exploded", "?limit=0", "?after=no-such-request", "?q=" + strings.Repeat("x", 300)} {
		if r := e.do(t, req{method: "GET", path: "/api/audit" + q, cookie: c}); r.code != 400 || r.errorText(t) == "" {
			t.Errorf("GET /api/audit%s: %d %s; want 400 with why", q, r.code, r.body)
		}
	}
}

// A page's event stream says when the map may have changed, once per
// change, so that it reads /api/fleet again rather than polling.
func TestEventsTellOfFleetChanges(t *testing.T) {
	views := newFakeViews(nil)
	e := newEnv(t, Config{Views: views, fleetEvery: 20 * time.Millisecond})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close) // after the stream's own cleanup has closed it
	ch, _ := e.openEvents(t, srv, e.login(t))
	if ev := next(t, ch); ev.name != "pending" {
		t.Fatalf("first event %q", ev.name)
	}
	views.version.Store("2")
	if ev := next(t, ch); ev.name != "fleet" || ev.data != `{"version":"2"}` {
		t.Fatalf("after a change: %+v; want a fleet event", ev)
	}
	views.version.Store("3")
	if ev := next(t, ch); ev.name != "fleet" || ev.data != `{"version":"3"}` {
		t.Fatalf("after a second change: %+v", ev)
	}
	// No change, no event.
	select {
	case ev := <-ch:
		if ev.name != ":" {
			t.Fatalf("an event without a change: %+v", ev)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// The pages' answers are gzipped for a browser that accepts it, and plain
// for one that does not.
func TestFleetPagesGzipped(t *testing.T) {
	e := newEnv(t, Config{Views: newFakeViews(nil)})
	c := e.login(t)
	plain := e.do(t, req{method: "GET", path: "/api/fleet", cookie: c})
	if plain.code != 200 || plain.header.Get("Content-Encoding") != "" || !strings.Contains(plain.body, `"targets"`) {
		t.Fatalf("plain: %d %q %s", plain.code, plain.header.Get("Content-Encoding"), plain.body)
	}
	for _, ae := range []string{"gzip", "br, gzip;q=0.8", "deflate, GZIP"} {
		r := e.do(t, req{method: "GET", path: "/api/fleet", cookie: c, header: map[string]string{"Accept-Encoding": ae}})
		if r.code != 200 || r.header.Get("Content-Encoding") != "gzip" || !strings.Contains(r.header.Get("Vary"), "Accept-Encoding") {
			t.Fatalf("Accept-Encoding %q: %d %v", ae, r.code, r.header)
		}
		z, err := gzip.NewReader(strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(z)
		if err != nil || string(b) != plain.body {
			t.Fatalf("gunzipped %q (%v); want %q", b, err, plain.body)
		}
	}
	if r := e.do(t, req{method: "GET", path: "/api/fleet", cookie: c, header: map[string]string{"Accept-Encoding": "gzip;q=0"}}); r.header.Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 answered gzipped")
	}
}

// The page's script and style go gzipped to a browser that takes it.
func TestAssetsGzipped(t *testing.T) {
	e := newEnv(t, Config{})
	for _, name := range []string{"app.js", "pages.js", "app.css"} {
		plain := e.do(t, req{method: "GET", path: "/static/" + name})
		r := e.do(t, req{method: "GET", path: "/static/" + name, header: map[string]string{"Accept-Encoding": "gzip"}})
		if plain.code != 200 || r.code != 200 || r.header.Get("Content-Encoding") != "gzip" || r.header.Get("Content-Type") != plain.header.Get("Content-Type") {
			t.Fatalf("%s: %d/%d %v", name, plain.code, r.code, r.header)
		}
		z, err := gzip.NewReader(strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(z); string(b) != plain.body || len(r.body) >= len(plain.body)/2 {
			t.Errorf("%s: %d bytes gzipped of %d; want the same text in under half", name, len(r.body), len(plain.body))
		}
	}
}
