//go:build unix

package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the agent binary as sudo's
// askpass helper (`<binary> askpass`), the way the agent's main wires it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "askpass" {
		if err := Askpass(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// recorder collects a run's chunks and fails the test if emit is ever
// entered twice at once.
type recorder struct {
	collect
	inEmit atomic.Int32
	onData func(Chunk)
}

func (r *recorder) emit(c Chunk) {
	if r.inEmit.Add(1) != 1 {
		r.t.Errorf("emit called concurrently")
	}
	defer r.inEmit.Add(-1)
	r.collect.emit(c)
	if r.onData != nil {
		r.onData(c)
	}
}

// text returns a small stream's forwarded bytes (one segment, from 0).
func (r *recorder) text(s Stream) string {
	segs := r.segments(s)
	switch {
	case len(segs) == 0:
		return ""
	case len(segs) > 1 || segs[0].offset != 0:
		r.t.Fatalf("%s: %d segments; want one from offset 0", s, len(segs))
	}
	return segs[0].data
}

func runSpec(t *testing.T, ctx context.Context, spec Spec) (Result, *recorder) {
	t.Helper()
	r := &recorder{collect: collect{t: t}}
	if spec.Timeout == 0 {
		spec.Timeout = 30 * time.Second
	}
	res := Run(ctx, spec, r.emit)
	return res, r
}

func TestRun(t *testing.T) {
	self, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	wantDir := runIdentity{home: self.HomeDir}.dir()
	tests := []struct {
		name       string
		command    string
		stdin      []byte
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "success", command: "true", wantCode: 0},
		{name: "exit code", command: "exit 3", wantCode: 3},
		{name: "command not found", command: "gridcity-no-such-command 2>/dev/null", wantCode: 127},
		{name: "killed by a signal", command: "kill -9 $$", wantCode: -1},
		{name: "streams kept apart", command: "echo out; echo err >&2; echo out2; echo err2 >&2", wantStdout: "out\nout2\n", wantStderr: "err\nerr2\n"},
		{name: "agent environment not passed", command: "echo ${GRIDCITY_TEST_TOKEN:-unset}", wantStdout: "unset\n"},
		{name: "login variables", command: `echo "$HOME $USER $LOGNAME"`, wantStdout: fmt.Sprintf("%s %s %s\n", self.HomeDir, self.Username, self.Username)},
		{name: "working directory is home", command: "pwd", wantStdout: wantDir + "\n"},
		{name: "no stdin is /dev/null", command: "cat; echo done", wantStdout: "done\n"},
		{name: "stdin closed after the input", command: "cat", stdin: []byte("line\n"), wantStdout: Mask + "\n"},
		{name: "no terminal", command: "tty || true", wantStdout: "not a tty\n"},
		{name: "own session", command: `cut -d' ' -f6 /proc/$$/stat; echo $$`},
	}
	t.Setenv("GRIDCITY_TEST_TOKEN", "agent-token")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rec := runSpec(t, context.Background(), Spec{ID: "t", Command: tt.command, Stdin: tt.stdin})
			if res.Err != nil {
				t.Fatalf("got error %v", res.Err)
			}
			stdout, stderr := rec.text(Stdout), rec.text(Stderr)
			if tt.name == "own session" {
				// The session id printed is the shell's own pid.
				if f := strings.Fields(stdout); len(f) != 2 || f[0] != f[1] {
					t.Errorf("got session and pid %q; want them equal", stdout)
				}
				return
			}
			if res.ExitCode != tt.wantCode || stdout != tt.wantStdout || stderr != tt.wantStderr {
				t.Errorf("got code %d, stdout %q, stderr %q; want %d, %q, %q", res.ExitCode, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if res.StdoutTotal != uint64(len(stdout)) || res.StderrTotal != uint64(len(stderr)) {
				t.Errorf("got totals %d/%d; want %d/%d", res.StdoutTotal, res.StderrTotal, len(stdout), len(stderr))
			}
			if string(res.StdoutKept) != stdout || string(res.StderrKept) != stderr {
				t.Errorf("got kept %q/%q; want the whole output", res.StdoutKept, res.StderrKept)
			}
			if res.TimedOut || res.Canceled {
				t.Errorf("got timed out %v, canceled %v; want neither", res.TimedOut, res.Canceled)
			}
		})
	}
}

func TestRunRefusesBadSpecs(t *testing.T) {
	tests := []struct {
		name    string
		spec    Spec
		wantErr string
	}{
		{name: "empty command", spec: Spec{ID: "a", Timeout: time.Second}, wantErr: "command a: the command is empty"},
		{name: "NUL byte", spec: Spec{ID: "a", Command: "echo \x00", Timeout: time.Second}, wantErr: "contains a NUL byte"},
		{name: "timeout too short", spec: Spec{ID: "a", Command: "true", Timeout: 999 * time.Millisecond}, wantErr: "timeout 999ms is outside 1s–10m0s"},
		{name: "timeout too long", spec: Spec{ID: "a", Command: "true", Timeout: 601 * time.Second}, wantErr: "timeout 10m1s is outside"},
		{name: "unknown user", spec: Spec{ID: "a", Command: "true", Timeout: time.Second, RunAs: "gridcity-no-such-user"}, wantErr: `run as "gridcity-no-such-user": user: unknown user gridcity-no-such-user`},
		{name: "sudo password with a line break", spec: Spec{ID: "a", Command: "true", Timeout: time.Second, SudoPassword: []byte("pa\nzq9x")}, wantErr: "the sudo password contains a line break"},
		{name: "askpass path relative", spec: Spec{ID: "a", Command: "true", Timeout: time.Second, SudoPassword: []byte("zq9x-pw"), AskpassPath: "gridcity-agent"}, wantErr: `sudo askpass helper "gridcity-agent": the agent binary's path must be absolute`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := false
			tt.spec.OnStart = func(int) { started = true }
			res := Run(context.Background(), tt.spec, func(Chunk) { t.Error("emit called") })
			if res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) {
				t.Fatalf("got error %v; want %q", res.Err, tt.wantErr)
			}
			if strings.Contains(res.Err.Error(), "zq9x") {
				t.Errorf("error %q shows the password", res.Err)
			}
			if res.ExitCode != -1 || started {
				t.Errorf("got code %d, started %v; want -1 and not started", res.ExitCode, started)
			}
		})
	}
}

// processGone reports whether pid has exited. A zombie counts as gone: it
// runs nothing, and a container's init may never reap it.
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	// The state follows the parenthesised command name.
	s := string(b)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pids parses the pids a command printed, one a line.
func pids(t *testing.T, out string) []int {
	t.Helper()
	var ps []int
	for _, f := range strings.Fields(out) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestRunEndsTheWholeTree(t *testing.T) {
	const grace = 300 * time.Millisecond
	tests := []struct {
		name     string
		command  string
		timeout  time.Duration
		timedOut bool
		// most is how long Run may take.
		most time.Duration
	}{
		{
			// The grandchild ignores SIGTERM and holds the pipes: only the
			// SIGKILL to the group ends it.
			name:    "timeout kills a grandchild that ignores TERM",
			command: `sh -c 'trap "" TERM; echo $$; exec sleep 1000' & wait`,
			timeout: time.Second, timedOut: true, most: time.Second + grace + 2*time.Second,
		},
		{
			// Daemonized but still in the group: no pipes, no parent.
			name:    "timeout kills a detached grandchild in the group",
			command: `(trap "" TERM HUP; exec sleep 1000) </dev/null >/dev/null 2>&1 & echo $!; sleep 1000`,
			timeout: time.Second, timedOut: true, most: time.Second + grace + 2*time.Second,
		},
		{
			name:    "a shell's leftovers go with it",
			command: `sleep 1000 & echo $!; trap "" TERM; (exec sleep 1001) & echo $!; exit 0`,
			timeout: 30 * time.Second, most: grace + 2*time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, rec := runSpec(t, context.Background(), Spec{ID: "t", Command: tt.command, Timeout: tt.timeout, killGrace: grace})
			took := time.Since(start)
			if res.Err != nil || res.TimedOut != tt.timedOut {
				t.Fatalf("got error %v, timed out %v; want none, %v", res.Err, res.TimedOut, tt.timedOut)
			}
			if tt.timedOut && res.ExitCode != -1 {
				t.Errorf("got code %d; want -1 (killed)", res.ExitCode)
			}
			if took > tt.most {
				t.Errorf("Run took %s; want at most %s", took, tt.most)
			}
			ps := pids(t, rec.text(Stdout))
			if len(ps) == 0 {
				t.Fatal("no pid printed")
			}
			for _, p := range ps {
				waitGone(t, p)
			}
		})
	}
}

// TestRunDoesNotHangOnEscapedPipeHolder: a process that left the group
// (setsid) keeps the pipes open and cannot be reached by the group's
// signals; Run stops reading after pipeGrace instead of waiting for it.
func TestRunDoesNotHangOnEscapedPipeHolder(t *testing.T) {
	start := time.Now()
	// The pause lets setsid run before the shell exits and its group is ended.
	res, rec := runSpec(t, context.Background(), Spec{ID: "t", Command: "setsid sleep 1000 & echo $!; sleep 0.5", killGrace: 300 * time.Millisecond})
	took := time.Since(start)
	ps := pids(t, rec.text(Stdout))
	escaped := len(ps) == 1 && !processGone(ps[0])
	for _, p := range ps {
		syscall.Kill(p, syscall.SIGKILL)
	}
	if res.Err != nil || res.ExitCode != 0 || !escaped {
		t.Fatalf("got error %v, code %d, pids %v (escaped %v); want success and one escaped process", res.Err, res.ExitCode, ps, escaped)
	}
	if took < pipeGrace || took > pipeGrace+2*time.Second {
		t.Errorf("Run took %s; want about %s", took, pipeGrace)
	}
}

func TestRunCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recorder{collect: collect{t: t}}
	r.onData = func(c Chunk) {
		if strings.Contains(string(c.Data), "ready") {
			cancel()
		}
	}
	start := time.Now()
	res := Run(ctx, Spec{ID: "t", Command: "echo ready; exec sleep 1000", Timeout: 60 * time.Second}, r.emit)
	if !res.Canceled || res.TimedOut || res.ExitCode != -1 || res.Err != nil {
		t.Errorf("got canceled %v, timed out %v, code %d, error %v; want canceled, -1", res.Canceled, res.TimedOut, res.ExitCode, res.Err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("cancel took %s", took)
	}
}

func TestRunCanceledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Run(ctx, Spec{ID: "t", Command: "echo ran", Timeout: time.Second, OnStart: func(int) { t.Error("started") }}, func(Chunk) { t.Error("output") })
	if !res.Canceled || res.ExitCode != -1 || res.Err != nil {
		t.Errorf("got %+v; want canceled, -1, no error", res)
	}
}

func TestRunOnStartBeforeOutput(t *testing.T) {
	var pid atomic.Int64
	r := &recorder{collect: collect{t: t}}
	r.onData = func(Chunk) {
		if pid.Load() == 0 {
			t.Error("output before OnStart")
		}
	}
	res := Run(context.Background(), Spec{ID: "t", Command: "echo $$", Timeout: 10 * time.Second, OnStart: func(p int) { pid.Store(int64(p)) }}, r.emit)
	if got := strings.TrimSpace(r.text(Stdout)); res.Err != nil || got != strconv.FormatInt(pid.Load(), 10) {
		t.Errorf("shell printed pid %q, OnStart got %d (error %v); want the same", got, pid.Load(), res.Err)
	}
}

func TestRunMasksTheSecret(t *testing.T) {
	const secret = "hunter22"
	tests := []struct {
		name      string
		command   string
		stdin     string
		wantMasks int // in stdout and stderr together
	}{
		{name: "echoed", command: `read s; echo "got $s"; echo "$s" >&2`, stdin: secret + "\n", wantMasks: 2},
		{name: "no trailing newline", command: `cat; echo; cat /dev/null`, stdin: secret, wantMasks: 1},
		{name: "split across writes", command: `read s; printf hunt; sleep 0.3; printf 'er22\n'; printf 'hunter'; sleep 0.3; printf '22'`, stdin: secret + "\n", wantMasks: 2},
		{name: "many times", command: `read s; for i in 1 2 3 4 5 6 7 8 9 10; do printf '%s' "$s"; done`, stdin: secret + "\n", wantMasks: 10},
		{name: "rev", command: `read s; echo "$s" | rev`, stdin: secret + "\n", wantMasks: 1},
		{name: "base64 of echo", command: `read s; echo "$s" | base64`, stdin: secret + "\n", wantMasks: 1},
		{name: "base64url unpadded", command: `read s; printf %s "$s" | basenc --base64url | tr -d =`, stdin: secret + "\n", wantMasks: 1},
		{name: "hex", command: `read s; echo "$s" | xxd -p; printf %s "$s" | xxd -p -u`, stdin: secret + "\n", wantMasks: 2},
		{name: "base64 in a longer stream", command: `read s; printf 'user:%s@host' "$s" | base64 -w0; echo; printf 'u:%s' "$s" | base64 >&2`, stdin: secret + "\n", wantMasks: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rec := runSpec(t, context.Background(), Spec{ID: "t", Command: tt.command, Stdin: []byte(tt.stdin)})
			all := rec.text(Stdout) + rec.text(Stderr)
			if res.Err != nil || strings.Count(all, Mask) != tt.wantMasks {
				t.Errorf("got %q (error %v); want %d masks", all, res.Err, tt.wantMasks)
			}
			if s := fmt.Sprintf("%+v %s %s", res, res.StdoutKept, res.StderrKept); strings.Contains(all, secret) || strings.Contains(s, secret) {
				t.Errorf("the secret shows in %q or %s", all, s)
			}
			for _, form := range []string{"22retnuh", "aHVudGVyMj", "68756e746572", "68756E746572", "aHVudGVyMjI", "h1bnRlcjIy", "odW50ZXIyM"} {
				if strings.Contains(all, form) {
					t.Errorf("a form of the secret, %q, shows in %q", form, all)
				}
			}
		})
	}
}

func TestRunUnreadStdinDoesNotHang(t *testing.T) {
	res, _ := runSpec(t, context.Background(), Spec{ID: "t", Command: "exit 4", Stdin: make([]byte, 4<<20)})
	if res.ExitCode != 4 || res.Err != nil {
		t.Errorf("got code %d, error %v; want 4", res.ExitCode, res.Err)
	}
}

// TestRunHugeOutput: 50 MB on stdout and 3 MB on stderr at once cost about
// AuditBytes+TailBytes each on the wire, with exact totals and offsets.
func TestRunHugeOutput(t *testing.T) {
	const outN, errN = 50_000_000, 3_000_000
	const outLine, errLine = "0123456789\n", "e\n"
	r := &recorder{collect: collect{t: t}}
	res := Run(context.Background(), Spec{
		ID:      "t",
		Command: fmt.Sprintf("yes e | head -c %d >&2 & yes 0123456789 | head -c %d; wait", errN, outN),
		Timeout: 120 * time.Second,
	}, r.emit)
	if res.Err != nil || res.ExitCode != 0 {
		t.Fatalf("got code %d, error %v", res.ExitCode, res.Err)
	}
	for _, s := range []struct {
		which Stream
		n     int
		line  string
		total uint64
		kept  []byte
	}{{Stdout, outN, outLine, res.StdoutTotal, res.StdoutKept}, {Stderr, errN, errLine, res.StderrTotal, res.StderrKept}} {
		if s.total != uint64(s.n) {
			t.Errorf("%s total %d; want %d", s.which, s.total, s.n)
		}
		full := strings.Repeat(s.line, s.n/len(s.line)+1)[:s.n]
		sameSegments(t, r.segments(s.which), wantSegments(full))
		if want := full[:HeadBytes] + full[s.n-TailBytes:]; string(s.kept) != want {
			t.Errorf("%s kept %d bytes; want head and tail, %d", s.which, len(s.kept), len(want))
		}
	}
	var wire int
	for _, c := range r.chunks {
		wire += len(c.Data)
	}
	if want := 2 * (AuditBytes + TailBytes); wire != want {
		t.Errorf("%d bytes forwarded; want %d", wire, want)
	}
}

func TestRunAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root; TestRunAsRefusedWhenNotRoot covers the refusal")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	gids, err := nobody.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	wantDir := runIdentity{home: nobody.HomeDir}.dir()
	res, rec := runSpec(t, context.Background(), Spec{ID: "t", RunAs: "nobody", Command: `id -u; id -g; id -G; pwd; echo "$HOME $USER $LOGNAME"`})
	want := strings.Join([]string{nobody.Uid, nobody.Gid, strings.Join(gids, " "), wantDir, nobody.HomeDir + " nobody nobody"}, "\n") + "\n"
	if got := rec.text(Stdout); res.Err != nil || got != want {
		t.Errorf("got %q (error %v, stderr %q); want %q", got, res.Err, rec.text(Stderr), want)
	}
}

// TestRunAsRefusedWhenNotRoot runs itself as nobody when the test runs as
// root, so the refusal is checked with a real unprivileged agent.
func TestRunAsRefusedWhenNotRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		nobody, err := user.Lookup("nobody")
		if err != nil {
			t.Skipf("no user nobody to run unprivileged as: %v", err)
		}
		uid, _ := strconv.Atoi(nobody.Uid)
		gid, _ := strconv.Atoi(nobody.Gid)
		cmd := exec.Command(exposedTestBinary(t), "-test.run=^TestRunAsRefusedWhenNotRoot$", "-test.v", "-test.count=1")
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=" + commandPath, "HOME=/"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestRunAsRefusedWhenNotRoot") {
			t.Fatalf("as nobody: %v\n%s", err, out)
		}
		return
	}
	self, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := runSpec(t, context.Background(), Spec{ID: "t", RunAs: "root", Command: "true"})
	want := fmt.Sprintf("the agent runs as %s and cannot run commands as root: run the agent as root or set runAs: %s", self.Username, self.Username)
	if res.Err == nil || res.Err.Error() != want {
		t.Errorf("got error %v; want %q", res.Err, want)
	}
	for _, runAs := range []string{"", self.Username} {
		res, rec := runSpec(t, context.Background(), Spec{ID: "t", RunAs: runAs, Command: "id -u"})
		if got := rec.text(Stdout); res.Err != nil || got != self.Uid+"\n" {
			t.Errorf("runAs %q: got %q, error %v; want %s", runAs, got, res.Err, self.Uid)
		}
	}
}

// exposedTestBinary copies the test binary where any user can run it (go
// test builds it in a 0700 directory), for sudo's askpass helper and for
// running the tests unprivileged.
func exposedTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gridcity-runner-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "runner.test")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
