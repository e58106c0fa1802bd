package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/gridcity/gridcity/coordinator/internal/command"
)

// The app is installable in a real Chromium: the manifest parses without
// an error and names icons that load at their sizes (a maskable one too);
// the service worker registers, controls the page and keeps only the
// shell — never an answer of the API; and a notification's link
// (#requests/ID) opens the page on that request's card, or on the history
// when it was decided meanwhile.
func TestBrowserInstallable(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	e := newEnv(t, Config{Now: time.Now})
	srv := httptest.NewServer(e.h) // 127.0.0.1: a secure context for a service worker
	t.Cleanup(srv.Close)
	p := openApp(t, srv.URL)
	problems := watchConsole(p.ctx)

	var res page.GetAppManifestResult
	p.do("read the manifest as Chromium parsed it", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		var err error
		res, err = chromedp.Call(ctx, page.GetAppManifest, page.GetAppManifestParams{})
		return err
	}))
	if !strings.HasSuffix(res.URL, "/manifest.webmanifest") || len(res.Errors) > 0 || res.Data == "" {
		var errs []string
		for _, e := range res.Errors {
			errs = append(errs, fmt.Sprintf("%d:%d %s", e.Line, e.Column, e.Message))
		}
		t.Fatalf("manifest %q: errors %v", res.URL, errs)
	}
	var m struct {
		Name, ShortName, StartURL, Scope, Display, ThemeColor string
		Icons                                                 []struct{ Src, Sizes, Type, Purpose string }
	}
	json.Unmarshal([]byte(strings.NewReplacer(`"short_name"`, `"ShortName"`, `"start_url"`, `"StartURL"`, `"theme_color"`, `"ThemeColor"`).Replace(res.Data)), &m)
	if m.Name == "" || m.ShortName == "" || m.StartURL != "/" || m.Scope != "/" || m.Display != "standalone" || m.ThemeColor == "" {
		t.Fatalf("manifest %+v", m)
	}
	var purposes []string
	for _, icon := range m.Icons {
		if icon.Type != "image/png" {
			continue
		}
		purposes = append(purposes, icon.Sizes+" "+icon.Purpose)
		size := strings.Split(icon.Sizes, "x")[0]
		got := p.eval(fmt.Sprintf(`fetch(%q).then((r) => r.blob()).then(createImageBitmap).then((b) => b.width + 'x' + b.height)`, icon.Src))
		if got != size+"x"+size {
			t.Errorf("icon %s is %s; want %s", icon.Src, got, icon.Sizes)
		}
	}
	if want := []string{"192x192 any", "512x512 any", "512x512 maskable"}; !slices.Equal(purposes, want) {
		t.Errorf("PNG icons %v; want %v", purposes, want)
	}

	// The service worker: registered, active, and in control after a reload.
	if got := p.eval(`navigator.serviceWorker.ready.then((r) => new URL(r.active.scriptURL).pathname + ' ' + r.scope)`); got != "/sw.js "+srv.URL+"/" {
		t.Fatalf("service worker %q; want /sw.js over the whole app", got)
	}
	p.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#pending-view")))
	waitFor(t, p.ctx, "the page under the service worker", `navigator.serviceWorker.controller !== null`)
	p.eval(`fetch('/api/requests?status=pending', {headers: {'X-Gridcity-Session': sessionStorage.getItem('gridcity.session')}}).then((r) => String(r.status))`)
	kept := p.eval(`caches.keys().then((ks) => Promise.all(ks.map((k) => caches.open(k).then((c) => c.keys())))).then((all) => all.flat().map((r) => new URL(r.url).pathname).sort().join(' '))`)
	if !strings.Contains(kept, "/static/app.js") || strings.Contains(kept, "/api/") {
		t.Fatalf("the service worker keeps %q; want the shell and no answer of the API", kept)
	}
	for _, path := range strings.Fields(kept) {
		if path != "/" && path != "/manifest.webmanifest" && !strings.HasPrefix(path, "/static/") {
			t.Errorf("the service worker keeps %s, which is not the shell", path)
		}
	}

	// A notification's link opens the card it names.
	r := e.submit(t, command.Submission{Command: "systemctl reload caddy"})
	waitFor(t, p.ctx, "the new card", fmt.Sprintf(`document.querySelector('#cards [data-id=%q]') !== null`, r.ID))
	p.do("open the link", chromedp.Navigate(srv.URL+"/#requests/"+r.ID))
	waitFor(t, p.ctx, "the card in focus", fmt.Sprintf(`document.querySelector('#cards [data-id=%q].focused') !== null && document.activeElement.dataset.id === %q`, r.ID, r.ID))
	// Decided meanwhile: the link opens the history, with a word why.
	if _, err := e.svc.Deny(context.Background(), r.ID, testUser, "not now"); err != nil {
		t.Fatal(err)
	}
	p.do("open the link again, as a notification opens it: a page load", chromedp.Reload())
	waitFor(t, p.ctx, "the history", `location.hash === '#history' && !document.querySelector('#history-view').hidden`)
	p.contains("#flash", "no longer waiting")
	if ps := problems(); len(ps) > 0 {
		t.Errorf("console problems: %v", ps)
	}
}
