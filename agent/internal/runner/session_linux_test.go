package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		raw     string
		state   byte
		session int
	}{
		{raw: "42 (sleep) S 1 42 42 0 -1 4194560 97 0 0 0", state: 'S', session: 42},
		{raw: "43 (a b) R 1 7 9 0 -1", state: 'R', session: 9},
		// A name made to look like fields: only the last ')' ends it.
		{raw: "44 () 1 1 1 1 () S 2 3 77 0 -1 0", state: 'S', session: 77},
		{raw: "45 ((x)) Z 1 45 45 0", state: 'Z', session: 45},
	}
	for _, tt := range tests {
		st, err := parseStat([]byte(tt.raw))
		if err != nil || st.state != tt.state || st.session != tt.session {
			t.Errorf("%q: got %c %d, %v; want %c %d", tt.raw, st.state, st.session, err, tt.state, tt.session)
		}
	}
	for _, bad := range []string{"", "46 sleep S 1 2 3", "47 (x) S 1 2", "48 (x) S 1 2 x"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q: parsed; want an error", bad)
		}
	}
}

// requireTools skips a test without the programs it runs, except in CI,
// whose image must have them. (dash's set -m does nothing without a
// terminal, so job control needs bash.)
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI must have %s: %v", tool, err)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// inSession lists, independently of the code under test, the processes
// (zombies aside) whose /proc/PID/stat field 6 is sid.
func inSession(t *testing.T, sid int) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		rest := strings.Fields(s[strings.LastIndex(s, ")")+1:])
		if len(rest) >= 4 && rest[3] == strconv.Itoa(sid) && rest[0] != "Z" {
			out = append(out, strings.TrimSpace(s[:strings.LastIndex(s, ")")+1]))
		}
	}
	return out
}

// killAll ends what a failed test left, as inSession lists it.
func killAll(left []string) {
	for _, p := range left {
		if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestRunEndsTheWholeSession: processes that moved to a process group of
// their own still go when the command times out, is canceled or ends.
func TestRunEndsTheWholeSession(t *testing.T) {
	requireTools(t, "timeout", "bash")
	// A copy of sleep whose name looks like stat fields: a parser that
	// stops at the first ')' reads session 1 and misses it.
	weird := filepath.Join(t.TempDir(), ") S 1 1 1 1 (")
	if err := exec.Command("cp", "/bin/sleep", weird).Run(); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(weird), 0o755)
	const grace = 300 * time.Millisecond
	tests := []struct {
		name     string
		command  string
		timeout  time.Duration
		cancel   bool
		timedOut bool
	}{
		{name: "timeout's own group on timeout", command: `timeout 300 sleep 1000 & wait`, timeout: time.Second, timedOut: true},
		{name: "job control on timeout", command: `bash -c 'set -m; sleep 1000 & wait'`, timeout: time.Second, timedOut: true},
		{name: "job control ignoring TERM on timeout", command: `bash -c 'set -m; (trap "" TERM; exec sleep 1000) & wait'`, timeout: time.Second, timedOut: true},
		{name: "odd command name on timeout", command: `bash -c 'set -m; "$0" 1000 & wait' '` + weird + `'`, timeout: time.Second, timedOut: true},
		{name: "timeout's own group on cancel", command: `timeout 300 sleep 1000 & wait`, timeout: 30 * time.Second, cancel: true},
		{name: "leftovers in other groups after the shell exits", command: `timeout 300 sleep 1000 & bash -c 'set -m; sleep 1001 & sleep 0.2'; exit 0`, timeout: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var sid atomic.Int64
			spec := Spec{ID: "t", Command: tt.command, Timeout: tt.timeout, killGrace: grace,
				OnStart: func(pid int) {
					sid.Store(int64(pid))
					if tt.cancel {
						time.AfterFunc(time.Second, cancel)
					}
				}}
			start := time.Now()
			res, rec := runSpec(t, ctx, spec)
			took := time.Since(start)
			left := inSession(t, int(sid.Load()))
			killAll(left)
			t.Logf("%s → code %d, timed out %v, canceled %v in %s; stderr %q", tt.command, res.ExitCode, res.TimedOut, res.Canceled, took.Round(time.Millisecond), rec.text(Stderr))
			if res.Err != nil || res.TimedOut != tt.timedOut || res.Canceled != tt.cancel {
				t.Errorf("got error %v, timed out %v, canceled %v; want none, %v, %v", res.Err, res.TimedOut, res.Canceled, tt.timedOut, tt.cancel)
			}
			if len(left) > 0 {
				t.Errorf("after Run returned, session %d still holds %q", sid.Load(), left)
			}
			if most := 2*time.Second + grace + time.Second; took > most {
				t.Errorf("Run took %s; want at most %s", took, most)
			}
		})
	}
}

// TestEndSessionKillsWhatForksDuringTheGrace: a process that ignores TERM
// and keeps starting new groups is still ended within the bound.
func TestEndSessionKillsWhatForksDuringTheGrace(t *testing.T) {
	requireTools(t, "bash")
	var sid atomic.Int64
	command := `trap "" TERM; while :; do bash -c 'trap "" TERM; set -m; sleep 1000 & sleep 0.05'; done`
	start := time.Now()
	res, _ := runSpec(t, context.Background(), Spec{ID: "t", Command: command, Timeout: time.Second, killGrace: 300 * time.Millisecond,
		OnStart: func(pid int) { sid.Store(int64(pid)) }})
	left := inSession(t, int(sid.Load()))
	killAll(left)
	if !res.TimedOut || len(left) > 0 {
		t.Errorf("got timed out %v, left %q; want timed out and nothing left", res.TimedOut, left)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Run took %s", took)
	}
}

// TestSessionMembers finds a process that changed its group, and reports
// nothing for a session without members.
func TestSessionMembers(t *testing.T) {
	requireTools(t, "bash")
	cmd := exec.Command("bash", "-c", "set -m; sleep 1000 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var child int
	fmt.Fscan(out, &child)
	sid := cmd.Process.Pid
	if pgid, err := syscall.Getpgid(child); err != nil || pgid == sid {
		t.Fatalf("sleep's group %d, %v; want one of its own", pgid, err)
	}
	members, err := sessionMembers(sid)
	if err != nil || len(members) != 2 || !(members[0] == child || members[1] == child) {
		t.Errorf("got %v, %v; want the shell %d and sleep %d", members, err, sid, child)
	}
	if left := endSession(sid, 200*time.Millisecond); len(left) > 0 {
		t.Errorf("left %v", left)
	}
	cmd.Wait()
	if members, err := sessionMembers(sid); err != nil || len(members) != 0 {
		t.Errorf("after the end: %v, %v; want none", members, err)
	}
}
