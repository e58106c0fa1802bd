// Package probe checks that a resource answers, each engine speaking the resource's real
// protocol (a TCP connect, an HTTP request, a Postgres startup, a Redis PING, a MySQL handshake,
// a DNS lookup, an S3 bucket HEAD) with the standard library only. It is shared by the agent,
// which probes from the servers that use a resource, and the coordinator, which probes the rest.
//
// Everything read from the wire is untrusted: reads are bounded, lengths are checked before
// slicing, and reasons taken from a server are truncated and stripped of control characters.
package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultTimeout bounds a probe whose Spec sets no timeout.
const DefaultTimeout = 5 * time.Second

// AgentMinInterval is the shortest interval at which an agent repeats a probe: an agent is a
// guest on its server, and the coordinator expects its results no more often than this.
const AgentMinInterval = 5 * time.Second

// maxReason bounds a reason: it may quote a server, and servers are untrusted.
const maxReason = 512

// Spec says what to probe and how long to wait at most.
type Spec struct {
	Engine  string        // one of Engines()
	Target  string        // host:port, a URL for http/https/s3, a name for dns
	Timeout time.Duration // DefaultTimeout when zero or negative
}

// Result is the outcome of one probe.
type Result struct {
	OK bool
	// Reason is the real error text when OK is false (e.g. "dial tcp 10.0.4.20:5432: connect:
	// connection refused"), empty when OK is true.
	Reason      string
	Latency     time.Duration
	Metrics     map[string]float64 // never nil
	TLSNotAfter time.Time          // https only: the leaf certificate's NotAfter, even when unverified
}

// engine runs one probe; the context carries the deadline, which the engine must honour.
type engine func(ctx context.Context, target string) Result

var engines = map[string]engine{
	"tcp":      probeTCP,
	"http":     func(ctx context.Context, t string) Result { return probeHTTP(ctx, "http", t) },
	"https":    func(ctx context.Context, t string) Result { return probeHTTP(ctx, "https", t) },
	"postgres": probePostgres,
	"redis":    probeRedis,
	"mysql":    probeMySQL,
	"dns":      probeDNS,
	"s3":       probeS3,
}

// Engines lists the engine names Run knows, sorted, so that a config can be validated at start.
func Engines() []string {
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Run probes s.Target with s.Engine. It never returns later than s.Timeout after it was called
// (or after ctx ends), never panics, and reports every failure in Result.Reason.
func Run(ctx context.Context, s Spec) (res Result) {
	start := time.Now()
	defer func() {
		res.Latency = time.Since(start)
		res.Reason = Clean(res.Reason)
		if res.OK {
			res.Reason = ""
		} else if res.Reason == "" {
			res.Reason = "probe failed without a reason"
		}
		if res.Metrics == nil {
			res.Metrics = map[string]float64{}
		}
	}()
	eng, ok := engines[strings.ToLower(strings.TrimSpace(s.Engine))]
	if !ok {
		return Result{Reason: fmt.Sprintf("unknown probe engine %q (known: %s)", s.Engine, strings.Join(Engines(), ", "))}
	}
	if strings.TrimSpace(s.Target) == "" {
		return Result{Reason: fmt.Sprintf("%s probe: empty target", s.Engine)}
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	done := make(chan Result, 1) // buffered: an engine that overstays must not leak blocked
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- Result{Reason: fmt.Sprintf("%s probe of %s panicked: %v", s.Engine, s.Target, p)}
			}
		}()
		done <- eng(ctx, strings.TrimSpace(s.Target))
	}()
	select {
	case res = <-done:
		return res
	case <-ctx.Done():
		select {
		case res = <-done: // the engine's own error text is the better reason
			return res
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Result{Reason: fmt.Sprintf("%s probe of %s: no answer within %s", s.Engine, s.Target, timeout)}
		}
		return Result{Reason: fmt.Sprintf("%s probe of %s: %v", s.Engine, s.Target, context.Cause(ctx))}
	}
}

// fail is a failed Result with err's text as the reason.
func fail(err error) Result { return Result{Reason: err.Error()} }

// dial connects to target (host:port, host, or scheme://host:port/…) and sets the context's
// deadline on the connection, so that every later read and write is bounded too.
func dial(ctx context.Context, target, defaultPort string) (net.Conn, error) {
	addr, err := hostPort(target, defaultPort)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(dl); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// hostPort turns a target into host:port, adding defaultPort when the target has none.
func hostPort(target, defaultPort string) (string, error) {
	t := strings.TrimSpace(target)
	if strings.Contains(t, "://") {
		u, err := url.Parse(t)
		if err != nil {
			return "", fmt.Errorf("parse target %q: %w", target, err)
		}
		t = u.Host
	}
	if t == "" {
		return "", fmt.Errorf("target %q names no host", target)
	}
	if ip := net.ParseIP(strings.Trim(t, "[]")); ip != nil && (!strings.HasPrefix(t, "[") || strings.HasSuffix(t, "]")) {
		if defaultPort == "" {
			return "", fmt.Errorf("target %q names no port", target)
		}
		return net.JoinHostPort(ip.String(), defaultPort), nil
	}
	host, port, err := net.SplitHostPort(t)
	if err != nil {
		if defaultPort == "" || strings.Contains(t, ":") {
			return "", fmt.Errorf("target %q: want host:port", target)
		}
		return net.JoinHostPort(t, defaultPort), nil
	}
	if host == "" || port == "" {
		return "", fmt.Errorf("target %q: want host:port", target)
	}
	return t, nil
}

// Clean makes text from a probed server safe to pass on as data: valid UTF-8, control characters
// turned into spaces, trimmed, and cut at a bounded length.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
