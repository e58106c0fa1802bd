//go:build unix

package hostquery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQueryLines(t *testing.T) {
	tests := []struct {
		name       string
		max, line  int
		script     string
		stopAfter  int // 0: never
		wantLines  string
		wantStderr string
		wantErr    string
	}{
		{name: "lines", max: 100, line: 100, script: "printf 'a\\nbb\\n\\nccc'", wantLines: "a|bb||ccc"},
		{name: "environment fixed", max: 100, line: 100, script: "echo $LC_ALL ${GRIDCITY_SECRET:-unset}", wantLines: "C unset"},
		{name: "long line passed over", max: 1 << 20, line: 4, script: "printf 'ok\\n'; head -c 100000 /dev/zero | tr '\\0' x; printf '\\nokay\\n'", wantLines: "ok|okay"},
		{name: "stopped by the caller", max: 1 << 20, line: 100, script: "while :; do echo x; done", stopAfter: 3, wantLines: "x|x|x"},
		{name: "bounded", max: 10, line: 100, script: "while :; do echo 0123; done", wantLines: "0123|0123", wantErr: "output truncated after 10 bytes"},
		{name: "stderr on success", max: 100, line: 100, script: "echo out; echo 'Hint: You are currently not seeing messages from other users and the system.' >&2",
			wantLines: "out", wantStderr: "Hint: You are currently not seeing messages from other users and the system."},
		{name: "exit code", max: 100, line: 100, script: "echo 'Failed to seek to cursor: Invalid argument' >&2; exit 1",
			wantStderr: "Failed to seek to cursor: Invalid argument", wantErr: "/bin/sh exited with code 1: Failed to seek to cursor: Invalid argument"},
	}
	t.Setenv("GRIDCITY_SECRET", "s3cret")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			start := time.Now()
			stderr, err := QueryLines(context.Background(), tt.max, tt.line, []string{"/bin/sh", "-c", tt.script}, func(b []byte) bool {
				got = append(got, string(b))
				return tt.stopAfter == 0 || len(got) < tt.stopAfter
			})
			if strings.Join(got, "|") != tt.wantLines || stderr != tt.wantStderr {
				t.Errorf("got %q, stderr %q; want %q, %q", strings.Join(got, "|"), stderr, tt.wantLines, tt.wantStderr)
			}
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got error %v; want %q", err, tt.wantErr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v; want the process ended at once", d)
			}
		})
	}
}

func TestQueryLinesTruncatedIs(t *testing.T) {
	_, err := QueryLines(context.Background(), 4, 100, []string{"/bin/sh", "-c", "echo long line"}, func([]byte) bool { return true })
	if !errors.Is(err, ErrOutputTruncated) {
		t.Errorf("got %v; want ErrOutputTruncated", err)
	}
}

func TestQueryLinesRefusesRelative(t *testing.T) {
	if _, err := QueryLines(context.Background(), 4, 4, []string{"sh", "-c", "true"}, func([]byte) bool { return true }); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("got %v; want a refusal", err)
	}
}

// TestQueryLinesKillsGroup stops early while a helper the command started
// holds stdout open: both must be gone, and QueryLines must return.
func TestQueryLinesKillsGroup(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		_, err := QueryLines(context.Background(), 1<<20, 100, []string{"/bin/sh", "-c", "(sleep 60; echo late) & echo first; wait"}, func([]byte) bool { return false })
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("got %v; want nil after the caller stopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("QueryLines did not return after the caller stopped")
	}
}

func TestQueryLinesContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := QueryLines(ctx, 1<<20, 100, []string{"/bin/sh", "-c", "sleep 60"}, func([]byte) bool { return true })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v; want the deadline", err)
	}
}
