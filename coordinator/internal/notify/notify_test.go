package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/notifytest"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

var update = flag.Bool("update", false, "rewrite testdata/messages.golden")

// logBuffer collects a hub's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testHub runs a hub over cfgs with fast retries until the test ends.
type testHub struct {
	*Hub
	metrics *telemetry.Metrics
	log     *logBuffer
}

func startHub(t *testing.T, opts Options, cfgs ...config.Notifier) *testHub {
	t.Helper()
	th := &testHub{metrics: telemetry.New("test"), log: &logBuffer{}}
	opts.Metrics = th.metrics
	opts.Logger = slog.New(slog.NewTextHandler(th.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Backoff, opts.Cap = cmpOr(opts.Backoff, 20*time.Millisecond), cmpOr(opts.Cap, 80*time.Millisecond)
	if opts.AppURL == "" {
		opts.AppURL = "https://gridcity.example.com/"
	}
	h, err := New(cfgs, opts)
	if err != nil {
		t.Fatal(err)
	}
	th.Hub = h
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return th
}

func cmpOr(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

func (th *testHub) count(name string, labels ...string) float64 {
	fams, _ := th.metrics.Registry().Gather()
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		total := 0.0
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				ok := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						ok = true
					}
				}
				if !ok {
					continue metrics
				}
			}
			total += m.GetCounter().GetValue()
		}
		return total
	}
	return 0
}

// waitCount waits, for at most 5 s, until the hub's count of name (with
// labels) is at least n: the hub is done with the events the count is
// of. It does not fail the test; the assertions after it say what is
// wrong when the count never comes.
func (th *testHub) waitCount(n float64, name string, labels ...string) {
	for deadline := time.Now().Add(5 * time.Second); th.count(name, labels...) < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

func keyFile(t testing.TB, secret string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func webhookCfg(t *testing.T, name, url, key string) config.Notifier {
	return config.Notifier{Name: name, Kind: "webhook", URL: url, SecretFile: keyFile(t, key), Timeout: 300 * time.Millisecond, DropAfter: 5 * time.Second}
}

var t0 = time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)

func requestEvent(id, server string) Event {
	return Event{ID: "ev-" + id, Kind: RequestWaiting, At: time.Now(), Request: &Request{ID: id, Server: server, Command: "systemctl restart nginx",
		Reason: "nginx is down", Client: "claude-code", Token: "laptop", Status: "pending", ExpiresAt: t0.Add(5 * time.Minute)}}
}

func TestSignature(t *testing.T) {
	// The HMAC-SHA256 test vector every library documents.
	const want = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
	body := []byte("The quick brown fox jumps over the lazy dog")
	if got := Sign([]byte("key"), body); got != want {
		t.Fatalf("Sign = %s; want %s", got, want)
	}
	for _, c := range []struct {
		key, body, sig string
		ok             bool
	}{
		{"key", string(body), want, true},
		{"key", string(body) + " ", want, false},
		{"kez", string(body), want, false},
		{"key", string(body), strings.ToUpper(want), false},
		{"key", string(body), strings.TrimPrefix(want, "sha256="), false},
		{"key", string(body), "", false},
	} {
		if got := Verify([]byte(c.key), []byte(c.body), c.sig); got != c.ok {
			t.Errorf("Verify(%q, …, %q) = %v; want %v", c.key, c.sig, got, c.ok)
		}
	}
}

// Every kind of notifier, through a receiver that checks what it gets,
// with one event of each kind: each receiver gets each once, and the
// webhook's bodies carry the contract's fields.
func TestEveryKindGetsEveryEventOnce(t *testing.T) {
	hook := notifytest.Webhook(t, []byte("hook-key-1"), time.Minute)
	sl := notifytest.Slack(t)
	nt := notifytest.Ntfy(t, "ntfy-token-1")
	mail := notifytest.StartSMTP(t, "alerts", "smtp-password-1", true)
	slackURL := keyFile(t, sl.URL+"/services/T000/B000/XXXX")
	th := startHub(t, Options{Districts: func(targets []string) []string { return []string{"lekhix"} }},
		webhookCfg(t, "hook", hook.URL, "hook-key-1"),
		config.Notifier{Name: "chat", Kind: "slack", URLFile: slackURL},
		config.Notifier{Name: "phone", Kind: "ntfy", URL: nt.URL + "/gridcity", TokenFile: keyFile(t, "ntfy-token-1")},
		config.Notifier{Name: "mail", Kind: "email", SMTP: mail.Addr, From: "gridcity@example.com", To: []string{"ops@example.com"},
			Username: "alerts", PasswordFile: keyFile(t, "smtp-password-1"), CAFile: mail.CAFile},
	)
	events := sampleEvents()
	for _, e := range events {
		th.Emit(e)
	}
	n := len(events)
	for name, rc := range map[string]*notifytest.Receiver{"webhook": hook, "slack": sl, "ntfy": nt} {
		if got, ok := rc.Wait(10*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= n }); !ok || len(got) != n {
			t.Fatalf("%s got %d messages; want %d (refused: %v)\n%s", name, len(got), n, rc.Bad(), th.log)
		}
	}
	if got, ok := mail.Wait(10*time.Second, func(m []notifytest.Mail) bool { return len(m) >= n }); !ok || len(got) != n {
		t.Fatalf("smtp got %d mails; want %d\n%s", len(got), n, th.log)
	}
	for _, m := range mail.Mails() {
		if !m.TLS || m.User != "alerts" || m.From != "gridcity@example.com" || len(m.To) != 1 || m.To[0] != "ops@example.com" {
			t.Fatalf("mail %+v; want it sent after STARTTLS, authenticated as alerts", m)
		}
	}
	byEvent := map[string]map[string]any{}
	for _, d := range hook.Got() {
		var p map[string]any
		if err := json.Unmarshal(d.Body, &p); err != nil {
			t.Fatal(err)
		}
		if d.Header.Get(EventHeader) != p["event"] || d.Header.Get(DeliveryHeader) != p["id"] {
			t.Errorf("headers %v disagree with the body %s", d.Header, d.Body)
		}
		byEvent[p["event"].(string)] = p
	}
	for _, c := range []struct {
		event string
		keys  []string
		link  string
	}{
		{RequestWaiting, []string{"server", "requestId", "request", "district"}, "https://gridcity.example.com/#requests/req-1"},
		{RequestDecided, []string{"server", "requestId", "request"}, "https://gridcity.example.com/#requests/req-1"},
		{RequestFinished, []string{"server", "requestId", "request"}, "https://gridcity.example.com/#requests/req-1"},
		{IncidentOpened, []string{"incident"}, "https://gridcity.example.com/#incidents"},
		{IncidentEnded, []string{"incident"}, "https://gridcity.example.com/#incidents"},
		{AttackOpened, []string{"server", "attack"}, "https://gridcity.example.com/#security"},
		{AgentOffline, []string{"server", "offline"}, "https://gridcity.example.com/#servers/web-3"},
	} {
		p := byEvent[c.event]
		if p == nil {
			t.Errorf("the webhook got no %s", c.event)
			continue
		}
		for _, k := range append(c.keys, "id", "event", "at", "occurredAt", "title", "text") {
			if _, ok := p[k]; !ok {
				t.Errorf("%s body lacks %q: %v", c.event, k, p)
			}
		}
		if p["link"] != c.link {
			t.Errorf("%s link %v; want %s", c.event, p["link"], c.link)
		}
	}
	if in := byEvent[IncidentOpened]["incident"].(map[string]any); in["target"] != "orders-db" || len(in["explains"].([]any)) != 2 || in["atRisk"] != 3.0 {
		t.Errorf("incident %v; want orders-db explaining 2, 3 at risk", in)
	}
	for _, d := range nt.Got() {
		if d.Header.Get("Click") == "" || d.Header.Get("Tags") == "" {
			t.Errorf("ntfy headers %v lack Click or Tags", d.Header)
		}
	}
	if got := th.count("gridcity_notifications_sent_total", "notifier", "hook"); got != float64(n) {
		t.Errorf("sent_total{notifier=hook} = %v; want %d", got, n)
	}
	golden(t, hook, sl, nt, mail)
}

// sampleEvents is one event of each kind, the request's three from one
// request.
func sampleEvents() []Event {
	code := 0
	r := requestEvent("req-1", "web-1")
	decided, finished := *r.Request, *r.Request
	decided.Status, decided.Decision, decided.DecidedBy, decided.Note, decided.ExpiresAt = "approved", "approved", "alice", "go ahead", time.Time{}
	finished.Status, finished.Decision, finished.DecidedBy, finished.Note, finished.ExitCode, finished.DurationMs, finished.ExpiresAt = "completed", "", "alice", "go ahead", &code, 1234, time.Time{}
	in := &Incident{ID: 7, Target: "orders-db", Kind: "database", Reason: "connection refused", StartedAt: t0, Explains: []string{"lekhix-api", "lekhix-web"}, AtRisk: 3}
	ended := *in
	ended.EndedAt = t0.Add(12 * time.Minute)
	return []Event{
		r,
		{ID: "ev-2", Kind: RequestDecided, At: time.Now(), Request: &decided},
		{ID: "ev-3", Kind: RequestFinished, At: time.Now(), Request: &finished},
		{ID: "ev-4", Kind: IncidentOpened, At: time.Now(), Incident: in},
		{ID: "ev-5", Kind: IncidentEnded, At: time.Now(), Incident: &ended},
		{ID: "ev-6", Kind: AttackOpened, At: time.Now(), Attack: &Attack{Kind: "ssh_brute_force", Server: "web-1", Source: "203.0.113.9", Users: []string{"root", "admin"},
			Count: 120, FirstSeen: t0, LastSeen: t0.Add(time.Minute), Advice: "block 203.0.113.9"}},
		{ID: "ev-7", Kind: AgentOffline, At: time.Now(), Offline: &Offline{Server: "web-3", LastSeen: t0}},
	}
}

// golden compares what every receiver got with testdata/messages.golden
// (-update rewrites it), times and ids made stable.
func golden(t *testing.T, hook, sl, nt *notifytest.Receiver, mail *notifytest.SMTP) {
	t.Helper()
	var b strings.Builder
	sorted := func(ds []notifytest.Delivery, key func(notifytest.Delivery) string) []notifytest.Delivery {
		out := append([]notifytest.Delivery(nil), ds...)
		for i := range out {
			for j := i + 1; j < len(out); j++ {
				if key(out[j]) < key(out[i]) {
					out[i], out[j] = out[j], out[i]
				}
			}
		}
		return out
	}
	for _, d := range sorted(hook.Got(), func(d notifytest.Delivery) string { return d.Header.Get(DeliveryHeader) }) {
		var v any
		json.Unmarshal(d.Body, &v)
		pretty, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintf(&b, "== webhook %s\n%s\n", d.Header.Get(EventHeader), pretty)
	}
	for _, d := range sorted(sl.Got(), func(d notifytest.Delivery) string { return string(d.Body) }) {
		fmt.Fprintf(&b, "== slack\n%s\n", d.Body)
	}
	for _, d := range sorted(nt.Got(), func(d notifytest.Delivery) string { return d.Header.Get("Title") }) {
		fmt.Fprintf(&b, "== ntfy Title: %s | Priority: %s | Tags: %s | Click: %s\n%s\n", d.Header.Get("Title"), d.Header.Get("Priority"), d.Header.Get("Tags"), d.Header.Get("Click"), d.Body)
	}
	mails := mail.Mails()
	for i := range mails {
		for j := i + 1; j < len(mails); j++ {
			if mails[j].Data < mails[i].Data {
				mails[i], mails[j] = mails[j], mails[i]
			}
		}
	}
	for _, m := range mails {
		fmt.Fprintf(&b, "== mail\n%s\n", m.Data)
	}
	got := stable(b.String())
	file := filepath.Join("testdata", "messages.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("messages differ from %s (run with -update after checking them):\n%s", file, got)
	}
}

var (
	stableAt   = regexp.MustCompile(`"(at|occurredAt)": "[^"]+"`)
	stableDate = regexp.MustCompile(`(?m)^Date: .*$`)
	stableMsg  = regexp.MustCompile(`Message-ID: <[^@]+@gridcity>`)
	stableCR   = strings.NewReplacer("\r\n", "\n")
)

func stable(s string) string {
	s = stableAt.ReplaceAllString(s, `"$1": "…"`)
	s = stableDate.ReplaceAllString(s, "Date: …")
	s = stableMsg.ReplaceAllString(s, "Message-ID: <…@gridcity>")
	return stableCR.Replace(s)
}
