// Package frontdoor holds the rules every request to the coordinator's HTTP
// listener passes before any handler sees it, whatever its path (/mcp, the
// app and its /api, /healthz, /metrics, and paths that exist nowhere):
//
//   - DNS rebinding: on a connection that arrived on a loopback address,
//     the Host must be a loopback name (403 otherwise). A page on
//     evil.example that makes its name resolve to 127.0.0.1 calls the
//     coordinator as its own origin, and only the Host tells.
//   - The public listener (Config.Public, --public-url): the Host must be
//     the public host (421 otherwise), whatever address the connection
//     arrived on, and every answer carries HSTS, so that a browser that
//     has seen the app once never reaches it over plain HTTP.
//   - Slow clients: the headers must arrive within HeaderTimeout and the
//     body within Config.BodyTimeout after them, so that a client sending a
//     byte a second cannot hold a connection and a handler for ever. The
//     bound is on reading the request only: a response may take as long as
//     it needs (run_command's wait, the app's event stream).
//
// The handlers keep their own checks too; these are the ones no route can
// forget.
package frontdoor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/publicurl"
)

// HeaderTimeout bounds the time a client takes to send a request's
// headers.
const HeaderTimeout = 10 * time.Second

// HSTS is the Strict-Transport-Security value of every answer from the
// public listener: browsers that have seen it reach the host over HTTPS
// only, for a year. Subdomains are left out: they are not the
// coordinator's.
const HSTS = "max-age=31536000"

// DefaultBodyTimeout is Config.BodyTimeout's default: the largest body any
// endpoint takes (1 MiB, on /mcp) arrives in it at 35 KB/s.
const DefaultBodyTimeout = 30 * time.Second

// Config tunes the front door. The zero value is the default.
type Config struct {
	// BodyTimeout bounds the time a client takes to send a request's body,
	// counted from the end of its headers; 0 means DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Logger receives the refusals; nil discards them.
	Logger *slog.Logger
	// Public, when set, makes this the public listener's front door: the
	// Host must name Public, and answers carry HSTS. Zero: the loopback
	// listener's (or a listener behind --public-http's proxy).
	Public publicurl.URL
}

// NewServer returns an http.Server for the coordinator's listener: next
// behind the front door, and the server's own timeouts to match.
func NewServer(next http.Handler, cfg Config) *http.Server {
	return &http.Server{
		Handler:           Handler(next, cfg),
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       2 * time.Minute,
	}
}

// Handler wraps next with the front door's rules.
func Handler(next http.Handler, cfg Config) http.Handler {
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cfg.Public.IsZero() {
			w.Header().Set("Strict-Transport-Security", HSTS)
		}
		hasBody := r.Body != nil && r.Body != http.NoBody
		if hasBody {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(cfg.BodyTimeout)); err == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, limit: cfg.BodyTimeout}
			} else if !errors.Is(err, http.ErrNotSupported) {
				logger.Warn("could not bound the request body's reading time", "err", err, "path", r.URL.Path)
			}
		}
		code, msg := hostRule(r, cfg.Public)
		if code != 0 {
			logger.Warn("request refused", "reason", msg, "path", r.URL.Path, "remote", r.RemoteAddr)
			if hasBody && r.ProtoMajor == 1 {
				// Answer without reading the body, and close the connection
				// rather than read the body to reuse it. (HTTP/2 resets the
				// one stream.)
				w.Header().Set("Connection", "close")
			}
			refuse(w, r, code, msg)
			return
		}
		if !cfg.Public.IsZero() {
			r = r.WithContext(loopback.HostChecked(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}

// hostRule returns the status and message a request's Host is refused
// with, or 0. On the public listener the Host must name the public URL;
// the request is then marked as checked (loopback.HostChecked) by the
// caller, so that the handlers' own rebinding checks do not refuse the
// public host when the listener is bound to a loopback address (behind a
// port forward, or in tests). Everywhere else: the DNS-rebinding rule.
func hostRule(r *http.Request, public publicurl.URL) (int, string) {
	if !public.IsZero() {
		if public.Accepts(r.Host) {
			return 0, ""
		}
		return http.StatusMisdirectedRequest, fmt.Sprintf("this listener serves %s only, and Host %q is not it; use %s", public, r.Host, public)
	}
	if loopback.Rebound(r) {
		return http.StatusForbidden, fmt.Sprintf("Host %q is not a loopback name on a loopback connection (possible DNS rebinding); use http://127.0.0.1 or http://localhost", r.Host)
	}
	return 0, ""
}

// refuse answers in JSON on the app's API, whose callers read JSON errors,
// and in text elsewhere.
func refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// deadlineBody is a request body read under the connection's read
// deadline, whose timeout says what happened. Once the body has been read
// to its end the deadline is lifted: the server then keeps reading the
// connection in the background to notice a client that goes away, and a
// deadline firing there would cancel the request's context, ending a long
// response (an event stream) that has nothing more to read. (net/http
// clears it itself when it starts that read; this does not rely on it.)
// Requests without a body get no deadline at all, for the same reason:
// their background read starts before the handler.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	limit time.Duration
	done  bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil || b.done {
		return n, err
	}
	if errors.Is(err, io.EOF) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
		return n, err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, &BodyTimeoutError{Limit: b.limit, Err: err}
	}
	return n, err
}

// BodyTimeoutError is the error a handler reads from a body that did not
// arrive in time. It matches os.ErrDeadlineExceeded with errors.Is.
type BodyTimeoutError struct {
	Limit time.Duration
	Err   error
}

func (e *BodyTimeoutError) Error() string {
	return fmt.Sprintf("the request body did not arrive within %s of its headers; send the whole request at once", e.Limit)
}

func (e *BodyTimeoutError) Unwrap() error { return e.Err }
