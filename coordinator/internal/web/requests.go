package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// requestView is a request as the page sees it. It is built field by field
// from command.Request, so that nothing added to the request later reaches
// the browser without a decision here; the request never holds the input's
// value or a sudo password in the first place.
type requestView struct {
	ID             string         `json:"id"`
	Server         string         `json:"server"`
	Command        string         `json:"command"`
	Reason         string         `json:"reason"`
	Client         string         `json:"client"`
	Token          string         `json:"token"`
	Risky          bool           `json:"risky"`
	Input          *command.Input `json:"input"`
	Sudo           bool           `json:"sudo"`
	RunAs          string         `json:"runAs"`
	TimeoutSeconds int            `json:"timeoutSeconds"`
	CreatedAt      time.Time      `json:"createdAt"`
	ExpiresAt      time.Time      `json:"expiresAt"`

	Status command.Status `json:"status"`
	// Decision is approved, denied, expired, or "" while pending.
	Decision   string         `json:"decision"`
	DecidedBy  string         `json:"decidedBy"`
	DecidedAt  *time.Time     `json:"decidedAt"`
	Note       string         `json:"note"`
	StartedAt  *time.Time     `json:"startedAt"`
	FinishedAt *time.Time     `json:"finishedAt"`
	ExitCode   *int           `json:"exitCode"`
	Stdout     command.Output `json:"stdout"`
	Stderr     command.Output `json:"stderr"`
	DurationMs int64          `json:"durationMs"`
	Detail     string         `json:"detail"`

	// Added in issue 13; the fields above keep their names and meaning.
	// Runbook names the configured runbook(s) whose command this is.
	Runbook string `json:"runbook"`
	// InputGiven and SudoPasswordGiven say that the approver typed the
	// declared input and a sudo password; their values are never kept.
	InputGiven        bool `json:"inputGiven"`
	SudoPasswordGiven bool `json:"sudoPasswordGiven"`
}

func viewOf(r command.Request) requestView {
	v := requestView{
		ID: r.ID, Server: r.Server, Command: r.Command, Reason: r.Reason,
		Client: r.Client, Token: r.Token, Risky: r.Risky, Sudo: r.Sudo, RunAs: r.RunAs,
		TimeoutSeconds: r.TimeoutSeconds, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		Status: r.Status, DecidedBy: r.DecidedBy, DecidedAt: timePtr(r.DecidedAt), Note: r.Note,
		StartedAt: timePtr(r.StartedAt), FinishedAt: timePtr(r.FinishedAt),
		ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr, DurationMs: r.DurationMs, Detail: r.Detail,
		Runbook: r.Runbook, InputGiven: r.InputGiven, SudoPasswordGiven: r.SudoPasswordGiven,
	}
	if r.Input != nil {
		in := *r.Input
		v.Input = &in
	}
	switch {
	case r.Status == command.StatusPending:
	case r.Status == command.StatusDenied && r.DecidedBy == "":
		v.Decision = "expired"
	case r.Status == command.StatusDenied:
		v.Decision = "denied"
	case !r.DecidedAt.IsZero():
		v.Decision = "approved"
	}
	return v
}

func viewsOf(rs []command.Request) []requestView {
	out := make([]requestView, 0, len(rs)) // [] rather than null for an empty list
	for _, r := range rs {
		out = append(out, viewOf(r))
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// listRequests serves ?status=pending (the default: the cards) and
// ?status=all (the history).
func (a *app) listRequests(w http.ResponseWriter, r *http.Request, se store.Session) {
	switch s := r.URL.Query().Get("status"); s {
	case "", "pending":
		rs, err := a.svc.Pending(r.Context())
		if err != nil {
			a.serviceError(w, r, "listing pending requests", err)
			return
		}
		for _, req := range rs {
			a.svc.MarkShown(r.Context(), req.ID, se.Approver)
		}
		writeJSON(w, http.StatusOK, viewsOf(rs))
	case "all":
		a.history(w, r, se)
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("status=%q is not known; use status=pending or status=all", s))
	}
}

func (a *app) history(w http.ResponseWriter, r *http.Request, _ store.Session) {
	limit, err := queryInt(r, "limit", defaultHistory, maxHistory)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rs, err := a.svc.History(r.Context(), limit)
	if err != nil {
		a.serviceError(w, r, "listing the history", err)
		return
	}
	writeJSON(w, http.StatusOK, viewsOf(rs))
}

func (a *app) getRequest(w http.ResponseWriter, r *http.Request, _ store.Session) {
	req, err := a.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.decisionError(w, r, r.PathValue("id"), err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(req))
}

type approveRequest struct {
	Note string `json:"note"`
	// Input is the value of the request's declared input, for its stdin.
	Input *string `json:"input"`
	// SudoPassword is for sudo on the server, given through askpass.
	SudoPassword *string `json:"sudoPassword"`
}

// String keeps the input and the sudo password out of any log or error
// message that formats the request.
func (approveRequest) String() string { return "approveRequest{redacted}" }

func (a *app) approve(w http.ResponseWriter, r *http.Request, se store.Session) {
	id := r.PathValue("id")
	var in approveRequest
	if code, msg := decodeJSON(w, r, maxApproveBody, &in); code != 0 {
		writeError(w, code, msg)
		return
	}
	if msg := checkNote(in.Note); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	ap := command.Approval{Note: in.Note}
	// An empty field on the card means "not given": the service then asks
	// for a declared input with ErrInputRequired, and runs sudo without a
	// password (it may be configured NOPASSWD).
	if in.Input != nil && *in.Input != "" {
		ap.Input = []byte(*in.Input)
	}
	if in.SudoPassword != nil && *in.SudoPassword != "" {
		ap.SudoPassword = []byte(*in.SudoPassword)
	}
	req, err := a.svc.Approve(r.Context(), id, se.Approver, ap)
	if err != nil {
		a.decisionError(w, r, id, err)
		return
	}
	a.log.Info("request approved in the app", "request", id, "approver", se.Approver)
	writeJSON(w, http.StatusOK, viewOf(req))
}

type denyRequest struct {
	Note string `json:"note"`
}

func (a *app) deny(w http.ResponseWriter, r *http.Request, se store.Session) {
	id := r.PathValue("id")
	var in denyRequest
	if code, msg := decodeJSON(w, r, maxDenyBody, &in); code != 0 {
		writeError(w, code, msg)
		return
	}
	if msg := checkNote(in.Note); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	req, err := a.svc.Deny(r.Context(), id, se.Approver, in.Note)
	if err != nil {
		a.decisionError(w, r, id, err)
		return
	}
	a.log.Info("request denied in the app", "request", id, "approver", se.Approver)
	writeJSON(w, http.StatusOK, viewOf(req))
}

func checkNote(note string) string {
	if n := utf8.RuneCountInString(note); n > maxNoteRunes {
		return fmt.Sprintf("the note has %d characters; keep it under %d", n, maxNoteRunes)
	}
	return ""
}

// decisionError maps the service's errors to statuses the page acts on:
// 404 gone, 409 someone else decided first, 422 type the input.
func (a *app) decisionError(w http.ResponseWriter, r *http.Request, id string, err error) {
	switch {
	case a.storeDown(w, r, err):
	case errors.Is(err, command.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no request %q; it may have been removed, reload the list", id))
	case errors.Is(err, command.ErrDecided):
		// The service says what became of it ("… it is denied").
		writeError(w, http.StatusConflict, err.Error()+"; someone else decided first, or it expired: see the history")
	case errors.Is(err, command.ErrInputRequired):
		writeError(w, http.StatusUnprocessableEntity, command.ErrInputRequired.Error())
	case errors.Is(err, command.ErrUnreachable):
		writeError(w, http.StatusServiceUnavailable, err.Error()+"; nothing was recorded and the request still waits: approve it again in a few seconds")
	default:
		// The approval may have been recorded and the dispatch failed; the
		// service then marked the request failed with the reason, which the
		// history shows.
		a.serviceError(w, r, "deciding request "+id, err)
	}
}

func (a *app) serviceError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if a.storeDown(w, r, err) {
		return
	}
	a.log.Error("app: "+what+" failed", "err", err)
	writeError(w, http.StatusInternalServerError, what+" failed: "+err.Error())
}

// storeDown answers 503 when err says the store is unreachable, with what
// is wrong, what waits and what did not happen, and reports whether it did.
func (a *app) storeDown(w http.ResponseWriter, r *http.Request, err error) bool {
	msg, ok := storeDownMessage(r, err)
	if !ok {
		return false
	}
	a.log.Warn("app: the store is unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
	w.Header().Set("Retry-After", "5")
	writeError(w, http.StatusServiceUnavailable, msg)
	return true
}

// storeDownMessage is the answer to a request that the store's outage
// stopped (store.ErrUnavailable): the service's own wording when it gave
// one (command.StoreDownError), else one for what the request was.
func storeDownMessage(r *http.Request, err error) (string, bool) {
	if !errors.Is(err, store.ErrUnavailable) {
		return "", false
	}
	var sd *command.StoreDownError
	if errors.As(err, &sd) {
		return sd.Error(), true
	}
	outcome := command.NothingRecorded
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		outcome = "nothing can be read from it now: reload once the store is back"
	case strings.HasSuffix(r.URL.Path, "/approve"):
		outcome = command.NothingApproved
	case strings.HasSuffix(r.URL.Path, "/deny"):
		outcome = command.NothingDenied
	}
	return command.StoreDown(err, outcome).Error(), true
}
