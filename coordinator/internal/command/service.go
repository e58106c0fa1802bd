package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

// ServerInfo is what the service needs to know about a server.
type ServerInfo struct {
	Known           bool
	Online          bool
	CommandsEnabled bool
	RunAs           string
	// HeldBy is, when another coordinator holds the server's stream, that
	// coordinator's HTTP address (or its replica id); Replica is its id.
	HeldBy, Replica string
}

// Servers answers questions about servers (the fleet model).
type Servers interface {
	ServerInfo(name string) ServerInfo
	Names() []string
}

// Dispatcher sends a message to a connected agent (the agent API).
type Dispatcher interface {
	Send(server string, m *gridcityv1.CoordinatorMessage) error
}

// Config tunes the service; zero fields take the contract's values.
type Config struct {
	Now    func() time.Time
	Expiry time.Duration
	// Lost is how long past its timeout a dispatched command may stay
	// silent (agent gone and not back) before it ends as unknown.
	Lost time.Duration
	// ProgressEvery is how often a waiting call reports progress.
	ProgressEvery time.Duration
	// Reread is, on a store shared by replicas, how often the service
	// re-reads the requests it follows (waits, the app's events, hand-offs
	// to it) in case a notification was lost (default 2 s).
	Reread time.Duration
	// Metrics counts the requests by status and times decisions (optional).
	Metrics *telemetry.Metrics
	// Unseal is the unseal key approvals and hand-offs are authenticated
	// with. Without it no hand-off verifies: a replica sends only what it
	// approved itself.
	Unseal *sealing.Key
	// Notice, when set, hears of every change this service commits (not
	// those read back from other replicas, which tell their own), to tell
	// people (notify.Hub.Request). It is called with the service's lock
	// held, on the approval's path: it must return at once.
	Notice func(EventKind, Request)
}

// Store is the part of the coordinator's store that keeps requests and
// their audit.
type Store interface {
	// SwapRequestAudited writes a change of a request and the audit rows
	// that record it in one transaction, if the stored status is still
	// expect; else store.ErrConflict.
	SwapRequestAudited(ctx context.Context, expect string, r store.RequestRecord, h *store.Handoff, steps ...store.AuditEntry) error
	// CreateRequestLimited records a new request unless its token has
	// limit pending since since (store.ErrTooMany), and returns the count.
	CreateRequestLimited(ctx context.Context, r store.RequestRecord, limit int, since time.Time, steps ...store.AuditEntry) (int, error)
	// Handoffs lists the hand-offs sealed to a replica ("": all).
	Handoffs(ctx context.Context, replica string) ([]store.Handoff, error)
	// Replicas lists the replicas beating since since, with their keys.
	Replicas(ctx context.Context, since time.Time) ([]store.Replica, error)
	Request(ctx context.Context, id string) (store.RequestRecord, error)
	// Requests lists requests with one of the statuses (all when none are
	// given), newest first, at most limit.
	Requests(ctx context.Context, limit int, statuses ...string) ([]store.RequestRecord, error)
	// AppendAudit writes one audit row for a step that changes nothing else.
	AppendAudit(ctx context.Context, e store.AuditEntry) error
	// AppendAuditOnce writes it unless the request has a row of its step.
	AppendAuditOnce(ctx context.Context, e store.AuditEntry) (bool, error)
	Audit(ctx context.Context, requestID string, limit int) ([]store.AuditEntry, error)
}

// Service owns command requests. It is safe for concurrent use.
type Service struct {
	cfg     Config
	store   Store
	servers Servers
	out     Dispatcher
	logger  *slog.Logger

	mu      sync.Mutex // serialises state changes, so each step is audited before the next
	subs    map[chan Event]struct{}
	waiters map[string][]chan Request
	outputs map[string]*outputs // output of running commands, by request id

	// On a store shared by replicas (see Share): this replica, and the
	// status each request was last published in here, so that a change
	// read back from the store is published once, and never a stale one.
	shared *Shared
	seen   map[string]seenState
	taken  takenHandoffs
}

type seenState struct {
	status Status
	at     time.Time
}

// Share makes the service one of several replicas on one store: requests
// may be asked for servers whose stream another replica holds; an
// approval for one is sealed to that replica and handed to it through the
// store; and changes made by other replicas reach this one's waiters and
// subscribers through Changed (the store's notifications) and a re-read
// every Config.Reread. Call it once, before the service is used.
func (s *Service) Share(sh Shared) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shared, s.seen, s.taken = &sh, map[string]seenState{}, takenHandoffs{}
}

// New returns a service.
func New(cfg Config, st Store, servers Servers, out Dispatcher, logger *slog.Logger) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Expiry == 0 {
		cfg.Expiry = Expiry
	}
	if cfg.Lost == 0 {
		cfg.Lost = 2 * time.Minute
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	if cfg.Reread == 0 {
		cfg.Reread = 2 * time.Second
	}
	return &Service{cfg: cfg, store: st, servers: servers, out: out, logger: logger,
		subs: map[chan Event]struct{}{}, waiters: map[string][]chan Request{}, outputs: map[string]*outputs{}}
}

// Submission is a run_command call.
type Submission struct {
	Server         string
	Command        string
	Reason         string
	TimeoutSeconds int
	Input          *Input
	Risky          bool
	Client         string
	Token          string
	Runbook        string // the runbook(s) whose command this is, from the config
}

// Limits on what a request may hold.
const (
	maxCommand = 16 << 10
	maxReason  = 2 << 10
	maxPrompt  = 256
)

var sudoWord = regexp.MustCompile(`(^|[\s;&|(\x60$])sudo(\s|$)`)

// Submit validates and records a request. Nothing else happens to it until
// a person decides.
func (s *Service) Submit(ctx context.Context, sub Submission) (Request, error) {
	if err := s.validate(sub); err != nil {
		return Request{}, err
	}
	info := s.servers.ServerInfo(sub.Server)
	now := s.cfg.Now().UTC()
	r := Request{
		ID: newID(), Server: sub.Server, Command: sub.Command, Reason: sub.Reason, TimeoutSeconds: sub.TimeoutSeconds,
		Input: sub.Input, Risky: sub.Risky, Client: sub.Client, Token: sub.Token, RunAs: info.RunAs, Runbook: sub.Runbook,
		Sudo:   info.RunAs != "root" && sudoWord.MatchString(sub.Command),
		Status: StatusPending, CreatedAt: now, ExpiresAt: now.Add(s.cfg.Expiry),
	}
	rec, entries, err := s.record(r, step{name: "requested", actor: "token:" + r.Token + " (" + r.Client + ")", detail: map[string]any{
		"server": r.Server, "command": r.Command, "reason": r.Reason, "timeoutSeconds": r.TimeoutSeconds,
		"risky": r.Risky, "input": r.Input, "runAs": r.RunAs, "runbook": r.Runbook}})
	if err != nil {
		return Request{}, err
	}
	// Counted and inserted in one transaction under a lock every replica
	// takes: parallel calls cannot all pass the count before any of them
	// is stored.
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, err := s.store.CreateRequestLimited(ctx, rec, MaxPendingPerToken, now.Add(-s.cfg.Expiry), entries...); errors.Is(err, store.ErrTooMany) {
		return Request{}, fmt.Errorf("%d requests of this token are already waiting for a person (at most %d): wait for them with wait_for_command, or have them decided in the app, before asking for more", n, MaxPendingPerToken)
	} else if err != nil {
		return Request{}, StoreDown(err, NothingRequested)
	}
	s.counted("", r)
	s.publish(EventCreated, r)
	return r, nil
}

func (s *Service) validate(sub Submission) error {
	info := s.servers.ServerInfo(sub.Server)
	switch {
	case strings.TrimSpace(sub.Server) == "":
		return fmt.Errorf("server is empty: name a server from list_servers")
	case !info.Known:
		return fmt.Errorf("unknown server %q; known servers: %s", sub.Server, strings.Join(s.servers.Names(), ", "))
	case !info.Online && !s.remote(info) && info.HeldBy != "":
		return fmt.Errorf("server %q is connected to another coordinator (%s), which this one cannot hand commands to: ask through that coordinator's /mcp", sub.Server, info.HeldBy)
	case !info.Online && !s.remote(info):
		return fmt.Errorf("server %q is offline: its agent is not connected, so nothing can run there now; check list_servers", sub.Server)
	case !info.CommandsEnabled:
		return fmt.Errorf("server %q does not run commands: its agent is configured with commands: false", sub.Server)
	case strings.TrimSpace(sub.Command) == "":
		return fmt.Errorf("command is empty: give the shell command to run")
	case strings.ContainsRune(sub.Command, 0):
		return fmt.Errorf("command contains a NUL byte, which no shell command can hold")
	case len(sub.Command) > maxCommand:
		return fmt.Errorf("command is %d bytes; at most %d (put longer scripts in a file on the server)", len(sub.Command), maxCommand)
	case !utf8.ValidString(sub.Command):
		return fmt.Errorf("command is not valid UTF-8")
	case strings.TrimSpace(sub.Reason) == "":
		return fmt.Errorf("reason is empty: say why this command should run; the person approving it reads this")
	case len(sub.Reason) > maxReason:
		return fmt.Errorf("reason is %d bytes; at most %d", len(sub.Reason), maxReason)
	case sub.TimeoutSeconds < 1 || sub.TimeoutSeconds > 600:
		return fmt.Errorf("timeout_seconds %d is out of range: use 1 to 600", sub.TimeoutSeconds)
	}
	if sub.Input != nil && (strings.TrimSpace(sub.Input.Prompt) == "" || len(sub.Input.Prompt) > maxPrompt) {
		return fmt.Errorf("input.prompt must say what to type (1 to %d bytes)", maxPrompt)
	}
	fields := [][2]string{{"command", sub.Command}, {"reason", sub.Reason}}
	if sub.Input != nil {
		fields = append(fields, [2]string{"input.prompt", sub.Input.Prompt})
	}
	for _, f := range fields {
		if err := checkVisible(f[0], f[1]); err != nil {
			return err
		}
	}
	return nil
}

// remote reports whether a server's stream is held by another replica that
// this one can hand an approved command to.
func (s *Service) remote(info ServerInfo) bool {
	return s.shared != nil && !info.Online && info.Replica != ""
}

// MaxPendingPerToken bounds the cards one token can have open, so that no
// client can bury a request among many.
const MaxPendingPerToken = 20

func newID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "cmd_" + hex.EncodeToString(b)
}

// Get returns a request.
func (s *Service) Get(ctx context.Context, id string) (Request, error) {
	rec, err := s.store.Request(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Request{}, ErrNotFound
	}
	if err != nil {
		return Request{}, StoreDown(err, NothingRead)
	}
	var r Request
	if err := json.Unmarshal(rec.Body, &r); err != nil {
		return Request{}, fmt.Errorf("request %s is unreadable: %w", id, err)
	}
	return r, nil
}

// Pending lists the requests waiting for a person, oldest first.
func (s *Service) Pending(ctx context.Context) ([]Request, error) {
	rs, err := s.list(ctx, 1000, string(StatusPending))
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs, err
}

// Counts returns how many requests wait for a person and how many
// commands are out on the fleet (dispatched or running), as the store
// has them: the same on every replica.
func (s *Service) Counts(ctx context.Context) (pending, running int, err error) {
	p, err := s.store.Requests(ctx, 100000, string(StatusPending))
	if err != nil {
		return 0, 0, err
	}
	r, err := s.store.Requests(ctx, 100000, string(StatusDispatched), string(StatusRunning))
	if err != nil {
		return 0, 0, err
	}
	return len(p), len(r), nil
}

// History lists requests, newest first.
func (s *Service) History(ctx context.Context, limit int) ([]Request, error) {
	return s.list(ctx, limit)
}

func (s *Service) list(ctx context.Context, limit int, statuses ...string) ([]Request, error) {
	recs, err := s.store.Requests(ctx, limit, statuses...)
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(recs))
	for _, rec := range recs {
		var r Request
		if err := json.Unmarshal(rec.Body, &r); err != nil {
			return nil, fmt.Errorf("request %s is unreadable: %w", rec.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// MarkShown records, once per request, that an approver saw its card:
// once across replicas too, whichever app showed it first.
func (s *Service) MarkShown(ctx context.Context, id, approver string) {
	e, err := s.entry(id, step{name: "shown", actor: "approver:" + approver})
	if err == nil {
		_, err = s.store.AppendAuditOnce(ctx, e)
	}
	if err != nil {
		s.logger.Error("audit shown", "request", id, "err", err)
	}
}

// Deny records a person's no.
func (s *Service) Deny(ctx context.Context, id, approver, note string) (Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.pending(ctx, id)
	if err != nil {
		return r, StoreDown(err, NothingDenied)
	}
	r.Status, r.DecidedAt, r.DecidedBy, r.Note = StatusDenied, s.cfg.Now().UTC(), approver, bound(note, maxReason)
	if err := s.commit(ctx, StatusPending, r, step{name: "denied", actor: "approver:" + approver, detail: map[string]any{"note": r.Note}}); err != nil {
		return s.decided(ctx, id, StoreDown(err, NothingDenied))
	}
	s.publish(EventFinished, r)
	return r, nil
}

// Approve records a person's yes and then, only once that is committed,
// dispatches the command to its agent with the input and sudo password,
// which go nowhere else.
func (s *Service) Approve(ctx context.Context, id, approver string, a Approval) (Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.pending(ctx, id)
	if err != nil {
		return r, StoreDown(err, NothingApproved)
	}
	if r.Input != nil && len(a.Input) == 0 {
		return r, ErrInputRequired
	}
	now := s.cfg.Now().UTC()
	r.Status, r.DecidedAt, r.DecidedBy, r.Note = StatusApproved, now, approver, bound(a.Note, maxReason)
	r.InputGiven, r.SudoPasswordGiven = len(a.Input) > 0, len(a.SudoPassword) > 0
	r.Authenticator = s.authenticator(r, nil)
	// With replicas, for a server whose stream another replica holds, the
	// input and sudo password are sealed to that replica and the hand-off
	// is saved with the approval, in one commit; the holder dispatches
	// it. A server no live replica holds may be moving to another after
	// its replica stopped: the approval is refused, not spent, and can be
	// given again once the agent is back.
	var h *store.Handoff
	if info := s.servers.ServerInfo(r.Server); s.shared != nil && !info.Online {
		if !s.remote(info) {
			return r, fmt.Errorf("%w: no coordinator holds the agent of %s now (it may be reconnecting to another after one stopped)", ErrUnreachable, r.Server)
		}
		if h, err = s.handoff(ctx, r, info, a); err != nil {
			return r, fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
	}
	body, entries, err := s.record(r, step{name: "approved", actor: "approver:" + approver, detail: map[string]any{"note": r.Note, "input": len(a.Input) > 0, "sudoPassword": len(a.SudoPassword) > 0}})
	if err != nil {
		return Request{}, err
	}
	if err := s.store.SwapRequestAudited(ctx, string(StatusPending), body, h, entries...); err != nil {
		return s.decided(ctx, id, StoreDown(err, NothingApproved))
	}
	s.counted(StatusPending, r)
	s.publish(EventDecided, r)
	if h != nil {
		return r, nil // the holder dispatches it
	}
	return s.dispatch(ctx, r, a)
}

// decided answers a decision whose change could not be written: when
// another replica (or a sweep) changed the request first, with the
// request as it is now and ErrDecided.
func (s *Service) decided(ctx context.Context, id string, err error) (Request, error) {
	if !errors.Is(err, store.ErrConflict) {
		return Request{}, err
	}
	cur, gerr := s.Get(ctx, id)
	if gerr != nil {
		return Request{}, gerr
	}
	s.publishNewer(cur)
	return cur, fmt.Errorf("%w: it is %s", ErrDecided, cur.Status)
}

// handoff seals a's secrets to the live replica that holds r's server.
func (s *Service) handoff(ctx context.Context, r Request, info ServerInfo, a Approval) (*store.Handoff, error) {
	live, err := s.store.Replicas(ctx, s.cfg.Now().Add(-s.shared.LiveFor))
	if err != nil {
		return nil, err
	}
	for _, rep := range live {
		if rep.ID != info.Replica {
			continue
		}
		if len(rep.HandoffKey) == 0 {
			return nil, fmt.Errorf("the coordinator holding the agent of %s (%s) registered no hand-off key (is it an older gridcity?)", r.Server, info.HeldBy)
		}
		b, err := sealApproval(rep.HandoffKey, r.ID, a)
		if err != nil {
			return nil, fmt.Errorf("sealing it to the coordinator holding the agent of %s (%s): %w", r.Server, info.HeldBy, err)
		}
		h := &store.Handoff{RequestID: r.ID, Replica: rep.ID, Sealed: b, CreatedAt: s.cfg.Now().UTC()}
		h.Auth = s.authenticator(r, h)
		return h, nil
	}
	return nil, fmt.Errorf("the coordinator holding the agent of %s (%s) has stopped; the agent reconnects to another within its backoff", r.Server, info.HeldBy)
}

// handOn hands an approved request on to the replica that holds its
// agent now: the agent moved between the approval (or the hand-off to
// this replica) and the dispatch. Its secrets are sealed to that replica
// as an approval made here would be; the request stays approved and the
// sweep's limits still count from the approval, so a request that keeps
// chasing a moving agent ends failed, never late. Called with s.mu held.
func (s *Service) handOn(ctx context.Context, r Request, info ServerInfo, a Approval) (Request, error) {
	h, err := s.handoff(ctx, r, info, a)
	if err != nil {
		return s.fail(ctx, r, "not dispatched: the agent moved to another coordinator, and the command could not be handed on to it ("+err.Error()+"); nothing ran; ask again"), nil
	}
	body, entries, err := s.record(r, step{name: "handed on", actor: "coordinator", detail: map[string]any{"server": r.Server, "to": info.HeldBy}})
	if err != nil {
		return r, err
	}
	if err := s.store.SwapRequestAudited(ctx, string(StatusApproved), body, h, entries...); err != nil {
		if errors.Is(err, store.ErrConflict) {
			cur, _ := s.decided(ctx, r.ID, err)
			return cur, nil
		}
		return s.fail(ctx, r, "not dispatched: the agent moved to another coordinator, and the hand-off could not be written ("+err.Error()+"); nothing ran; ask again"), nil
	}
	return r, nil
}

// notDispatched is what did not happen when the store went away between
// the approval and the dispatch.
const notDispatched = "the approval was recorded but the command was not dispatched, so nothing ran: ask again once the store is back"

// dispatch sends an approved request. Called with s.mu held.
func (s *Service) dispatch(ctx context.Context, r Request, a Approval) (Request, error) {
	info := s.servers.ServerInfo(r.Server)
	switch {
	case s.remote(info):
		return s.handOn(ctx, r, info, a)
	case !info.Online:
		return s.fail(ctx, r, fmt.Sprintf("not dispatched: server %q went offline before dispatch", r.Server)), nil
	case info.RunAs != r.RunAs:
		return s.fail(ctx, r, fmt.Sprintf("not dispatched: the agent on %s now runs commands as %q, not %q as the card said; ask again", r.Server, info.RunAs, r.RunAs)), nil
	}
	// Recorded as dispatched before it is sent: after a crash in between,
	// the agent's journal (which lacks it) settles it as never received,
	// rather than a record saying it never ran when it did.
	r.Status, r.DispatchedAt = StatusDispatched, s.cfg.Now().UTC()
	if err := s.commit(ctx, StatusApproved, r, step{name: "dispatched", actor: "coordinator", detail: map[string]any{"server": r.Server}}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			// Another replica ended it (or sent it) first: not sent here.
			cur, _ := s.decided(ctx, r.ID, err)
			return cur, nil
		}
		// No audit row, no dispatch: the command does not run.
		r.Status, r.DispatchedAt = StatusApproved, time.Time{}
		r = s.fail(ctx, r, "not dispatched: the audit log could not be written ("+err.Error()+")")
		return r, fmt.Errorf("not dispatched: %w", StoreDown(err, notDispatched))
	}
	err := s.out.Send(r.Server, &gridcityv1.CoordinatorMessage{Body: &gridcityv1.CoordinatorMessage_RunCommand{RunCommand: &gridcityv1.RunCommand{
		RequestId: r.ID, Command: r.Command, TimeoutSeconds: uint32(r.TimeoutSeconds), RunAs: r.RunAs,
		StdinSecret: a.Input, SudoPassword: a.SudoPassword,
	}}})
	if err != nil {
		return s.fail(ctx, r, "not dispatched: "+err.Error()), nil
	}
	s.outputs[r.ID] = &outputs{}
	s.publish(EventUpdated, r)
	return r, nil
}

// fail ends a request as failed with detail, auditing it. Called with s.mu held.
func (s *Service) fail(ctx context.Context, r Request, detail string, missed ...step) Request {
	from := r.Status
	r.Status, r.Detail, r.FinishedAt = StatusFailed, detail, s.cfg.Now().UTC()
	if err := s.commit(ctx, from, r, append(missed, step{name: "failed", actor: "coordinator", detail: map[string]any{"detail": detail}})...); errors.Is(err, store.ErrConflict) {
		cur, _ := s.decided(ctx, r.ID, err) // another replica moved it on first
		return cur
	} else if err != nil {
		s.logger.Error("record a failed request", "request", r.ID, "detail", detail, "err", err)
	}
	s.publish(EventFinished, r)
	return r
}

// pending loads a request that is still waiting for a decision, expiring it
// on the way if its time is up. Called with s.mu held.
func (s *Service) pending(ctx context.Context, id string) (Request, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return r, err
	}
	if r.Status == StatusPending && !s.cfg.Now().Before(r.ExpiresAt) {
		r, err = s.expire(ctx, r)
		if err != nil {
			return r, err
		}
	}
	if r.Status != StatusPending {
		return r, fmt.Errorf("%w: it is %s", ErrDecided, r.Status)
	}
	return r, nil
}

func (s *Service) expire(ctx context.Context, r Request) (Request, error) {
	r.Status, r.DecidedAt = StatusDenied, s.cfg.Now().UTC()
	r.Note = fmt.Sprintf("nobody approved it within %s, so it was denied", s.cfg.Expiry)
	if err := s.commit(ctx, StatusPending, r, step{name: "expired", actor: "coordinator", detail: map[string]any{"note": r.Note}}); errors.Is(err, store.ErrConflict) {
		cur, gerr := s.Get(ctx, r.ID) // decided elsewhere meanwhile
		if gerr == nil {
			s.publishNewer(cur)
		}
		return cur, gerr
	} else if err != nil {
		return r, err
	}
	s.publish(EventFinished, r)
	return r, nil
}

// Sweep ends what time has ended: pending requests past their expiry, and
// dispatched or running ones whose agent stayed silent well past their
// timeout (it went away and did not come back to report).
func (s *Service) Sweep(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.list(ctx, 10000, string(StatusPending), string(StatusApproved), string(StatusDispatched), string(StatusRunning))
	if errors.Is(err, store.ErrUnavailable) {
		// The fleet logs the outage once; the sweep runs again when it ends.
		s.logger.Debug("sweep requests: the store is unreachable", "err", err)
		return
	}
	if err != nil {
		s.logger.Error("sweep requests", "err", err)
		return
	}
	now := s.cfg.Now()
	var approved approvedSweep
	for _, r := range rs {
		switch r.Status {
		case StatusPending:
			if !now.Before(r.ExpiresAt) {
				if _, err := s.expire(ctx, r); err != nil {
					s.logger.Error("expire request", "request", r.ID, "err", err)
				}
			}
		case StatusApproved:
			// Approved but never recorded as dispatched: the coordinator
			// stopped before sending it (dispatch is saved before the send).
			// The input and sudo password are gone with it, and a late
			// dispatch would surprise the approver; ask again instead.
			// With replicas, unless it is on its way (see sweepApproved).
			if detail := s.sweepApproved(ctx, &approved, r, now); detail != "" {
				s.fail(ctx, r, detail)
			}
		case StatusDispatched, StatusRunning:
			since := r.DispatchedAt
			if !r.StartedAt.IsZero() {
				since = r.StartedAt
			}
			if now.Sub(since) > time.Duration(r.TimeoutSeconds)*time.Second+s.cfg.Lost {
				s.finishUnknown(ctx, r, fmt.Sprintf("the agent on %s did not report this command's end, and was not back within %s after its timeout; it may or may not have run", r.Server, s.cfg.Lost))
			}
		}
	}
}

// Run sweeps every few seconds until ctx ends.
// On a shared store it also re-reads, every Config.Reread, what changed
// on other replicas and the hand-offs sealed to this one, in case a
// notification was lost.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	var reread <-chan time.Time
	if s.sharing() {
		rt := time.NewTicker(s.cfg.Reread)
		defer rt.Stop()
		reread = rt.C
	}
	s.Sweep(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep(ctx)
		case <-reread:
			s.Changed(ctx, "")
		}
	}
}

func (s *Service) finishUnknown(ctx context.Context, r Request, detail string, missed ...step) {
	from := r.Status
	r.Status, r.Detail, r.FinishedAt = StatusUnknown, detail, s.cfg.Now().UTC()
	delete(s.outputs, r.ID)
	if err := s.commit(ctx, from, r, append(missed, step{name: "unknown", actor: "coordinator", detail: map[string]any{"detail": detail}})...); errors.Is(err, store.ErrConflict) {
		s.decided(ctx, r.ID, err) // it ended elsewhere first
		return
	} else if err != nil {
		s.logger.Error("record a request as unknown", "request", r.ID, "err", err)
	}
	s.publish(EventFinished, r)
}

// Wait returns the request once it is terminal or d has passed, whichever
// comes first; a request still under way comes back in its last known
// state, never as an error. It follows the request's own events (publish
// hands each waiter the request as saved), so the store is read once, at
// the start, and never with a context that the wait's own deadline has
// ended. progress, when set, is called when the wait begins and every
// Config.ProgressEvery after.
func (s *Service) Wait(ctx context.Context, id string, d time.Duration, progress func(Request)) (Request, error) {
	// Registered before the read, so that a change in between is not missed.
	ch := s.waiter(id)
	defer s.dropWaiter(id, ch)
	r, err := s.Get(ctx, id)
	if err != nil || r.Status.Terminal() {
		return r, err
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	var tick, reread <-chan time.Time
	if s.sharing() {
		// Another replica's change arrives by notification; should that
		// be lost, by this re-read of the store.
		t := time.NewTicker(s.cfg.Reread)
		defer t.Stop()
		reread = t.C
	}
	if progress != nil {
		progress(r)
		t := time.NewTicker(s.cfg.ProgressEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case r = <-ch:
			if r.Status.Terminal() {
				return r, nil
			}
		case <-tick:
			progress(r)
		case <-reread:
			s.refresh(ctx, id)
		case <-deadline.C:
			return r, nil
		case <-ctx.Done(): // the caller went away; it gets what is known
			return r, nil
		}
	}
}

// waiter registers a channel that receives the request each time it
// changes; it holds only the newest state.
func (s *Service) waiter(id string) chan Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan Request, 1)
	s.waiters[id] = append(s.waiters[id], ch)
	return ch
}

func (s *Service) dropWaiter(id string, ch chan Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.waiters[id]
	for i, w := range ws {
		if w == ch {
			s.waiters[id] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(s.waiters[id]) == 0 {
		delete(s.waiters, id)
	}
}

// Subscribe returns live events; call the func to stop.
func (s *Service) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, 64)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

// publish tells subscribers, wakes waiters and gives Notice a change this
// service committed. Called with s.mu held.
func (s *Service) publish(kind EventKind, r Request) {
	if s.cfg.Notice != nil {
		s.cfg.Notice(kind, r)
	}
	s.relay(kind, r)
}

// relay tells subscribers and wakes waiters. Called with s.mu held.
func (s *Service) relay(kind EventKind, r Request) {
	if s.seen != nil {
		s.seen[r.ID] = seenState{status: r.Status, at: s.cfg.Now()}
	}
	for ch := range s.subs {
		select {
		case ch <- Event{Kind: kind, Request: r}:
		default: // a slow subscriber misses an event; the app reloads its list on reconnect
		}
	}
	for _, w := range s.waiters[r.ID] {
		// Only publish sends, under s.mu: once the stale state is taken
		// out there is room for the new one.
		select {
		case <-w:
		default:
		}
		w <- r
	}
}

// step is one audit row of a request's life.
type step struct {
	name, actor string
	detail      any
	at          time.Time // zero: now
}

func (s *Service) entry(id string, st step) (store.AuditEntry, error) {
	b := []byte("{}")
	if st.detail != nil {
		var err error
		if b, err = json.Marshal(st.detail); err != nil {
			return store.AuditEntry{}, err
		}
	}
	at := st.at
	if at.IsZero() {
		at = s.cfg.Now()
	}
	return store.AuditEntry{At: at.UTC(), RequestID: id, Step: st.name, Actor: st.actor, Detail: b}, nil
}

// commit saves r with the audit rows of the steps that brought it to its
// state, in one store transaction (both or neither), if the stored
// request is still in status from: else store.ErrConflict, and nothing
// is written.
func (s *Service) commit(ctx context.Context, from Status, r Request, steps ...step) error {
	rec, entries, err := s.record(r, steps...)
	if err != nil {
		return err
	}
	if err := s.store.SwapRequestAudited(ctx, string(from), rec, nil, entries...); err != nil {
		return err
	}
	s.counted(from, r)
	return nil
}

// counted tells the metrics of a change this replica committed, from
// status from ("" for a new request) to r's.
func (s *Service) counted(from Status, r Request) {
	if from == r.Status {
		return
	}
	s.cfg.Metrics.Request(string(r.Status))
	if from == StatusPending && (r.Status == StatusApproved || r.Status == StatusDenied) {
		decision := string(r.Status)
		if r.Status == StatusDenied && r.DecidedBy == "" {
			decision = "expired"
		}
		s.cfg.Metrics.Decision(decision, r.DecidedAt.Sub(r.CreatedAt))
	}
}

// record is r as stored, with the audit rows of steps.
func (s *Service) record(r Request, steps ...step) (store.RequestRecord, []store.AuditEntry, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return store.RequestRecord{}, nil, err
	}
	entries := make([]store.AuditEntry, 0, len(steps))
	for _, st := range steps {
		e, err := s.entry(r.ID, st)
		if err != nil {
			return store.RequestRecord{}, nil, err
		}
		entries = append(entries, e)
	}
	return store.RequestRecord{ID: r.ID, Server: r.Server, Token: r.Token, Status: string(r.Status), CreatedAt: r.CreatedAt, Body: body}, entries, nil
}

// audit records a step that changes nothing in the request.
func (s *Service) audit(ctx context.Context, id string, st step) error {
	e, err := s.entry(id, st)
	if err != nil {
		return err
	}
	return s.store.AppendAudit(ctx, e)
}

func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
