package notify

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/notifytest"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

type oneServer struct{}

func (oneServer) ServerInfo(string) command.ServerInfo {
	return command.ServerInfo{Known: true, Online: true, CommandsEnabled: true, RunAs: "deploy"}
}
func (oneServer) Names() []string { return []string{"web-1"} }

// sentTo records what the command service sends to the agent.
type sentTo struct{ run chan *gridcityv1.RunCommand }

func (s sentTo) Send(_ string, m *gridcityv1.CoordinatorMessage) error {
	s.run <- m.GetRunCommand()
	return nil
}

// A command with a secret input and a sudo password, whose output is
// distinctive, goes through the real command service with every kind of
// notifier listening: no receiver sees the input, the sudo password, the
// output or any notifier's credentials, and neither does the log, though
// one Slack URL points at a closed port and its failures are logged.
func TestNoSecretInAnyMessageOrLog(t *testing.T) {
	const (
		input, sudo, output              = "hunter2-input", "hunter2-sudo", "OUTPUT-PLANTED-42"
		hookKey, ntfyToken, smtpPassword = "hook-key-SECRET", "ntfy-token-SECRET", "smtp-pw-SECRET"
		slackPath, deadSlackPath         = "/services/T0/B0/SLACK-SECRET", "/services/T0/B0/SLACK-SECRET2"
	)
	hook := notifytest.Webhook(t, []byte(hookKey), time.Minute)
	sl := notifytest.Slack(t)
	sl.Script(notifytest.Fail)
	nt := notifytest.Ntfy(t, ntfyToken)
	mail := notifytest.StartSMTP(t, "alerts", smtpPassword, true)
	th := startHub(t, Options{},
		webhookCfg(t, "hook", hook.URL, hookKey),
		config.Notifier{Name: "chat", Kind: "slack", URLFile: keyFile(t, sl.URL+slackPath)},
		config.Notifier{Name: "dead-chat", Kind: "slack", URLFile: keyFile(t, "http://127.0.0.1:1"+deadSlackPath), DropAfter: time.Second},
		config.Notifier{Name: "phone", Kind: "ntfy", URL: nt.URL + "/t", TokenFile: keyFile(t, ntfyToken)},
		config.Notifier{Name: "mail", Kind: "email", SMTP: mail.Addr, From: "g@example.com", To: []string{"ops@example.com"},
			Username: "alerts", PasswordFile: keyFile(t, smtpPassword), CAFile: mail.CAFile},
	)

	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agent := sentTo{run: make(chan *gridcityv1.RunCommand, 1)}
	svc := command.New(command.Config{Notice: th.Request}, st, oneServer{}, agent, slog.New(slog.DiscardHandler))
	r, err := svc.Submit(ctx, command.Submission{Server: "web-1", Command: "read t; sudo -S true; echo $((6*7))", Reason: "check the key",
		TimeoutSeconds: 30, Input: &command.Input{Prompt: "the key", Secret: true}, Client: "claude-code", Token: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Approve(ctx, r.ID, "alice", command.Approval{Note: "ok", Input: []byte(input), SudoPassword: []byte(sudo)}); err != nil {
		t.Fatal(err)
	}
	if rc := <-agent.run; string(rc.GetStdinSecret()) != input || string(rc.GetSudoPassword()) != sudo {
		t.Fatalf("the agent got %q and %q; the test's plants did not reach it", rc.GetStdinSecret(), rc.GetSudoPassword())
	}
	for _, ev := range []*gridcityv1.CommandEvent{
		{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED},
		{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_OUTPUT, Data: []byte(output + "\n")},
		{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutTotal: uint64(len(output) + 1)},
	} {
		if err := svc.HandleEvent(ctx, "web-1", ev); err != nil {
			t.Fatal(err)
		}
	}
	if done, _ := svc.Get(ctx, r.ID); !strings.Contains(done.Stdout.Text, output) {
		t.Fatalf("the result lacks the planted output: %+v", done.Stdout)
	}

	const n = 3 // waiting, decided, finished
	for name, rc := range map[string]*notifytest.Receiver{"webhook": hook, "slack": sl, "ntfy": nt} {
		if got, ok := rc.Wait(10*time.Second, func(d []notifytest.Delivery) bool { return len(d) >= n }); !ok {
			t.Fatalf("%s got %d messages; want %d\n%s", name, len(got), n, th.log)
		}
	}
	if got, ok := mail.Wait(10*time.Second, func(m []notifytest.Mail) bool { return len(m) >= n }); !ok {
		t.Fatalf("smtp got %d; want %d", len(got), n)
	}
	th.waitCount(n, "gridcity_notifications_dropped_total", "notifier", "dead-chat")

	var seen []string
	for _, rc := range []*notifytest.Receiver{hook, sl, nt} {
		for _, d := range rc.Got() {
			seen = append(seen, string(d.Body))
			for k, vs := range d.Header {
				if k != "Authorization" { // ntfy's token is for ntfy
					seen = append(seen, k+": "+strings.Join(vs, ","))
				}
			}
		}
	}
	for _, m := range mail.Mails() {
		seen = append(seen, m.Data)
	}
	seen = append(seen, th.log.String())
	all := strings.Join(seen, "\n")
	for _, secret := range []string{input, sudo, "hunter2", output, hookKey, ntfyToken, smtpPassword, "SLACK-SECRET"} {
		if strings.Contains(all, secret) {
			t.Errorf("%q is in a message or the log", secret)
		}
	}
	if !strings.Contains(all, "read t; sudo -S true; echo $((6*7))") || !strings.Contains(th.log.String(), "dead-chat") {
		t.Fatal("the messages lack the command, or the log the dead receiver: the check above looked at nothing")
	}
}
