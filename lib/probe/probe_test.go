package probe

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// tcpEngines speak a protocol over a plain TCP connection to host:port.
var tcpEngines = []string{"tcp", "postgres", "redis", "mysql", "http"}

// target is how engine e addresses addr.
func target(e, addr string) string {
	if e == "http" {
		return "http://" + addr + "/"
	}
	return addr
}

// fakeServer listens on loopback and runs serve for each connection until the test ends.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestRunUnknownEngineAndEmptyTarget(t *testing.T) {
	for _, s := range []Spec{{Engine: "gopher", Target: "127.0.0.1:70"}, {Engine: "tcp"}} {
		r := Run(context.Background(), s)
		if r.OK || r.Reason == "" || r.Metrics == nil {
			t.Errorf("Run(%+v) = %+v; want a failure with a reason and non-nil metrics", s, r)
		}
	}
}

func TestEngines(t *testing.T) {
	got := strings.Join(Engines(), ",")
	want := "dns,http,https,mysql,postgres,redis,s3,tcp"
	if got != want {
		t.Errorf("Engines() = %s; want %s", got, want)
	}
}

func TestHostPort(t *testing.T) {
	tests := []struct {
		in, def, want string
		wantErr       bool
	}{
		{"10.0.4.20:5432", "5432", "10.0.4.20:5432", false},
		{"10.0.4.20", "5432", "10.0.4.20:5432", false},
		{"db.internal", "6379", "db.internal:6379", false},
		{"::1", "6379", "[::1]:6379", false},
		{"[::1]:7000", "6379", "[::1]:7000", false},
		{"[::1]", "6379", "[::1]:6379", false},
		{"postgres://db:5433/app?sslmode=disable", "5432", "db:5433", false},
		{"redis://cache", "6379", "cache:6379", false},
		{"10.0.4.20", "", "", true},
		{":80", "80", "", true},
		{"postgres://", "5432", "", true},
	}
	for _, tt := range tests {
		got, err := hostPort(tt.in, tt.def)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("hostPort(%q, %q) = %q, %v; want %q, error %v", tt.in, tt.def, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestClean(t *testing.T) {
	got := Clean("a\x00b\r\nc\xff" + strings.Repeat("é", 400))
	if strings.ContainsAny(got, "\x00\r\n") || len(got) > maxReason+len("…") || !strings.HasPrefix(got, "a b  c\uFFFD") {
		t.Errorf("Clean(...) = %q; want control characters replaced, valid UTF-8, at most %d bytes", got, maxReason)
	}
}

func TestRefused(t *testing.T) {
	addr := closedPort(t)
	for _, e := range tcpEngines {
		r := Run(context.Background(), Spec{Engine: e, Target: target(e, addr), Timeout: 2 * time.Second})
		if r.OK || !strings.Contains(r.Reason, "connection refused") || !strings.Contains(r.Reason, addr) {
			t.Errorf("%s on a closed port: %+v; want a failure whose reason names %s and says connection refused", e, r, addr)
		}
	}
}

// TestSilentServer: a server that accepts and never answers must not hold a probe past its timeout.
func TestSilentServer(t *testing.T) {
	stop := make(chan struct{})
	addr := fakeServer(t, func(c net.Conn) { <-stop })
	t.Cleanup(func() { close(stop) }) // runs before the server's cleanup: LIFO
	const timeout = 300 * time.Millisecond
	for _, e := range []string{"postgres", "redis", "mysql", "http"} {
		start := time.Now()
		r := Run(context.Background(), Spec{Engine: e, Target: target(e, addr), Timeout: timeout})
		if el := time.Since(start); el > timeout+200*time.Millisecond {
			t.Errorf("%s against a silent server returned after %s; want about %s", e, el, timeout)
		}
		if r.OK || r.Reason == "" {
			t.Errorf("%s against a silent server: %+v; want a failure with a reason", e, r)
		}
		t.Logf("%s: %s", e, r.Reason)
	}
}

func TestParentContextCancelled(t *testing.T) {
	stop := make(chan struct{})
	addr := fakeServer(t, func(c net.Conn) { <-stop })
	t.Cleanup(func() { close(stop) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := Run(ctx, Spec{Engine: "redis", Target: addr, Timeout: 10 * time.Second})
	if time.Since(start) > time.Second || r.OK {
		t.Errorf("Run with a context ending after 100ms: %+v after %s; want a failure within about 100ms", r, time.Since(start))
	}
}

// TestGarbageServer: nonsense, huge lengths and half messages fail cleanly, without panics.
func TestGarbageServer(t *testing.T) {
	payloads := map[string][]byte{
		"text":       []byte("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"),
		"huge":       {'E', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"short":      {'R', 0, 0},
		"binary":     {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0xff},
		"longline":   []byte(strings.Repeat("+", 100<<10)),
		"nul-header": make([]byte, 64),
	}
	for name, p := range payloads {
		addr := fakeServer(t, func(c net.Conn) { c.Write(p) })
		for _, e := range []string{"postgres", "redis", "mysql", "http"} {
			r := Run(context.Background(), Spec{Engine: e, Target: target(e, addr), Timeout: time.Second})
			if r.OK || r.Reason == "" || len(r.Reason) > maxReason+len("…") {
				t.Errorf("%s reading %s: %+v; want a failure with a bounded reason", e, name, r)
			}
		}
	}
}

func TestTCP(t *testing.T) {
	addr := fakeServer(t, func(net.Conn) {})
	r := Run(context.Background(), Spec{Engine: "tcp", Target: addr, Timeout: time.Second})
	if !r.OK || r.Reason != "" || r.Latency <= 0 {
		t.Errorf("tcp to a listening port: %+v; want OK with a latency", r)
	}
}

func TestDNS(t *testing.T) {
	r := Run(context.Background(), Spec{Engine: "dns", Target: "localhost", Timeout: 2 * time.Second})
	if !r.OK || r.Metrics["addresses"] < 1 {
		t.Errorf("dns localhost: %+v; want OK with at least one address", r)
	}
	// .invalid never resolves (RFC 6761); offline, the lookup fails by timeout instead.
	r = Run(context.Background(), Spec{Engine: "dns", Target: "gridcity-probe.invalid", Timeout: 2 * time.Second})
	if r.OK || r.Reason == "" {
		t.Errorf("dns gridcity-probe.invalid: %+v; want a failure with a reason", r)
	}
}
