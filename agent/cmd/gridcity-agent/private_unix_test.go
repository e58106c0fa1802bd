//go:build unix

package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gridcity/gridcity/agent/internal/cmdjournal"
	"github.com/gridcity/gridcity/agent/internal/runner"
	"github.com/gridcity/gridcity/lib/atomicfile/atomicfiletest"
)

// TestStateDirectoryIsPrivate starts the agent under umask 022 on a state
// directory of mode 0755, as `mkdir` leaves one: it is made 0700 and the
// log says so; then the command journal writes into it, and nothing there
// may be readable by others.
func TestStateDirectoryIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"run", "--state", state}, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "not enrolled") {
		t.Fatalf("run: %v; want it to stop at \"not enrolled\", after checking the state directory", err)
	}
	if !strings.Contains(stderr.String(), "made the state directory private") {
		t.Errorf("the log does not say the state directory was made private:\n%s", stderr.String())
	}

	j, err := cmdjournal.Open(state, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Accept("cmd-1"); err != nil {
		t.Fatal(err)
	}
	if err := j.Finished("cmd-1", runner.Result{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if open := atomicfiletest.OpenToOthers(t, state, 2); len(open) != 0 {
		t.Errorf("open to others: %v; want every file 0600 and the directory 0700", open)
	}
}

// TestStateDirectoryShared: a state directory others may write in is
// refused, with what to do instead.
func TestStateDirectoryShared(t *testing.T) {
	state := t.TempDir()
	if err := os.Chmod(state, 0o777); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"run", "--state", state}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "give a directory of its own") || !strings.Contains(err.Error(), state) {
		t.Fatalf("run: %v; want a refusal naming %s and what to do", err, state)
	}
}
