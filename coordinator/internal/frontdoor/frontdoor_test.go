package frontdoor

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/certtest"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/publicurl"
)

// serve runs h behind the front door on a loopback listener the test holds,
// and returns its address.
func serve(t *testing.T, h http.Handler, cfg Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(h, cfg)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// readAll answers 200 with the body's length, or the read error's text
// with 408 for a body that came too slowly and 400 otherwise.
var readAll = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		http.Error(w, err.Error(), http.StatusRequestTimeout)
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		fmt.Fprintf(w, "%d bytes", len(b))
	}
})

// trickle sends a request's headers at once and then its body of n bytes
// one byte per tick, until the body is sent or the connection fails. It
// returns the connection and a counter of the body bytes sent.
func trickle(t *testing.T, addr, path string, n int, tick time.Duration) (net.Conn, *atomic.Int64) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, addr, n); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	go func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for range n {
			<-tk.C
			if _, err := conn.Write([]byte("x")); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	return conn, &sent
}

// A client that sends its headers and then a byte at a time is cut off at
// the body bound, long before it would have finished.
func TestSlowBodyIsCutOff(t *testing.T) {
	const bound = 500 * time.Millisecond
	addr := serve(t, readAll, Config{BodyTimeout: bound})
	const n = 100 // at a byte per 50 ms, 5 s to send
	start := time.Now()
	conn, sent := trickle(t, addr, "/mcp", n, 50*time.Millisecond)
	conn.SetReadDeadline(time.Now().Add(20 * bound)) // on failure, do not wait for the whole body
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer %s after the headers (%d of %d body bytes sent): %v; want the server to give up on the body after %s", time.Since(start).Round(time.Millisecond), sent.Load(), n, err, bound)
	}
	took, got := time.Since(start), sent.Load()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within 500ms") {
		t.Errorf("got %d %q; want 408 saying the body did not arrive within 500ms", res.StatusCode, body)
	}
	if got >= n {
		t.Errorf("the server read the whole trickled body (%d bytes, %s); want it cut off", got, took)
	}
	if took < bound {
		t.Errorf("cut off after %s; want no sooner than the bound, %s", took, bound)
	}
}

// A body sent at once is read, and the bound does not touch what follows:
// a response that streams for several times the bound, after a POST body
// (run_command's wait) or after a GET (the app's event stream), is neither
// cancelled nor cut.
func TestLongResponseOutlivesTheBound(t *testing.T) {
	const bound = 200 * time.Millisecond
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "read %d\n", len(b))
		rc := http.NewResponseController(w)
		tk := time.NewTicker(bound / 4)
		defer tk.Stop()
		end := time.Now().Add(5 * bound)
		for time.Now().Before(end) {
			select {
			case <-r.Context().Done():
				fmt.Fprintf(w, "cancelled: %v\n", context.Cause(r.Context()))
				return
			case <-tk.C:
				fmt.Fprintln(w, "tick")
				if err := rc.Flush(); err != nil {
					return
				}
			}
		}
		fmt.Fprintln(w, "done")
	})
	addr := serve(t, stream, Config{BodyTimeout: bound})
	for _, method := range []string{"POST", "GET"} {
		t.Run(method, func(t *testing.T) {
			var body io.Reader
			if method == "POST" {
				body = strings.NewReader(`{"name":"run_command"}`)
			}
			req, _ := http.NewRequest(method, "http://"+addr+"/mcp", body)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			out, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("reading the stream: %v (so far %q)", err, out)
			}
			if !strings.HasSuffix(string(out), "done\n") || strings.Contains(string(out), "cancelled") {
				t.Fatalf("stream %q; want it to run to its end (done) without being cancelled", out)
			}
		})
	}
}

// Every path on a loopback listener refuses a Host that is not a loopback
// name (DNS rebinding), before its handler runs; the app's API answers in
// JSON, as its callers expect.
func TestForeignHostRefusedOnEveryPath(t *testing.T) {
	var reached atomic.Int64
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, "ok")
	}), Config{})
	_, port, _ := net.SplitHostPort(addr)
	for _, path := range []string{"/healthz", "/metrics", "/mcp", "/", "/api/me", "/nowhere"} {
		for host, want := range map[string]int{"evil.example:" + port: 403, "evil.example": 403, "127.0.0.1:" + port: 200, "localhost:" + port: 200, "[::1]:" + port: 200} {
			req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
			req.Host = host
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("GET %s with Host %s: got %d %q; want %d", path, host, res.StatusCode, b, want)
				continue
			}
			if want != 403 {
				continue
			}
			if !strings.Contains(string(b), "DNS rebinding") {
				t.Errorf("GET %s with Host %s: %q; want it to say why (DNS rebinding)", path, host, b)
			}
			if json := strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"); json != strings.HasPrefix(path, "/api/") {
				t.Errorf("GET %s: Content-Type %q; want JSON on /api/ only", path, res.Header.Get("Content-Type"))
			}
		}
	}
	if n := reached.Load(); n != 6*3 {
		t.Errorf("the handler ran %d times; want %d (only for loopback Hosts)", n, 6*3)
	}
}

// A refused request's body is not read: the answer comes while the client
// is still sending it.
func TestForeignHostRefusedWithoutReadingTheBody(t *testing.T) {
	addr := serve(t, readAll, Config{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// 100 KB announced, 1 KB sent: net/http reads up to 256 KB of an unread
	// body before answering, unless the connection is to be closed.
	fmt.Fprintf(conn, "POST /api/login HTTP/1.1\r\nHost: evil.example\r\nContent-Length: %d\r\n\r\n%s", 100<<10, strings.Repeat("x", 1<<10))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // on failure, do not wait for ever
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v; want 403 from the headers alone", err)
	}
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("got %d; want 403", res.StatusCode)
	}
}

// On the public listener every path serves the public host alone (421 for
// any other Host, loopback names included), every answer carries HSTS, and
// a request that passes is not taken for DNS rebinding by the handlers'
// own checks, though this listener is bound to loopback as in the tests
// (and behind a port forward).
func TestPublicHostOnly(t *testing.T) {
	var reached atomic.Int64
	var rebound atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if loopback.Rebound(r) {
			rebound.Add(1)
		}
		fmt.Fprint(w, "ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	public, err := publicurl.Parse("https://coord.test:" + port)
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(h, Config{Public: public})
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	paths := []string{"/healthz", "/metrics", "/mcp", "/", "/api/me", "/nowhere"}
	hosts := map[string]int{"coord.test:" + port: 200, "COORD.test:" + port: 200, "coord.test": 421, "evil.example:" + port: 421, "127.0.0.1:" + port: 421, "localhost:" + port: 421}
	for _, path := range paths {
		for host, want := range hosts {
			req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
			req.Host = host
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != want {
				t.Errorf("GET %s with Host %s: got %d %q; want %d", path, host, res.StatusCode, b, want)
			}
			if got := res.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
				t.Errorf("GET %s with Host %s: Strict-Transport-Security %q; want max-age=31536000", path, host, got)
			}
			if want == 421 && !strings.Contains(string(b), "serves https://coord.test:"+port+" only") {
				t.Errorf("GET %s with Host %s: %q; want it to name the public URL", path, host, b)
			}
			if json := strings.HasPrefix(res.Header.Get("Content-Type"), "application/json"); want == 421 && json != strings.HasPrefix(path, "/api/") {
				t.Errorf("GET %s: Content-Type %q; want JSON on /api/ only", path, res.Header.Get("Content-Type"))
			}
		}
	}
	if n := reached.Load(); n != int64(len(paths)*2) {
		t.Errorf("the handler ran %d times; want %d (only for the public host)", n, len(paths)*2)
	}
	if n := rebound.Load(); n != 0 {
		t.Errorf("loopback.Rebound held %d requests for the public host rebound; want none", n)
	}
}

// Over TLS, where clients speak HTTP/2 (the public listener), a body
// trickled a byte at a time is cut off at the bound too.
func TestSlowBodyIsCutOffOverHTTP2(t *testing.T) {
	const bound = 500 * time.Millisecond
	p := certtest.New(t, 1, "coord.test")
	cert, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public, _ := publicurl.Parse("https://coord.test")
	hs := NewServer(readAll, Config{BodyTimeout: bound, Public: public})
	hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.Cert)
	client := certtest.Client(t, roots, ln.Addr().String())

	body, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for range 100 { // 5 s to send
			<-tk.C
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
		}
		w.Close()
	}()
	start := time.Now()
	req, _ := http.NewRequest("POST", "https://coord.test/mcp", body)
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("no answer while the body trickled in: %v; want it cut off after %s", err, bound)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 {
		t.Fatalf("spoke %s; want HTTP/2, which this test is about", res.Proto)
	}
	if took := time.Since(start); res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within 500ms") || took > 3*time.Second {
		t.Errorf("got %d %q after %s; want 408 saying the body did not arrive within 500ms, well before the 5 s it takes to send", res.StatusCode, b, took)
	}
}
