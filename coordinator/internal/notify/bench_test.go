package notify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/notifytest"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// discard is an agent stream that takes every command.
type discard struct{}

func (discard) Send(string, *gridcityv1.CoordinatorMessage) error { return nil }

// BenchmarkApprovalWithDeadReceiver is a command asked and approved
// (Submit, then Approve up to its dispatch) on one coordinator on its
// SQLite file: with no notifier, and with notifiers whose receivers take
// the connection and never answer (each attempt waits its 10 s timeout),
// the webhook alone or one of every kind. The approval must cost the
// same either way: telling people never waits for them.
func BenchmarkApprovalWithDeadReceiver(b *testing.B) {
	for _, name := range []string{"none", "dead-webhook", "dead-all-four"} {
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var notifiers []config.Notifier
			if name != "none" {
				hook := notifytest.Webhook(b, []byte("k"), time.Minute)
				hook.Script(notifytest.Always(notifytest.Hang, 1<<20)...)
				notifiers = append(notifiers, config.Notifier{Name: "hook", Kind: "webhook", URL: hook.URL, SecretFile: keyFile(b, "k")})
			}
			if name == "dead-all-four" {
				sl, nt := notifytest.Slack(b), notifytest.Ntfy(b, "")
				sl.Script(notifytest.Always(notifytest.Hang, 1<<20)...)
				nt.Script(notifytest.Always(notifytest.Hang, 1<<20)...)
				mail := notifytest.StartSMTP(b, "", "", true)
				mail.Script(notifytest.Always(notifytest.Hang, 1<<20)...)
				notifiers = append(notifiers,
					config.Notifier{Name: "chat", Kind: "slack", URLFile: keyFile(b, sl.URL+"/services/x")},
					config.Notifier{Name: "phone", Kind: "ntfy", URL: nt.URL + "/t"},
					config.Notifier{Name: "mail", Kind: "email", SMTP: mail.Addr, From: "g@example.com", To: []string{"o@example.com"}, CAFile: mail.CAFile})
			}
			hub, err := New(notifiers, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { hub.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			st, err := store.OpenSQLite(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			cfg := command.Config{}
			if len(notifiers) > 0 {
				cfg.Notice = hub.Request
			}
			svc := command.New(cfg, st, oneServer{}, discard{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			b.ResetTimer()
			for i := range b.N {
				r, err := svc.Submit(ctx, command.Submission{Server: "web-1", Command: fmt.Sprintf("echo %d", i), Reason: "bench", TimeoutSeconds: 30,
					Client: "bench", Token: fmt.Sprintf("t%d", i%16)})
				if err != nil {
					b.Fatal(err)
				}
				if got, err := svc.Approve(ctx, r.ID, "alice", command.Approval{}); err != nil || got.Status != command.StatusDispatched {
					b.Fatalf("approve: %+v, %v", got.Status, err)
				}
			}
		})
	}
}
