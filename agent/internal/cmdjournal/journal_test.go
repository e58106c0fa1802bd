//go:build unix

package cmdjournal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/agent/internal/runner"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// clock is a settable time for the journal under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// deadPID is above any pid_max, so signal 0 to it fails with ESRCH.
const deadPID = 1 << 30

func openAt(t *testing.T, dir string, c *clock, bootID string) (*Journal, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	j, err := open(dir, slog.New(slog.NewTextHandler(&logs, nil)), c.now, bootID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, &logs
}

func entry(t *testing.T, j *Journal, id string) Entry {
	t.Helper()
	for _, e := range j.Unacked() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no entry %s", id)
	return Entry{}
}

func TestAcceptTwice(t *testing.T) {
	j, _ := openAt(t, t.TempDir(), newClock(), "boot-1")
	if err := j.Accept("cmd-1"); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"accepted", "started", "exited"} {
		switch state {
		case "started":
			j.Started("cmd-1", 123)
		case "exited":
			j.Finished("cmd-1", runner.Result{ExitCode: 0}, nil, nil)
		}
		if err := j.Accept("cmd-1"); !errors.Is(err, ErrSeen) {
			t.Errorf("accept again while %s: got %v; want ErrSeen", state, err)
		}
	}
	if err := j.Accept(""); err == nil {
		t.Error("accept of an empty id: got nil; want an error")
	}
}

func TestLifecycleErrors(t *testing.T) {
	j, _ := openAt(t, t.TempDir(), newClock(), "boot-1")
	if err := j.Started("never", 1); err == nil || !strings.Contains(err.Error(), "journal: started never: it was never accepted") {
		t.Errorf("started without accept: got %v", err)
	}
	j.Accept("a")
	j.Finished("a", runner.Result{}, nil, nil)
	if err := j.Started("a", 1); err == nil || !strings.Contains(err.Error(), "it is exited") {
		t.Errorf("started after finished: got %v", err)
	}
	if err := j.Finished("a", runner.Result{}, nil, nil); err == nil || !strings.Contains(err.Error(), "it is exited") {
		t.Errorf("finished twice: got %v", err)
	}
	j.Forget("a")
	if err := j.Finished("a", runner.Result{}, nil, nil); err == nil || !strings.Contains(err.Error(), "it was forgotten") {
		t.Errorf("finished after forget: got %v", err)
	}
}

func TestFinishedRecordsTheResult(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 100<<10)
	copy(long, "HEAD")
	copy(long[len(long)-4:], "TAIL")
	tests := []struct {
		name       string
		result     runner.Result
		kept       []byte
		wantReason string
		wantKept   int
	}{
		{name: "exit code", result: runner.Result{ExitCode: 3, Duration: 1500 * time.Millisecond, StdoutTotal: 5}, kept: []byte("hello"), wantKept: 5},
		{name: "timed out", result: runner.Result{ExitCode: -1, TimedOut: true}},
		{name: "canceled", result: runner.Result{ExitCode: -1, Canceled: true}, wantReason: "canceled"},
		{name: "could not start", result: runner.Result{ExitCode: -1, Err: errors.New(`run as "bob": user: unknown user bob`)}, wantReason: `could not start: run as "bob": user: unknown user bob`},
		{name: "kept output bounded", result: runner.Result{StdoutTotal: uint64(len(long))}, kept: long, wantKept: runner.HeadBytes + runner.TailBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			j, _ := openAt(t, dir, newClock(), "boot-1")
			j.Accept("c")
			if tt.result.Err == nil {
				j.Started("c", 42)
			}
			if err := j.Finished("c", tt.result, tt.kept, nil); err != nil {
				t.Fatal(err)
			}
			j.Close()
			j, _ = openAt(t, dir, newClock(), "boot-1") // what is on disk
			e := entry(t, j, "c")
			if e.State != Exited || e.ExitCode != tt.result.ExitCode || e.TimedOut != tt.result.TimedOut || e.Reason != tt.wantReason ||
				e.DurationMs != tt.result.Duration.Milliseconds() || e.StdoutTotal != tt.result.StdoutTotal || len(e.StdoutKept) != tt.wantKept {
				t.Errorf("got %+v (kept %d); want exited, code %d, reason %q, kept %d", e, len(e.StdoutKept), tt.result.ExitCode, tt.wantReason, tt.wantKept)
			}
			if tt.wantKept > 0 && (!bytes.HasPrefix(e.StdoutKept, tt.kept[:4]) || !bytes.HasSuffix(e.StdoutKept, tt.kept[len(tt.kept)-4:])) {
				t.Errorf("kept %q…%q; want the head and the tail", e.StdoutKept[:4], e.StdoutKept[len(e.StdoutKept)-4:])
			}
		})
	}
}

func TestSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	j, _ := openAt(t, dir, c, "boot-1")
	j.Accept("done")
	j.Started("done", deadPID)
	j.Finished("done", runner.Result{ExitCode: 7, StdoutTotal: 3}, []byte("out"), []byte("err"))
	j.Accept("forgotten")
	j.Finished("forgotten", runner.Result{}, nil, nil)
	j.Forget("forgotten")
	j.Close()

	j, _ = openAt(t, dir, c, "boot-1")
	e := entry(t, j, "done")
	if e.State != Exited || e.ExitCode != 7 || string(e.StdoutKept) != "out" || string(e.StderrKept) != "err" || e.PID != deadPID {
		t.Errorf("after reopen got %+v; want exited 7 with its output", e)
	}
	for _, id := range []string{"done", "forgotten"} {
		if err := j.Accept(id); !errors.Is(err, ErrSeen) {
			t.Errorf("accept %s after reopen: got %v; want ErrSeen", id, err)
		}
	}
	if got := len(j.Unacked()); got != 1 {
		t.Errorf("%d unacked; want 1", got)
	}
}

func TestRestartMidRun(t *testing.T) {
	tests := []struct {
		name       string
		pid        int // 0: accepted, never started
		bootID     string
		wantReason string
	}{
		{name: "accepted, not started", wantReason: reasonRestarted, bootID: "boot-1"},
		{name: "started, process gone", pid: deadPID, bootID: "boot-1", wantReason: reasonRestarted},
		{name: "started, process alive", pid: os.Getpid(), bootID: "boot-1", wantReason: fmt.Sprintf("still running after the agent restarted (pid %d); its result cannot be collected", os.Getpid())},
		{name: "started, then a reboot", pid: os.Getpid(), bootID: "boot-2", wantReason: reasonRebooted},
		{name: "no boot id to compare", pid: deadPID, bootID: "", wantReason: reasonRestarted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			j, _ := openAt(t, dir, newClock(), "boot-1")
			j.Accept("c")
			if tt.pid != 0 {
				j.Started("c", tt.pid)
			}
			j.Close() // the agent dies here
			j, _ = openAt(t, dir, newClock(), tt.bootID)
			e := entry(t, j, "c")
			if e.State != Unknown || e.Reason != tt.wantReason || e.ExitCode != -1 || e.FinishedAt.IsZero() {
				t.Errorf("got %+v; want unknown with %q", e, tt.wantReason)
			}
			if err := j.Accept("c"); !errors.Is(err, ErrSeen) {
				t.Errorf("accept after restart: got %v; want ErrSeen", err)
			}
		})
	}
}

func TestForget(t *testing.T) {
	c := newClock()
	j, logs := openAt(t, t.TempDir(), c, "boot-1")
	j.Accept("ended")
	j.Finished("ended", runner.Result{}, nil, nil)
	j.Accept("running")
	j.Started("running", deadPID)
	if err := j.Forget("ended", "running", "never-here"); err != nil {
		t.Fatal(err)
	}
	if got := j.Unacked(); len(got) != 1 || got[0].ID != "running" {
		t.Errorf("unacked %+v; want only the running command", got)
	}
	if !strings.Contains(logs.String(), "still running; kept") {
		t.Errorf("log %q; want a warning about the running command", logs.String())
	}
	for _, id := range []string{"ended", "never-here"} {
		if err := j.Accept(id); !errors.Is(err, ErrSeen) {
			t.Errorf("accept %s after forget: got %v; want ErrSeen", id, err)
		}
	}
	if err := j.Forget("ended"); err != nil {
		t.Errorf("forget twice: %v", err)
	}
}

func TestSeenIsBounded(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	j, _ := openAt(t, dir, c, "boot-1")
	j.limits.seen = 3
	j.Forget("old")
	c.add(time.Hour)
	j.Forget("a", "b", "c") // "old" is the oldest of four: dropped
	if err := j.Accept("old"); err != nil {
		t.Errorf("accept of an id past the count bound: %v; want accepted", err)
	}
	if err := j.Accept("a"); !errors.Is(err, ErrSeen) {
		t.Errorf("accept of a remembered id: got %v; want ErrSeen", err)
	}
	j.Close()

	c.add(seenFor + time.Minute)
	j, _ = openAt(t, dir, c, "boot-1") // pruned by age on open
	for _, id := range []string{"a", "b", "c"} {
		if err := j.Accept(id); err != nil {
			t.Errorf("accept %s after %s: %v; want accepted", id, seenFor, err)
		}
	}
}

func TestFullJournal(t *testing.T) {
	j, logs := openAt(t, t.TempDir(), newClock(), "boot-1")
	j.limits.entries = 3
	j.Accept("r1")
	j.Accept("e1")
	j.Finished("e1", runner.Result{}, nil, nil)
	j.Accept("r2")
	if err := j.Accept("r3"); err != nil { // drops e1
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "journal full") || !errors.Is(j.Accept("e1"), ErrSeen) {
		t.Errorf("got log %q; want the drop logged and e1 still refused", logs.String())
	}
	if err := j.Accept("r4"); err == nil || !strings.Contains(err.Error(), "3 commands are already running") {
		t.Errorf("accept with every entry running: got %v", err)
	}
}

func TestKeptOutputBudget(t *testing.T) {
	c := newClock()
	j, _ := openAt(t, t.TempDir(), c, "boot-1")
	j.limits.keptBytes = 100 << 10
	out := bytes.Repeat([]byte("o"), 30<<10)
	for i := range 5 {
		id := fmt.Sprintf("c%d", i)
		c.add(time.Second)
		j.Accept(id)
		j.Finished(id, runner.Result{StdoutTotal: uint64(len(out))}, out, nil)
	}
	total := 0
	for _, e := range j.Unacked() {
		total += len(e.StdoutKept)
		if e.StdoutTotal != uint64(len(out)) {
			t.Errorf("%s: total %d; want it kept", e.ID, e.StdoutTotal)
		}
	}
	if e := entry(t, j, "c0"); total > 100<<10 || e.StdoutKept != nil || !strings.Contains(e.Reason, "output not kept") {
		t.Errorf("kept %d bytes, oldest %+v; want at most 100 KiB, the oldest without output", total, e.Reason)
	}
	if e := entry(t, j, "c4"); len(e.StdoutKept) != len(out) {
		t.Errorf("newest kept %d bytes; want all %d", len(e.StdoutKept), len(out))
	}
}

// TestKeptOutputDefaultBudget: with the production bound, entries that
// each keep all they may (head and tail of both streams) hold at most
// 1 MiB in all; the oldest lose their output first and say why.
func TestKeptOutputDefaultBudget(t *testing.T) {
	if maxKeptBytes != 1<<20 {
		t.Fatalf("maxKeptBytes %d; want 1 MiB", maxKeptBytes)
	}
	c := newClock()
	j, _ := openAt(t, t.TempDir(), c, "boot-1")
	out := bytes.Repeat([]byte("o"), runner.HeadBytes+runner.TailBytes)
	const n = 40 // 40 × 64 KiB = 2.5 MiB offered
	for i := range n {
		id := fmt.Sprintf("c%02d", i)
		c.add(time.Second)
		j.Accept(id)
		if err := j.Finished(id, runner.Result{StdoutTotal: 1 << 30, StderrTotal: 1 << 30}, out, out); err != nil {
			t.Fatal(err)
		}
	}
	total, stripped := 0, 0
	es := j.Unacked()
	for i, e := range es {
		kept := len(e.StdoutKept) + len(e.StderrKept)
		total += kept
		if kept == 0 {
			stripped++
			if !strings.Contains(e.Reason, "output not kept: the agent's journal holds at most 1024 KiB of output") {
				t.Errorf("%s lost its output with reason %q", e.ID, e.Reason)
			}
			if i > 0 && len(es[i-1].StdoutKept) > 0 {
				t.Errorf("%s lost its output while the older %s kept its", e.ID, es[i-1].ID)
			}
		}
	}
	if want := n - (1<<20)/len(out)/2; total > 1<<20 || stripped != want {
		t.Errorf("kept %d bytes, %d entries stripped; want at most 1 MiB, %d stripped", total, stripped, want)
	}
}

// TestKeptOutputBoundedOnOpen: a journal written under a larger bound
// (an older agent kept 4 MiB) is cut to the bound when it is opened.
func TestKeptOutputBoundedOnOpen(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	j, _ := openAt(t, dir, c, "boot-1")
	j.limits.keptBytes = 4 << 20
	out := bytes.Repeat([]byte("o"), runner.HeadBytes+runner.TailBytes)
	for i := range 40 {
		id := fmt.Sprintf("c%02d", i)
		c.add(time.Second)
		j.Accept(id)
		j.Finished(id, runner.Result{}, out, out)
	}
	j.Close()
	j, _ = openAt(t, dir, c, "boot-1")
	total := 0
	for _, e := range j.Unacked() {
		total += len(e.StdoutKept) + len(e.StderrKept)
	}
	if total > maxKeptBytes || total < maxKeptBytes-2*len(out) {
		t.Errorf("kept %d bytes after reopening; want at most %d, and no less than needed", total, maxKeptBytes)
	}
	if e := entry(t, j, "c00"); e.StdoutKept != nil || !strings.Contains(e.Reason, "output not kept") {
		t.Errorf("oldest: kept %d, reason %q; want its output dropped, saying why", len(e.StdoutKept), e.Reason)
	}
}

func TestLongReasonBounded(t *testing.T) {
	j, _ := openAt(t, t.TempDir(), newClock(), "boot-1")
	j.Accept("c")
	j.Finished("c", runner.Result{ExitCode: -1, Err: errors.New(strings.Repeat("é", 3000))}, nil, nil)
	r := entry(t, j, "c").Reason
	if len(r) > maxReasonBytes || !utf8.ValidString(r) || !strings.HasPrefix(r, "could not start: éé") || !strings.HasSuffix(r, "é…") {
		t.Errorf("reason of %d bytes %q…; want at most %d, valid UTF-8, cut with …", len(r), r[:40], maxReasonBytes)
	}
}

// TestHelloFitsTheCoordinatorLimit: with the journal at every bound at
// once (maxEntries ended entries, each offered the most output it may
// keep and the longest reason), the hello that carries Unacked, built as
// the agent's link builds it, stays under the coordinator's 4 MiB message
// limit.
func TestHelloFitsTheCoordinatorLimit(t *testing.T) {
	const coordinatorLimit = 4 << 20 // coordinator/internal/agentapi.MaxMessageBytes
	c := newClock()
	j, _ := openAt(t, t.TempDir(), c, "boot-1")
	out := bytes.Repeat([]byte("o"), runner.HeadBytes+runner.TailBytes)
	reason := boundReason("could not start: " + strings.Repeat("x", 4000))
	// Filled directly: a thousand durable saves of a megabyte file would
	// make this test slow for no gain; boundKept is what Finished runs.
	for i := range maxEntries {
		c.add(time.Second)
		id := fmt.Sprintf("cmd_%020x", i)
		j.entries[id] = &Entry{ID: id, State: Exited, AcceptedAt: c.now(), StartedAt: c.now(), FinishedAt: c.now(), PID: 1 << 22,
			ExitCode: -1, TimedOut: true, DurationMs: 600_000, Reason: reason,
			StdoutTotal: 1 << 40, StderrTotal: 1 << 40, StdoutKept: out, StderrKept: out}
		j.boundKept()
	}
	hello := &gridcityv1.Hello{Name: strings.Repeat("n", 253), AgentVersion: "v0.0.0-dev", CommandsEnabled: true, RunAs: "root",
		Capabilities: []string{"state", "commands"}}
	kept := 0
	for _, e := range j.Unacked() {
		kept += len(e.StdoutKept) + len(e.StderrKept)
		hello.Journal = append(hello.Journal, &gridcityv1.CommandEvent{RequestId: e.ID, Reason: e.Reason,
			Kind: gridcityv1.CommandEvent_KIND_EXITED, ExitCode: int32(e.ExitCode), TimedOut: e.TimedOut, DurationMs: e.DurationMs,
			StdoutTotal: e.StdoutTotal, StderrTotal: e.StderrTotal, StdoutKept: e.StdoutKept, StderrKept: e.StderrKept,
			AtUnixMs: e.FinishedAt.UnixMilli()})
	}
	size := proto.Size(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Hello{Hello: hello}})
	t.Logf("%d entries, %d bytes of output kept: hello of %d bytes (%.2f MiB)", len(hello.Journal), kept, size, float64(size)/(1<<20))
	if kept > maxKeptBytes || size >= coordinatorLimit*3/4 {
		t.Errorf("kept %d bytes, hello %d bytes; want at most %d kept and the hello well under %d", kept, size, maxKeptBytes, coordinatorLimit)
	}
}

func TestDamagedFile(t *testing.T) {
	tests := []struct {
		name        string
		content     string
		wantUnknown []string
		wantSeen    []string
	}{
		{name: "not json", content: "\x00\x01 garbage"},
		{name: "empty", content: ""},
		{
			name:        "truncated",
			content:     `{"version":1,"entries":[{"id":"cmd-1","state":"exited","exitCode":0},{"id":"cmd\"2","state":"started","pid":12`,
			wantUnknown: []string{"cmd-1", `cmd"2`},
		},
		{
			name:        "bad state",
			content:     `{"version":1,"entries":[{"id":"cmd-1","state":"running"}],"seen":[{"id":"old-1","at":"2026-03-01T00:00:00Z"}]}`,
			wantUnknown: []string{"cmd-1"}, wantSeen: []string{"old-1"},
		},
		{name: "other version", content: `{"version":9,"entries":[{"id":"cmd-9","state":"exited"}]}`, wantUnknown: []string{"cmd-9"}},
		{name: "duplicate entry", content: `{"version":1,"entries":[{"id":"x","state":"exited"},{"id":"x","state":"exited"}]}`, wantUnknown: []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, fileName), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			j, logs := openAt(t, dir, newClock(), "boot-1")
			aside, _ := filepath.Glob(filepath.Join(dir, fileName+".damaged-*"))
			if len(aside) != 1 || !strings.Contains(logs.String(), "journal damaged") || !strings.Contains(logs.String(), aside[0]) {
				t.Fatalf("moved aside %v, log %q; want one file and a log line naming it", aside, logs.String())
			}
			if b, _ := os.ReadFile(aside[0]); string(b) != tt.content {
				t.Errorf("the damaged file was changed")
			}
			var unknown []string
			for _, e := range j.Unacked() {
				if e.State != Unknown || e.Reason != reasonDamaged {
					t.Errorf("salvaged %+v; want unknown with %q", e, reasonDamaged)
				}
				unknown = append(unknown, e.ID)
			}
			want := slices.Sorted(slices.Values(tt.wantUnknown))
			if fmt.Sprint(unknown) != fmt.Sprint(want) && len(unknown)+len(want) > 0 {
				t.Errorf("unknown %q; want %q (by id)", unknown, want)
			}
			for _, id := range append(tt.wantUnknown, tt.wantSeen...) {
				if err := j.Accept(id); !errors.Is(err, ErrSeen) {
					t.Errorf("accept salvaged %s: got %v; want ErrSeen", id, err)
				}
			}
			if err := j.Accept("fresh"); err != nil {
				t.Errorf("accept a new id: %v", err)
			}
		})
	}
}

func TestOversizedFileSetAside(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, fileName))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(maxFileBytes + 1) // sparse
	f.Close()
	j, logs := openAt(t, dir, newClock(), "boot-1")
	if !strings.Contains(logs.String(), "larger than the journal can be") || len(j.Unacked()) != 0 {
		t.Errorf("log %q; want the size named", logs.String())
	}
}

func TestFileOnDisk(t *testing.T) {
	dir := t.TempDir()
	j, _ := openAt(t, dir, newClock(), "boot-1")
	j.Accept("c")
	fi, err := os.Stat(filepath.Join(dir, fileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("journal file: %v, %v; want mode 0600", fi, err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, n := range names {
		if b := filepath.Base(n); b != fileName && b != lockName {
			t.Errorf("left behind: %s", b)
		}
	}
}

func TestOneProcessPerDirectory(t *testing.T) {
	dir := t.TempDir()
	j, _ := openAt(t, dir, newClock(), "boot-1")
	j.Accept("running")
	j.Started("running", os.Getpid())
	if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), "in use by another gridcity-agent") {
		t.Fatalf("second open: got %v; want refused", err)
	}
	// The refused open did not touch the first one's running command.
	if e := entry(t, j, "running"); e.State != Started {
		t.Errorf("got %s; want started", e.State)
	}
	j.Close()
	j2, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	j2.Close()
}

func TestConcurrentUse(t *testing.T) {
	j, _ := openAt(t, t.TempDir(), newClock(), "boot-1")
	var wg sync.WaitGroup
	var won atomic.Int32
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if j.Accept("contested") == nil {
				won.Add(1)
			}
			for i := range 10 {
				id := fmt.Sprintf("g%d-%d", g, i)
				if err := j.Accept(id); err != nil {
					t.Error(err)
					return
				}
				j.Started(id, deadPID)
				j.Unacked()
				j.Finished(id, runner.Result{}, []byte("out"), nil)
				if i%2 == 0 {
					j.Forget(id)
				}
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d goroutines accepted the same id; want 1", won.Load())
	}
	if got := len(j.Unacked()); got != 8*5+1 {
		t.Errorf("%d unacked; want %d", got, 8*5+1)
	}
}
