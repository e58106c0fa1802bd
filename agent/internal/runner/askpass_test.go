//go:build linux

package runner

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestAskpassWithoutSocket(t *testing.T) {
	var out bytes.Buffer
	err := askpass("", &out)
	if err == nil || !strings.Contains(err.Error(), askpassSocketEnv+" is not set") || out.Len() != 0 {
		t.Errorf("got %v, output %q; want an error naming %s and no output", err, out.String(), askpassSocketEnv)
	}
}

// startTestAskpass serves password to uid, running as the test's own user.
func startTestAskpass(t *testing.T, uid uint32, password string) *askpassServer {
	t.Helper()
	agent, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := startAskpass(runIdentity{name: "test", uid: uid, gid: uint32(os.Getegid())}, agent, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	return a
}

func TestAskpassAnswersOnce(t *testing.T) {
	const password = "s3cret-sudo-pw"
	a := startTestAskpass(t, uint32(os.Geteuid()), password)
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
	a := startTestAskpass(t, uint32(os.Geteuid())+4242, "s3cret-sudo-pw")
	var out bytes.Buffer
	err := askpass(filepath.Join(a.dir, "s"), &out)
	if err == nil || !strings.Contains(err.Error(), "gave no password") || out.Len() != 0 {
		t.Errorf("got %q, %v; want no password", out.String(), err)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "s")); err != nil {
		t.Errorf("socket after a stranger asked: %v; want it still there", err)
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
