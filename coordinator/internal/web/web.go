// Package web is the approval app: the page a person opens to approve or
// deny the commands an AI asked to run, and the JSON API behind it.
//
// The app has its own login (approver accounts, bcrypt) and sessions: an
// HttpOnly, SameSite=Strict cookie plus a second secret that the page keeps
// in sessionStorage and sends in the X-Gridcity-Session header (both kept by
// hash; see auth.go for why the cookie alone is not enough). An MCP bearer
// token opens nothing here. Every state-changing request must come from the
// app's own origin, so a page on another site cannot approve anything even
// in a logged-in browser, and on loopback the Host must be a loopback name,
// so DNS rebinding cannot make another site the app's origin.
//
// The page is plain HTML, CSS and JavaScript embedded in the binary: no CDN,
// no build step, no inline script (the Content-Security-Policy forbids it),
// and everything that came from the fleet or the AI is put on the page as
// text, never as HTML.
package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Service is the command service as the app uses it; *command.Service
// satisfies it. A small interface keeps the handlers testable on their own.
type Service interface {
	// Pending lists requests awaiting a decision, oldest first.
	Pending(ctx context.Context) ([]command.Request, error)
	// History lists every request, newest first, at most limit.
	History(ctx context.Context, limit int) ([]command.Request, error)
	Get(ctx context.Context, id string) (command.Request, error)
	Approve(ctx context.Context, id, approver string, a command.Approval) (command.Request, error)
	Deny(ctx context.Context, id, approver, note string) (command.Request, error)
	// MarkShown records (once per request) that an approver saw it.
	MarkShown(ctx context.Context, id, approver string)
	// Subscribe delivers every change; the func unsubscribes.
	Subscribe() (<-chan command.Event, func())
}

// Config tunes the app. The zero value works on plain-HTTP loopback.
type Config struct {
	// Secure marks the session cookie Secure (and names it with the
	// __Host- prefix); set it when the app is served over TLS.
	Secure bool
	// SessionTTL is how long a login lasts; 0 means 12 hours.
	SessionTTL time.Duration
	// Now is the clock for sessions and login rate limits; nil means time.Now.
	Now func() time.Time
	// Views answer the read-only pages of the fleet (/api/fleet,
	// /api/servers/…, /api/incidents, /api/security); nil: they answer 503.
	Views Views
	// OAuth is the consent step of MCP clients' sign-in; nil: the
	// /api/oauth/ endpoints answer 404.
	OAuth Consent

	// heartbeat is how often an idle event stream carries a comment, so
	// that proxies keep it open and a dead client is noticed; the session
	// is checked again at each one. 0 means 15 s; tests shorten it.
	heartbeat time.Duration
	// fleetEvery is how often an event stream looks for a change of the
	// fleet to tell the page of; 0 means 2 s.
	fleetEvery time.Duration
}

// Bounds on what a browser may send and ask for.
const (
	defaultSessionTTL = 12 * time.Hour
	maxLoginBody      = 4 << 10
	maxApproveBody    = 128 << 10 // the declared input may be a key or a certificate
	maxDenyBody       = 16 << 10
	maxNoteRunes      = 2000
	defaultHistory    = 100
	maxHistory        = 1000
)

//go:embed assets
var assets embed.FS

// Store is the part of the coordinator's store the app reads and writes:
// approvers to log in, and their sessions.
type Store interface {
	Approver(ctx context.Context, name string) (store.Approver, error)
	CreateSession(ctx context.Context, s store.Session) error
	// SessionByHash returns a session that has not expired at now.
	SessionByHash(ctx context.Context, hash []byte, now time.Time) (store.Session, error)
	DeleteSession(ctx context.Context, hash []byte) error
	// Audit lists a request's audit rows in order, at most limit.
	Audit(ctx context.Context, requestID string, limit int) ([]store.AuditEntry, error)
}

type app struct {
	cfg     Config
	svc     Service
	st      Store
	log     *slog.Logger
	logins  *loginLimiter
	streams *streams
}

// New returns the app's handler, to be mounted at "/" beside the
// coordinator's own /mcp, /healthz and /metrics.
func New(cfg Config, svc Service, st Store, logger *slog.Logger) http.Handler {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = defaultSessionTTL
	}
	if cfg.heartbeat <= 0 {
		cfg.heartbeat = 15 * time.Second
	}
	if cfg.fleetEvery <= 0 {
		cfg.fleetEvery = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &app{cfg: cfg, svc: svc, st: st, log: logger, logins: newLoginLimiter(), streams: newStreams()}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/login", a.login)
	mux.Handle("POST /api/logout", a.authed(a.logout))
	mux.Handle("GET /api/me", a.authed(a.me))
	mux.Handle("GET /api/requests", a.authed(a.listRequests))
	mux.Handle("GET /api/history", a.authed(a.history))
	mux.Handle("GET /api/requests/{id}", a.authed(a.getRequest))
	mux.Handle("POST /api/requests/{id}/approve", a.authed(a.approve))
	mux.Handle("POST /api/requests/{id}/deny", a.authed(a.deny))
	mux.Handle("GET /api/events", a.authed(a.events))
	a.routeViews(mux)
	a.routeOAuth(mux)
	// Anything else under /api/ is a mistake, answered in JSON; it still
	// needs a session so that the API's shape is not told to strangers.
	mux.Handle("/api/", a.authed(func(w http.ResponseWriter, r *http.Request, _ store.Session) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s; the app's API is /api/login, /api/me, /api/requests, /api/history, /api/events, /api/fleet, /api/servers/NAME, /api/servers/NAME/metrics, /api/incidents, /api/security, /api/audit", r.Method, r.URL.Path))
	}))

	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder
	}
	files := http.FileServerFS(static)
	zipped := gzipAssets(static)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	// The installable app: its manifest, and the service worker that keeps
	// its shell, at the root so that its scope is the whole app.
	mux.HandleFunc("GET /manifest.webmanifest", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/manifest+json")
		http.ServeFileFS(w, r, static, "manifest.webmanifest")
	})
	mux.HandleFunc("GET /sw.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		http.ServeFileFS(w, r, static, "sw.js")
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		if z, ok := zipped[r.URL.Path]; ok && acceptsGzip(r) {
			h := w.Header()
			h.Set("Content-Type", mime.TypeByExtension(path.Ext(r.URL.Path)))
			h.Set("Content-Encoding", "gzip")
			h.Add("Vary", "Accept-Encoding")
			h.Set("Content-Length", strconv.Itoa(len(z)))
			w.Write(z)
			return
		}
		files.ServeHTTP(w, r)
	})))

	return securityHeaders(hostGuard(a.log, mux))
}

// gzipAssets compresses the page's script and style once, at start: a
// phone on a slow link loads a third of the bytes.
func gzipAssets(static fs.FS) map[string][]byte {
	out := map[string][]byte{}
	matches, _ := fs.Glob(static, "*.[jc]s*")
	for _, name := range matches {
		if ext := path.Ext(name); ext != ".js" && ext != ".css" {
			continue
		}
		b, err := fs.ReadFile(static, name)
		if err != nil {
			continue
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		out[name] = z.Bytes()
	}
	return out
}

// hostGuard refuses, before anything else, a request whose Host is not a
// loopback name on a loopback connection (DNS rebinding; see checkHost).
func hostGuard(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := checkHost(r); msg != "" {
			log.Warn("app request refused", "reason", msg, "path", r.URL.Path, "remote", r.RemoteAddr)
			if strings.HasPrefix(r.URL.Path, "/api/") {
				writeError(w, http.StatusForbidden, msg)
			} else {
				http.Error(w, msg, http.StatusForbidden)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// securityHeaders sets on every response what keeps the page from being
// framed, from running script it did not ship, and from leaking its URL.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		// The API's answers are about live requests: never from a cache.
		// The page's files may be revalidated, so a new binary shows at once.
		h.Set("Cache-Control", "no-store")
		if r.URL.Path == "/" || r.URL.Path == "/sw.js" || r.URL.Path == "/manifest.webmanifest" || strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-cache")
		}
		next.ServeHTTP(w, r)
	})
}

// apiError is every error the API returns: what was wrong and what to do.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v) // the client went away; nothing to tell it
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}

// decodeJSON reads a bounded JSON body into v, refusing unknown fields so
// that a misspelt "input" fails loudly instead of approving without it.
// It returns a status and message to send when the body is unusable.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) (int, string) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "send the body as JSON with Content-Type: application/json"
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", limit)
		}
		if errors.Is(err, io.EOF) {
			return http.StatusBadRequest, "request body is empty; send a JSON object"
		}
		return http.StatusBadRequest, "request body is not the expected JSON: " + err.Error()
	}
	if dec.More() {
		return http.StatusBadRequest, "request body has data after the JSON object; send one object"
	}
	return 0, ""
}

// queryInt parses an optional positive integer query parameter.
func queryInt(r *http.Request, name string, def, max int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q is not a positive number", name, s)
	}
	return min(n, max), nil
}
