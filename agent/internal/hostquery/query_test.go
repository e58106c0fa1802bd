//go:build unix

package hostquery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestQuery(t *testing.T) {
	tests := []struct {
		name     string
		max      int
		argv     []string
		wantOut  string
		wantCode int
		wantErr  string
	}{
		{name: "output", max: 100, argv: []string{"/bin/sh", "-c", "echo hello"}, wantOut: "hello\n"},
		{name: "locale is C", max: 100, argv: []string{"/bin/sh", "-c", "echo $LC_ALL"}, wantOut: "C\n"},
		{name: "agent environment not passed", max: 100, argv: []string{"/bin/sh", "-c", "echo ${GRIDCITY_SECRET:-unset}"}, wantOut: "unset\n"},
		{
			name: "non-zero exit keeps output and code", max: 100,
			argv:    []string{"/bin/sh", "-c", "echo partial; echo 'E: Could not open lock file' >&2; echo more >&2; exit 100"},
			wantOut: "partial\n", wantCode: 100, wantErr: "/bin/sh exited with code 100: E: Could not open lock file",
		},
		{
			name: "output bounded", max: 10, argv: []string{"/bin/sh", "-c", "printf '0123456789abcdef'"},
			wantOut: "0123456789", wantErr: "output truncated after 10 bytes (6 more)",
		},
		{name: "relative program refused", max: 10, argv: []string{"sh", "-c", "true"}, wantCode: -1, wantErr: "must be an absolute path"},
		{name: "missing program", max: 10, argv: []string{"/nonexistent/apt-get"}, wantCode: -1, wantErr: "no such file or directory"},
	}
	t.Setenv("GRIDCITY_SECRET", "s3cret")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code, err := Query(context.Background(), tt.max, tt.argv...)
			if string(out) != tt.wantOut || code != tt.wantCode {
				t.Errorf("got %q, code %d; want %q, code %d", out, code, tt.wantOut, tt.wantCode)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got error %v; want %q", err, tt.wantErr)
			}
		})
	}
}

func TestQueryTruncatedIs(t *testing.T) {
	_, _, err := Query(context.Background(), 1, "/bin/sh", "-c", "echo long")
	if !errors.Is(err, ErrOutputTruncated) {
		t.Errorf("got %v; want ErrOutputTruncated", err)
	}
}

// TestQueryKillsGroup checks that a query and the helpers it started are
// gone when ctx ends, even when a helper holds stdout open.
func TestQueryKillsGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := Query(ctx, 100, "/bin/sh", "-c", "sleep 30 & sleep 30; wait")
	// Past WaitDelay (2 s) would mean the background sleep kept the pipe.
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("returned after %v; want soon after the deadline", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v; want the deadline error", err)
	}
}
