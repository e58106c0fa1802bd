package stdiobridge

// A stdio client ends the session by closing the bridge's stdin, and may do
// so while calls are still running (a run_command waiting for a person).
// The SDK treats the end of its input as the end of the connection: it
// cancels every request in flight and writes no more answers. So the
// bridge holds the end of stdin back from the SDK until each request it
// has passed on has been answered, or DrainTimeout has passed.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/command"
)

// DefaultDrainTimeout covers the longest wait of a call the coordinator
// answers in time: wait_for_command's (45 s; run_command's is 25 s), plus
// a margin for the way back.
const DefaultDrainTimeout = command.WaitAgain + 5*time.Second

// inflight is the set of the client's requests not yet answered, by id.
type inflight struct {
	mu      sync.Mutex
	ids     map[string]bool
	changed chan struct{} // a token after each answer
}

func newInflight() *inflight {
	return &inflight{ids: map[string]bool{}, changed: make(chan struct{}, 1)}
}

// wireMessage is what the tracking reads of a JSON-RPC message.
type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// messages decodes one line: a message or a batch of them. A line that is
// not JSON-RPC yields none; the SDK answers it as it sees fit.
func messages(line []byte) []wireMessage {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '[' {
		var batch []wireMessage
		if json.Unmarshal(line, &batch) != nil {
			return nil
		}
		return batch
	}
	var m wireMessage
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return []wireMessage{m}
}

// idKey names an id whatever its spelling: 7 and 7.0 are one id, "7" another.
func idKey(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return "s" + v, true
	case float64:
		return fmt.Sprint("n", v), true
	}
	return "", false
}

// received notes the requests in a line from the client, and forgets the
// ones it cancels (a cancelled request needs no answer).
func (f *inflight) received(line []byte) {
	for _, m := range messages(line) {
		switch {
		case m.Method == "notifications/cancelled":
			if k, ok := idKey(m.Params.RequestID); ok {
				f.done(k)
			}
		case m.Method == "subscriptions/listen":
			// A stateless client's stream of list changes: it lasts until
			// the client goes, and nobody waits for its end.
		case m.Method != "":
			if k, ok := idKey(m.ID); ok {
				f.mu.Lock()
				f.ids[k] = true
				f.mu.Unlock()
			}
		}
	}
}

// sent forgets the requests answered by a message to the client.
func (f *inflight) sent(msg []byte) {
	for _, m := range messages(msg) {
		if m.Method != "" {
			continue // a request or notification of the bridge's own
		}
		if k, ok := idKey(m.ID); ok {
			f.done(k)
		}
	}
}

func (f *inflight) done(k string) {
	f.mu.Lock()
	delete(f.ids, k)
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ids)
}

// wait returns when every request has been answered, the bound has passed
// or stop is closed, with the number still unanswered.
func (f *inflight) wait(stop <-chan struct{}, bound time.Duration) int {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		n := f.count()
		if n == 0 {
			return 0
		}
		select {
		case <-f.changed:
		case <-timer.C:
			return n
		case <-stop:
			return n
		}
	}
}

// drainingReader hands the client's input to the SDK a line at a time,
// noting the requests in it, and holds the end of the input back until
// they are answered (bounded).
type drainingReader struct {
	stop   <-chan struct{} // the bridge is stopping: no more waiting
	in     *bufio.Reader
	track  *inflight
	bound  time.Duration
	logger *slog.Logger

	drained bool
	line    []byte // the line being read, when longer than in's buffer
	pending []byte // read and noted, not yet handed on
	err     error  // to hand on after pending
}

func (r *drainingReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			if errors.Is(r.err, io.EOF) {
				r.drain()
			}
			return 0, r.err
		}
		chunk, err := r.in.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: hand it on piece by piece, and note it once whole
			// (up to the SDK's own limit on a message; past it the SDK ends
			// the session anyway).
			if len(r.line)+len(chunk) <= mcp.DefaultMaxLineLength {
				r.line = append(r.line, chunk...)
			}
			r.pending = bytes.Clone(chunk)
			continue
		}
		r.err = err
		if len(r.line) > 0 {
			r.track.received(append(r.line, chunk...))
			r.line = nil
		} else {
			r.track.received(chunk)
		}
		r.pending = bytes.Clone(chunk)
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// drain waits for the requests in flight when the input ended.
func (r *drainingReader) drain() {
	n := r.track.count()
	if r.drained || n == 0 {
		return
	}
	r.drained = true
	r.logger.Info("stdin closed; answering the requests still in flight before exiting", "requests", n, "within", r.bound)
	if left := r.track.wait(r.stop, r.bound); left > 0 {
		r.logger.Warn("stdin closed; requests left unanswered", "requests", left, "waited", r.bound)
	}
}

// trackingWriter notes the answers written to the client. The SDK writes
// one message (or batch) per Write.
type trackingWriter struct {
	out    io.Writer
	track  *inflight
	failed atomic.Bool // a write failed
}

func (w *trackingWriter) Write(p []byte) (int, error) {
	n, err := w.out.Write(p)
	if err != nil {
		w.failed.Store(true)
		return n, err
	}
	w.track.sent(p)
	return n, nil
}

func (*trackingWriter) Close() error { return nil }
