package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/notifytest"
	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// The real coordinator and a real agent, with four notifiers whose
// receivers run on loopback in the test: a webhook receiver that checks
// the HMAC signature and the timestamp (and that first fails, then hangs
// past the attempt's timeout, then fails again before it recovers), a
// Slack-shaped receiver, an ntfy-shaped receiver with a token, and an
// SMTP server that insists on STARTTLS and a password. A command with a
// secret input is approved, another denied; the agent is stopped past the
// grace and started again. Each receiver sees the events its notifier
// asked for, each once: the server's incident covers its agent.offline
// where a notifier wants both. No message carries the secret input or the
// command's output.
func TestNotificationsEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	hook := notifytest.Webhook(t, []byte("e2e-hook-key"), time.Minute)
	hook.Script(notifytest.Fail, notifytest.Hang, notifytest.Fail)
	slack := notifytest.Slack(t)
	ntfy := notifytest.Ntfy(t, "e2e-ntfy-token")
	smtp := notifytest.StartSMTP(t, "alerts", "e2e-smtp-password", true)
	cfg := fmt.Sprintf(`notify:
  - name: hook
    kind: webhook
    url: %s/hook
    secretFile: %s
    timeout: 1s
    groupWait: 1s
  - name: chat
    kind: slack
    urlFile: %s
    groupWait: 1s
  - name: phone
    kind: ntfy
    url: %s/gridcity
    tokenFile: %s
    events: [request.waiting, agent.offline]
  - name: mail
    kind: email
    smtp: %s
    from: gridcity@example.com
    to: [ops@example.com]
    username: alerts
    passwordFile: %s
    caFile: %s
    events: [request.waiting, request.decided, incident.opened]
    groupWait: 1s
`, hook.URL, write("hook.key", "e2e-hook-key\n"), write("slack.url", slack.URL+"/services/T0/B0/e2e\n"), ntfy.URL, write("ntfy.token", "e2e-ntfy-token"),
		smtp.Addr, write("smtp.password", "e2e-smtp-password"), smtp.CAFile)
	cfgFile := write("gridcity.yaml", cfg)
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: freePort(t)}
	c.p = start(t, "coordinator", "gridcity", "serve", "--data", c.data, "--config", cfgFile, "--http", c.http, "--grpc", c.grpc, "--advertise", c.grpc,
		"--log-level", "debug", "--app-url", "https://gridcity.example.com/")
	c.waitHealthy()

	tok := c.token()
	state := t.TempDir()
	agent := startAgent(t, c, "notify-1", state, c.joinLine())
	c.waitStatus(tok, "notify-1", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e-claude")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	app := c.login(t)

	// Approved with a secret input; its output is not in the command.
	got := runAsync(cs, map[string]any{"server": "notify-1", "command": "read s; echo $((6*7))xyz", "reason": "e2e notify", "timeout_seconds": 30,
		"input": map[string]any{"prompt": "the token", "secret": true}})
	card := app.card("read s; echo $((6*7))xyz")
	approveAt := time.Now()
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{"input": "hunter2-secret", "note": "fine"}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	if took := time.Since(approveAt); took > 2*time.Second {
		t.Errorf("the approval took %s while the webhook receiver fails and hangs", took)
	}
	if r := (<-got).must(t); r.Status != "completed" || r.Stdout != "42xyz\n" {
		t.Fatalf("result %+v", r)
	}
	// Denied.
	got = runAsync(cs, map[string]any{"server": "notify-1", "command": "rm -rf /tmp/nothing-here", "reason": "e2e deny", "timeout_seconds": 5})
	denied := app.card("rm -rf /tmp/nothing-here")
	if code, body := app.post("/api/requests/"+denied.ID+"/deny", map[string]string{"note": "no"}); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	(<-got).must(t)

	// The agent goes away past the grace, and comes back.
	agent.stop()
	wantBefore := map[string]int{"request.waiting": 2, "request.decided": 2, "request.finished": 1, "incident.opened": 1}
	events(t, "webhook", hook, 90*time.Second, wantBefore)
	events(t, "ntfy", ntfy, 30*time.Second, map[string]int{"request.waiting": 2, "agent.offline": 1})
	startAgent(t, c, "notify-1", state, "")
	c.waitStatus(tok, "notify-1", "online", 30*time.Second)
	wantAfter := map[string]int{"request.waiting": 2, "request.decided": 2, "request.finished": 1, "incident.opened": 1, "incident.ended": 1}
	hookBodies := events(t, "webhook", hook, 30*time.Second, wantAfter)
	slackBodies := events(t, "slack", slack, 30*time.Second, wantAfter)
	mails := mailEvents(t, smtp, 30*time.Second, map[string]int{"request.waiting": 2, "request.decided": 2, "incident.opened": 1})
	// Nothing more arrives: each event once.
	time.Sleep(3 * time.Second)
	events(t, "webhook", hook, 0, wantAfter)
	events(t, "slack", slack, 0, wantAfter)
	ntfyBodies := events(t, "ntfy", ntfy, 0, map[string]int{"request.waiting": 2, "agent.offline": 1})
	if hook.Seen() != len(hook.Got())+3 || len(hook.Bad()) != 0 {
		t.Errorf("webhook: %d requests for %d deliveries, refused %v; want three failed tries (fail, hang, fail) and none refused", hook.Seen(), len(hook.Got()), hook.Bad())
	}

	// The links open the app where it is reached, at the card.
	var waiting struct {
		RequestID, Link string
		Request         struct{ Command, Client string }
	}
	for _, b := range hookBodies {
		if strings.Contains(b, `"event":"request.waiting"`) && strings.Contains(b, card.ID) {
			json.Unmarshal([]byte(b), &waiting)
		}
	}
	if waiting.Link != "https://gridcity.example.com/#requests/"+card.ID || waiting.Request.Client != "e2e-claude" {
		t.Errorf("request.waiting %+v; want the card's link and the client", waiting)
	}
	all := strings.Join(slices.Concat(hookBodies, slackBodies, ntfyBodies, mails), "\n") + c.p.out.String()
	for _, secret := range []string{"hunter2-secret", "42xyz", "e2e-hook-key", "e2e-ntfy-token", "e2e-smtp-password", "/services/T0/B0/e2e"} {
		if strings.Contains(all, secret) {
			t.Errorf("%q is in a message or the coordinator's log", secret)
		}
	}
	for _, m := range smtp.Mails() {
		if !m.TLS || m.User != "alerts" {
			t.Errorf("a mail came without STARTTLS or the login: %+v", m)
		}
	}
	resp, err := http.Get("http://" + c.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gridcity_notifications_sent_total{event="request.waiting",notifier="hook"} 2`, `gridcity_notifications_suppressed_total{notifier="hook",reason="incident"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// events waits up to within for a receiver to have exactly want of each
// event (a grouped message counts each of its events), and returns the
// bodies; within 0 checks once.
func events(t *testing.T, name string, rc *notifytest.Receiver, within time.Duration, want map[string]int) []string {
	t.Helper()
	count := func(ds []notifytest.Delivery) (map[string]int, []string) {
		n := map[string]int{}
		var bodies []string
		for _, d := range ds {
			bodies = append(bodies, string(d.Body))
			kind := d.Header.Get("X-Gridcity-Event") // webhook
			if kind == "" {
				kind = eventOf(string(d.Body) + " " + d.Header.Get("Title"))
			}
			var grouped struct{ Count int }
			json.Unmarshal(d.Body, &grouped)
			n[kind] += max(grouped.Count, 1)
		}
		return n, bodies
	}
	got, ok := rc.Wait(max(within, time.Millisecond), func(ds []notifytest.Delivery) bool {
		n, _ := count(ds)
		return fmt.Sprint(n) == fmt.Sprint(want)
	})
	n, bodies := count(got)
	if !ok {
		t.Fatalf("%s got %v; want %v\n%s", name, n, want, strings.Join(bodies, "\n"))
	}
	return bodies
}

// eventOf tells the event of a Slack or ntfy message by its title, as a
// person reading it would.
func eventOf(s string) string {
	switch {
	case strings.Contains(s, "Approval waiting"), strings.Contains(s, "command waiting"):
		return "request.waiting"
	case strings.Contains(s, "Approved on"), strings.Contains(s, "Denied on"), strings.Contains(s, "Expired unanswered"):
		return "request.decided"
	case strings.Contains(s, "Completed on"), strings.Contains(s, "Failed on"), strings.Contains(s, "Timed out on"), strings.Contains(s, "Unknown on"):
		return "request.finished"
	case strings.Contains(s, "Incident ended"):
		return "incident.ended"
	case strings.Contains(s, "Incident on"):
		return "incident.opened"
	case strings.Contains(s, " offline since "):
		return "agent.offline"
	}
	return "unknown: " + s
}

func mailEvents(t *testing.T, s *notifytest.SMTP, within time.Duration, want map[string]int) []string {
	t.Helper()
	count := func(ms []notifytest.Mail) (map[string]int, []string) {
		n := map[string]int{}
		var out []string
		for _, m := range ms {
			out = append(out, m.Data)
			for _, line := range strings.Split(m.Data, "\r\n") {
				if k, ok := strings.CutPrefix(line, "X-Gridcity-Event: "); ok {
					n[k]++
				}
			}
		}
		return n, out
	}
	got, ok := s.Wait(within, func(ms []notifytest.Mail) bool { n, _ := count(ms); return fmt.Sprint(n) == fmt.Sprint(want) })
	n, out := count(got)
	if !ok {
		t.Fatalf("smtp got %v; want %v", n, want)
	}
	return out
}

// Two replicas on one PostgreSQL, both with the same notifier: a command
// asked through A and approved in B's app (B holds the agent), then the
// agent stopped past the grace and started again. The webhook receiver
// gets each event once, not once per replica: the request's from the
// replica that committed each change, the incident's from the leader.
func TestNotificationsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	hook := notifytest.Webhook(t, []byte("ha-hook-key"), time.Minute)
	dir := t.TempDir()
	key := filepath.Join(dir, "hook.key")
	cfg := filepath.Join(dir, "gridcity.yaml")
	if err := os.WriteFile(key, []byte("ha-hook-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("notify:\n  - {name: hook, kind: webhook, url: %q, secretFile: %q, groupWait: 1s}\n", hook.URL, key)), 0o600); err != nil {
		t.Fatal(err)
	}
	url := pgtest.Database(t)
	a, b := startReplica(t, url, "--config", cfg), startReplica(t, url, "--config", cfg)
	state := t.TempDir()
	agent := startAgent(t, b, "ha-notify-1", state, b.joinLine("--store", url))
	b.waitStatus(b.token(), "ha-notify-1", "online", 30*time.Second)
	a.waitStatus(a.token(), "ha-notify-1", "online", 15*time.Second)
	cs, err := a.mcpClient(a.token(), "e2e-claude")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	app := b.approver(t, "dana")[0]
	got := runAsync(cs, map[string]any{"server": "ha-notify-1", "command": "echo across", "reason": "e2e ha notify", "timeout_seconds": 30})
	card := app.card("echo across")
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 200 {
		t.Fatalf("approve on B: %d %s", code, body)
	}
	if r := (<-got).must(t); r.Status != "completed" {
		t.Fatalf("result %+v", r)
	}
	agent.stop()
	events(t, "webhook", hook, 90*time.Second, map[string]int{"request.waiting": 1, "request.decided": 1, "request.finished": 1, "incident.opened": 1})
	startAgent(t, b, "ha-notify-1", state, "")
	a.waitStatus(a.token(), "ha-notify-1", "online", 60*time.Second)
	want := map[string]int{"request.waiting": 1, "request.decided": 1, "request.finished": 1, "incident.opened": 1, "incident.ended": 1}
	events(t, "webhook", hook, 60*time.Second, want)
	time.Sleep(5 * time.Second) // a replica's re-read (2 s) and the leader's look (2 s) have come and gone
	bodies := events(t, "webhook", hook, 0, want)
	for _, body := range bodies {
		if strings.Contains(body, `"event":"request.waiting"`) && !strings.Contains(body, card.ID) {
			t.Errorf("request.waiting for another request: %s", body)
		}
	}
}
