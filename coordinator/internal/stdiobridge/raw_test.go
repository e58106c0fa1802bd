package stdiobridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// rawStdio drives the bridge with JSON-RPC lines of its own, as a client
// written in another language would: nothing is assumed of the go-sdk
// client's habits (its handshake, its fallbacks).
type rawStdio struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	lines  chan []byte // the bridge's stdout, a line each; closed with it
	served chan error  // Serve's result
	log    *syncBuffer
}

func startRaw(t *testing.T, cfg Config) *rawStdio {
	t.Helper()
	r := &rawStdio{lines: make(chan []byte, 100), served: make(chan error, 1), log: &syncBuffer{}}
	logger := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := New(context.Background(), asMain(t, cfg, logger), logger)
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	r.stdin, r.stdout = stdinW, stdoutR
	go func() {
		r.served <- b.Serve(context.Background(), stdinR, stdoutW)
		stdoutW.Close()
	}()
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdoutR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			r.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	t.Cleanup(func() {
		r.stdin.Close()
		for range r.lines {
		}
	})
	return r
}

func (r *rawStdio) send(t *testing.T, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(r.stdin, format+"\n", args...); err != nil {
		t.Fatal(err)
	}
}

// rpcAnswer is a JSON-RPC response as the tests read it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// answer reads stdout up to the response to id, passing notifications by.
func (r *rawStdio) answer(t *testing.T, id int) rpcAnswer {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				t.Fatalf("stdout closed before the answer to %d\nlog:\n%s", id, r.log.String())
			}
			var a rpcAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				t.Fatalf("stdout line is not JSON: %q", line)
			}
			if a.Method == "" && string(a.ID) == fmt.Sprint(id) {
				return a
			}
		case <-timeout:
			t.Fatalf("no answer to %d\nlog:\n%s", id, r.log.String())
		}
	}
}

// rest reads stdout until the bridge closes it, and returns the answers
// by id.
func (r *rawStdio) rest(t *testing.T, within time.Duration) map[string]rpcAnswer {
	t.Helper()
	got := map[string]rpcAnswer{}
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				return got
			}
			var a rpcAnswer
			if json.Unmarshal(line, &a) == nil && a.Method == "" {
				got[string(a.ID)] = a
			}
		case <-timeout:
			t.Fatalf("stdout still open after %s\nlog:\n%s", within, r.log.String())
		}
	}
}

// initialize opens a legacy session: initialize, then initialized.
func (r *rawStdio) initialize(t *testing.T, version string) rpcAnswer {
	t.Helper()
	r.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, version)
	a := r.answer(t, 1)
	if a.Error != nil {
		t.Fatalf("initialize: %+v", a.Error)
	}
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return a
}
