package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The contract's notify block loads as it is written, with the defaults
// for what it leaves out.
func TestNotifyContract(t *testing.T) {
	c, err := Load("testdata/notify.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n, ok := c.Notifier("ops")
	if !ok || len(c.Notify) != 1 {
		t.Fatalf("notifiers %+v; want ops", c.Notify)
	}
	if n.Kind != "webhook" || n.URL != "http://127.0.0.1:9000/hook" || n.SecretFile != "/etc/gridcity/ops.key" ||
		!slices.Equal(n.Events, NotifyEvents) || len(n.Districts) != 0 || n.Line != 2 {
		t.Fatalf("ops = %+v", n)
	}
	if n.Timeout != DefaultNotifyTimeout || n.DropAfter != DefaultNotifyDropAfter || n.MinInterval != DefaultNotifyMinInterval ||
		n.GroupWait != DefaultNotifyGroupWait || n.Queue != DefaultNotifyQueue {
		t.Fatalf("defaults %+v", n)
	}
}

func TestNotifyProblems(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"a secret in the config", `notify:
  - name: ops
    kind: webhook
    url: https://hooks.example.com/x
    secret: hunter2
`, []string{
			`c.yaml:2: notifier "ops": a webhook is signed; set secretFile: to a file holding the key (e.g. openssl rand -hex 32 > /etc/gridcity/ops.key; chmod 600 it), or secretEnv: to an environment variable holding it`,
			`c.yaml:5: a notifier: secret: the config holds no secrets; put it in a file readable only by gridcity and name it with secretFile: (or name an environment variable with secretEnv:)`,
		}},
		{"kinds, events, names", `notify:
  - name: a
    kind: webhok
    events: [request.waiting, incident.open]
  - name: a
    kind: ntfy
    url: ftp://x
  - kind: slack
    url: https://hooks.slack.com/services/T/B/K
`, []string{
			`c.yaml:3: notifier "a": unknown kind "webhok" (did you mean "webhook"?); known kinds: webhook, slack, ntfy, email`,
			`c.yaml:4: notifier "a": unknown event "incident.open" (did you mean "incident.opened"?); events: request.waiting, request.decided, request.finished, incident.opened, incident.ended, attack.opened, agent.offline`,
			`c.yaml:5: notifier name "a" is used twice (first at line 2); names must be unique`,
			`c.yaml:7: notifier "a": url "ftp://x" is not an http:// or https:// address`,
			`c.yaml:8: a notifier has no name; give it one (letters, digits, '-', '_' and '.')`,
			`c.yaml:9: a notifier: a slack notifier has no url; its keys are urlFile, urlEnv`,
			`c.yaml:9: a notifier: a Slack (or Mattermost, Rocket.Chat) webhook URL holds its own key; put it in a file and set urlFile:, or name an environment variable with urlEnv:`,
		}},
		{"ntfy token over plain http", `notify:
  - {name: phone, kind: ntfy, url: "http://ntfy.example.com/t", tokenFile: /etc/t, tokenEnv: T, secretFile: /x}
  - {name: local, kind: ntfy, url: "http://127.0.0.1:8080/t", tokenFile: /etc/t}
  - {name: pw, kind: ntfy, url: "https://u:p@ntfy.example.com/t"}
`, []string{
			`c.yaml:2: notifier "phone": a ntfy notifier has no secretFile; its keys are url, tokenFile, tokenEnv`,
			`c.yaml:2: notifier "phone": tokenFile and tokenEnv name the same secret; keep one`,
			`c.yaml:2: notifier "phone": the token would cross the network in plain text; use an https:// URL, or no token`,
			`c.yaml:4: notifier "pw": url carries a user or password; the config holds no secrets (a webhook is signed with secretFile:, ntfy takes tokenFile:)`,
		}},
		{"email", `notify:
  - name: mail
    kind: email
    smtp: smtp.example.com
    from: "ops <ops@example.com>"
    to: [a@example.com, "b@example.com\nBcc: x@evil"]
    username: alerts
  - {name: mail2, kind: email, smtp: "mx:25", from: g@example.com, passwordEnv: P}
`, []string{
			`c.yaml:4: notifier "mail": smtp "smtp.example.com" is not host:port; write e.g. smtp.example.com:587`,
			`c.yaml:5: notifier "mail": from "ops <ops@example.com>" is not a mail address; write e.g. gridcity@example.com`,
			`c.yaml:6: notifier "mail": to "b@example.com\nBcc: x@evil" is not a mail address`,
			`c.yaml:7: notifier "mail": username "alerts" without a password; set passwordFile: (or passwordEnv:)`,
			`c.yaml:8: notifier "mail2" has no recipients; set to: [someone@example.com]`,
			`c.yaml:8: notifier "mail2": a password without a username; set username:`,
		}},
		{"timing", `notify:
  - {name: t, kind: webhook, url: "https://h.example.com/", secretEnv: K, timeout: 2m, dropAfter: 48h, minInterval: -1s, groupWait: 10m, queue: 0, districts: ["bad id"]}
`, []string{
			`c.yaml:2: notifier "t": district "bad id": a district id uses only letters, digits, '-', '_' and '.'`,
			`c.yaml:2: notifier "t": timeout 2m0s is out of range; give each attempt 100ms to 1m (the default is 10s)`,
			`c.yaml:2: notifier "t": dropAfter 48h0m0s is out of range; keep trying for at least one timeout (2m0s) and at most 24h0m0s (the default is 15m0s)`,
			`c.yaml:2: notifier "t": minInterval -1s is negative; use 0 to tell every time, or a duration like 5m`,
			`c.yaml:2: notifier "t": groupWait 10m0s is out of range; use 0 (no grouping) to 5m (the default is 10s)`,
			`c.yaml:2: notifier "t": queue 0 is out of range; keep 1 to 100000 events waiting (the default is 256)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.src, nil)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if strings.Contains(strings.Join(got, "\n"), "hunter2") {
				t.Error("a problem repeats the secret")
			}
		})
	}
}

func TestNotifyEveryKind(t *testing.T) {
	c, err := load(strings.NewReader(`notify:
  - {name: hook, kind: webhook, url: "https://h.example.com/x", secretEnv: HOOK_KEY, minInterval: 0, groupWait: 0}
  - {name: chat, kind: slack, urlFile: /etc/gridcity/slack-url}
  - {name: phone, kind: ntfy, url: "https://ntfy.sh/gridcity-ops", tokenEnv: NTFY_TOKEN, events: [request.waiting]}
  - {name: mail, kind: email, smtp: "smtp.example.com:587", from: gridcity@example.com, to: [ops@example.com], username: alerts, passwordFile: /etc/gridcity/smtp, dropAfter: 1h}
`), "c.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Notify) != 4 || c.Notify[0].MinInterval != 0 || c.Notify[0].GroupWait != 0 || c.Notify[3].DropAfter != time.Hour {
		t.Fatalf("notifiers %+v", c.Notify)
	}
}
