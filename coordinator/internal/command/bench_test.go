package command

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// instantAgent stands in for an agent's stream: each command sent to it
// runs at once and is reported started and exited to the service that
// holds the stream, from a goroutine of its own as the stream's would be.
type instantAgent struct {
	sent chan *gridcityv1.RunCommand
}

func (a *instantAgent) Send(server string, m *gridcityv1.CoordinatorMessage) error {
	a.sent <- m.GetRunCommand()
	return nil
}

func newInstantAgent() *instantAgent {
	return &instantAgent{sent: make(chan *gridcityv1.RunCommand, 16)}
}

// serve runs what is sent, reporting to holder, until ctx ends.
func (a *instantAgent) serve(ctx context.Context, holder *Service) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case rc := <-a.sent:
				holder.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: rc.GetRequestId(), Kind: gridcityv1.CommandEvent_KIND_STARTED})
				holder.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: rc.GetRequestId(), Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutKept: []byte("ok\n"), StdoutTotal: 3})
			}
		}
	}()
}

// BenchmarkApprovalToResult is the time from a person's approval to the
// result reaching the client waiting for it, for a command the agent ends
// at once (so that what is timed is the coordinators' part): on one
// coordinator on its SQLite file, and with the client on replica A, the
// approver on replica C and the agent's stream on replica B, sharing one
// PostgreSQL, where the approval reaches B and the end reaches A by the
// store's notifications (LISTEN/NOTIFY).
func BenchmarkApprovalToResult(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.Run("one-coordinator-sqlite", func(b *testing.B) {
		st, err := store.OpenSQLite(ctx, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		agent := newInstantAgent()
		svc := New(Config{}, st, fakeServers{"web-1": onHere}, agent, logger)
		agent.serve(ctx, svc)
		approvalToResult(b, svc, svc)
	})
	b.Run("three-replicas-postgres", func(b *testing.B) {
		url := pgtest.Database(b)
		agent := newInstantAgent()
		a := newReplica(b, url, "a", Config{}, heldBy("b"), nil)
		holder := newReplica(b, url, "b", Config{}, onHere, agent)
		c := newReplica(b, url, "c", Config{}, heldBy("b"), nil)
		agent.serve(ctx, holder.svc)
		var listening sync.WaitGroup
		for _, r := range []*replica{a, holder, c} {
			listening.Add(1)
			var once sync.Once
			go r.st.Listen(ctx, store.RequestsChannel, logger, func(id string) {
				once.Do(listening.Done)
				r.svc.Changed(ctx, id)
			})
			go r.svc.Run(ctx)
		}
		listening.Wait()
		approvalToResult(b, a.svc, c.svc)
	})
}

// approvalToResult asks on asker, approves on approver, and times the
// approval until asker's Wait returns the result.
func approvalToResult(b *testing.B, asker, approver *Service) {
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		r, err := asker.Submit(ctx, Submission{Server: "web-1", Command: "uptime", Reason: "bench", TimeoutSeconds: 10, Client: "bench", Token: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		waited := make(chan Request, 1)
		go func() {
			w, _ := asker.Wait(ctx, r.ID, 30*time.Second, nil)
			waited <- w
		}()
		b.StartTimer()
		if _, err := approver.Approve(ctx, r.ID, "bench", Approval{}); err != nil {
			b.Fatal(err)
		}
		w := <-waited
		b.StopTimer()
		if w.Status != StatusCompleted {
			b.Fatalf("request %s ended %s (%s); want completed", r.ID, w.Status, w.Detail)
		}
	}
}
