//go:build linux

package runner

import (
	"bytes"
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

	"golang.org/x/sys/unix"
)

func TestAskpassWithoutSocket(t *testing.T) {
	var out bytes.Buffer
	err := askpass("", &out)
	if err == nil || !strings.Contains(err.Error(), askpassSocketEnv+" is not set") || out.Len() != 0 {
		t.Errorf("got %v, output %q; want an error naming %s and no output", err, out.String(), askpassSocketEnv)
	}
}

// syncBuffer is a log sink the askpass goroutine writes while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startTestAskpass serves password to uid in the test process's own
// session, running as the test's own user.
func startTestAskpass(t *testing.T, uid uint32, password string) (*askpassServer, *syncBuffer) {
	t.Helper()
	agent, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	a, err := startAskpass(runIdentity{name: "test", uid: uid, gid: uint32(os.Getegid())}, "t", agent, []byte(password), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	a.answer(sid)
	return a, logs
}

func TestAskpassAnswersOnce(t *testing.T) {
	const password = "s3cret-sudo-pw"
	a, _ := startTestAskpass(t, uint32(os.Geteuid()), password)
	sock := filepath.Join(a.dir, "s")

	// Nothing in the directory holds the password.
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(a.dir, e.Name()))
		if bytes.Contains(b, []byte(password)) {
			t.Errorf("%s holds the password", e.Name())
		}
	}
	if fi, err := os.Stat(a.dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v (%v); want 0700", fi.Mode(), err)
	}

	var out bytes.Buffer
	if err := askpass(sock, &out); err != nil || out.String() != password+"\n" {
		t.Fatalf("first ask: got %q, %v; want the password and a line break", out.String(), err)
	}
	out.Reset()
	if err := askpass(sock, &out); err == nil || out.Len() != 0 {
		t.Errorf("second ask: got %q, %v; want an error and no output", out.String(), err)
	}
	a.close()
	if _, err := os.Stat(a.dir); !os.IsNotExist(err) {
		t.Errorf("directory after close: %v; want it removed", err)
	}
}

// TestAskpassRefusesOtherUsers: a peer whose uid is not the run-as user's
// gets nothing, and does not use up the one answer.
func TestAskpassRefusesOtherUsers(t *testing.T) {
	a, _ := startTestAskpass(t, uint32(os.Geteuid())+4242, "s3cret-sudo-pw")
	var out bytes.Buffer
	err := askpass(filepath.Join(a.dir, "s"), &out)
	if err == nil || !strings.Contains(err.Error(), "gave no password") || out.Len() != 0 {
		t.Errorf("got %q, %v; want no password", out.String(), err)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "s")); err != nil {
		t.Errorf("socket after a stranger asked: %v; want it still there", err)
	}
}

// helperCmd runs the test binary as the askpass helper (see TestMain).
func helperCmd(t *testing.T, sock string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "askpass")
	cmd.Env = []string{askpassSocketEnv + "=" + sock}
	return cmd
}

// TestAskpassRefusesOtherSessions: a process of the run-as user outside
// the command's session (here: the test's) is refused, logged with its
// pid and not the password, and does not use up the answer; a process in
// the session, started after it, gets the password.
func TestAskpassRefusesOtherSessions(t *testing.T) {
	const password = "s3cret-sudo-pw"
	a, logs := startTestAskpass(t, uint32(os.Geteuid()), password)
	sock := filepath.Join(a.dir, "s")

	intruder := helperCmd(t, sock)
	intruder.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	intruder.Stdout, intruder.Stderr = &stdout, &stderr
	err := intruder.Run()
	if err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), "gave no password") {
		t.Errorf("process in another session: got %v, stdout %q, stderr %q; want refused", err, stdout.String(), stderr.String())
	}
	log := logs.String()
	wantLog := fmt.Sprintf("level=WARN msg=\"sudo askpass: refused a connection from a process outside the command's session; the password was not sent\" command=t peer_pid=%d", intruder.Process.Pid)
	if !strings.Contains(log, wantLog) || strings.Contains(log, password) {
		t.Errorf("log %q; want %q and no password", log, wantLog)
	}

	child := helperCmd(t, sock) // same session as the test
	out, err := child.Output()
	if err != nil || string(out) != password+"\n" {
		t.Errorf("process in the session: got %q, %v; want the password", out, err)
	}
}

func TestAskpassPrivateBase(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root agent keeps a private base directory")
	}
	a, _ := startTestAskpass(t, uint32(os.Geteuid()), "pw")
	base := filepath.Dir(a.dir)
	fi, err := os.Stat(base)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o711 || st.Uid != 0 || filepath.Base(base) == filepath.Base(os.TempDir()) {
		t.Errorf("base %s: mode %s, owner %d; want a root-owned 0711 directory of its own", base, fi.Mode().Perm(), st.Uid)
	}
	t.Logf("per-command directory %s", a.dir)

	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	root := t.TempDir()
	os.Chmod(root, 0o1777)
	old := syscall.Umask(0o077)
	made, err := privateBase(root, "a", "b")
	syscall.Umask(old)
	if err != nil || made != filepath.Join(root, "a", "b") {
		t.Fatalf("fresh: got %q, %v", made, err)
	}
	for _, d := range []string{filepath.Join(root, "a"), made} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v, %v; want 0711 whatever the umask", d, fi.Mode(), err)
		}
	}
	if _, err := privateBase(root, "a", "b"); err != nil {
		t.Errorf("again: %v; want the existing directory accepted", err)
	}

	// Someone else took the name first.
	squat := filepath.Join(root, "squat")
	os.Mkdir(squat, 0o755)
	os.Chown(squat, uid, uid)
	link := filepath.Join(root, "link")
	os.Symlink(made, link)
	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	for name, want := range map[string]string{"squat": "is not root's", "link": "is not a directory", "open": "is writable by others"} {
		if _, err := privateBase(root, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v; want %q", name, err, want)
		}
	}
}

func TestSudoWrapperAddsAskpassFlag(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "real-sudo")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "sudo")
	if err := os.WriteFile(wrapper, []byte(sudoWrapper(fake)), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{args: []string{"id", "-u"}, want: "-A id -u"},
		{args: []string{"-u", "www-data", "id"}, want: "-A -u www-data id"},
		{args: []string{"-k"}, want: "-A -k"},
		{args: []string{"-S", "id"}, want: "-S id"},
		{args: []string{"-nS", "id"}, want: "-nS id"},
		{args: []string{"--stdin", "id"}, want: "--stdin id"},
		{args: []string{"id", "-S"}, want: "-A id -S"},
		{args: []string{"--", "-S"}, want: "-A -- -S"},
		{args: []string{"sh", "-c", "echo 'a b'"}, want: "-A sh -c echo 'a b'"},
	}
	for _, tt := range tests {
		out, err := exec.Command(wrapper, tt.args...).Output()
		if got := strings.TrimSuffix(string(out), "\n"); err != nil || got != tt.want {
			t.Errorf("sudo %q: got %q, %v; want %q", tt.args, got, err, tt.want)
		}
	}
}
