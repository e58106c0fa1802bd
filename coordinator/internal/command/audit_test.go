package command

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// An approval whose change of the request cannot be written leaves no
// "approved" row in the audit: the row and the change it records commit
// together or not at all (store.TestSaveRequestAuditedOnAFullDatabase
// makes the database full for real).
func TestApprovalNotSavedLeavesNoApprovedRow(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{})
	st := &failingChange{Store: e.st, status: string(StatusApproved)}
	e.svc.store = st
	if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{Note: "go"}); err == nil || !strings.Contains(err.Error(), "database or disk is full") {
		t.Fatalf("approve: %v; want the store's error", err)
	}
	if got := e.steps(t, r.ID); got != "requested" {
		t.Fatalf("audit steps %q; want only requested: the approval did not happen", got)
	}
	if got, _ := e.svc.Get(ctx, r.ID); got.Status != StatusPending {
		t.Fatalf("status %s; want pending", got.Status)
	}
	if e.out.count() != 0 {
		t.Fatal("dispatched although the approval was not recorded")
	}
}

// failingChange fails every write of a request into one status, after
// any audit row written on its own has gone through: a disk that fills up
// between the audit row and the change.
type failingChange struct {
	Store
	status string
}

func (f *failingChange) SwapRequestAudited(ctx context.Context, expect string, r store.RequestRecord, h *store.Handoff, steps ...store.AuditEntry) error {
	if r.Status == f.status {
		return errors.New("save request: database or disk is full (13)")
	}
	return f.Store.SwapRequestAudited(ctx, expect, r, h, steps...)
}

// Forty parallel calls with one token: exactly the limit is accepted, the
// rest refused with a message that says why and what to do.
func TestPendingCapHoldsUnderParallelCalls(t *testing.T) {
	e := newEnv(t, "")
	submitAtOnce(t, e.svc, e.svc)
	if rs, _ := e.svc.Pending(context.Background()); len(rs) != MaxPendingPerToken {
		t.Fatalf("%d cards; want %d", len(rs), MaxPendingPerToken)
	}
	// Requests past their expiry no longer count, swept or not.
	e.clock.add(Expiry)
	if _, err := e.svc.Submit(context.Background(), Submission{Server: "web-1", Command: "id", Reason: "r", TimeoutSeconds: 5, Token: "laptop"}); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
}

// After the coordinator missed a command's accepted and started (it was
// killed, or the stream broke), the agent's journal reports them on
// reconnect and the audit records them, at the agent's times when those
// are plausible, in the same commit as the end they precede.
func TestJournalStepsTheCoordinatorMissedAreAudited(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	ran := e.submit(t, Submission{})
	running := e.submit(t, Submission{})
	heard := e.submit(t, Submission{})
	lying := e.submit(t, Submission{})
	for _, r := range []Request{ran, running, heard, lying} {
		if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
			t.Fatal(err)
		}
	}
	dispatched := e.clock.now()
	// Only the accepted of "heard" reached the coordinator live.
	if err := e.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: heard.ID, Kind: gridcityv1.CommandEvent_KIND_ACCEPTED}); err != nil {
		t.Fatal(err)
	}
	e.clock.add(time.Minute) // the coordinator was down for a minute
	acceptedAt, startedAt, finishedAt := dispatched.Add(100*time.Millisecond), dispatched.Add(300*time.Millisecond), dispatched.Add(20*time.Second)
	at := func(t time.Time) int64 { return t.UnixMilli() }
	ev := func(id string, k gridcityv1.CommandEvent_Kind, ms int64) *gridcityv1.CommandEvent {
		return &gridcityv1.CommandEvent{RequestId: id, Kind: k, AtUnixMs: ms}
	}
	forget := e.svc.Reconnected(ctx, "web-1", e.clock.now(), []*gridcityv1.CommandEvent{
		ev(ran.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(acceptedAt)),
		ev(ran.ID, gridcityv1.CommandEvent_KIND_STARTED, at(startedAt)),
		{RequestId: ran.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, AtUnixMs: at(finishedAt), StdoutTotal: 3, StdoutKept: []byte("ok\n")},
		ev(running.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(acceptedAt)),
		ev(running.ID, gridcityv1.CommandEvent_KIND_STARTED, at(startedAt)),
		ev(heard.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(acceptedAt)),
		ev(heard.ID, gridcityv1.CommandEvent_KIND_STARTED, at(startedAt)),
		// A clock a year ahead, and a time before the command existed.
		ev(lying.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(dispatched.AddDate(1, 0, 0))),
		ev(lying.ID, gridcityv1.CommandEvent_KIND_STARTED, at(dispatched.AddDate(-1, 0, 0))),
		{RequestId: lying.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, AtUnixMs: at(dispatched.AddDate(1, 0, 0))},
	})
	if strings.Join(forget, ",") != ran.ID+","+lying.ID {
		t.Fatalf("forget %v; want %s and %s", forget, ran.ID, lying.ID)
	}
	for _, tt := range []struct {
		r     Request
		steps string
	}{
		{ran, "requested,approved,dispatched,accepted,started,finished"},
		{running, "requested,approved,dispatched,accepted,started"},
		{heard, "requested,approved,dispatched,accepted,started"},
		{lying, "requested,approved,dispatched,accepted,started,finished"},
	} {
		if got := e.steps(t, tt.r.ID); got != tt.steps {
			t.Errorf("%s: audit steps %s; want %s", tt.r.ID, got, tt.steps)
		}
	}
	times := func(id string) map[string]time.Time {
		entries, err := e.st.Audit(ctx, id, 100)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]time.Time{}
		for _, en := range entries {
			m[en.Step] = en.At
			if (en.Step == "accepted" || en.Step == "started") && id != heard.ID && !strings.Contains(string(en.Detail), `"fromJournal":true`) {
				t.Errorf("%s %s: detail %s; want it marked as from the journal", id, en.Step, en.Detail)
			}
		}
		return m
	}
	now := e.clock.now()
	if m := times(ran.ID); !m["accepted"].Equal(acceptedAt) || !m["started"].Equal(startedAt) || !m["finished"].Equal(now) {
		t.Errorf("ran: accepted %s started %s finished %s; want the agent's %s and %s, recorded at %s", m["accepted"], m["started"], m["finished"], acceptedAt, startedAt, now)
	}
	if m := times(heard.ID); !m["accepted"].Equal(dispatched) || !m["started"].Equal(startedAt) {
		t.Errorf("heard: accepted %s started %s; want the live %s kept and the agent's %s", m["accepted"], m["started"], dispatched, startedAt)
	}
	if m := times(lying.ID); !m["accepted"].Equal(now) || !m["started"].Equal(now) {
		t.Errorf("implausible agent times taken as they are: accepted %s started %s; want now %s", m["accepted"], m["started"], now)
	}
	if got, _ := e.svc.Get(ctx, ran.ID); got.Status != StatusCompleted || !got.FinishedAt.Equal(finishedAt) {
		t.Errorf("ran: %s finished %s; want completed at the agent's %s", got.Status, got.FinishedAt, finishedAt)
	}
	if got, _ := e.svc.Get(ctx, lying.ID); !got.FinishedAt.Equal(now) {
		t.Errorf("lying: finished %s; want now %s, not the agent's implausible time", got.FinishedAt, now)
	}
	for _, r := range []Request{running, heard} {
		if got, _ := e.svc.Get(ctx, r.ID); got.Status != StatusRunning {
			t.Errorf("%s: %s; want running, as the agent reports", r.ID, got.Status)
		}
	}
	// Reported again (the ack was lost): nothing is audited twice.
	e.svc.Reconnected(ctx, "web-1", e.clock.now(), []*gridcityv1.CommandEvent{
		ev(running.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(acceptedAt)),
		ev(running.ID, gridcityv1.CommandEvent_KIND_STARTED, at(startedAt)),
		ev(heard.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(acceptedAt)),
		ev(heard.ID, gridcityv1.CommandEvent_KIND_STARTED, at(startedAt)),
	})
	if got := e.steps(t, running.ID); got != "requested,approved,dispatched,accepted,started" {
		t.Errorf("after a second report: %s", got)
	}
	// A journal that contradicts itself (started, yet only accepted)
	// does not make the audit say it started.
	odd := e.submit(t, Submission{})
	if _, err := e.svc.Approve(ctx, odd.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	e.svc.Reconnected(ctx, "web-1", e.clock.now().Add(time.Second), []*gridcityv1.CommandEvent{
		ev(odd.ID, gridcityv1.CommandEvent_KIND_STARTED, at(e.clock.now())),
		ev(odd.ID, gridcityv1.CommandEvent_KIND_ACCEPTED, at(e.clock.now())),
	})
	if got := e.steps(t, odd.ID); got != "requested,approved,dispatched,accepted" {
		t.Errorf("self-contradicting journal: %s; want only accepted added", got)
	}
}

// The journal's steps and the end they precede commit together: when the
// end cannot be recorded, neither are they, and the agent is not told to
// forget, so it reports all of it again.
func TestJournalStepsCommitWithTheEnd(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{})
	if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	journal := []*gridcityv1.CommandEvent{
		{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_ACCEPTED, AtUnixMs: e.clock.now().UnixMilli()},
		{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED, AtUnixMs: e.clock.now().UnixMilli()},
		{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, AtUnixMs: e.clock.now().UnixMilli()},
	}
	e.st.fail["finished"] = true
	if forget := e.svc.Reconnected(ctx, "web-1", e.clock.now().Add(time.Second), journal); len(forget) != 0 {
		t.Fatalf("forget %v although the end was not recorded", forget)
	}
	if got := e.steps(t, r.ID); got != "requested,approved,dispatched" {
		t.Fatalf("steps %s; want nothing from a journal whose end failed", got)
	}
	e.st.fail["finished"] = false
	if forget := e.svc.Reconnected(ctx, "web-1", e.clock.now().Add(time.Second), journal); len(forget) != 1 {
		t.Fatalf("forget %v; want the request", forget)
	}
	if got := e.steps(t, r.ID); got != "requested,approved,dispatched,accepted,started,finished" {
		t.Fatalf("steps %s", got)
	}
}

// submitAtOnce makes twice MaxPendingPerToken parallel calls with one
// token, spread over the services (replicas of one store), and checks that
// exactly the limit is accepted and the rest refused with a message that
// says why and what to do.
func submitAtOnce(t *testing.T, svcs ...*Service) {
	t.Helper()
	const calls = 2 * MaxPendingPerToken
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		svc := svcs[i%len(svcs)]
		wg.Go(func() {
			_, errs[i] = svc.Submit(context.Background(), Submission{Server: "web-1", Command: fmt.Sprintf("uptime # %d", i), Reason: "look", TimeoutSeconds: 5, Token: "laptop", Client: "claude-code"})
		})
	}
	wg.Wait()
	accepted := 0
	for _, err := range errs {
		switch {
		case err == nil:
			accepted++
		case !strings.Contains(err.Error(), "already waiting for a person (at most 20): wait for them with wait_for_command"):
			t.Errorf("refusal %q does not say why and what to do", err)
		}
	}
	if accepted != MaxPendingPerToken {
		t.Fatalf("%d of %d accepted; want exactly %d", accepted, calls, MaxPendingPerToken)
	}
}
