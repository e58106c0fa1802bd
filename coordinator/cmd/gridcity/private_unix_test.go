//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gridcity/gridcity/lib/atomicfile/atomicfiletest"
)

// readyWriter is serve's stderr: it closes ready once the log says the
// coordinator is serving, by which point every file of a first start
// (store, coordinator.json, admin-password, mcp-token) is written.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "coordinator ready") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *readyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// serveUntilReady runs `gridcity serve --data dir` with the extra flags
// under umask 022 and stops it once it is ready. It returns serve's log,
// and its error (nil if it became ready).
func serveUntilReady(t *testing.T, dir string, extra ...string) (string, error) {
	t.Helper()
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &readyWriter{ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		done <- cmdServe(ctx, append([]string{"--data", dir, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, extra...), &bytes.Buffer{}, stderr)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("serve returned before it was ready, without an error; log:\n%s", stderr)
		}
		return stderr.String(), err
	case <-stderr.ready:
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve stopped with %v; log:\n%s", err, stderr)
		}
		return stderr.String(), nil
	}
}

// TestServeWritesOnlyPrivateFiles starts a coordinator for the first time
// under umask 022 on a data directory of mode 0755, as `mkdir` leaves one:
// nothing it leaves there (the store and SQLite's WAL, which hold the CA
// key sealed; unseal.key; coordinator.json; admin-password; mcp-token; serve.lock) may be
// readable by others, the directory is made 0700, and the log says so.
func TestServeWritesOnlyPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := serveUntilReady(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "made the data directory private") {
		t.Errorf("the log does not say the data directory was made private:\n%s", log)
	}
	if open := atomicfiletest.OpenToOthers(t, dir, 6); len(open) != 0 {
		t.Errorf("open to others: %v; want every file 0600 and the directory 0700", open)
	}
}

// TestServeRefusesASharedDataDirectory: a data directory others may write
// in is refused with what to do instead.
func TestServeRefusesASharedDataDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := serveUntilReady(t, dir)
	if err == nil {
		t.Fatalf("serve started on a directory of mode 0777; want a refusal")
	}
	if want := "give a directory of its own"; !strings.Contains(err.Error(), want) {
		t.Errorf("serve: %v; want %q", err, want)
	}
}
