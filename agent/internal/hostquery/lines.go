//go:build unix

package hostquery

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// QueryLines runs argv the way Query does (no shell, an absolute program, a
// fixed environment, its own process group killed with ctx) and hands each
// line of its stdout, without the newline, to line as it arrives. The slice
// is valid only during the call.
//
// Unlike Query it stops reading early: when line returns false, or once
// maxBytes of stdout were read (ErrOutputTruncated, wrapped), the process
// group is killed and QueryLines returns. That is what a reader of a big
// history needs (journalctl printing a day of entries, taken a few MiB at a
// time from a cursor): Query would have to drain and discard the rest of
// the output on every call. A line longer than maxLine is passed over.
//
// stderr is the start of what the process wrote there, which some tools use
// for warnings while exiting 0 (journalctl's hint about missing
// permissions). A non-zero exit returns an *ExitError, unless QueryLines
// itself stopped the process.
func QueryLines(ctx context.Context, maxBytes, maxLine int, argv []string, line func([]byte) bool) (stderr string, err error) {
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return "", fmt.Errorf("query %q: the program must be an absolute path", argv)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = queryEnv
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 2 * time.Second
	errBuf := &capWriter{max: queryStderrMax}
	cmd.Stderr = errBuf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("%s: %w", argv[0], err)
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s: %w", argv[0], err)
	}

	stopped, readErr := readLines(out, maxBytes, maxLine, line)
	if stopped != nil {
		// Killing the group ends the process and closes the pipe's other
		// end; Wait reaps it.
		cancel()
	}
	waitErr := cmd.Wait()
	stderr = firstLine(errBuf.buf.Bytes())
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	switch {
	case stopped != nil && errors.Is(stopped, errStopped):
		return stderr, nil
	case stopped != nil:
		return stderr, fmt.Errorf("%s: %w", argv[0], stopped)
	case ctx.Err() != nil:
		return stderr, fmt.Errorf("%s: %w", argv[0], ctx.Err())
	case waitErr != nil && code > 0:
		return stderr, &ExitError{Argv0: argv[0], Code: code, Stderr: stderr}
	case waitErr != nil:
		return stderr, fmt.Errorf("%s: %w", argv[0], waitErr)
	case readErr != nil:
		return stderr, fmt.Errorf("%s: %w", argv[0], readErr)
	}
	return stderr, nil
}

// errStopped says the caller's line func asked to stop.
var errStopped = errors.New("stopped")

// readLines reads r line by line until EOF. It returns a non-nil stopped
// (errStopped, or ErrOutputTruncated with the count) when it stopped before
// EOF, and readErr for a failed read.
func readLines(r io.Reader, maxBytes, maxLine int, line func([]byte) bool) (stopped, readErr error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	skipping := false
	for {
		if n >= maxBytes {
			return fmt.Errorf("%w after %d bytes", ErrOutputTruncated, n), nil
		}
		b, err := br.ReadSlice('\n')
		n += len(b)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			skipping = true
			continue
		case skipping:
			// The tail of a line longer than the buffer.
			skipping = err != nil
		case len(b) > 0:
			if err == nil {
				b = b[:len(b)-1]
			}
			if len(b) <= maxLine && !line(b) {
				return errStopped, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil
			}
			return nil, err
		}
	}
}
