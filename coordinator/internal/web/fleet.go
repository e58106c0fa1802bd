package web

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Views answer the app's read-only pages of the fleet; *fleetview.App
// satisfies it, so that a person sees what the AI's tools see.
type Views interface {
	Fleet(ctx context.Context, after string) (fleetview.AppFleet, error)
	Server(ctx context.Context, name string) (fleetview.AppServer, error)
	ServerMetrics(ctx context.Context, name, since string) (fleetview.MetricsOutput, error)
	Incidents(ctx context.Context) (fleetview.AppIncidents, error)
	Security(ctx context.Context, after string) (fleetview.SecurityOutput, error)
	// Version changes when what the map draws may have changed.
	Version() string
}

// Bounds of the audit page.
const (
	defaultAuditPage = 50
	maxAuditPage     = 200
	// auditScan is how many of the newest requests the filters look
	// through; older ones are beyond the page's reach (the CLI's
	// `gridcity audit` reads them all).
	auditScan      = 5000
	maxAuditSteps  = 100
	maxAuditFilter = 256
)

func (a *app) routeViews(mux *http.ServeMux) {
	view := func(h func(w http.ResponseWriter, r *http.Request) (any, error)) http.Handler {
		return a.authed(func(w http.ResponseWriter, r *http.Request, _ store.Session) {
			if a.cfg.Views == nil {
				writeError(w, http.StatusServiceUnavailable, "this coordinator serves no fleet pages")
				return
			}
			v, err := h(w, r)
			switch {
			case errors.Is(err, fleetview.ErrNotFound):
				writeError(w, http.StatusNotFound, err.Error())
			case errors.Is(err, fleetview.ErrBadRequest):
				writeError(w, http.StatusBadRequest, err.Error())
			case err != nil:
				a.log.Error("app page failed", "path", r.URL.Path, "err", err)
				writeError(w, http.StatusInternalServerError, "the page could not be made: "+err.Error())
			default:
				writePage(w, r, v)
			}
		})
	}
	mux.Handle("GET /api/fleet", view(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return a.cfg.Views.Fleet(r.Context(), r.URL.Query().Get("after"))
	}))
	mux.Handle("GET /api/servers/{name}", view(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return a.cfg.Views.Server(r.Context(), r.PathValue("name"))
	}))
	mux.Handle("GET /api/servers/{name}/metrics", view(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return a.cfg.Views.ServerMetrics(r.Context(), r.PathValue("name"), r.URL.Query().Get("since"))
	}))
	mux.Handle("GET /api/incidents", view(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return a.cfg.Views.Incidents(r.Context())
	}))
	mux.Handle("GET /api/security", view(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return a.cfg.Views.Security(r.Context(), r.URL.Query().Get("after"))
	}))
	mux.Handle("GET /api/audit", a.authed(a.audit))
}

// auditRow is one request on the audit page, with its steps.
type auditRow struct {
	requestView
	Steps []auditStep `json:"steps"`
}

type auditStep struct {
	At     string `json:"at"`
	Step   string `json:"step"`
	Actor  string `json:"actor"`
	Detail any    `json:"detail,omitempty"`
}

// auditPage is GET /api/audit's answer.
type auditPage struct {
	Requests []auditRow `json:"requests"`
	// Matched counts the matching requests among the newest Scanned.
	Matched   int    `json:"matched"`
	Scanned   int    `json:"scanned"`
	NextAfter string `json:"nextAfter,omitempty"`
}

// audit answers GET /api/audit?server=&client=&token=&approver=&outcome=&q=&after=&limit=:
// the requests, newest first, with every step the audit log holds for
// them; each filter matches a field exactly (ignoring case), q any text of
// the command or reason, outcome the request's status.
func (a *app) audit(w http.ResponseWriter, r *http.Request, _ store.Session) {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit", defaultAuditPage, maxAuditPage)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, k := range []string{"server", "client", "token", "approver", "outcome", "q", "after"} {
		if len(q.Get(k)) > maxAuditFilter {
			writeError(w, http.StatusBadRequest, k+" is longer than 256 characters")
			return
		}
	}
	if o := q.Get("outcome"); o != "" && !knownStatus(o) {
		writeError(w, http.StatusBadRequest, "outcome "+o+" is not a status: use pending, approved, dispatched, running, completed, denied, failed, timed_out or unknown")
		return
	}
	rs, err := a.svc.History(r.Context(), auditScan)
	if err != nil {
		a.serviceError(w, r, "reading the audit", err)
		return
	}
	match := func(x command.Request) bool {
		eq := func(k, v string) bool { f := q.Get(k); return f == "" || strings.EqualFold(f, v) }
		text := strings.ToLower(q.Get("q"))
		return eq("server", x.Server) && eq("client", x.Client) && eq("token", x.Token) && eq("approver", x.DecidedBy) &&
			eq("outcome", string(x.Status)) && (text == "" || strings.Contains(strings.ToLower(x.Command+"\n"+x.Reason), text))
	}
	out := auditPage{Requests: []auditRow{}, Scanned: len(rs)}
	started := q.Get("after") == ""
	for _, x := range rs {
		if !match(x) {
			continue
		}
		out.Matched++
		if !started {
			started = x.ID == q.Get("after")
			continue
		}
		if len(out.Requests) == limit {
			if out.NextAfter == "" {
				out.NextAfter = out.Requests[len(out.Requests)-1].ID
			}
			continue
		}
		row := auditRow{requestView: viewOf(x), Steps: []auditStep{}}
		steps, err := a.st.Audit(r.Context(), x.ID, maxAuditSteps)
		if err != nil {
			a.serviceError(w, r, "reading the audit", err)
			return
		}
		for _, s := range steps {
			row.Steps = append(row.Steps, auditStep{At: s.At.UTC().Format("2006-01-02T15:04:05Z"), Step: s.Step, Actor: s.Actor, Detail: jsonOrNil(s.Detail)})
		}
		out.Requests = append(out.Requests, row)
	}
	if !started {
		writeError(w, http.StatusBadRequest, "after "+q.Get("after")+" is not a request on this page's filters; start again without after")
		return
	}
	writePage(w, r, out)
}

func knownStatus(s string) bool {
	for _, st := range []command.Status{command.StatusPending, command.StatusApproved, command.StatusDispatched, command.StatusRunning,
		command.StatusCompleted, command.StatusDenied, command.StatusFailed, command.StatusTimedOut, command.StatusUnknown} {
		if string(st) == s {
			return true
		}
	}
	return false
}

// jsonOrNil is an audit row's JSON detail as a value, nil when there is none.
func jsonOrNil(b []byte) any {
	if len(b) == 0 || string(b) == "{}" {
		return nil
	}
	return json.RawMessage(b)
}

// writePage answers a page's JSON, gzipped when the browser accepts it
// (every browser does): the map of a thousand servers is about a MiB of
// JSON and a tenth of that gzipped. The pages hold no secret for a
// compression side channel to find (the session's key is only ever in the
// login's answer, which is not compressed).
func writePage(w http.ResponseWriter, r *http.Request, v any) {
	if !acceptsGzip(r) {
		writeJSON(w, http.StatusOK, v)
		return
	}
	h := w.Header()
	h.Set("Content-Encoding", "gzip")
	h.Add("Vary", "Accept-Encoding")
	z, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	defer z.Close()
	writeJSON(gzipped{ResponseWriter: w, z: z}, http.StatusOK, v)
}

// gzipped writes a response's body through z.
type gzipped struct {
	http.ResponseWriter
	z *gzip.Writer
}

func (g gzipped) Write(b []byte) (int, error) { return g.z.Write(b) }

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, q, _ := strings.Cut(strings.TrimSpace(part), ";"); strings.EqualFold(enc, "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
