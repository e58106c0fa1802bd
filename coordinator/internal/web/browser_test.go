package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/command"
)

// findChromium returns Debian's chromium, or skips (fails in CI, which must
// install it: the app is only tested for real in a real browser).
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI must install chromium (apt-get install -y chromium) for the browser test")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipping the browser test")
	return ""
}

// TestBrowser drives the real app in headless Chromium at phone width: log
// in, see a card appear live, approve it with a note, see it leave, and find
// its result in the history. Set GRIDCITY_SCREENSHOTS=DIR to keep PNGs of
// each screen.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	chromium := findChromium(t)
	e := newEnv(t, Config{Now: time.Now})
	// The agent runs what it is sent and reports back a moment later.
	e.agent.exit = func(rc *gridcityv1.RunCommand) {
		time.Sleep(100 * time.Millisecond)
		r, err := e.svc.Get(context.Background(), rc.GetRequestId())
		if err == nil {
			finish(e.svc, r.Server, r.ID, "Restarted nginx.service\nnginx is active (running)\n", 0)
		}
	}
	srv := httptest.NewServer(e.h) // 127.0.0.1: loopback only
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx := startChromium(t, ctx, chromium)

	// A 360 px wide phone.
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(360, 780, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch),
		chromedp.Navigate("about:blank"),
	); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	problems := watchConsole(bctx)

	shots := os.Getenv("GRIDCITY_SCREENSHOTS")
	if shots != "" {
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shot := func(name string) {
		if shots == "" {
			return
		}
		// The cards' transitions (0.3 s) ended.
		waitFor(t, bctx, "transitions to end", `document.getAnimations().length === 0`)
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	// Log in.
	do("open the app", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	shot("login")
	do("log in",
		chromedp.SendKeys(chromedp.CSS("#login-form [name=username]"), testUser),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=password]"), testPassword),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#pending-view")),
		chromedp.WaitVisible(chromedp.CSS("#empty")),
	)
	if who := text("#who"); who != testUser {
		t.Errorf("logged in as %q; want %q", who, testUser)
	}
	waitFor(t, bctx, "the live stream", `document.querySelector('#notice').hidden`)

	// The session key is in this tab's sessionStorage only: not in a
	// cookie, not in localStorage. The cookie alone opens nothing, even
	// from the app's own page.
	eval := func(ctx context.Context, what, js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	token := eval(bctx, "the session key", `sessionStorage.getItem('gridcity.session') || ''`)
	if len(token) != 43 {
		t.Fatalf("sessionStorage holds %q; want the 43-character csrfToken", token)
	}
	if got := eval(bctx, "other storage", `JSON.stringify([localStorage.length, document.cookie])`); got != `[0,""]` {
		t.Errorf("localStorage length and document.cookie: %s; want nothing (the cookie is HttpOnly)", got)
	}
	if got := eval(bctx, "fetch with the cookie alone", `Promise.all([
		fetch('/api/me').then((r) => r.status),
		fetch('/api/me', {headers: {'X-Gridcity-Session': sessionStorage.getItem('gridcity.session')}}).then((r) => r.status),
	]).then((s) => s.join(' '))`); got != "401 200" {
		t.Errorf("/api/me without and with the header: %s; want 401 200", got)
	}

	// The stream drops (the coordinator restarts, the phone changes
	// network): the page says so, reconnects by itself, and catches up.
	srv.CloseClientConnections()
	waitFor(t, bctx, "the reconnect notice", `!document.querySelector('#notice').hidden && document.querySelector('#notice').textContent.includes('Reconnecting')`)
	shot("reconnecting")

	// Requests made while the page is open appear without a reload. The
	// command carries markup, which must show as text.
	const cmd = `systemctl restart nginx && echo '<img src=x onerror=alert(1)>'`
	first := e.submit(t, command.Submission{Command: cmd, Reason: "nginx answers 502 since the deploy at 10:02", Risky: true, Client: "claude-code", Token: "laptop"})
	card := fmt.Sprintf(`#cards article[data-id="%s"]`, first.ID)
	do("see the card appear", chromedp.WaitVisible(chromedp.CSS(card)))
	waitFor(t, bctx, "the notice to clear after the reconnect", `document.querySelector('#notice').hidden`)
	// Now the stream is back; the next requests arrive live.
	if got := text(card + " .cmd"); got != cmd {
		t.Errorf("card shows command %q; want %q as text", got, cmd)
	}
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#cards img').length`)); n != 0 {
		t.Errorf("the command's markup became %d elements; want text only", n)
	}
	if got := text(card + " .badge.risky"); got != "risky" {
		t.Errorf("risky badge %q", got)
	}
	for sel, want := range map[string]string{".server": "web-1", ".reason": first.Reason, ".client dd": "claude-code", ".token dd": "laptop"} {
		if got := text(card + " " + sel); got != want {
			t.Errorf("card %s = %q; want %q", sel, got, want)
		}
	}
	if left := text(card + " .left"); !regexp.MustCompile(`^(5:00|4:[345]\d) left$`).MatchString(left) {
		t.Errorf("time left %q; want about 5:00 left", left)
	}

	second := e.submit(t, command.Submission{Server: "app-1", Command: "sudo docker login registry.example --password-stdin", Reason: "pull the new image",
		Input: &command.Input{Prompt: "Registry token", Secret: true}, Client: "cursor", Token: "ci", Runbook: "registry-login"})
	card2 := fmt.Sprintf(`#cards article[data-id="%s"]`, second.ID)
	do("see the second card", chromedp.WaitVisible(chromedp.CSS(card2+" .input")), chromedp.WaitVisible(chromedp.CSS(card2+" .sudo")))
	if typ, _ := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('%s .input').type`, card2))); typ != "password" {
		t.Errorf("secret input field type %q; want password", typ)
	}
	if got := text(card2 + " .input-label"); got != "Registry token" {
		t.Errorf("input label %q; want the prompt", got)
	}
	if got := text(card2 + " .runbook dd"); got != "registry-login" {
		t.Errorf("card names runbook %q; want registry-login", got)
	}
	visible := func(sel string) bool {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector('%s'); return !!e && e.checkVisibility(); })()`, sel)))
		if err != nil {
			t.Fatalf("is %s visible: %v", sel, err)
		}
		return v
	}
	if visible(card + " .runbook") {
		t.Error("a command of the AI's own shows a runbook row")
	}
	third := e.submit(t, command.Submission{Command: "apt-get upgrade -y", Reason: "security updates"})
	card3 := fmt.Sprintf(`#cards article[data-id="%s"]`, third.ID)
	do("see the third card", chromedp.WaitVisible(chromedp.CSS(card3)))
	waitFor(t, bctx, "the count in the title", `document.title.startsWith('(3)')`)
	if wide, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		t.Error("the page scrolls sideways at 360 px")
	}
	shot("cards")
	do("dark scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	shot("cards-dark")
	do("light scheme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{}})
		return err
	}))

	// Every non-ASCII character the coordinator lets through is marked, in
	// a box of its own named by its code points (with the marks on it), in
	// the command, the reason and the prompt; and a right-to-left word
	// cannot reorder the ASCII around it: "ש>ב" is drawn in the order it
	// runs, never as "ב<ש".
	homoCmd := "cat /etc/p\u0430sswd ש>ב"
	homo := e.submit(t, command.Submission{Command: homoCmd, Reason: "r\u00e9ad \u0435\u0308", Input: &command.Input{Prompt: "T\u043eken"}})
	card5 := fmt.Sprintf(`#cards article[data-id="%s"]`, homo.ID)
	do("see the card with non-ASCII characters", chromedp.WaitVisible(chromedp.CSS(card5)))
	boxes := func(sel string) string {
		t.Helper()
		return eval(bctx, "the marked characters of "+sel, fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('%s .unusual')].map((b) => b.textContent + ' ' + b.title))`, sel))
	}
	for sel, want := range map[string]string{
		card5 + " .cmd":         `["а U+0430","ש U+05E9","ב U+05D1"]`,
		card5 + " .reason":      "[\"\u00e9 U+00E9\",\"\u0435\u0308 U+0435 U+0308\"]",
		card5 + " .input-label": `["о U+043E"]`,
		card + " .cmd":          `[]`,
	} {
		if got := boxes(sel); got != want {
			t.Errorf("%s marks %s; want %s", sel, got, want)
		}
	}
	if got := text(card5 + " .cmd"); got != homoCmd {
		t.Errorf("card shows command %q; want %q", got, homoCmd)
	}
	if got := text(card5 + " .unusual-note"); got != "Not ASCII, highlighted above: U+0430, U+05E9, U+05D1, U+00E9, U+0435, U+0308, U+043E" {
		t.Errorf("note under the card: %q", got)
	}
	if ordered := eval(bctx, "the drawn order", fmt.Sprintf(`(() => {
		const [, shin, bet] = [...document.querySelectorAll('%s .cmd .unusual')].map((b) => b.getBoundingClientRect());
		return String(shin.right <= bet.left);
	})()`, card5)); ordered != "true" {
		t.Error("a right-to-left word reordered the command: ש is drawn after ב")
	}
	shot("non-ascii")
	if _, err := e.svc.Deny(ctx, homo.ID, "bob", "lookalike"); err != nil {
		t.Fatal(err)
	}
	do("the non-ASCII card leaves", chromedp.WaitNotPresent(chromedp.CSS(card5)))

	// Someone else denies the third: it leaves this page too.
	if _, err := e.svc.Deny(ctx, third.ID, "bob", "not during business hours"); err != nil {
		t.Fatal(err)
	}
	do("the card decided elsewhere leaves", chromedp.WaitNotPresent(chromedp.CSS(card3)))

	// Approve the first with a note.
	do("approve with a note",
		chromedp.SendKeys(chromedp.CSS(card+" .note"), "ok, watch the error rate"),
		chromedp.Click(chromedp.CSS(card+" .approve")),
		chromedp.WaitNotPresent(chromedp.CSS(card)),
	)
	// The second needs its input: approving without it is refused on the
	// card, then typing it sends it to the agent and nowhere else.
	do("approve without the input", chromedp.Click(chromedp.CSS(card2+" .approve")))
	waitFor(t, bctx, "the input error", fmt.Sprintf(`document.querySelector('%s .error').textContent.includes('Type the value')`, card2))
	do("approve with the input",
		chromedp.SendKeys(chromedp.CSS(card2+" .input"), "tok-9f8e7d"),
		chromedp.SendKeys(chromedp.CSS(card2+" .sudo"), "sudo-pw"),
		chromedp.Click(chromedp.CSS(card2+" .approve")),
		chromedp.WaitNotPresent(chromedp.CSS(card2)),
		chromedp.WaitVisible(chromedp.CSS("#empty")),
	)
	if rc := e.agent.last(); rc.GetRequestId() != second.ID || string(rc.GetStdinSecret()) != "tok-9f8e7d" || string(rc.GetSudoPassword()) != "sudo-pw" {
		t.Errorf("agent got %v; want the typed input and sudo password", rc)
	}
	waitDone(t, e, first.ID)
	waitDone(t, e, second.ID)

	// The history shows the result.
	hist := fmt.Sprintf(`#history article[data-id="%s"]`, first.ID)
	do("open the history", chromedp.Click(chromedp.CSS("#nav-history")), chromedp.WaitVisible(chromedp.CSS(hist)))
	for sel, want := range map[string]string{
		".badge.status": "completed", ".cmd": cmd, ".note dd": "ok, watch the error rate", ".exit dd": "0",
		".duration dd": "1.2 s", ".stdout pre": "Restarted nginx.service\nnginx is active (running)\n",
	} {
		if got := text(hist + " " + sel); got != want {
			t.Errorf("history %s = %q; want %q", sel, got, want)
		}
	}
	// The history keeps the risky mark and the runbook, and says what the
	// approver typed, never the value.
	hist2 := fmt.Sprintf(`#history article[data-id="%s"]`, second.ID)
	for sel, want := range map[string]bool{hist + " .badge.risky": true, hist2 + " .badge.risky": false, hist + " .runbook": false, hist2 + " .runbook": true,
		hist + " .given": false, hist2 + " .given": true} {
		if got := visible(sel); got != want {
			t.Errorf("history %s visible %v; want %v", sel, got, want)
		}
	}
	if got := text(hist2 + " .runbook dd"); got != "registry-login" {
		t.Errorf("history names runbook %q", got)
	}
	if got := text(hist2 + " .given dd"); got != "the secret input and a sudo password (not kept)" {
		t.Errorf("history says the approver typed %q", got)
	}
	if got := text(hist + " .decision dd"); !strings.HasPrefix(got, "approved by alice") {
		t.Errorf("history decision %q; want approved by alice", got)
	}
	if got := text(fmt.Sprintf(`#history article[data-id="%s"] .decision dd`, third.ID)); !strings.HasPrefix(got, "denied by bob") {
		t.Errorf("history of the third: %q; want denied by bob", got)
	}
	if got := boxes(fmt.Sprintf(`#history article[data-id="%s"] .cmd`, homo.ID)); got != `["а U+0430","ש U+05E9","ב U+05D1"]` {
		t.Errorf("history marks %s in the command", got)
	}
	if strings.Contains(text("#history"), "tok-9f8e7d") {
		t.Error("the history shows the typed input")
	}
	shot("history")

	// A reload keeps the login: the key is still in sessionStorage.
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(hist)))
	if login, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`!document.querySelector('#login-view').hidden`)); login {
		t.Error("the login form shows after a reload")
	}

	// The review's attack: any server on another port of this host, say an
	// AI agent's dev server, receives the session cookie when the browser
	// visits it (cookies are not isolated by port). With it, and any
	// Origin it likes, it still cannot approve; and its page can neither
	// read the app's sessionStorage nor hear the app's tabs.
	fourth := e.submit(t, command.Submission{Command: "rm -rf /var/cache/app", Reason: "disk full"})
	card4 := fmt.Sprintf(`#cards article[data-id="%s"]`, fourth.ID)
	stolen := make(chan string, 8)
	dev := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen <- r.Header.Get("Cookie")
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>dev server</title><p>vite dev server")
	}))
	t.Cleanup(dev.Close)
	thief, cancelThief := chromedp.NewContext(bctx)
	if err := chromedp.Do(thief, chromedp.Navigate(dev.URL)); err != nil {
		t.Fatalf("open the dev server: %v", err)
	}
	cookie := <-stolen
	if !strings.Contains(cookie, cookiePlain+"=") {
		t.Fatalf("the dev server got cookies %q; want the app's session cookie (else this test shows nothing)", cookie)
	}
	if got := eval(thief, "the dev server page", `new Promise((resolve) => {
		const ch = new BroadcastChannel('gridcity-session');
		const heard = [];
		ch.onmessage = (e) => heard.push(JSON.stringify(e.data));
		ch.postMessage({type: 'ask'});
		setTimeout(() => resolve(sessionStorage.length + ' ' + heard.join(',')), 700);
	})`); got != "0 " {
		t.Errorf("the dev server's page got %q; want no storage and no answer", got)
	}
	if err := chromedp.Cancel(thief); err != nil {
		t.Fatal(err)
	}
	cancelThief()
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/me", ""},
		{"GET", "/api/requests", ""},
		{"GET", "/api/events", ""},
		{"POST", "/api/requests/" + fourth.ID + "/approve", `{"note":"approved by the dev server"}`},
	} {
		rq, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		rq.Header.Set("Cookie", cookie)
		rq.Header.Set("Origin", srv.URL)
		rq.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with the stolen cookie: %d; want 401", tc.method, tc.path, res.StatusCode)
		}
	}
	if r, _ := e.svc.Get(ctx, fourth.ID); r.Status != command.StatusPending {
		t.Fatalf("the dev server's approve left the request %s; want pending", r.Status)
	}

	// Another tab of the app is handed the key by this one: opening the
	// app's link again needs no password.
	tab2, cancelTab2 := chromedp.NewContext(bctx)
	if err := chromedp.Do(tab2, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS(card4))); err != nil {
		t.Fatalf("a second tab: %v", err)
	}
	if who, _ := chromedp.Run(tab2, chromedp.TextContent(chromedp.CSS("#who"))); who != testUser {
		t.Errorf("the second tab is logged in as %q; want %q", who, testUser)
	}
	if err := chromedp.Cancel(tab2); err != nil {
		t.Fatal(err)
	}
	cancelTab2()

	// Without the key (and no other tab to hand it over) the page asks for
	// the login, though the cookie is still there.
	eval(bctx, "lose the key", `sessionStorage.clear(), ''`)
	do("reload without the key", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	do("log in again",
		chromedp.SendKeys(chromedp.CSS("#login-form [name=username]"), testUser),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=password]"), testPassword),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#nav-pending")),
		chromedp.Click(chromedp.CSS("#nav-pending")),
		chromedp.WaitVisible(chromedp.CSS(card4)),
	)

	// Logging out ends the session and returns to the login form.
	do("log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login-form")))
	if got := eval(bctx, "the key after logout", `sessionStorage.getItem('gridcity.session') || ''`); got != "" {
		t.Errorf("the key %q outlives the logout", got)
	}

	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}

// startChromium starts a headless Chromium of its own, closed when the
// test ends, and answers its first tab.
func startChromium(t *testing.T, ctx context.Context, chromium string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return bctx
}

// waitFor polls a JavaScript condition. chromedp's Poll builds a function
// from a string, which the app's CSP (rightly) forbids; Evaluate is not
// subject to it.
func waitFor(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s (%s): %v", what, cond, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitDone(t *testing.T, e *testEnv, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.svc.Get(context.Background(), id)
		if err == nil && r.Status.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request %s is %s; want it finished", id, r.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watchConsole collects uncaught exceptions and CSP violations from the
// page. The 401 of the first /api/me (not logged in yet) is expected.
func watchConsole(ctx context.Context) func() []string {
	var mu sync.Mutex
	var out []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
				mu.Lock()
				out = append(out, m.String())
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), out...)
	}
}
