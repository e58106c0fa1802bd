package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The replica tests run two Services on one real PostgreSQL.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// replica is one coordinator of a shared store: its service, what it sent
// to agents, and its store connection.
type replica struct {
	id  string
	svc *Service
	out *signalRecorder
	st  *store.Postgres
	log *syncBuffer // what it logged
}

// syncBuffer is a log shared by a replica's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// signalRecorder is a recorder that says when something was sent.
type signalRecorder struct {
	recorder
	signal chan struct{}
}

func (r *signalRecorder) Send(server string, m *gridcityv1.CoordinatorMessage) error {
	err := r.recorder.Send(server, m)
	select {
	case r.signal <- struct{}{}:
	default:
	}
	return err
}

// replicas starts replicas a and b on one new PostgreSQL database; b
// holds web-1's stream, a sees it online there (as fleet.Reload shows
// it). Both are registered live with their hand-off keys.
func replicas(t testing.TB, cfg Config) (a, b *replica) {
	t.Helper()
	url := pgtest.Database(t)
	return newReplica(t, url, "a", cfg, heldBy("b"), nil), newReplica(t, url, "b", cfg, onHere, nil)
}

// onHere is web-1 as the replica holding its stream sees it.
var onHere = ServerInfo{Known: true, Online: true, CommandsEnabled: true, RunAs: "root"}

// heldBy is web-1 as a replica sees it whose stream replica id holds.
func heldBy(id string) ServerInfo {
	return ServerInfo{Known: true, CommandsEnabled: true, RunAs: "root", HeldBy: id + ":4600", Replica: id}
}

// newReplica starts replica id on the store at url, registered live with
// its hand-off key, seeing web-1 as view; it sends to agents through out,
// or when out is nil records what it sends.
func newReplica(t testing.TB, url, id string, cfg Config, view ServerInfo, out Dispatcher) *replica {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key, err := NewHandoffKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.HeartbeatReplica(ctx, store.Replica{ID: id, GRPC: id + ":4601", HTTP: id + ":4600", HeartbeatAt: time.Now(), HandoffKey: key.Public()}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	rec := &signalRecorder{signal: make(chan struct{}, 1)}
	if out == nil {
		out = rec
	}
	if cfg.Unseal == nil {
		cfg.Unseal = testUnseal // every replica of a store is given the same
	}
	log := &syncBuffer{}
	svc := New(cfg, st, fakeServers{"web-1": view, "off-1": {Known: true, CommandsEnabled: true, RunAs: "root"}}, out, slog.New(slog.NewTextHandler(log, nil)))
	svc.Share(Shared{Replica: id, Key: key, LiveFor: 15 * time.Second})
	return &replica{id: id, svc: svc, out: rec, st: st, log: log}
}

func (r *replica) submit(t *testing.T, command string) Request {
	t.Helper()
	req, err := r.svc.Submit(context.Background(), Submission{Server: "web-1", Command: command, Reason: "check", TimeoutSeconds: 30, Client: "claude-code", Token: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func auditOf(t *testing.T, st Store, id string) string {
	t.Helper()
	entries, err := st.Audit(context.Background(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, e := range entries {
		s = append(s, e.Step)
	}
	return strings.Join(s, ",")
}

// A command asked through replica a for a server whose stream b holds,
// approved on a: the approval is committed with the input and sudo
// password sealed to b (never in the clear in the store), b dispatches it
// once with them, and its end, reported to b, reaches a's waiter and a's
// subscribers when a hears of the change.
func TestApprovalOnOneReplicaIsDispatchedByTheHolder(t *testing.T) {
	a, b := replicas(t, Config{Reread: time.Hour}) // only the notifications (Changed) carry changes
	ctx := context.Background()
	events, stop := a.svc.Subscribe()
	defer stop()
	r := a.submit(t, "read t; echo $t")
	if r.Status != StatusPending || r.RunAs != "root" {
		t.Fatalf("submitted %+v", r)
	}
	got, err := a.svc.Approve(ctx, r.ID, "alice", Approval{Note: "ok", Input: []byte("hunter2-input"), SudoPassword: []byte("hunter2-sudo")})
	if err != nil || got.Status != StatusApproved {
		t.Fatalf("approve on a: %+v, %v; want approved, handed to b", got, err)
	}
	if a.out.count() != 0 || b.out.count() != 0 {
		t.Fatal("sent before b took the hand-off")
	}
	hs, err := a.st.Handoffs(ctx, "b")
	if err != nil || len(hs) != 1 || hs[0].RequestID != r.ID {
		t.Fatalf("hand-offs to b: %+v, %v; want one for %s", hs, err, r.ID)
	}
	rec, _ := a.st.Request(ctx, r.ID)
	audit, _ := a.st.Audit(ctx, r.ID, 100)
	stored := [][]byte{hs[0].Sealed, rec.Body}
	for _, e := range audit {
		stored = append(stored, e.Detail)
	}
	for _, secret := range []string{"hunter2-input", "hunter2-sudo", "hunter2"} {
		for _, b := range stored {
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("%q is in the store in the clear: %q", secret, b)
			}
		}
	}
	// Only b can open it, and only as this request's.
	if _, err := a.svc.shared.Key.open(r.ID, hs[0].Sealed); err == nil {
		t.Fatal("a opened a hand-off sealed to b")
	}
	if _, err := b.svc.shared.Key.open("cmd_other", hs[0].Sealed); err == nil {
		t.Fatal("b opened the hand-off as another request's")
	}

	waited := make(chan Request, 1)
	go func() {
		w, _ := a.svc.Wait(ctx, r.ID, 30*time.Second, nil)
		waited <- w
	}()
	b.svc.Changed(ctx, r.ID) // the notification of the approval
	b.svc.Changed(ctx, r.ID) // and again: nothing is sent twice
	if b.out.count() != 1 || string(b.out.sent[0].StdinSecret) != "hunter2-input" || string(b.out.sent[0].SudoPassword) != "hunter2-sudo" || b.out.sent[0].RequestId != r.ID {
		t.Fatalf("b sent %+v; want the command once with the input and sudo password", b.out.sent)
	}
	if hs, _ := a.st.Handoffs(ctx, ""); len(hs) != 0 {
		t.Fatalf("hand-offs after the dispatch: %+v; want none", hs)
	}
	b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED})
	b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_OUTPUT, Data: []byte("********\n")})
	b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutTotal: 9})
	a.svc.Changed(ctx, r.ID) // the notification of the end
	w := <-waited
	if w.Status != StatusCompleted || w.Stdout.Text != "********\n" || w.Note != "ok" || w.DecidedBy != "alice" {
		t.Fatalf("a's wait: %+v; want completed with b's output", w)
	}
	if got := auditOf(t, a.st, r.ID); got != "requested,approved,dispatched,started,finished" {
		t.Fatalf("audit %s", got)
	}
	var kinds []EventKind
	for len(events) > 0 {
		if ev := <-events; ev.Request.ID == r.ID {
			kinds = append(kinds, ev.Kind)
		}
	}
	if fmt.Sprint(kinds) != "[created decided finished]" {
		t.Fatalf("a's subscriber saw %v; want created, decided (here), finished (from b)", kinds)
	}
}

// Two approvers on two replicas approve one request at the same moment:
// exactly one approval wins, the other is told it is decided, and the
// command is sent once.
func TestTwoReplicasApproveAtOnce(t *testing.T) {
	a, b := replicas(t, Config{Reread: time.Hour})
	ctx := context.Background()
	for i := range 5 {
		r := a.submit(t, fmt.Sprint("uptime # ", i))
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, rep := range []*replica{a, b} {
			wg.Go(func() {
				<-start
				_, errs[j] = rep.svc.Approve(ctx, r.ID, fmt.Sprint("approver-", rep.id), Approval{})
			})
		}
		close(start)
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("approvals: %v; want exactly one to win", errs)
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrDecided) {
				t.Fatalf("losing approval: %v; want ErrDecided", err)
			}
		}
		b.svc.Changed(ctx, r.ID)
		a.svc.Changed(ctx, r.ID)
		if n := a.out.count() + b.out.count(); n != i+1 || a.out.count() != 0 {
			t.Fatalf("after %d approvals: a sent %d, b sent %d; want b to have sent each once", i+1, a.out.count(), b.out.count())
		}
		if got := auditOf(t, a.st, r.ID); got != "requested,approved,dispatched" {
			t.Fatalf("audit %s", got)
		}
	}
}

// With every notification lost, the periodic re-read still carries the
// approval to the holder and the end back to the waiter.
func TestLostNotificationsDelayNothingIsLost(t *testing.T) {
	a, b := replicas(t, Config{Reread: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { a.svc.Run(ctx) })
	wg.Go(func() { b.svc.Run(ctx) })
	r := a.submit(t, "uptime")
	waited := make(chan Request, 1)
	go func() {
		w, _ := a.svc.Wait(ctx, r.ID, 30*time.Second, nil)
		waited <- w
	}()
	if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.out.signal:
	case <-time.After(10 * time.Second):
		t.Fatal("b never took the hand-off")
	}
	b.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutKept: []byte("up\n"), StdoutTotal: 3})
	select {
	case w := <-waited:
		if w.Status != StatusCompleted || w.Stdout.Text != "up\n" {
			t.Fatalf("a's wait: %+v; want completed", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's wait never heard of the end")
	}
	if b.out.count() != 1 {
		t.Fatalf("b sent %d; want 1", b.out.count())
	}
}

// An approval handed to a replica that then died ends failed, by any
// replica's sweep: its key died with it, so no one else sends it late;
// one handed to a live replica is left for it.
func TestHandoffToADeadReplicaFails(t *testing.T) {
	a, b := replicas(t, Config{Reread: time.Hour})
	ctx := context.Background()
	r := a.submit(t, "uptime")
	if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{Input: nil}); err != nil {
		t.Fatal(err)
	}
	a.svc.Sweep(ctx)
	if got, _ := a.svc.Get(ctx, r.ID); got.Status != StatusApproved {
		t.Fatalf("a hand-off to a live replica was swept: %+v", got)
	}
	// b is killed: its heartbeat stops, and a no longer counts it live.
	if err := a.st.HeartbeatReplica(ctx, store.Replica{ID: "b", GRPC: "b:4601", HeartbeatAt: time.Now().Add(-time.Minute), StartedAt: time.Now().Add(-time.Hour)}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	a.svc.Sweep(ctx)
	got, _ := a.svc.Get(ctx, r.ID)
	if got.Status != StatusFailed || !strings.Contains(got.Detail, "stopped before sending it; nothing ran; ask again") {
		t.Fatalf("after b died: %+v; want failed", got)
	}
	// A new approval while a's view still says b holds the agent is
	// refused, not spent: the request waits for the agent's next replica.
	r2 := a.submit(t, "uptime # 2")
	if _, err := a.svc.Approve(ctx, r2.ID, "alice", Approval{}); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "has stopped") {
		t.Fatalf("approval for a dead holder: %v; want ErrUnreachable", err)
	}
	if got, _ := a.svc.Get(ctx, r2.ID); got.Status != StatusPending || auditOf(t, a.st, r2.ID) != "requested" {
		t.Fatalf("after a refused approval: %s, audit %s; want pending, nothing recorded", got.Status, auditOf(t, a.st, r2.ID))
	}
	b.svc.Changed(ctx, "") // had b lived on, it would find nothing to send
	if b.out.count() != 0 {
		t.Fatal("sent after the request failed")
	}
	if got := auditOf(t, a.st, r.ID); got != "requested,approved,failed" {
		t.Fatalf("audit %s", got)
	}
	// A server that no replica holds is still refused.
	if _, err := a.svc.Submit(ctx, Submission{Server: "off-1", Command: "id", Reason: "r", TimeoutSeconds: 5, Token: "laptop"}); err == nil || !strings.Contains(err.Error(), "is offline") {
		t.Fatalf("offline server: %v; want refused as offline", err)
	}
}

// The agent moves between an approval and its dispatch: a approved a
// command for web-1 on b, but web-1's agent reconnected to c before b took
// the hand-off. b hands it on to c, sealed to c, and c runs it once with
// the secrets; the audit says so. When the agent's new replica has died
// too, the request ends failed, saying nothing ran.
func TestApprovalFollowsTheAgentToAnotherReplica(t *testing.T) {
	url := pgtest.Database(t)
	cfg := Config{Reread: time.Hour}
	a := newReplica(t, url, "a", cfg, heldBy("b"), nil)
	b := newReplica(t, url, "b", cfg, onHere, nil)
	c := newReplica(t, url, "c", cfg, heldBy("b"), nil)
	ctx := context.Background()
	r := a.submit(t, "read t; echo $t")
	if _, err := a.svc.Approve(ctx, r.ID, "alice", Approval{Input: []byte("hunter2-input"), SudoPassword: []byte("hunter2-sudo")}); err != nil {
		t.Fatal(err)
	}
	// web-1's agent moves from b to c.
	b.svc.servers.(fakeServers)["web-1"] = heldBy("c")
	c.svc.servers.(fakeServers)["web-1"] = onHere
	b.svc.Changed(ctx, r.ID)
	if b.out.count() != 0 {
		t.Fatal("b sent to an agent it no longer holds")
	}
	hs, err := a.st.Handoffs(ctx, "")
	if err != nil || len(hs) != 1 || hs[0].Replica != "c" {
		t.Fatalf("hand-offs: %+v, %v; want one, to c", hs, err)
	}
	if got, _ := a.svc.Get(ctx, r.ID); got.Status != StatusApproved {
		t.Fatalf("after the hand-on: %s; want still approved", got.Status)
	}
	for _, secret := range []string{"hunter2-input", "hunter2-sudo"} {
		if bytes.Contains(hs[0].Sealed, []byte(secret)) {
			t.Fatalf("%q is in the hand-off in the clear", secret)
		}
	}
	c.svc.Changed(ctx, r.ID)
	c.svc.Changed(ctx, r.ID)
	if c.out.count() != 1 || string(c.out.sent[0].StdinSecret) != "hunter2-input" || string(c.out.sent[0].SudoPassword) != "hunter2-sudo" {
		t.Fatalf("c sent %+v; want the command once with the input and sudo password", c.out.sent)
	}
	if got := auditOf(t, a.st, r.ID); got != "requested,approved,handed on,dispatched" {
		t.Fatalf("audit %s; want requested,approved,handed on,dispatched", got)
	}

	// The agent moves again, to d, which is dead: nothing runs, and the request says so.
	r2 := a.submit(t, "uptime")
	if _, err := a.svc.Approve(ctx, r2.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	b.svc.servers.(fakeServers)["web-1"] = heldBy("d")
	b.svc.Changed(ctx, r2.ID)
	got, _ := a.svc.Get(ctx, r2.ID)
	if got.Status != StatusFailed || !strings.Contains(got.Detail, "could not be handed on") || !strings.Contains(got.Detail, "nothing ran") {
		t.Fatalf("handed on to a dead replica: %+v; want failed, saying nothing ran", got)
	}
	if b.out.count() != 0 || c.out.count() != 1 {
		t.Fatal("sent something for the request that failed")
	}
}

// The pending limit holds across replicas: requests of one token asked at
// two replicas at once are accepted up to the limit, no more.
func TestPendingCapAcrossReplicas(t *testing.T) {
	a, b := replicas(t, Config{Reread: time.Hour})
	submitAtOnce(t, a.svc, b.svc)
}
