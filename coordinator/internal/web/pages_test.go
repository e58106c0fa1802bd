package web

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

//go:embed testdata/a11y.js
var a11yCheck string

// city is the app over a real fleet: the views the pages draw are
// mcpserver.App's, as the coordinator serves them.
type city struct {
	e   *testEnv
	f   *fleet.Fleet
	url string
}

// newCity builds a fleet with an incident on purpose: the database
// orders-db is down (its listener closed), app-1 that uses it is offline
// and explained by it, web-1 that uses app-1 is at risk. web-1 has the
// facts a server page shows and a week of metrics with a filling disk;
// the audit holds a completed, a denied and a pending command.
func newCity(t *testing.T, extraYAML string, servers func(f *fleet.Fleet)) *city {
	t.Helper()
	ctx := context.Background()
	down, _ := net.Listen("tcp", "127.0.0.1:0")
	up, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Cleanup(func() { up.Close() })
	go acceptAll(up)
	go acceptAll(down)
	yaml := fmt.Sprintf(`
districts:
  - {id: shop, name: Shop, members: [web-1, app-1, orders-db]}
  - {id: ops, name: Ops, members: [batch-1, sessions]}
%s
resources:
  - {id: orders-db, kind: database, engine: tcp, target: %q, timeout: 500ms}
  - {id: sessions, kind: cache, engine: tcp, target: %q, timeout: 500ms}
links:
  - {from: app-1, to: orders-db}
  - {from: web-1, to: app-1}
  - {from: batch-1, to: sessions}
probes: {interval: 15s, timeout: 1s, failuresBeforeTroubled: 2}
`, extraYAML, down.Addr().String(), up.Addr().String())
	cfg, err := config.Parse(strings.NewReader(yaml), "city.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, err := fleet.New(ctx, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	web := f.Connect(&gridcityv1.Hello{Name: "web-1", AgentVersion: "1.4.0", CommandsEnabled: true, RunAs: "root"})
	f.Apply("web-1", web, webState(now))
	app := f.Connect(&gridcityv1.Hello{Name: "app-1"})
	batch := f.Connect(&gridcityv1.Hello{Name: "batch-1"})
	f.Apply("batch-1", batch, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(),
		Host:   &gridcityv1.HostInfo{Hostname: "batch-1", Os: "ubuntu", OsVersion: "24.04", Kernel: "6.8", Arch: "arm64"},
		Cpu:    &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(12), Load1: 0.2},
		Memory: &gridcityv1.Memory{TotalBytes: 4 << 30, UsedBytes: 1 << 30, UsedPercent: 25}})
	if servers != nil {
		servers(f)
	}
	if err := st.AppendMetrics(ctx, webHistory(now), now, store.DefaultMetricRetention); err != nil {
		t.Fatal(err)
	}

	prober := resources.New(cfg, logger)
	topo := topology.New(cfg, f, prober)
	tracker := incidents.New(st, func() (graph.Report, error) {
		g, err := topo.Graph()
		if err != nil {
			return graph.Report{}, err
		}
		return g.Incidents(), nil
	}, logger)
	views := fleetview.New(fleetview.Deps{Fleet: f, Store: st, Commands: command.New(command.Config{}, st, f, &fakeAgent{}, logger), Topology: topo, Resources: prober, Incidents: tracker, Logger: logger})
	down.Close()
	f.Disconnect("app-1", app)
	prober.CheckAll(ctx)
	prober.CheckAll(ctx)
	if err := tracker.Observe(ctx, now); err != nil {
		t.Fatal(err)
	}

	e := newEnvOn(t, Config{Views: views, Now: time.Now, fleetEvery: 50 * time.Millisecond}, st)
	done := e.submit(t, command.Submission{Server: "web-1", Command: "df -h /", Reason: "the root disk is filling", Client: "claude-code", Token: "laptop"})
	if _, err := e.svc.Approve(ctx, done.ID, testUser, command.Approval{Note: "ok"}); err != nil {
		t.Fatal(err)
	}
	finish(e.svc, "web-1", done.ID, "/dev/sda1 100G 91G 9G 91% /\n", 0)
	no := e.submit(t, command.Submission{Server: "app-1", Command: "systemctl restart app", Reason: "app-1 is down", Client: "cursor", Token: "ci"})
	if _, err := e.svc.Deny(ctx, no.ID, testUser, "the database is the cause"); err != nil {
		t.Fatal(err)
	}
	e.submit(t, command.Submission{Server: "web-1", Command: "journalctl -u nginx -n 50", Reason: "see why the shop is slow", Client: "claude-code", Token: "laptop"})
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	return &city{e: e, f: f, url: srv.URL}
}

func webState(now time.Time) *gridcityv1.StateUpdate {
	return &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: "web-1", Os: "debian", OsVersion: "12.7", Kernel: "6.1.0-25", Arch: "amd64", UptimeSeconds: 3 * 86400,
			Addresses: []string{"10.0.0.11"}},
		Cpu:    &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(37.5), Load1: 0.5, Load5: 0.7, Load15: 0.6},
		Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 2 << 30, AvailableBytes: 6 << 30, UsedPercent: 25},
		Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{
			{Mount: "/", Device: "/dev/sda1", Filesystem: "ext4", TotalBytes: 100 << 30, UsedBytes: 91 << 30, AvailableBytes: 9 << 30, UsedPercent: 91, InodesUsedPercent: 12},
			{Mount: "/boot", Device: "/dev/sda2", Filesystem: "ext4", TotalBytes: 1 << 30, UsedBytes: 100 << 20, AvailableBytes: 900 << 20, UsedPercent: 10}}},
		Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{
			{Proto: "tcp", Address: "0.0.0.0", Port: 443, Process: "nginx", Pid: 812},
			{Proto: "tcp", Address: "0.0.0.0", Port: 22, Process: "sshd", Pid: 601}}},
		Containers:  &gridcityv1.Containers{Items: []*gridcityv1.Container{{Id: "4f2a", Name: "shop-frontend", Image: "shop/frontend:2.3", State: "running", Status: "Up 3 days"}}},
		FailedUnits: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "backup.service", Description: "Nightly backup", SinceUnix: now.Add(-2 * time.Hour).Unix()}}},
		Updates:     &gridcityv1.Updates{Pending: 12, Security: 3, Manager: "apt", SecurityPackages: []string{"openssl"}, CheckedUnix: now.Add(-10 * time.Minute).Unix()},
		Gaps:        &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "containers.podman", Reason: "podman is not installed"}}},
		Processes: &gridcityv1.Processes{Items: []*gridcityv1.Process{
			{Pid: 812, Name: "nginx", User: "www-data", CpuPercent: 31.5, RssBytes: 120 << 20, Unit: "nginx.service"},
			{Pid: 944, Name: "node", User: "shop", CpuPercent: 4.2, RssBytes: 900 << 20}}},
		Logins: &gridcityv1.Logins{LogSources: []string{"/var/log/auth.log"}, Sources: []*gridcityv1.AuthSource{{Address: "203.0.113.7", Failures: 140, InvalidUsers: 60,
			Users: []string{"root", "admin", "oracle"}, FirstSeenUnix: now.Add(-20 * time.Minute).Unix(), LastSeenUnix: now.Add(-time.Minute).Unix()}}},
		Defenses: &gridcityv1.Defenses{Sshd: &gridcityv1.SSHConfig{PasswordAuthentication: "yes", PermitRootLogin: "yes"}},
	}
}

// webHistory is a week of web-1's history: CPU with a daily swing, the
// root disk filling from 70 % to 91 %.
func webHistory(now time.Time) []store.MetricPoint {
	var out []store.MetricPoint
	add := func(at time.Time, metric string, v float64) {
		out = append(out, store.MetricPoint{Server: "web-1", Metric: metric, At: at, N: 1, Min: v * 0.8, Sum: v, Max: math.Min(100, v*1.2)})
	}
	start := now.Add(-7 * 24 * time.Hour)
	for at := start; at.Before(now); {
		frac := float64(at.Sub(start)) / float64(7*24*time.Hour)
		hour := float64(at.Hour()) + float64(at.Minute())/60
		add(at, "cpu", 35+20*math.Sin(hour/24*2*math.Pi))
		add(at, "memory", 25+5*math.Sin(hour/12*math.Pi))
		add(at, "load", 0.5+0.3*math.Sin(hour/24*2*math.Pi))
		add(at, "disk:/", 70+21*frac)
		if now.Sub(at) > 2*time.Hour {
			at = at.Add(15 * time.Minute)
		} else {
			at = at.Add(time.Minute)
		}
	}
	return out
}

func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// browserPage is one tab of the app, logged in, with what a test does to it.
type browserPage struct {
	t    *testing.T
	ctx  context.Context
	url  string
	size string
	// shots and docs are where screenshots go ("" for none).
	shots, docs string
}

func openApp(t *testing.T, url string) *browserPage {
	t.Helper()
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	t.Cleanup(cancel)
	p := &browserPage{t: t, ctx: startChromium(t, ctx, chromium), url: url, shots: os.Getenv("GRIDCITY_SCREENSHOTS")}
	if os.Getenv("GRIDCITY_TOUR") != "" {
		p.docs = filepath.Join("..", "..", "..", "docs", "tour")
	}
	for _, d := range []string{p.shots, p.docs} {
		if d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.resize("phone")
	p.do("open the app", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	p.do("log in",
		chromedp.SendKeys(chromedp.CSS("#login-form [name=username]"), testUser),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=password]"), testPassword),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#pending-view")),
	)
	return p
}

// resize makes the tab a 360×780 phone or a 1280×800 desktop.
func (p *browserPage) resize(size string) {
	p.t.Helper()
	p.size = size
	vp := chromedp.EmulateViewport(1280, 800)
	if size == "phone" {
		vp = chromedp.EmulateViewport(360, 780, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	p.do("resize to "+size, vp)
}

func (p *browserPage) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("%s (%s): %v", what, p.size, err)
	}
}

func (p *browserPage) eval(js string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s (%s): %v", js, p.size, err)
	}
	return v
}

func (p *browserPage) text(sel string) string {
	p.t.Helper()
	return p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : '<no %s>'; })()`, sel, sel))
}

func (p *browserPage) count(sel string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		p.t.Fatal(err)
	}
	return n
}

// visit goes to a hash route and waits until its page has drawn its data.
func (p *browserPage) visit(hash, ready string) {
	p.t.Helper()
	p.eval(fmt.Sprintf(`location.hash = %q, ''`, hash))
	if ready == "" {
		return
	}
	waitFor(p.t, p.ctx, ready+" drawn", fmt.Sprintf(`document.body.dataset.ready === %q`, ready))
}

// contains fails unless the element's text has every one of want.
func (p *browserPage) contains(sel string, want ...string) {
	p.t.Helper()
	got := p.text(sel)
	for _, w := range want {
		if !strings.Contains(got, w) {
			p.t.Errorf("%s (%s) shows %q; want it to contain %q", sel, p.size, got, w)
		}
	}
}

func (p *browserPage) scheme(dark bool) {
	p.t.Helper()
	features := []*emulation.MediaFeature{}
	if dark {
		features = append(features, &emulation.MediaFeature{Name: "prefers-color-scheme", Value: "dark"})
	}
	p.do("colour scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features})
		return err
	}))
}

type a11yReport struct {
	Problems []string `json:"problems"`
	Controls int      `json:"controls"`
	Texts    int      `json:"texts"`
	Skipped  int      `json:"skipped"`
}

func (p *browserPage) a11y() a11yReport {
	p.t.Helper()
	var r a11yReport
	if err := json.Unmarshal([]byte(p.eval(a11yCheck)), &r); err != nil {
		p.t.Fatal(err)
	}
	return r
}

// accessible runs the check in the light and the dark scheme and fails on
// every problem; a page with few texts checked would show nothing.
func (p *browserPage) accessible(page string) {
	p.t.Helper()
	for _, dark := range []bool{false, true} {
		p.scheme(dark)
		r := p.a11y()
		if r.Texts < 10 || r.Controls < 5 {
			p.t.Errorf("%s (%s, dark %v): checked only %d texts and %d controls", page, p.size, dark, r.Texts, r.Controls)
		}
		for _, pr := range r.Problems {
			p.t.Errorf("%s (%s, dark %v): %s", page, p.size, dark, pr)
		}
	}
	p.scheme(false)
}

func (p *browserPage) noSidewaysScroll(page string) {
	p.t.Helper()
	if wide := p.eval(`String(document.documentElement.scrollWidth > window.innerWidth)`); wide == "true" {
		p.t.Errorf("%s scrolls sideways at %s size", page, p.size)
	}
}

// shot saves the whole page as a test artifact, and the screen as it
// shows for the README's tour when GRIDCITY_TOUR is set and the page's
// size is one of tour.
func (p *browserPage) shot(name string, tour ...string) {
	p.t.Helper()
	file := fmt.Sprintf("%s-%s.png", name, p.size)
	save := func(dir string, a chromedp.Action[[]byte]) {
		png, err := chromedp.Run(p.ctx, a)
		if err != nil {
			p.t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
	if p.shots != "" {
		save(p.shots, chromedp.FullScreenshot(100))
	}
	if p.docs != "" && slices.Contains(tour, p.size) {
		save(p.docs, chromedp.CaptureScreenshot())
	}
}

// TestBrowserPages walks every page of the fleet at phone and desktop
// size over a real fleet with an incident, checks what each shows, runs
// the accessibility check on each, and keeps screenshots
// (GRIDCITY_SCREENSHOTS=DIR; GRIDCITY_TOUR=1 also writes the README's to
// docs/tour).
func TestBrowserPages(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	c := newCity(t, "", nil)
	p := openApp(t, c.url)
	problems := watchConsole(p.ctx)

	for _, size := range []string{"phone", "desktop"} {
		p.resize(size)

		// The pending card says how the server is and what involves it,
		// one tap from its page.
		p.visit("#pending", "")
		waitFor(t, p.ctx, "the card's context", `!!document.querySelector('#cards .context:not([hidden]) .ctx-link')`)
		p.contains("#cards .context", "online", "cpu 37.5%", "mem 25%", "disk / 91%", "at risk from orders-db", "1 open attack", "web-1: its page")
		p.accessible("pending")
		p.shot("pending", "phone")
		p.do("open the server from its card", chromedp.Click(chromedp.CSS("#cards .ctx-link")))
		waitFor(t, p.ctx, "the server page", `document.body.dataset.ready === 'server'`)
		if h := p.text("#server-view h1"); h != "web-1" {
			t.Errorf("the card's link opened %q", h)
		}

		// The map: districts, tiles by status with the incident drawn on
		// them, the links, and a search.
		p.visit("#map", "map")
		p.contains("#map-summary", "3 servers", "online 2", "offline 1", "1 open incident")
		for sel, want := range map[string][]string{
			`.tile[data-id="orders-db"]`:   {"orders-db", "root cause"},
			`.tile[data-id="app-1"]`:       {"app-1", "↳ orders-db"},
			`.tile[data-id="web-1"]`:       {"web-1", "cpu 37.5%", "disk 91%", "at risk"},
			`#map-incidents`:               {"root cause", "orders-db", "app-1", "web-1"},
			`.district[data-id="shop"] h2`: {"Shop", "3 · 2 troubled"},
		} {
			p.contains(sel, want...)
		}
		for sel, n := range map[string]int{".tile.root.bad": 1, ".tile.explained": 1, ".tile.atrisk": 1, ".district": 2, ".tile": 5, "#map-links line.hot": 1} {
			if got := p.count(sel); got != n {
				t.Errorf("map (%s): %d of %s; want %d", size, got, sel, n)
			}
		}
		if got := p.count("#map-links line"); got != 3 {
			t.Errorf("map (%s): %d links drawn; want 3", size, got)
		}
		if label := p.eval(`document.querySelector('.tile[data-id="app-1"]').getAttribute('aria-label')`); !strings.Contains(label, "offline") || !strings.Contains(label, "explained by orders-db") {
			t.Errorf("app-1's tile says %q to a screen reader", label)
		}
		p.noSidewaysScroll("map")
		p.accessible("map")
		p.shot("map", "phone", "desktop")
		p.do("search the map", chromedp.SendKeys(chromedp.CSS("#map-search"), "BATCH"))
		waitFor(t, p.ctx, "the search result", `!!document.querySelector('#map-found a[href="#servers/batch-1"]')`)
		p.eval(`document.querySelector('#map-search').value = '', document.querySelector('#map-search').dispatchEvent(new Event('input')), ''`)

		// The server page: facts, charts, topology, incident, security, commands.
		p.visit("#servers/web-1", "server")
		p.contains("#server-body", "debian 12.7 (amd64), kernel 6.1.0-25", "4 cores, 37.5% busy", "25% of 8.0 GiB used",
			"/dev/sda1", "91%", "nginx", "443", "shop-frontend", "backup.service", "12 pending, 3 security", "www-data", "nginx.service",
			"containers.podman: podman is not installed", "At risk from orders-db", "203.0.113.7", "ssh brute force", "df -h /", "journalctl -u nginx",
			"decided by alice", "exit 0", "Uses", "app-1")
		for _, m := range []string{"cpu", "memory", "load", "disk:/"} {
			if n := p.count(fmt.Sprintf(`.chart-box[data-metric="%s"] svg[role=img] polyline`, m)); n == 0 {
				t.Errorf("server page (%s): no line drawn for %s", size, m)
			}
		}
		p.contains(`.chart-box[data-metric="cpu"] svg title`, "CPU, last hour: now 37.5%")
		p.contains("#server-body table", "in ") // the root disk's projected full time
		p.do("a week of history", chromedp.Click(chromedp.CSS(`.seg button[data-since="7d"]`)))
		waitFor(t, p.ctx, "the week's charts", `(document.querySelector('.chart-box[data-metric="cpu"] svg title') || {}).textContent.includes('last week')`)
		if n := p.count(`.chart-box[data-metric="disk:/"] polyline`); n == 0 {
			t.Errorf("server page (%s): no week of the root disk", size)
		}
		p.noSidewaysScroll("server")
		p.accessible("server")
		p.shot("server", "phone", "desktop")
		p.do("back to the hour", chromedp.Click(chromedp.CSS(`.seg button[data-since="1h"]`)))
		waitFor(t, p.ctx, "the hour's charts", `document.querySelector('.seg button[data-since="1h"]').getAttribute('aria-pressed') === 'true'`)

		p.visit("#servers/app-1", "server")
		p.contains("#server-body", "offline", "Explained by orders-db")
		p.eval(`location.hash = '#servers/nope', ''`)
		waitFor(t, p.ctx, "the unknown server's error", `document.querySelector('#server-view .page-error').textContent.includes('no server is named')`)

		// Incidents: the open one and the history.
		p.visit("#incidents", "incidents")
		p.contains("#incidents-open", "1 open", "orders-db", "Explains", "app-1", "At risk", "web-1")
		p.contains("#incidents-history", "orders-db", "open", "Lasted")
		p.noSidewaysScroll("incidents")
		p.accessible("incidents")
		p.shot("incidents")

		// Security: attacks, exposures, gaps.
		p.visit("#security", "security")
		p.contains("#security-body", "1 open of 1 attacks", "203.0.113.7", "root, admin, oracle", "Blocked", "no", "Exposures", "ssh password login")
		p.noSidewaysScroll("security")
		p.accessible("security")
		p.shot("security")

		// The audit, filtered and with each request's steps.
		p.visit("#audit", "audit")
		if n := p.count("#audit-list article"); n != 3 {
			t.Errorf("audit (%s): %d requests; want 3", size, n)
		}
		p.contains("#audit-summary", "3 requests match")
		p.eval(`document.querySelector('#audit-form [name=outcome]').value = 'denied', ''`)
		p.do("filter the audit", chromedp.Click(chromedp.CSS(`#audit-form button[type=submit]`)))
		waitFor(t, p.ctx, "the filtered audit", `location.hash === '#audit?outcome=denied' && document.body.dataset.ready === 'audit' && document.querySelectorAll('#audit-list article').length === 1`)
		p.contains("#audit-list article", "app-1", "denied", "systemctl restart app", "cursor", "requested", "denied")
		p.visit("#audit?server=web-1&q=DF", "audit")
		if n := p.count("#audit-list article"); n != 1 {
			t.Errorf("audit of web-1 with df (%s): %d requests; want 1", size, n)
		}
		p.do("open the steps", chromedp.Click(chromedp.CSS("#audit-list details summary")))
		p.contains("#audit-list details", "requested", "approved by approver:alice", "finished by agent:web-1", "exitCode")
		p.visit("#audit?limit=2", "audit")
		p.do("page on", chromedp.Click(chromedp.CSS("#audit-more")))
		waitFor(t, p.ctx, "the next page of the audit", `document.querySelectorAll('#audit-list article').length === 3 && document.querySelector('#audit-more').hidden`)
		p.noSidewaysScroll("audit")
		p.accessible("audit")
		p.shot("audit")
	}

	// Live: a server that connects appears on the open map without a reload.
	p.visit("#map", "map")
	c.f.Connect(&gridcityv1.Hello{Name: "new-1", District: "ops"})
	waitFor(t, p.ctx, "the new server on the map", `!!document.querySelector('.tile[data-id="new-1"]')`)

	for _, pr := range problems() {
		t.Errorf("browser console: %s", pr)
	}
}

// The check finds what it is for: a page with an unnamed button, input
// and picture and faint text fails it; the same page made right passes.
func TestA11yCheckFails(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	fixture := func(bad bool) string {
		page := `<!doctype html><html lang="en"><head><style>body{background:#fff;color:#222}</style></head><body>
<h1>Fixture</h1><p class="faint" style="color:%s">Reads too faint on white</p>
<button type="button">%s</button><label>%s<input id="x"></label>
<svg width="20" height="20" %s><circle cx="10" cy="10" r="8"/></svg>
<p style="background:#1a1d23;color:%s">On a dark panel</p><p>Plain enough</p></body></html>`
		if bad {
			return fmt.Sprintf(page, "#aaaaaa", "", "", "", "#5b6170")
		}
		return fmt.Sprintf(page, "#595959", "Save", "Name ", `role="img" aria-label="a dot"`, "#c9cfdb")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, fixture(r.URL.Path == "/bad"))
	}))
	t.Cleanup(srv.Close)
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := &browserPage{t: t, ctx: startChromium(t, ctx, chromium), size: "desktop"}
	p.do("open the bad fixture", chromedp.Navigate(srv.URL+"/bad"))
	bad := p.a11y()
	joined := strings.Join(bad.Problems, "\n")
	for _, want := range []string{"no accessible name: button", "no accessible name: input#x", "svg without a title", "contrast 2.32:1 < 4.5:1 for p.faint", "contrast 2.72:1 < 4.5:1 for p \"On a dark panel\""} {
		if !strings.Contains(joined, want) {
			t.Errorf("the check missed %q; it found:\n%s", want, joined)
		}
	}
	if len(bad.Problems) != 5 {
		t.Errorf("the bad fixture has 5 problems; the check found %d:\n%s", len(bad.Problems), joined)
	}
	p.do("open the good fixture", chromedp.Navigate(srv.URL+"/good"))
	if good := p.a11y(); len(good.Problems) != 0 || good.Texts < 4 {
		t.Errorf("the good fixture: %+v; want no problem and its texts checked", good)
	}
}

// A thousand servers in twenty districts: the map draws in reasonable time
// with each district folded into counts and its troubled members, and the
// search finds any server.
func TestBrowserBigFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	var districts strings.Builder
	for d := range 20 {
		fmt.Fprintf(&districts, "  - {id: d%02d, name: District %02d, members: [", d, d)
		for i := range 50 {
			if i > 0 {
				districts.WriteString(", ")
			}
			fmt.Fprintf(&districts, "srv-%04d", d*50+i)
		}
		districts.WriteString("]}\n")
	}
	c := newCity(t, districts.String(), func(f *fleet.Fleet) {
		now := time.Now().UnixMilli()
		for i := range 1000 {
			name := fmt.Sprintf("srv-%04d", i)
			s := f.Connect(&gridcityv1.Hello{Name: name})
			f.Apply(name, s, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now,
				Cpu:    &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(float64(i % 90))},
				Memory: &gridcityv1.Memory{TotalBytes: 4 << 30, UsedPercent: float64(i % 70)}})
			if i%97 == 0 {
				f.Disconnect(name, s)
			}
		}
	})
	p := openApp(t, c.url)
	p.resize("desktop")
	start := time.Now()
	p.visit("#map", "map")
	took := time.Since(start)
	t.Logf("the map of %d targets drew in %v", 1005, took)
	if took > 8*time.Second {
		t.Errorf("the map of 1,000 servers took %v to draw; want a few seconds at most", took)
	}
	if n := p.count(".district.collapsed"); n != 20 {
		t.Errorf("%d districts folded into counts; want the 20 large ones", n)
	}
	if n := p.count(".tile"); n > 200 {
		t.Errorf("%d tiles drawn; want the folded districts' troubled members only", n)
	}
	if n := p.count(`.tile[data-id="srv-0097"]`); n != 1 {
		t.Error("the offline srv-0097 is not drawn in its folded district")
	}
	p.contains(`.district[data-id="d01"] .counts`, "online 49", "offline 1")
	if n := p.count("#map-incidents .incident"); n != 3 {
		t.Errorf("%d incidents drawn in full above the map; want the 3 largest, the others folded", n)
	}
	p.contains("#map-incidents .more-incidents summary", "9 more open incidents")
	p.accessible("big map")
	p.eval(`document.querySelector('.more-incidents').scrollIntoView(), ''`)
	p.shot("map-1000", "desktop")
	p.do("show a district whole", chromedp.Click(chromedp.CSS(`.district[data-id="d03"] button.expand`)))
	if n := p.count(`.district[data-id="d03"] .tile`); n != 50 {
		t.Errorf("the district shown whole has %d tiles; want 50", n)
	}
	p.do("search", chromedp.SendKeys(chromedp.CSS("#map-search"), "srv-0777"))
	waitFor(t, p.ctx, "the search result", `!!document.querySelector('#map-found a[href="#servers/srv-0777"]')`)
	p.do("go to the first result", chromedp.SendKeys(chromedp.CSS("#map-search"), "\r"))
	waitFor(t, p.ctx, "srv-0777's page", `document.body.dataset.ready === 'server' && document.querySelector('#server-view h1').textContent === 'srv-0777'`)
}
