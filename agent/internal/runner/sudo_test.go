//go:build linux

package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const sudoTestUser = "gridcity-sudo-test"

// requireRootAndSudo skips a test that needs root and a real sudo, except
// in CI, whose setup must provide both.
func requireRootAndSudo(t *testing.T) {
	t.Helper()
	var reason string
	switch {
	case os.Geteuid() != 0:
		reason = "needs root to create the test user and its sudoers drop-in"
	case findSudo() == "":
		reason = "sudo is not installed (apt-get install -y sudo)"
	}
	for _, tool := range []string{"useradd", "chpasswd", "visudo", "passwd"} {
		if _, err := exec.LookPath(tool); reason == "" && err != nil {
			reason = tool + " is not installed"
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must install sudo and run the tests as root: %s", reason)
	}
	t.Skip(reason)
}

func runTool(t *testing.T, stdin string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// setUpSudoUser makes sudoTestUser a non-root user allowed any command
// through sudo with a fresh password, and returns the password. The user is
// kept (a system user without a login shell whose password is locked again
// afterwards); the sudoers drop-in is removed.
func setUpSudoUser(t *testing.T) string {
	t.Helper()
	if _, err := exec.Command("id", sudoTestUser).Output(); err != nil {
		runTool(t, "", "useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", sudoTestUser)
	}
	raw := make([]byte, 18)
	rand.Read(raw)
	password := "gc-" + base64.RawURLEncoding.EncodeToString(raw)
	runTool(t, sudoTestUser+":"+password+"\n", "chpasswd")
	t.Cleanup(func() { exec.Command("passwd", "-l", sudoTestUser).Run() })

	draft := filepath.Join(t.TempDir(), "sudoers")
	if err := os.WriteFile(draft, []byte(sudoTestUser+" ALL=(ALL) ALL\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	runTool(t, "", "visudo", "-cf", draft)
	dropIn := "/etc/sudoers.d/" + sudoTestUser
	runTool(t, "", "install", "-m", "0440", "-o", "root", "-g", "root", draft, dropIn)
	t.Cleanup(func() { os.Remove(dropIn) })
	return password
}

// TestSudoWithRealUser runs Debian's real sudo as a real non-root user and
// feeds it the password through the askpass helper (the test binary stands
// in for the agent binary, see TestMain).
func TestSudoWithRealUser(t *testing.T) {
	requireRootAndSudo(t)
	password := setUpSudoUser(t)
	agent := exposedTestBinary(t)

	tests := []struct {
		name       string
		command    string
		password   string
		wantCode   int
		wantStdout string
		wantStderr string // contained
		stdin      string
	}{
		{name: "right password", command: "sudo -k; sudo id -u", password: password, wantStdout: "0\n"},
		{name: "sudo below another program", command: "sudo -k; timeout 20 sudo id -u", password: password, wantStdout: "0\n"},
		{name: "credentials cached within the command", command: "sudo -k; sudo true; (sudo id -u)", password: password, wantStdout: "0\n"},
		{name: "stdin stays the command's", command: "sudo -k; sudo id -u; cat", password: password, stdin: "input", wantStdout: "0\n" + Mask},
		{name: "wrong password fails at once", command: "sudo -k; sudo id -u", password: "wrong-" + password, wantCode: 1, wantStderr: "Sorry, try again."},
		{name: "no second answer", command: "sudo -k; sudo -k; sudo true; sudo -k; sudo id -u", password: password, wantCode: 1, wantStderr: "no password was provided"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdin []byte
			if tt.stdin != "" {
				stdin = []byte(tt.stdin)
			}
			start := time.Now()
			res, rec := runSpec(t, context.Background(), Spec{
				ID: "sudo", RunAs: sudoTestUser, Command: tt.command, Timeout: 60 * time.Second,
				SudoPassword: []byte(tt.password), AskpassPath: agent, Stdin: stdin,
			})
			stdout, stderr := rec.text(Stdout), rec.text(Stderr)
			t.Logf("%s → exit %d in %s; stdout %q; stderr %q", tt.command, res.ExitCode, time.Since(start).Round(time.Millisecond), stdout, stderr)
			if res.Err != nil || res.TimedOut {
				t.Fatalf("got error %v, timed out %v", res.Err, res.TimedOut)
			}
			if res.ExitCode != tt.wantCode || stdout != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("got code %d, stdout %q, stderr %q; want %d, %q, stderr with %q", res.ExitCode, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			for _, out := range [][]byte{[]byte(stdout), []byte(stderr), res.StdoutKept, res.StderrKept} {
				if bytes.Contains(out, []byte(password)) {
					t.Errorf("the password shows in %q", out)
				}
			}
		})
	}
}

// TestSudoRefusesAnotherProcessOfTheUser: a process of the run-as user
// outside the command's session that finds the socket and asks first gets
// nothing (and is logged with its pid), and the command's sudo still gets
// the password.
func TestSudoRefusesAnotherProcessOfTheUser(t *testing.T) {
	requireRootAndSudo(t)
	password := setUpSudoUser(t)
	agent := exposedTestBinary(t)
	u, err := user.Lookup(sudoTestUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// t.TempDir's parent is 0700: the run-as user could not see the flag.
	flagDir, err := os.MkdirTemp("", "gridcity-sudo-flag-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(flagDir) })
	os.Chmod(flagDir, 0o755)
	flag := filepath.Join(flagDir, "go")

	type outcome struct {
		pid            int
		err            error
		stdout, stderr string
	}
	intruded := make(chan outcome, 1)
	var once sync.Once
	r := &recorder{collect: collect{t: t}}
	r.onData = func(c Chunk) {
		sock, ok := strings.CutSuffix(string(c.Data), "\n")
		if c.Stream != Stdout || !ok || !strings.HasSuffix(sock, "/s") {
			return
		}
		once.Do(func() {
			go func() {
				// Same user, its own session: a cron job, a login, a poller.
				cmd := exec.Command(agent, "askpass")
				cmd.Env = []string{askpassSocketEnv + "=" + sock}
				cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				intruded <- outcome{pid: cmd.Process.Pid, err: err, stdout: stdout.String(), stderr: stderr.String()}
				os.WriteFile(flag, nil, 0o644)
			}()
		})
	}
	logs := &syncBuffer{}
	res := Run(context.Background(), Spec{
		ID: "sudo", RunAs: sudoTestUser, Timeout: 60 * time.Second, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Command:      `echo "$GRIDCITY_ASKPASS_SOCKET"; while [ ! -e ` + shellQuote(flag) + ` ]; do sleep 0.05; done; sudo -k; sudo id -u`,
		SudoPassword: []byte(password), AskpassPath: agent,
	}, r.emit)
	stdout, stderr := r.text(Stdout), r.text(Stderr)
	var in outcome
	select {
	case in = <-intruded:
	default:
		t.Fatalf("no intruder ran; stdout %q", stdout)
	}
	t.Logf("intruder pid %d: %v, stdout %q, stderr %q; command: exit %d, stdout %q, stderr %q; log %q", in.pid, in.err, in.stdout, in.stderr, res.ExitCode, stdout, stderr, logs.String())
	if in.err == nil || in.stdout != "" || !strings.Contains(in.stderr, "gave no password") {
		t.Errorf("intruder got %q, %v, stderr %q; want refused", in.stdout, in.err, in.stderr)
	}
	if res.Err != nil || res.ExitCode != 0 || !strings.HasSuffix(stdout, "\n0\n") {
		t.Errorf("command: got code %d, error %v, stdout %q, stderr %q; want sudo id -u to print 0", res.ExitCode, res.Err, stdout, stderr)
	}
	if log := logs.String(); !strings.Contains(log, fmt.Sprintf("outside the command's session; the password was not sent\" command=sudo peer_pid=%d peer_uid=%d", in.pid, uid)) || strings.Contains(log, password) {
		t.Errorf("log %q; want the refusal with the intruder's pid, and no password", log)
	}
}

// TestSudoPasswordMaskedAndHelperGone: the sudo password is masked when the
// command prints it, the helper's directory belongs to the run-as user
// alone, and it is gone when Run returns.
func TestSudoPasswordMaskedAndHelperGone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the helper directory is handed to another user only by root")
	}
	res, rec := runSpec(t, context.Background(), Spec{
		ID: "t", RunAs: "nobody", Command: `printf 'sudo-%s-9\n' pw; echo "$SUDO_ASKPASS"; d=$(dirname "$SUDO_ASKPASS"); ls -ld "$d" | cut -d' ' -f1,3; ls -ld "$(dirname "$d")" | cut -d' ' -f1,3; ls "$(dirname "$d")" >/dev/null 2>&1 && echo listable || echo unlistable`,
		SudoPassword: []byte("sudo-pw-9"), AskpassPath: exposedTestBinary(t),
	})
	lines := strings.Split(rec.text(Stdout), "\n")
	if res.Err != nil || len(lines) < 3 {
		t.Fatalf("got %q, error %v", rec.text(Stdout), res.Err)
	}
	if lines[0] != Mask {
		t.Errorf("printed password %q; want %q", lines[0], Mask)
	}
	if lines[2] != "drwx------ nobody" {
		t.Errorf("helper directory %q; want drwx------ nobody", lines[2])
	}
	// Other users cannot list the base to find the socket.
	if len(lines) < 5 || lines[3] != "drwx--x--x root" || lines[4] != "unlistable" {
		t.Errorf("base directory %q; want drwx--x--x root, unlistable", lines[3:])
	}
	if _, err := os.Stat(filepath.Dir(lines[1])); !os.IsNotExist(err) {
		t.Errorf("helper directory %s after Run: %v; want it removed", filepath.Dir(lines[1]), err)
	}
}
