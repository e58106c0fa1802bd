package stdiobridge

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// A client that closes stdin with calls in flight still gets their
// answers: the bridge exits once they are written.
func TestStdioBridgeAnswersInFlightRequestsAtStdinClose(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, time.Second) // run_command answers "waiting" after a second
	c.start()
	r := startRaw(t, Config{Endpoint: c.endpoint(), Token: operateToken})
	r.initialize(t, "2025-11-25")
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"server":"web-1","command":"uptime","reason":"look","timeout_seconds":10}}}`)
	r.send(t, `{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"list_servers","arguments":{}}}`)
	r.send(t, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"incident_report","arguments":{}}}`)
	r.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`)
	r.stdin.Close()

	got := r.rest(t, 15*time.Second)
	for _, id := range []string{"2", `"three"`} {
		a, ok := got[id]
		if !ok || a.Error != nil {
			t.Errorf("request %s: answered %v, %+v; want its result\nlog:\n%s", id, ok, a.Error, r.log.String())
		}
	}
	var res struct {
		StructuredContent struct{ Status, RequestID string }
	}
	if json.Unmarshal(got["2"].Result, &res); res.StructuredContent.Status != "waiting" || res.StructuredContent.RequestID == "" {
		t.Errorf("run_command answered %s; want waiting with a request id", got["2"].Result)
	}
	if err := <-r.served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if p, _ := c.cmds.Pending(context.Background()); len(p) != 1 {
		t.Errorf("%d requests pending; want the one run_command asked for", len(p))
	}
}

// The wait is bounded: a call that would take longer is given up, and the
// bridge exits.
func TestStdioBridgeDrainIsBounded(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 20*time.Second)
	c.start()
	r := startRaw(t, Config{Endpoint: c.endpoint(), Token: operateToken, DrainTimeout: 200 * time.Millisecond})
	r.initialize(t, "2025-11-25")
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"server":"web-1","command":"uptime","reason":"look","timeout_seconds":10}}}`)
	start := time.Now()
	r.stdin.Close()
	r.rest(t, 10*time.Second)
	if err := <-r.served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("the bridge exited %s after stdin closed; want about its 200ms bound (plus closing the session)", took)
	}
	if !strings.Contains(r.log.String(), "requests left unanswered") {
		t.Errorf("the log does not say a request was left unanswered:\n%s", r.log.String())
	}
}

// A client that closes stdin and stops reading (it exited) is not waited
// for: the first answer that cannot be written ends the wait.
func TestStdioBridgeDrainEndsWhenStdoutCloses(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 20*time.Second)
	c.start()
	r := startRaw(t, Config{Endpoint: c.endpoint(), Token: operateToken}) // the default bound, 50 s
	r.initialize(t, "2025-11-25")
	// The progress token makes the coordinator write while the call waits.
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"run_command","arguments":{"server":"web-1","command":"uptime","reason":"look","timeout_seconds":10}}}`)
	r.stdout.Close()
	r.stdin.Close()
	select {
	case err := <-r.served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the bridge still waits for a client that stopped reading\nlog:\n%s", r.log.String())
	}
}

// The reader hands every byte on unchanged, and notes each request once:
// in a batch, on a line longer than its buffer, on a last line without a
// newline; a cancellation or an answer forgets it.
func TestDrainingReaderNotesRequests(t *testing.T) {
	t.Parallel()
	long := `{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"diagnose","arguments":{"target":"` + strings.Repeat("x", 10000) + `"}}}`
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`[{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		long,
		`{"jsonrpc":"2.0","id":9,"result":{}}`, // the client answering the bridge: not a request
		`not json`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`,
		`{"jsonrpc":"2.0","id":5.0,"method":"ping"}`,
	}, "\n")
	track := newInflight()
	r := &drainingReader{in: bufio.NewReader(strings.NewReader(input)), track: track, logger: slog.New(slog.DiscardHandler)}
	out, err := io.ReadAll(r)
	if err != nil || string(out) != input {
		t.Fatalf("read %d bytes (%v); want the input unchanged", len(out), err)
	}
	track.mu.Lock()
	var ids []string
	for k := range track.ids {
		ids = append(ids, k)
	}
	track.mu.Unlock()
	slices.Sort(ids)
	if got, want := strings.Join(ids, ","), "n1,n2,n3,n5,slong"; got != want {
		t.Fatalf("in flight %s; want %s", got, want)
	}
	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		`[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}]` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":5}}` + "\n",
		`{"jsonrpc":"2.0","id":"long","result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":5,"result":{}}` + "\n",
	} {
		(&trackingWriter{out: io.Discard, track: track}).Write([]byte(answer))
	}
	if n := track.count(); n != 0 {
		t.Errorf("%d requests still in flight after every answer", n)
	}
}
