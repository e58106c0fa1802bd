package command

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// notices records what Config.Notice heard, on any number of replicas.
type notices struct {
	mu  sync.Mutex
	got []string
}

func (n *notices) on(replica string) func(EventKind, Request) {
	return func(k EventKind, r Request) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.got = append(n.got, fmt.Sprintf("%s:%s:%s", replica, k, r.Status))
	}
}

func (n *notices) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// With two replicas on one store, each change is noticed once, by the
// replica that committed it: the request and the approval on a, the
// end on b, which holds the agent. The changes each reads back from the
// other (notifications and the periodic re-read) reach its subscribers
// but are not noticed again, so a notifier tells each once.
func TestNoticeOncePerChangeAcrossReplicas(t *testing.T) {
	var heard notices
	url := pgtest.Database(t)
	a := newReplica(t, url, "a", Config{Reread: time.Hour, Notice: heard.on("a")}, heldBy("b"), nil)
	b := newReplica(t, url, "b", Config{Reread: time.Hour, Notice: heard.on("b")}, onHere, nil)
	ctx := context.Background()
	r := a.submit(t, "uptime")
	b.svc.Changed(ctx, r.ID)
	if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	b.svc.Changed(ctx, r.ID) // b takes the hand-off and dispatches
	b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED})
	b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutTotal: 0})
	for _, s := range []*Service{a.svc, b.svc, a.svc, b.svc} {
		s.Changed(ctx, r.ID)
		s.Changed(ctx, "")
	}
	want := []string{"a:created:pending", "a:decided:approved", "b:updated:dispatched", "b:updated:running", "b:finished:completed"}
	if got := heard.list(); !slices.Equal(got, want) {
		t.Fatalf("noticed %v; want %v", got, want)
	}

	// Two approvers at once on two replicas: one decision, noticed once.
	heard.mu.Lock()
	heard.got = nil
	heard.mu.Unlock()
	r = a.submit(t, "df -h")
	var wg sync.WaitGroup
	for _, rep := range []*replica{a, b} {
		wg.Go(func() { rep.svc.Approve(ctx, r.ID, "alice", Approval{}) })
	}
	wg.Wait()
	for _, s := range []*Service{a.svc, b.svc} {
		s.Changed(ctx, "")
	}
	decided := 0
	for _, n := range heard.list() {
		if n == "a:decided:approved" || n == "b:decided:approved" {
			decided++
		}
	}
	if decided != 1 {
		t.Fatalf("noticed %v; want the approval once", heard.list())
	}
}
