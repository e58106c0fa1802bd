package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/notifytest"
	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// A receiver that fails, then hangs past the attempt's timeout, then fails
// again, then recovers: the event arrives once, after four tries with
// growing pauses, and is counted sent once.
func TestRetryThroughFailureTimeoutAndRecovery(t *testing.T) {
	hook := notifytest.Webhook(t, []byte("k"), time.Minute)
	hook.Script(notifytest.Fail, notifytest.Hang, notifytest.Fail)
	th := startHub(t, Options{}, webhookCfg(t, "hook", hook.URL, "k"))
	start := time.Now()
	th.Emit(requestEvent("req-1", "web-1"))
	got, ok := hook.Wait(10*time.Second, func(d []notifytest.Delivery) bool { return len(d) > 0 })
	if !ok {
		t.Fatalf("not delivered\n%s", th.log)
	}
	// Once counted sent, the event is done with: no attempt of it can follow.
	th.waitCount(1, "gridcity_notifications_sent_total", "notifier", "hook")
	if got = hook.Got(); len(got) != 1 || hook.Seen() != 4 {
		t.Fatalf("delivered %d times in %d requests; want once in 4\n%s", len(got), hook.Seen(), th.log)
	}
	// Backoff 20 ms doubling (halved by jitter at most) and one 300 ms timeout.
	if took := time.Since(start); took < 300*time.Millisecond+35*time.Millisecond {
		t.Errorf("delivered after %s; the timeout and the pauses take longer", took)
	}
	if n := th.count("gridcity_notifications_sent_total", "notifier", "hook", "event", RequestWaiting); n != 1 {
		t.Errorf("sent_total = %v; want 1", n)
	}
	if n := th.count("gridcity_notifications_dropped_total"); n != 0 {
		t.Errorf("dropped_total = %v; want 0", n)
	}
	if !strings.Contains(th.log.String(), "trying again") {
		t.Errorf("the failures are not logged:\n%s", th.log)
	}
}

// A receiver that stays down: the event is dropped once dropAfter has
// passed since it happened, with a log line and a count; one that refuses
// (4xx) is dropped at once, without retries.
func TestDropAfterAndRefusal(t *testing.T) {
	down := notifytest.Webhook(t, []byte("k"), time.Minute)
	down.Script(notifytest.Always(notifytest.Fail, 1000)...)
	no := notifytest.Webhook(t, []byte("k"), time.Minute)
	no.Script(notifytest.Refuse)
	downCfg := webhookCfg(t, "down", down.URL, "k")
	downCfg.DropAfter = 400 * time.Millisecond
	th := startHub(t, Options{}, downCfg, webhookCfg(t, "no", no.URL, "k"))
	th.Emit(requestEvent("req-1", "web-1"))
	th.waitCount(2, "gridcity_notifications_dropped_total")
	if n := th.count("gridcity_notifications_dropped_total", "notifier", "down", "reason", "expired"); n != 1 {
		t.Fatalf("dropped{down, expired} = %v; want 1\n%s", n, th.log)
	}
	if n := th.count("gridcity_notifications_dropped_total", "notifier", "no", "reason", "refused"); n != 1 {
		t.Fatalf("dropped{no, refused} = %v; want 1\n%s", n, th.log)
	}
	if no.Seen() != 1 {
		t.Errorf("the refusing receiver was asked %d times; want once", no.Seen())
	}
	if down.Seen() < 3 {
		t.Errorf("the receiver that was down was asked %d times; want retries", down.Seen())
	}
	if len(down.Got())+len(no.Got()) != 0 {
		t.Error("a failed delivery was recorded")
	}
	for _, want := range []string{"not delivered within dropAfter", "the receiver refused it"} {
		if !strings.Contains(th.log.String(), want) {
			t.Errorf("no log line %q:\n%s", want, th.log)
		}
	}
}

// A full queue drops its oldest event for the new one, and counts it.
func TestQueueDropsOldest(t *testing.T) {
	c := webhookCfg(t, "q", "http://127.0.0.1:1/", "k")
	c.Queue = 3
	th := &testHub{}
	h, err := New([]config.Notifier{c}, Options{Metrics: nil, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	th.Hub = h
	for i := range 5 {
		h.Emit(requestEvent(fmt.Sprint("req-", i), "web-1")) // not running: nothing leaves the queue
	}
	var ids []string
	for _, e := range take(h.notifiers[0]) {
		ids = append(ids, e.Request.ID)
	}
	if fmt.Sprint(ids) != "[req-2 req-3 req-4]" {
		t.Fatalf("queue holds %v; want the newest three", ids)
	}
}

// Emitting to a receiver that never answers returns at once, however many
// events pile up behind it.
func TestDeadReceiverNeverBlocksEmit(t *testing.T) {
	dead := notifytest.Webhook(t, []byte("k"), time.Minute)
	dead.Script(notifytest.Always(notifytest.Hang, 100)...)
	c := webhookCfg(t, "dead", dead.URL, "k")
	c.Timeout, c.Queue = 10*time.Second, 64
	th := startHub(t, Options{}, c)
	start := time.Now()
	for i := range 10000 {
		th.Emit(requestEvent(fmt.Sprint("req-", i), "web-1"))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("10,000 emits took %s with a dead receiver", took)
	}
	if n := th.count("gridcity_notifications_dropped_total", "reason", "queue_full"); n < 10000-64-1 {
		t.Errorf("queue_full drops = %v; want nearly all of 10,000", n)
	}
}

// One incident explaining 50 servers is one message, and the 50 servers
// it names get no agent.offline of their own; three incidents at once
// are one grouped message; a second incident on the same target within
// minInterval is kept quiet, and so is its end.
func TestGroupingAndMinimumInterval(t *testing.T) {
	hook := notifytest.Webhook(t, []byte("k"), time.Minute)
	c := webhookCfg(t, "hook", hook.URL, "k")
	c.GroupWait, c.MinInterval = 150*time.Millisecond, time.Hour
	th := startHub(t, Options{}, c)
	var explains []string
	for i := range 50 {
		explains = append(explains, fmt.Sprintf("web-%02d", i))
	}
	th.Emit(Event{Kind: IncidentOpened, Incident: &Incident{ID: 1, Target: "switch-1", Kind: "probe", Reason: "no route", Explains: explains}})
	for _, s := range explains {
		th.Emit(Event{Kind: AgentOffline, Offline: &Offline{Server: s, LastSeen: t0}})
	}
	got, _ := hook.Wait(5*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= 1 })
	// Every event dealt with, sent or kept quiet: none is left to be told.
	th.waitCount(1, "gridcity_notifications_sent_total")
	th.waitCount(50, "gridcity_notifications_suppressed_total", "reason", "incident")
	if got = hook.Got(); len(got) != 1 {
		t.Fatalf("%d messages; want 1 for the incident and its 50 servers", len(got))
	}
	var p payload
	json.Unmarshal(got[0].Body, &p)
	if p.Event != IncidentOpened || len(p.Incident.Explains) != 50 || !strings.Contains(p.Text, "Explains 50: web-00") || !strings.Contains(p.Text, "and 30 more") {
		t.Fatalf("message %s", got[0].Body)
	}
	if n := th.count("gridcity_notifications_suppressed_total", "reason", "incident"); n != 50 {
		t.Errorf("suppressed{incident} = %v; want 50", n)
	}

	for i, target := range []string{"db-a", "db-b", "db-c"} {
		th.Emit(Event{Kind: IncidentOpened, Incident: &Incident{ID: int64(10 + i), Target: target, Kind: "database", Reason: "down", Explains: []string{}}})
	}
	got, _ = hook.Wait(5*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= 2 })
	json.Unmarshal(got[1].Body, &p)
	if len(got) != 2 || p.Count != 3 || len(p.Events) != 3 || p.Title != "3 incidents opened: db-a, db-b, db-c" {
		t.Fatalf("grouped message %s", got[len(got)-1].Body)
	}

	// db-a again (a new incident) within the interval: quiet, and its end too.
	th.Emit(Event{Kind: IncidentEnded, Incident: &Incident{ID: 10, Target: "db-a", Kind: "database", Reason: "down", Explains: []string{}}})
	th.Emit(Event{Kind: IncidentOpened, Incident: &Incident{ID: 20, Target: "db-a", Kind: "database", Reason: "down", Explains: []string{}}})
	th.Emit(Event{Kind: IncidentEnded, Incident: &Incident{ID: 20, Target: "db-a", Kind: "database", Reason: "down", Explains: []string{}}})
	got, _ = hook.Wait(5*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= 3 })
	th.waitCount(3, "gridcity_notifications_sent_total")
	th.waitCount(2, "gridcity_notifications_suppressed_total", "reason", "min_interval")
	if got = hook.Got(); len(got) != 3 {
		t.Fatalf("%d messages; want 3 (the first end only)", len(got))
	}
	json.Unmarshal(got[2].Body, &p)
	if p.Event != IncidentEnded || p.Incident.ID != 10 {
		t.Fatalf("third message %s; want the end of incident 10", got[2].Body)
	}
	if n := th.count("gridcity_notifications_suppressed_total", "reason", "min_interval"); n != 2 {
		t.Errorf("suppressed{min_interval} = %v; want 2", n)
	}
	// The ended incident no longer names its servers: a later offline is told.
	th.Emit(Event{Kind: IncidentEnded, Incident: &Incident{ID: 1, Target: "switch-1", Explains: explains}})
	th.Emit(Event{Kind: AgentOffline, Offline: &Offline{Server: "web-07", LastSeen: t0}})
	got, _ = hook.Wait(5*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= 5 })
	if len(got) != 5 {
		t.Fatalf("%d messages; want the end of switch-1 and web-07 offline", len(got))
	}
}

// The events and districts filters: empty means all; a notifier gets only
// what it asked for.
func TestFilters(t *testing.T) {
	all := notifytest.Webhook(t, []byte("k"), time.Minute)
	some := notifytest.Webhook(t, []byte("k"), time.Minute)
	sc := webhookCfg(t, "some", some.URL, "k")
	sc.Events, sc.Districts = []string{RequestWaiting, AgentOffline}, []string{"lekhix"}
	districts := map[string]string{"web-1": "lekhix", "web-2": "orders", "web-3": "lekhix"}
	th := startHub(t, Options{Districts: func(targets []string) []string {
		var out []string
		for _, t := range targets {
			if d := districts[t]; d != "" {
				out = append(out, d)
			}
		}
		return out
	}}, webhookCfg(t, "all", all.URL, "k"), sc)
	if !th.Wants(RequestDecided) {
		t.Fatal("the hub does not want request.decided, which one notifier asks for (all)")
	}
	th.Emit(requestEvent("r1", "web-1"))                                                    // both
	th.Emit(requestEvent("r2", "web-2"))                                                    // all only: another district
	th.Emit(Event{Kind: RequestDecided, Request: &Request{ID: "r1", Server: "web-1"}})      // all only: another event
	th.Emit(Event{Kind: AgentOffline, Offline: &Offline{Server: "web-3", LastSeen: t0}})    // both
	th.Emit(Event{Kind: AgentOffline, Offline: &Offline{Server: "unplaced", LastSeen: t0}}) // all only: in no district
	if got, ok := all.Wait(5*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= 5 }); !ok {
		t.Fatalf("all got %d; want 5", len(got))
	}
	// A notifier delivers one event at a time, in order (none is grouped
	// here): once some has a last event, it has dealt with all before it.
	th.Emit(requestEvent("r-last", "web-1"))
	got, ok := some.Wait(5*time.Second, func(d []notifytest.Delivery) bool {
		return len(d) > 0 && strings.Contains(string(d[len(d)-1].Body), `"requestId":"r-last"`)
	})
	if !ok {
		t.Fatalf("some never got the last event (%d messages)", len(got))
	}
	var subjects []string
	for _, d := range got[:len(got)-1] {
		var p payload
		json.Unmarshal(d.Body, &p)
		subjects = append(subjects, p.Event+" "+p.Server)
	}
	if fmt.Sprint(subjects) != "[request.waiting web-1 agent.offline web-3]" {
		t.Fatalf("some got %v; want web-1's request and web-3 offline", subjects)
	}
}

// Secrets come from files and the environment, and a missing one stops
// the start with the field's name and what to do.
func TestSecretsFromFilesAndEnvironment(t *testing.T) {
	env := map[string]string{"HOOK_KEY": "from-env", "EMPTY": " "}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		n    config.Notifier
		want string // "" for no error
	}{
		{config.Notifier{Name: "a", Kind: "webhook", URL: "http://127.0.0.1:1/", SecretEnv: "HOOK_KEY"}, ""},
		{config.Notifier{Name: "b", Kind: "webhook", URL: "http://127.0.0.1:1/", SecretFile: "/nonexistent/key"}, `notifier "b": secretFile /nonexistent/key: open /nonexistent/key: no such file or directory; create it holding only the secret`},
		{config.Notifier{Name: "c", Kind: "webhook", URL: "http://127.0.0.1:1/", SecretEnv: "EMPTY"}, `notifier "c": secretEnv: the environment variable EMPTY is not set or empty`},
		{config.Notifier{Name: "d", Kind: "webhook", URL: "http://127.0.0.1:1/", SecretFile: keyFile(t, "")}, "is empty; write the secret into it"},
		{config.Notifier{Name: "e", Kind: "slack", URLFile: keyFile(t, "not a url at all")}, "is not an http(s) address"},
		{config.Notifier{Name: "f", Kind: "ntfy", URL: "http://127.0.0.1:1/t", TokenEnv: "NTFY_TOKEN"}, "tokenEnv: the environment variable NTFY_TOKEN is not set"},
	} {
		_, err := New([]config.Notifier{c.n}, Options{Getenv: getenv})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.n.Name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v; want one with %q", c.n.Name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "not a url at all") {
			t.Errorf("%s: the error repeats the secret: %v", c.n.Name, err)
		}
	}
}

// Email goes out only over STARTTLS to a relay off loopback; a relay on
// loopback without STARTTLS takes mail without credentials, and never
// gets the password in plain text.
func TestEmailNeverSendsThePasswordInPlainText(t *testing.T) {
	plain := notifytest.StartSMTP(t, "", "", false)
	withPW := notifytest.StartSMTP(t, "alerts", "pw-1", false)
	base := config.Notifier{Kind: "email", From: "gridcity@example.com", To: []string{"ops@example.com"}, Timeout: time.Second, DropAfter: 5 * time.Second}
	local, secret := base, base
	local.Name, local.SMTP = "local", plain.Addr
	secret.Name, secret.SMTP, secret.Username, secret.PasswordFile = "secret", withPW.Addr, "alerts", keyFile(t, "pw-1")
	th := startHub(t, Options{}, local, secret)
	th.Emit(requestEvent("req-1", "web-1"))
	if got, ok := plain.Wait(5*time.Second, func(m []notifytest.Mail) bool { return len(m) > 0 }); !ok || got[0].TLS {
		t.Fatalf("local relay got %+v; want one mail in plain text\n%s", got, th.log)
	}
	th.waitCount(1, "gridcity_notifications_dropped_total", "notifier", "secret")
	if n := th.count("gridcity_notifications_dropped_total", "notifier", "secret", "reason", "refused"); n != 1 || withPW.Auths() != 0 || len(withPW.Mails()) != 0 {
		t.Fatalf("dropped{secret, refused} = %v, AUTH sent %d times, mails %d; want the message refused before any password\n%s", n, withPW.Auths(), len(withPW.Mails()), th.log)
	}
	if !strings.Contains(th.log.String(), "never sent in plain text") {
		t.Errorf("the log does not say why:\n%s", th.log)
	}
}

// A relay that answers 451, then one that hangs, then takes the mail:
// one mail, after STARTTLS.
func TestEmailRetries(t *testing.T) {
	mail := notifytest.StartSMTP(t, "", "", true)
	mail.Script(notifytest.Fail, notifytest.Hang)
	th := startHub(t, Options{}, config.Notifier{Name: "mail", Kind: "email", SMTP: mail.Addr, From: "g@example.com", To: []string{"a@example.com", "b@example.com"},
		CAFile: mail.CAFile, Timeout: 300 * time.Millisecond, DropAfter: 10 * time.Second})
	th.Emit(requestEvent("req-1", "web-1"))
	got, ok := mail.Wait(10*time.Second, func(m []notifytest.Mail) bool { return len(m) > 0 })
	th.waitCount(1, "gridcity_notifications_sent_total", "notifier", "mail") // no attempt can follow
	if got = mail.Mails(); !ok || len(got) != 1 || !got[0].TLS || len(got[0].To) != 2 {
		t.Fatalf("mails %+v; want one, after STARTTLS, to both\n%s", got, th.log)
	}
}

func TestHubWithoutNotifiers(t *testing.T) {
	var nilHub *Hub
	nilHub.Emit(requestEvent("r", "s"))
	nilHub.Run(context.Background())
	h, err := New(nil, Options{})
	if err != nil || h.Wants(RequestWaiting) {
		t.Fatalf("New(nil) = %v, %v; want a hub that wants nothing", h, err)
	}
	h.Emit(requestEvent("r", "s"))
}
