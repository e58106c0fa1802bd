package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// browser starts Debian's Chromium, headless, for the test; it fails in
// CI when Chromium is missing (CI installs it) and skips elsewhere.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must install chromium for the app's browser tests")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()))
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return bctx
}

// artifacts is where a test's screenshots go: GRIDCITY_ARTIFACTS/NAME when
// that is set (CI keeps it), else a directory of the test's own.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv("GRIDCITY_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The pages for the person who approves, on a real coordinator with real
// agents and an incident caused on purpose: a database the fleet uses
// stops answering, and a server's agent stops. Logged in, at a phone's
// size and a desktop's, every page shows what the tools would say: the
// map with its root causes, a server with its facts, what it uses and its
// commands, the incidents, the security findings and the audit.
func TestAppPagesShowTheFleet(t *testing.T) {
	t.Parallel()
	db, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go acceptAll(db)
	c := startCoordinatorWithConfig(t, fmt.Sprintf(`districts:
  - {id: shop, name: Shop, members: [web-1, orders-db]}
  - {id: edge, name: Edge, members: [web-2]}
resources:
  - {id: orders-db, kind: probe, engine: tcp, target: %q, interval: 1s, timeout: 500ms}
links:
  - {from: web-1, to: orders-db}
probes: {failuresBeforeTroubled: 2}
`, db.Addr().String()))
	tok := c.token()
	startAgent(t, c, "web-1", t.TempDir(), c.joinLine())
	web2 := startAgent(t, c, "web-2", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "web-1", "online", 20*time.Second)
	c.waitStatus(tok, "web-2", "online", 20*time.Second)

	// A command through approval, for the audit and web-1's page.
	cs, err := c.mcpClient(tok, "e2e-pages")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	app := c.login(t)
	got := runAsync(cs, map[string]any{"server": "web-1", "command": "uptime", "reason": "how long has it been up", "timeout_seconds": 30})
	card := app.card("uptime")
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{"note": "fine"}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	if r := (<-got).must(t); r.Status != "completed" {
		t.Fatalf("uptime: %+v", r)
	}

	// The incident, on purpose.
	db.Close()
	web2.stop()
	c.waitStatus(tok, "web-2", "offline", 30*time.Second)
	eventually(t, 20*time.Second, "orders-db the root cause", func() error {
		var rep incidentReport
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		for _, rc := range rep.RootCauses {
			if rc.ID == "orders-db" {
				return nil
			}
		}
		return fmt.Errorf("root causes %+v", rep.RootCauses)
	})

	// The approval app's own axe-style check (labels, names, contrast).
	a11y, err := os.ReadFile("../internal/web/testdata/a11y.js")
	if err != nil {
		t.Fatal(err)
	}
	bctx := browser(t)
	shots := artifacts(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	pw, err := os.ReadFile(filepath.Join(c.data, "admin-password"))
	if err != nil {
		t.Fatal(err)
	}
	do("log in", chromedp.Navigate("http://"+c.http+"/"), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=username]"), "admin"),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=password]"), strings.TrimSpace(string(pw))),
		chromedp.Click(chromedp.CSS("#login-form button")), chromedp.WaitVisible(chromedp.CSS("#pending-view")))

	// page opens a route and waits until the page has drawn its data, then
	// returns the text a person sees.
	page := func(route, ready string) string {
		t.Helper()
		do("open "+route, chromedp.Navigate("http://"+c.http+"/"+route),
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.body.dataset.ready === %q`, ready), chromedp.WithPollingTimeout(20*time.Second)))
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	for _, size := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"phone", 360, 780, true}, {"desktop", 1280, 800, false}} {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if size.mobile {
			opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
		}
		do("viewport", chromedp.EmulateViewport(size.width, size.height, opts...))
		for _, p := range []struct {
			route, ready string
			want         []string
		}{
			{"#map", "map", []string{"orders-db", "web-1", "web-2", "Shop"}},
			{"#servers/web-1", "server", []string{"web-1", "orders-db", "uptime"}},
			{"#incidents", "incidents", []string{"orders-db", "web-2"}},
			{"#security", "security", nil},
			{"#audit", "audit", []string{"uptime", "how long has it been up", "admin"}},
		} {
			text := page(p.route, p.ready)
			for _, w := range p.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s at %s size: the page does not show %q:\n%s", p.route, size.name, w, text)
				}
			}
			// Labels and contrast, in the light and the dark scheme.
			for _, scheme := range []string{"light", "dark"} {
				do("colour scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
					_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
						Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
					return err
				}))
				out, err := chromedp.Run(bctx, chromedp.Evaluate[string](string(a11y)))
				if err != nil {
					t.Fatal(err)
				}
				var r struct {
					Problems        []string
					Controls, Texts int
				}
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("the a11y check answered %q: %v", out, err)
				}
				if r.Texts < 5 || r.Controls < 3 {
					t.Errorf("%s at %s size, %s: the a11y check saw only %d texts and %d controls", p.route, size.name, scheme, r.Texts, r.Controls)
				}
				for _, pr := range r.Problems {
					t.Errorf("%s at %s size, %s: %s", p.route, size.name, scheme, pr)
				}
			}
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s-%s.png", strings.NewReplacer("#", "", "/", "-").Replace(p.route), size.name)
			if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("screenshots in %s", shots)
}

// acceptAll accepts and closes connections until l is closed: a TCP
// service that is up.
func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
