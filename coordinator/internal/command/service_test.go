package command

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// fakeServers and recorder stand in for the fleet and the agent stream: the
// boundary to agents, which users never see.
type fakeServers map[string]ServerInfo

func (f fakeServers) ServerInfo(n string) ServerInfo { return f[n] }
func (f fakeServers) Names() []string {
	var out []string
	for n := range f {
		out = append(out, n)
	}
	return out
}

type recorder struct {
	mu   sync.Mutex
	sent []*gridcityv1.RunCommand
	err  error
}

func (r *recorder) Send(server string, m *gridcityv1.CoordinatorMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.sent = append(r.sent, m.GetRunCommand())
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// clock is an injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// failingAudit makes audit writes of chosen steps fail on demand, with
// the change they record: a forced failure.
type failingAudit struct {
	Store
	mu   sync.Mutex
	fail map[string]bool
}

func (f *failingAudit) failing(steps ...store.AuditEntry) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range steps {
		if f.fail[e.Step] {
			return true
		}
	}
	return false
}

func (f *failingAudit) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	if f.failing(e) {
		return errors.New("disk full")
	}
	return f.Store.AppendAudit(ctx, e)
}

func (f *failingAudit) SwapRequestAudited(ctx context.Context, expect string, r store.RequestRecord, h *store.Handoff, steps ...store.AuditEntry) error {
	if f.failing(steps...) {
		return errors.New("disk full")
	}
	return f.Store.SwapRequestAudited(ctx, expect, r, h, steps...)
}

func (f *failingAudit) CreateRequestLimited(ctx context.Context, r store.RequestRecord, limit int, since time.Time, steps ...store.AuditEntry) (int, error) {
	if f.failing(steps...) {
		return 0, errors.New("disk full")
	}
	return f.Store.CreateRequestLimited(ctx, r, limit, since, steps...)
}

type env struct {
	svc   *Service
	st    *failingAudit
	out   *recorder
	clock *clock
	dir   string
}

var servers = fakeServers{
	"web-1": {Known: true, Online: true, CommandsEnabled: true, RunAs: "root"},
	"app-1": {Known: true, Online: true, CommandsEnabled: true, RunAs: "deploy"},
	"ro-1":  {Known: true, Online: true, CommandsEnabled: false},
	"off-1": {Known: true, Online: false, CommandsEnabled: true, RunAs: "root"},
	"far-1": {Known: true, Online: false, CommandsEnabled: true, RunAs: "root", HeldBy: "10.0.0.2:4600"},
}

func newEnv(t *testing.T, dir string) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: &failingAudit{Store: st, fail: map[string]bool{}}, out: &recorder{}, clock: &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}, dir: dir}
	e.svc = New(Config{Now: e.clock.now}, e.st, servers, e.out, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return e
}

func (e *env) submit(t *testing.T, sub Submission) Request {
	t.Helper()
	if sub.Server == "" {
		sub.Server = "web-1"
	}
	if sub.Command == "" {
		sub.Command = "systemctl restart nginx"
	}
	if sub.Reason == "" {
		sub.Reason = "nginx failed"
	}
	if sub.TimeoutSeconds == 0 {
		sub.TimeoutSeconds = 30
	}
	sub.Client, sub.Token = "claude-code", "laptop"
	r, err := e.svc.Submit(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) steps(t *testing.T, id string) string {
	t.Helper()
	return auditOf(t, e.st, id)
}

func TestSubmitValidation(t *testing.T) {
	e := newEnv(t, "")
	ok := Submission{Server: "web-1", Command: "uptime", Reason: "look", TimeoutSeconds: 10}
	tests := []struct {
		name string
		mod  func(*Submission)
		want string
	}{
		{"unknown server", func(s *Submission) { s.Server = "web-3" }, `unknown server "web-3"; known servers:`},
		{"offline", func(s *Submission) { s.Server = "off-1" }, "is offline"},
		{"on another coordinator", func(s *Submission) { s.Server = "far-1" }, "is connected to another coordinator (10.0.0.2:4600), which this one cannot hand commands to"},
		{"commands off", func(s *Submission) { s.Server = "ro-1" }, "commands: false"},
		{"empty command", func(s *Submission) { s.Command = "  " }, "command is empty"},
		{"NUL", func(s *Submission) { s.Command = "ls\x00" }, "NUL byte"},
		{"no reason", func(s *Submission) { s.Reason = "" }, "reason is empty"},
		{"timeout 0", func(s *Submission) { s.TimeoutSeconds = 0 }, "use 1 to 600"},
		{"timeout 601", func(s *Submission) { s.TimeoutSeconds = 601 }, "use 1 to 600"},
		{"input without prompt", func(s *Submission) { s.Input = &Input{Secret: true} }, "input.prompt"},
	}
	for _, tt := range tests {
		sub := ok
		tt.mod(&sub)
		if _, err := e.svc.Submit(context.Background(), sub); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want %q", tt.name, err, tt.want)
		}
	}
	if rs, _ := e.svc.History(context.Background(), 10); len(rs) != 0 {
		t.Fatalf("refused submissions were stored: %d", len(rs))
	}
}

func TestApproveDispatchesAfterCommitAndFinishes(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{Input: &Input{Prompt: "registry token", Secret: true}})
	if r.Status != StatusPending || r.Sudo {
		t.Fatalf("got %+v", r)
	}
	if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{Note: "go"}); !errors.Is(err, ErrInputRequired) {
		t.Fatalf("got %v; want ErrInputRequired", err)
	}
	got, err := e.svc.Approve(ctx, r.ID, "alice", Approval{Note: "go", Input: []byte("s3cret"), SudoPassword: []byte("pw")})
	if err != nil || got.Status != StatusDispatched {
		t.Fatalf("approve: %+v %v", got, err)
	}
	if e.out.count() != 1 || string(e.out.sent[0].StdinSecret) != "s3cret" || e.out.sent[0].TimeoutSeconds != 30 {
		t.Fatalf("dispatched %+v", e.out.sent)
	}
	if _, err := e.svc.Approve(ctx, r.ID, "bob", Approval{Input: []byte("x")}); !errors.Is(err, ErrDecided) {
		t.Fatalf("second approval: got %v; want ErrDecided", err)
	}
	ev := func(k gridcityv1.CommandEvent_Kind, f func(*gridcityv1.CommandEvent)) {
		c := &gridcityv1.CommandEvent{RequestId: r.ID, Kind: k}
		if f != nil {
			f(c)
		}
		e.svc.HandleEvent(ctx, "web-1", c)
	}
	ev(gridcityv1.CommandEvent_KIND_ACCEPTED, nil)
	ev(gridcityv1.CommandEvent_KIND_STARTED, nil)
	ev(gridcityv1.CommandEvent_KIND_OUTPUT, func(c *gridcityv1.CommandEvent) { c.Data = []byte("restarted\n") })
	ev(gridcityv1.CommandEvent_KIND_OUTPUT, func(c *gridcityv1.CommandEvent) {
		c.Stream, c.Data = gridcityv1.CommandEvent_STREAM_STDERR, []byte("warning\n")
	})
	ev(gridcityv1.CommandEvent_KIND_EXITED, func(c *gridcityv1.CommandEvent) {
		c.ExitCode, c.DurationMs, c.StdoutTotal, c.StderrTotal = 3, 1200, 10, 8
	})
	done, _ := e.svc.Get(ctx, r.ID)
	if done.Status != StatusCompleted || *done.ExitCode != 3 || done.Stdout.Text != "restarted\n" || done.Stderr.Text != "warning\n" || done.Note != "go" || done.DecidedBy != "alice" {
		t.Fatalf("finished request %+v", done)
	}
	if got := e.steps(t, r.ID); got != "requested,approved,dispatched,accepted,started,finished" {
		t.Fatalf("audit steps %s", got)
	}
	// Neither the input nor the sudo password is in the store.
	all, _ := e.st.Audit(ctx, r.ID, 100)
	for _, a := range all {
		if strings.Contains(string(a.Detail), "s3cret") || strings.Contains(string(a.Detail), `"pw"`) {
			t.Fatalf("a secret reached the audit: %s", a.Detail)
		}
	}
	rec, _ := e.st.Request(ctx, r.ID)
	if strings.Contains(string(rec.Body), "s3cret") {
		t.Fatal("the secret reached the stored request")
	}
}

func TestDenyWithNote(t *testing.T) {
	e := newEnv(t, "")
	r := e.submit(t, Submission{})
	got, err := e.svc.Deny(context.Background(), r.ID, "alice", "not during business hours")
	if err != nil || got.Status != StatusDenied || got.Note != "not during business hours" {
		t.Fatalf("got %+v %v", got, err)
	}
	if e.out.count() != 0 {
		t.Fatal("a denied command was dispatched")
	}
	if got := e.steps(t, r.ID); got != "requested,denied" {
		t.Fatalf("steps %s", got)
	}
}

func TestExpiryAfterFiveMinutes(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{})
	e.clock.add(4*time.Minute + 59*time.Second)
	e.svc.Sweep(ctx)
	if got, _ := e.svc.Get(ctx, r.ID); got.Status != StatusPending {
		t.Fatalf("expired early: %s", got.Status)
	}
	e.clock.add(time.Second)
	e.svc.Sweep(ctx)
	got, _ := e.svc.Get(ctx, r.ID)
	if got.Status != StatusDenied || !strings.Contains(got.Note, "nobody approved it within 5m0s") {
		t.Fatalf("got %+v", got)
	}
	if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{}); !errors.Is(err, ErrDecided) {
		t.Fatalf("approving an expired request: %v", err)
	}
	if got := e.steps(t, r.ID); got != "requested,expired" {
		t.Fatalf("steps %s", got)
	}
	// Approving exactly at expiry, before a sweep, also finds it expired.
	r2 := e.submit(t, Submission{})
	e.clock.add(Expiry)
	if _, err := e.svc.Approve(ctx, r2.ID, "alice", Approval{}); !errors.Is(err, ErrDecided) {
		t.Fatalf("got %v; want ErrDecided after expiry", err)
	}
}

// In a bubble: the decision comes once Wait is blocked (synctest.Wait),
// and Wait's timers run on the bubble's clock.
func TestWaitReturnsWaitingThenResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, "")
		ctx := context.Background()
		r := e.submit(t, Submission{})
		start := time.Now()
		got, err := e.svc.Wait(ctx, r.ID, 200*time.Millisecond, nil)
		if err != nil || got.Status != StatusPending || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("got %s %v after %s; want pending after the wait", got.Status, err, time.Since(start))
		}
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			got, err = e.svc.Wait(ctx, r.ID, 10*time.Second, nil)
		}()
		synctest.Wait() // Wait is blocked on the request
		e.svc.Deny(ctx, r.ID, "alice", "no")
		<-waited
		if err != nil || got.Status != StatusDenied {
			t.Fatalf("got %s %v; want denied as soon as decided", got.Status, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("Wait did not wake on the decision")
		}
		if _, err := e.svc.Wait(ctx, "cmd_nope", time.Second, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v; want ErrNotFound", err)
		}
	})
}

func TestAuditFailureStopsDispatch(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	r := e.submit(t, Submission{})
	e.st.fail["dispatched"] = true
	got, err := e.svc.Approve(ctx, r.ID, "alice", Approval{})
	if err == nil || got.Status != StatusFailed || !strings.Contains(got.Detail, "audit log could not be written") {
		t.Fatalf("got %+v %v", got, err)
	}
	if e.out.count() != 0 {
		t.Fatal("dispatched although its audit row failed")
	}
	// And a failing approval row stops everything before that.
	r2 := e.submit(t, Submission{})
	e.st.fail["approved"] = true
	if _, err := e.svc.Approve(ctx, r2.ID, "alice", Approval{}); err == nil {
		t.Fatal("approved without an audit row")
	}
	if got, _ := e.svc.Get(ctx, r2.ID); got.Status != StatusPending || e.out.count() != 0 {
		t.Fatalf("got %s, %d sent; want still pending, nothing sent", got.Status, e.out.count())
	}
}

func TestSudoFlag(t *testing.T) {
	e := newEnv(t, "")
	for cmd, want := range map[string]bool{"sudo systemctl restart x": true, "ls && sudo -n true": true, "echo pseudo": false, "sudoku": false} {
		r := e.submit(t, Submission{Server: "app-1", Command: cmd})
		if r.Sudo != want {
			t.Errorf("%q: sudo=%v; want %v", cmd, r.Sudo, want)
		}
	}
	if r := e.submit(t, Submission{Server: "web-1", Command: "sudo ls"}); r.Sudo {
		t.Error("sudo flagged although the agent runs as root")
	}
}

// At most once: after a reconnect the agent's journal settles what it ran;
// what it never received fails and is never sent again.
func TestReconnectSettlesFromJournal(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	ran := e.submit(t, Submission{})
	lost := e.submit(t, Submission{})
	running := e.submit(t, Submission{})
	for _, r := range []Request{ran, lost, running} {
		if _, err := e.svc.Approve(ctx, r.ID, "alice", Approval{}); err != nil {
			t.Fatal(err)
		}
	}
	e.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: running.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED})
	forget := e.svc.Reconnected(ctx, "web-1", e.clock.now().Add(time.Second), []*gridcityv1.CommandEvent{
		{RequestId: ran.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, ExitCode: 0, StdoutTotal: 3, StdoutKept: []byte("ok\n")},
		{RequestId: running.ID, Kind: gridcityv1.CommandEvent_KIND_STARTED},
	})
	if len(forget) != 1 || forget[0] != ran.ID {
		t.Fatalf("forget %v; want only %s", forget, ran.ID)
	}
	if got, _ := e.svc.Get(ctx, ran.ID); got.Status != StatusCompleted || got.Stdout.Text != "ok\n" {
		t.Fatalf("ran: %+v", got)
	}
	if got, _ := e.svc.Get(ctx, lost.ID); got.Status != StatusFailed || !strings.Contains(got.Detail, "never received") {
		t.Fatalf("lost: %+v", got)
	}
	if got, _ := e.svc.Get(ctx, running.ID); got.Status != StatusRunning {
		t.Fatalf("still running: %s", got.Status)
	}
	if e.out.count() != 3 {
		t.Fatalf("%d sends; want 3 (nothing resent)", e.out.count())
	}
}

// Across a coordinator restart: pending requests survive and can be waited
// for and approved; one approved but not dispatched fails rather than
// running late; one dispatched whose agent never comes back ends unknown.
func TestCoordinatorRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir)
	ctx := context.Background()
	pending := e.submit(t, Submission{})
	dispatched := e.submit(t, Submission{})
	e.svc.Approve(ctx, dispatched.ID, "alice", Approval{})
	approvedOnly := e.submit(t, Submission{})
	// Simulate a crash between the approval row and dispatch.
	e.st.fail["dispatched"] = false
	r, _ := e.svc.Get(ctx, approvedOnly.ID)
	r.Status = StatusApproved
	if err := e.svc.commit(ctx, StatusPending, r, step{name: "approved", actor: "approver:alice"}); err != nil {
		t.Fatal(err)
	}

	e2 := newEnv(t, dir)
	e2.clock.t = e.clock.now()
	e2.svc.Sweep(ctx)
	if got, _ := e2.svc.Get(ctx, approvedOnly.ID); got.Status != StatusFailed || !strings.Contains(got.Detail, "between approval and dispatch") {
		t.Fatalf("approved, not dispatched: %+v", got)
	}
	got, err := e2.svc.Wait(ctx, pending.ID, 50*time.Millisecond, nil)
	if err != nil || got.Status != StatusPending {
		t.Fatalf("wait after restart: %s %v", got.Status, err)
	}
	if _, err := e2.svc.Approve(ctx, pending.ID, "alice", Approval{}); err != nil {
		t.Fatal(err)
	}
	e2.clock.add(30*time.Second + 2*time.Minute + time.Second)
	e2.svc.Sweep(ctx)
	if got, _ := e2.svc.Get(ctx, dispatched.ID); got.Status != StatusUnknown || !strings.Contains(got.Detail, "may or may not have run") {
		t.Fatalf("dispatched, agent never back: %+v", got)
	}
}

func TestOutputTrimming(t *testing.T) {
	var st stream
	// 100 KB in 1 KB chunks: whole for the audit, head 8 KB + tail 24 KB for the AI.
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for i := range 100 {
		st.add(uint64(i*1024), line)
	}
	out := st.result(100 * 1024)
	if out.Omitted != 100*1024-HeadBytes-TailBytes || !strings.Contains(out.Text, "bytes left out") {
		t.Fatalf("omitted %d", out.Omitted)
	}
	if len(st.kept(100*1024)) != 100*1024 {
		t.Fatalf("audit kept %d bytes; want all", len(st.kept(100*1024)))
	}
	// The agent's forwarding: the first AuditBytes, then only a tail chunk.
	var big stream
	big.add(0, make([]byte, AuditBytes))
	big.add(50<<20-TailBytes, []byte(strings.Repeat("t", TailBytes)))
	out = big.result(50 << 20)
	if out.Omitted != 50<<20-HeadBytes-TailBytes || !strings.HasSuffix(out.Text, strings.Repeat("t", TailBytes)) {
		t.Fatalf("omitted %d", out.Omitted)
	}
	if k := big.kept(50 << 20); !strings.Contains(k, "more bytes not kept") {
		t.Fatal("audit copy does not say it was cut")
	}
	// Small output comes back whole, with nothing omitted.
	var small stream
	small.add(0, []byte("hello"))
	if out := small.result(5); out.Text != "hello" || out.Omitted != 0 {
		t.Fatalf("got %+v", out)
	}
}

func TestReviewFindings(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	// A bidirectional override would make the card lie about what runs.
	_, err := e.svc.Submit(ctx, Submission{Server: "web-1", Command: "ls -la /var/log \u2067; touch /tmp/x #\u2069", Reason: "r", TimeoutSeconds: 5, Token: "t"})
	if err == nil || !strings.Contains(err.Error(), "U+2067") {
		t.Fatalf("bidi override: got %v", err)
	}
	if _, err := e.svc.Submit(ctx, Submission{Server: "web-1", Command: "echo a\rb", Reason: "r", TimeoutSeconds: 5, Token: "t"}); err == nil {
		t.Fatal("carriage return accepted")
	}
	if _, err := e.svc.Submit(ctx, Submission{Server: "web-1", Command: "printf 'a\\tb\\n'\necho ok\t", Reason: "two\nlines", TimeoutSeconds: 5, Token: "t"}); err != nil {
		t.Fatalf("newlines and tabs refused: %v", err)
	}

	// An agent cannot report on a request that was never dispatched.
	r := e.submit(t, Submission{})
	e.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED, StdoutKept: []byte("forged")})
	if got, _ := e.svc.Get(ctx, r.ID); got.Status != StatusPending {
		t.Fatalf("agent ended a pending request: %s", got.Status)
	}

	// A failed "finished" audit row is an error, so the agent is not told to forget.
	e.svc.Approve(ctx, r.ID, "alice", Approval{})
	e.st.fail["finished"] = true
	if err := e.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED}); err == nil {
		t.Fatal("finished without its audit row and no error")
	}
	e.st.fail["finished"] = false
	if err := e.svc.HandleEvent(ctx, "web-1", &gridcityv1.CommandEvent{RequestId: r.ID, Kind: gridcityv1.CommandEvent_KIND_EXITED}); err != nil {
		t.Fatal(err)
	}
	if got := e.steps(t, r.ID); got != "requested,approved,dispatched,finished" {
		t.Fatalf("steps %s", got)
	}

	// The run-as user the card showed is pinned: if the agent changed, nothing is sent.
	r2 := e.submit(t, Submission{Server: "app-1", Command: "id"})
	servers["app-1"] = ServerInfo{Known: true, Online: true, CommandsEnabled: true, RunAs: "root"}
	defer func() {
		servers["app-1"] = ServerInfo{Known: true, Online: true, CommandsEnabled: true, RunAs: "deploy"}
	}()
	sent := e.out.count()
	got, _ := e.svc.Approve(ctx, r2.ID, "alice", Approval{})
	if got.Status != StatusFailed || !strings.Contains(got.Detail, `now runs commands as "root", not "deploy"`) || e.out.count() != sent {
		t.Fatalf("run-as changed: %+v", got)
	}
	if e.out.sent[len(e.out.sent)-1].RunAs != "root" {
		t.Fatal("RunCommand does not carry the run-as user")
	}
}

func TestPendingCapPerToken(t *testing.T) {
	e := newEnv(t, "")
	for range MaxPendingPerToken {
		e.submit(t, Submission{})
	}
	_, err := e.svc.Submit(context.Background(), Submission{Server: "web-1", Command: "id", Reason: "r", TimeoutSeconds: 5, Token: "laptop"})
	if err == nil || !strings.Contains(err.Error(), "already waiting for a person") {
		t.Fatalf("got %v", err)
	}
	if _, err := e.svc.Submit(context.Background(), Submission{Server: "web-1", Command: "id", Reason: "r", TimeoutSeconds: 5, Token: "other"}); err != nil {
		t.Fatalf("another token was capped too: %v", err)
	}
}
