package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logWatch is the coordinator's log; it tells when a line containing want
// has been written.
type logWatch struct {
	mu    sync.Mutex
	b     strings.Builder
	want  string
	seen  chan struct{}
	found bool
}

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if !l.found && strings.Contains(l.b.String(), l.want) {
		l.found = true
		close(l.seen)
	}
	return len(p), nil
}

func (l *logWatch) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveInProcess runs `gridcity serve` on loopback in this process until the
// test ends, and returns its HTTP address and data directory.
func serveInProcess(t *testing.T, args ...string) (addr, data string) {
	t.Helper()
	data = t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	log := &logWatch{want: "coordinator ready", seen: make(chan struct{})}
	done := make(chan error, 1)
	args = append([]string{"--data", data, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--advertise", "127.0.0.1:4601"}, args...)
	go func() { done <- cmdServe(ctx, args, io.Discard, log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v\n%s", err, log)
		}
	})
	select {
	case <-log.seen:
	case err := <-done:
		done <- err
		t.Fatalf("serve ended before it was ready: %v\n%s", err, log)
	}
	info, err := readRuntime(data)
	if err != nil {
		t.Fatal(err)
	}
	return info.HTTP, data
}

// The whole HTTP listener, as `gridcity serve` sets it up: every route
// refuses a foreign Host on loopback, a request without a token is refused
// before its body is read, and a body trickled a byte at a time is cut off.
func TestServeFrontDoor(t *testing.T) {
	addr, data := serveInProcess(t, "--body-timeout", "500ms")
	_, port, _ := net.SplitHostPort(addr)
	tok, err := os.ReadFile(filepath.Join(data, localTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))

	t.Run("Host", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/metrics", "/", "/api/me", "/mcp", "/static/app.js", "/nowhere"} {
			for host, want := range map[string]int{"evil.example:" + port: 403, "127.0.0.1:" + port: 0, "localhost:" + port: 0} {
				req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
				req.Host = host
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if want == 403 && (res.StatusCode != 403 || !strings.Contains(string(b), "DNS rebinding")) {
					t.Errorf("GET %s with Host %s: got %d %q; want 403 (DNS rebinding)", path, host, res.StatusCode, b)
				}
				if want == 0 && res.StatusCode == 403 {
					t.Errorf("GET %s with Host %s: got 403 %q; want it served", path, host, b)
				}
			}
		}
		for _, path := range []string{"/healthz", "/metrics"} {
			res, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Errorf("GET %s on loopback: got %d; want 200", path, res.StatusCode)
			}
		}
	})

	t.Run("MCP client", func(t *testing.T) {
		// An ordinary client, whose requests are read within the bound,
		// keeps working, connection reuse included.
		hc := &http.Client{Transport: withToken(token)}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "front-door-test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		for range 3 {
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "list_servers" }) {
				t.Fatalf("tools %+v; want list_servers among them", res.Tools)
			}
		}
	})

	t.Run("token before body", func(t *testing.T) {
		conn := dialRaw(t, addr)
		// 10 MiB announced, 1 KiB sent: the answer must not wait for the rest.
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, 10<<20, strings.Repeat("x", 1<<10))
		res, err := readAnswer(conn, 10*time.Second)
		if err != nil {
			t.Fatalf("no answer before the body was sent: %v; want 401 from the headers alone", err)
		}
		if res.StatusCode != 401 {
			t.Fatalf("got %d; want 401", res.StatusCode)
		}
	})

	for _, tt := range []struct{ path, header string }{
		{"/mcp", "Authorization: Bearer " + token + "\r\nAccept: application/json, text/event-stream\r\n"},
		{"/api/login", "Origin: http://" + addr + "\r\n"},
	} {
		t.Run("slow body "+tt.path, func(t *testing.T) {
			conn := dialRaw(t, addr)
			const n = 100 // at a byte per 50 ms, 5 s to send
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", tt.path, addr, tt.header, n)
			var sent atomic.Int64
			go func() {
				tk := time.NewTicker(50 * time.Millisecond)
				defer tk.Stop()
				for range n {
					<-tk.C
					if _, err := conn.Write([]byte(" ")); err != nil { // JSON's whitespace: a decoder waits for more
						return
					}
					sent.Add(1)
				}
			}()
			res, err := readAnswer(conn, 10*time.Second)
			if err != nil {
				t.Fatalf("no answer while the body trickled in (%d of %d bytes sent): %v; want it cut off after --body-timeout 500ms", sent.Load(), n, err)
			}
			b, _ := io.ReadAll(res.Body)
			if got := sent.Load(); got >= n {
				t.Errorf("the whole body was read (%d bytes); want it cut off", got)
			}
			if res.StatusCode < 400 || !strings.Contains(string(b), "did not arrive within 500ms") {
				t.Errorf("got %d %q; want an error saying the body did not arrive within 500ms", res.StatusCode, b)
			}
		})
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readAnswer reads one response from conn, waiting at most limit (so that a
// server that never answers fails the test instead of hanging it).
func readAnswer(conn net.Conn, limit time.Duration) (*http.Response, error) {
	conn.SetReadDeadline(time.Now().Add(limit))
	return http.ReadResponse(bufio.NewReader(conn), nil)
}

// withToken is an HTTP transport that sends the token with every request.
type withToken string

func (b withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
