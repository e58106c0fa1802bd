//go:build unix

// Package hostquery runs the fixed, read-only queries collectors need
// (package managers, firewall tools, journalctl): no shell, an absolute
// program, a fixed environment, bounded output, and the whole process group
// killed with the context. It is kept apart from agent/internal/runner,
// which runs approved commands, so that a collector cannot reach the
// approved-command path; these two are the only packages of the agent that
// import os/exec.
package hostquery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrOutputTruncated is returned, wrapped, with the first maxBytes of a
// query's output when it wrote more; the caller decides whether a prefix is
// still useful.
var ErrOutputTruncated = errors.New("output truncated")

// queryEnv is the whole environment of a query: the agent's own environment
// (proxies, locale, a user's PATH) must not change what a host reports, and
// LC_ALL=C keeps the output in the format the parsers know.
var queryEnv = []string{
	"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	"LC_ALL=C",
	"LANG=C",
}

// queryStderrMax bounds the stderr kept for an error message.
const queryStderrMax = 4 << 10

// ExitError is the error of a query that ran and exited with a non-zero
// code; Stderr is the start of what it wrote there, for the reason.
type ExitError struct {
	Argv0  string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s exited with code %d", e.Argv0, e.Code)
	}
	return fmt.Sprintf("%s exited with code %d: %s", e.Argv0, e.Code, e.Stderr)
}

// Query runs argv (no shell; argv[0] an absolute path, so PATH cannot
// redirect it) with an empty stdin and returns up to maxBytes of its stdout
// and its exit code. A non-zero exit returns the output, the code and an
// *ExitError, since some tools (dnf check-update: 100) report results that
// way. The process and everything it started are killed when ctx is done:
// it runs in its own process group, so a helper it forks cannot outlive it
// holding the pipe open.
func Query(ctx context.Context, maxBytes int, argv ...string) ([]byte, int, error) {
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return nil, -1, fmt.Errorf("query %q: the program must be an absolute path", argv)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = queryEnv
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid addresses the whole group Setpgid created.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Bounds the wait for pipes held open by a process that escaped the
	// group after the kill.
	cmd.WaitDelay = 2 * time.Second
	stdout := &capWriter{max: maxBytes}
	stderr := &capWriter{max: queryStderrMax}
	cmd.Stdout = stdout
	cmd.Stderr = stderr

	err := cmd.Run()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	out := stdout.buf.Bytes()
	switch {
	case ctx.Err() != nil:
		return out, code, fmt.Errorf("%s: %w", argv[0], ctx.Err())
	case err != nil && code > 0:
		return out, code, &ExitError{Argv0: argv[0], Code: code, Stderr: firstLine(stderr.buf.Bytes())}
	case err != nil:
		return out, code, fmt.Errorf("%s: %w", argv[0], err)
	case stdout.dropped > 0:
		return out, code, fmt.Errorf("%s: %w after %d bytes (%d more)", argv[0], ErrOutputTruncated, maxBytes, stdout.dropped)
	}
	return out, code, nil
}

// capWriter keeps the first max bytes written to it and counts the rest:
// the child must never block on a full pipe, and a chatty one must never
// grow the agent's memory.
type capWriter struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if room < 0 {
		room = 0
	}
	if len(p) > room {
		w.dropped += int64(len(p) - room)
		w.buf.Write(p[:room])
		return len(p), nil
	}
	w.buf.Write(p)
	return len(p), nil
}

// firstLine returns the first non-empty line of b, trimmed, as the gist of
// an error message.
func firstLine(b []byte) string {
	for line := range strings.Lines(string(b)) {
		if s := strings.TrimSpace(line); s != "" {
			return strings.ToValidUTF8(s, "\uFFFD")
		}
	}
	return ""
}
