// Package notify tells people, where they already are, what needs them:
// an approval card waiting, its decision and end, an incident opened and
// ended, an attack, a server gone offline. Each notifier of the config
// (notify:) is a webhook signed with HMAC-SHA256, a Slack-compatible
// incoming webhook, an ntfy topic or email over SMTP with STARTTLS.
//
// Emitting never waits: an event is put on each interested notifier's
// bounded queue (the oldest is dropped when it is full) and a goroutine
// per notifier delivers it, retrying with backoff until the notifier's
// dropAfter. A slow or dead receiver delays nothing but its own messages.
//
// Quiet by design: events about the same kind of trouble that arrive
// within a notifier's groupWait go out as one message; a target is told
// of at most once per minInterval; a server an incident message already
// named gets no agent.offline of its own; and the sources (watch.go) only
// emit what outlasted the incident grace.
//
// A message is built from chosen fields only: never a command's output, a
// secret input, a sudo password or a notifier's own credentials.
package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

// Event names, as the config and the messages spell them.
const (
	RequestWaiting  = "request.waiting"
	RequestDecided  = "request.decided"
	RequestFinished = "request.finished"
	IncidentOpened  = "incident.opened"
	IncidentEnded   = "incident.ended"
	AttackOpened    = "attack.opened"
	AgentOffline    = "agent.offline"
)

// Event is one thing to tell. Exactly one of Request, Incident, Attack
// and Offline is set, as Kind says.
type Event struct {
	ID       string // unique; receivers may use it to drop a repeat delivery
	Kind     string
	At       time.Time
	Request  *Request
	Incident *Incident
	Attack   *Attack
	Offline  *Offline
	// districts the event's targets are in, filled in by the notifier.
	districts []string
}

// Request is what a message says of a command request: never its output,
// its input's value or a sudo password, which Request has no field for.
type Request struct {
	ID         string    `json:"id"`
	Server     string    `json:"server"`
	Command    string    `json:"command"`
	Reason     string    `json:"reason"`
	Client     string    `json:"client"`
	Token      string    `json:"token"`
	Risky      bool      `json:"risky"`
	Status     string    `json:"status"`
	Decision   string    `json:"decision,omitempty"` // approved, denied or expired
	DecidedBy  string    `json:"decidedBy,omitempty"`
	Note       string    `json:"note,omitempty"`
	ExitCode   *int      `json:"exitCode,omitempty"`
	DurationMs int64     `json:"durationMs,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	ExpiresAt  time.Time `json:"expiresAt,omitzero"`
}

// Incident is an incident opened or ended: its root cause and what it
// explains.
type Incident struct {
	ID        int64     `json:"id"`
	Target    string    `json:"target"`
	Kind      string    `json:"kind"`
	Reason    string    `json:"reason"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	Explains  []string  `json:"explains"`
	AtRisk    int       `json:"atRisk"` // healthy targets that use it
}

// Attack is an attack opened on a server.
type Attack struct {
	Kind      string    `json:"kind"`
	Server    string    `json:"server"`
	Source    string    `json:"source"`
	Users     []string  `json:"users"`
	Count     int       `json:"count"`
	Blocked   bool      `json:"blocked"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	Advice    string    `json:"advice"`
}

// Offline is a server whose agent has been offline past the grace.
type Offline struct {
	Server   string    `json:"server"`
	LastSeen time.Time `json:"lastSeen"`
}

// targets are the fleet's names an event is about, the first its subject.
func (e Event) targets() []string {
	switch {
	case e.Request != nil:
		return []string{e.Request.Server}
	case e.Incident != nil:
		return append([]string{e.Incident.Target}, e.Incident.Explains...)
	case e.Attack != nil:
		return []string{e.Attack.Server}
	case e.Offline != nil:
		return []string{e.Offline.Server}
	}
	return nil
}

// subject is the target the event is about.
func (e Event) subject() string {
	if t := e.targets(); len(t) > 0 {
		return t[0]
	}
	return ""
}

// alert reports whether an event is about trouble (grouped, held to the
// minimum interval) rather than about a request, which is always told at
// once: each card needs its own decision.
func alert(kind string) bool {
	return kind == IncidentOpened || kind == IncidentEnded || kind == AttackOpened || kind == AgentOffline
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Options are what the hub needs beside the notifiers' config.
type Options struct {
	// AppURL is the app's address as people reach it, for links
	// ("https://gridcity.example.com/"); links are left out when empty.
	AppURL string
	// Districts returns the districts the targets are in (for the
	// notifiers' district filters); nil: no district is known.
	Districts func(targets []string) []string
	Metrics   *telemetry.Metrics
	Logger    *slog.Logger
	// Now is the clock (tests); Backoff the first retry's delay and Cap
	// the longest (defaults 1 s and 1 min).
	Now          func() time.Time
	Backoff, Cap time.Duration
	// Getenv reads the environment for *Env secrets (os.Getenv).
	Getenv func(string) string
}

// Hub fans events out to the notifiers. Its methods are safe for
// concurrent use and never block.
type Hub struct {
	opts      Options
	notifiers []*notifier
}

// New reads the notifiers' secrets and returns a hub; Run delivers. An
// error names the notifier and what to do.
func New(cfgs []config.Notifier, opts Options) (*Hub, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.Cap <= 0 {
		opts.Cap = time.Minute
	}
	h := &Hub{opts: opts}
	var errs []error
	for _, c := range cfgs {
		// A config from Parse has these; one built in code may not.
		c.Queue = cmp.Or(c.Queue, config.DefaultNotifyQueue)
		c.Timeout = cmp.Or(c.Timeout, config.DefaultNotifyTimeout)
		c.DropAfter = cmp.Or(c.DropAfter, config.DefaultNotifyDropAfter)
		s, err := newSender(c, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("notifier %q: %w", c.Name, err))
			continue
		}
		h.notifiers = append(h.notifiers, newNotifier(c, s, opts))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// Emit hands e to every notifier that wants its kind, without waiting.
// A nil hub, or one without notifiers, does nothing.
func (h *Hub) Emit(e Event) {
	if h == nil || len(h.notifiers) == 0 {
		return
	}
	if e.ID == "" {
		e.ID = newID()
	}
	if e.At.IsZero() {
		e.At = h.opts.Now().UTC()
	}
	for _, n := range h.notifiers {
		if n.wants(e.Kind) {
			n.push(e)
		}
	}
}

// Wants reports whether any notifier wants events of kind, so that a
// source can skip the work of one nobody reads.
func (h *Hub) Wants(kind string) bool {
	if h == nil {
		return false
	}
	return slices.ContainsFunc(h.notifiers, func(n *notifier) bool { return n.wants(kind) })
}

// Run delivers until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	if h == nil {
		return
	}
	var wg sync.WaitGroup
	for _, n := range h.notifiers {
		wg.Go(func() { n.run(ctx) })
	}
	wg.Wait()
}
