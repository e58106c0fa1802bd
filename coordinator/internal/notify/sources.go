package notify

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/security"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Request tells of a change to a command request that this coordinator
// committed (command.Config.Notice): a card waiting, a decision, an end.
// Changes read back from another replica are that replica's to tell, so
// that each is told once. It never blocks.
func (h *Hub) Request(kind command.EventKind, r command.Request) {
	var ev, decision string
	switch {
	case kind == command.EventCreated:
		ev = RequestWaiting
	case kind == command.EventDecided:
		ev, decision = RequestDecided, "approved"
	case kind == command.EventFinished && r.Status == command.StatusDenied:
		ev, decision = RequestDecided, "denied"
		if r.DecidedBy == "" {
			decision = "expired"
		}
	case kind == command.EventFinished:
		ev = RequestFinished
	default:
		return // dispatched, started: nothing a person waits for
	}
	if !h.Wants(ev) {
		return
	}
	// Only these fields: the request's output, and the input and sudo
	// password the approver typed (which command.Request never holds),
	// stay out of every message.
	out := &Request{ID: r.ID, Server: r.Server, Command: r.Command, Reason: r.Reason, Client: r.Client, Token: r.Token,
		Risky: r.Risky, Status: string(r.Status), Decision: decision, DecidedBy: r.DecidedBy, Note: r.Note}
	switch ev {
	case RequestWaiting:
		out.ExpiresAt = r.ExpiresAt
	case RequestFinished:
		out.ExitCode, out.DurationMs, out.Detail = r.ExitCode, r.DurationMs, r.Detail
	}
	h.Emit(Event{Kind: ev, Request: out})
}

// Sources are what the watcher judges, on the replica that does the
// fleet's judgement.
type Sources struct {
	// Incidents are the open incidents (incidents.Tracker.Open).
	Incidents func() []store.Incident
	// AtRisk counts the healthy targets that use target (optional).
	AtRisk func(target string) int
	// Servers is the fleet (fleet.Fleet.Servers).
	Servers func() []fleet.Server
	// Attacks judges attacks (security.DefaultOptions with the runbooks).
	Attacks security.Options
	// Leads says whether this replica does the fleet's judgement; nil
	// for a lone coordinator, which always does.
	Leads func() bool
	// Grace: an incident is told once it has been open this long, and a
	// server once its agent has been offline this long (incidents.DefaultGrace).
	Grace time.Duration
	// Every is how often the watcher looks (default 2 s).
	Every time.Duration
}

// watcher remembers what it has told of, between looks.
type watcher struct {
	src       Sources
	leading   bool
	incidents map[int64]*seenIncident
	offline   map[string]bool // offline servers, and whether they were told of
	attacks   map[string]bool // open attacks by key
}

type seenIncident struct {
	in   store.Incident
	seen time.Time
	told bool
}

// Watch tells of incidents opened and ended, attacks opened and servers
// gone offline, as long as ctx lasts. Only the replica that leads judges
// (a lone coordinator always does), so that each is told once; when a
// replica starts leading, what was already past the grace is taken to be
// told by the one that led before, and only its end is told.
func (h *Hub) Watch(ctx context.Context, src Sources) {
	if h == nil || !(h.Wants(IncidentOpened) || h.Wants(IncidentEnded) || h.Wants(AttackOpened) || h.Wants(AgentOffline)) {
		return
	}
	if src.Every <= 0 {
		src.Every = 2 * time.Second
	}
	w := &watcher{src: src}
	t := time.NewTicker(src.Every)
	defer t.Stop()
	for {
		w.look(h, h.opts.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// look compares what the fleet shows now with the last look, and emits
// the differences that outlasted the grace.
func (w *watcher) look(h *Hub, now time.Time) {
	if w.src.Leads != nil && !w.src.Leads() {
		w.leading = false
		return
	}
	first := !w.leading
	if first {
		w.leading = true
		w.incidents, w.offline, w.attacks = map[int64]*seenIncident{}, map[string]bool{}, map[string]bool{}
	}
	if w.src.Incidents != nil {
		w.lookIncidents(h, now, first)
	}
	if w.src.Servers != nil {
		servers := w.src.Servers()
		w.lookOffline(h, servers, now, first)
		if h.Wants(AttackOpened) {
			w.lookAttacks(h, servers, now, first)
		}
	}
}

func (w *watcher) lookIncidents(h *Hub, now time.Time, first bool) {
	open := w.src.Incidents()
	ids := map[int64]bool{}
	for _, in := range open {
		ids[in.ID] = true
		s := w.incidents[in.ID]
		if s == nil {
			s = &seenIncident{seen: now, told: first && now.Sub(in.StartedAt) >= w.src.Grace}
			w.incidents[in.ID] = s
		}
		s.in = in
		// Troubled since it started (a server's since it was last heard
		// from), or since this replica saw it when that is earlier: so an
		// offline server's incident is told at the same look as its
		// agent.offline, which the incident message then covers.
		since := s.seen
		if !in.StartedAt.IsZero() && in.StartedAt.Before(since) {
			since = in.StartedAt
		}
		if !s.told && now.Sub(since) >= w.src.Grace {
			s.told = true
			h.Emit(Event{Kind: IncidentOpened, Incident: w.incident(in, time.Time{})})
		}
	}
	for id, s := range w.incidents {
		if ids[id] {
			continue
		}
		delete(w.incidents, id)
		// Ended within the grace: it was never told, and its end is not.
		if s.told {
			h.Emit(Event{Kind: IncidentEnded, Incident: w.incident(s.in, now)})
		}
	}
}

func (w *watcher) incident(in store.Incident, ended time.Time) *Incident {
	out := &Incident{ID: in.ID, Target: in.Target, Kind: in.Kind, Reason: in.Reason, StartedAt: in.StartedAt, EndedAt: ended,
		Explains: slices.Clone(in.Explains)}
	if out.Explains == nil {
		out.Explains = []string{}
	}
	if w.src.AtRisk != nil {
		out.AtRisk = w.src.AtRisk(in.Target)
	}
	return out
}

func (w *watcher) lookOffline(h *Hub, servers []fleet.Server, now time.Time, first bool) {
	gone := map[string]bool{}
	for _, srv := range servers {
		if srv.Status() != fleet.StatusOffline {
			continue // online, reconnecting after a restart, or retired
		}
		gone[srv.Name] = true
		past := now.Sub(srv.LastSeen) >= w.src.Grace
		told, seen := w.offline[srv.Name]
		switch {
		case !seen && first && past:
			w.offline[srv.Name] = true // told by the replica that led before
		case !told && past:
			w.offline[srv.Name] = true
			h.Emit(Event{Kind: AgentOffline, Offline: &Offline{Server: srv.Name, LastSeen: srv.LastSeen}})
		case !seen:
			w.offline[srv.Name] = false
		}
	}
	for name := range w.offline {
		if !gone[name] {
			delete(w.offline, name)
		}
	}
}

func (w *watcher) lookAttacks(h *Hub, servers []fleet.Server, now time.Time, first bool) {
	open := map[string]bool{}
	for _, srv := range servers {
		for _, a := range security.OpenAttacks(srv.Name, srv.State, now, w.src.Attacks) {
			key := fmt.Sprintf("%s\x00%s\x00%s\x00%d", a.Kind, a.Server, a.Source, a.FirstSeen.Unix())
			open[key] = true
			if w.attacks[key] || first {
				w.attacks[key] = true
				continue
			}
			w.attacks[key] = true
			h.Emit(Event{Kind: AttackOpened, Attack: &Attack{Kind: a.Kind, Server: a.Server, Source: a.Source, Users: a.Users,
				Count: a.Count, Blocked: a.Blocked, FirstSeen: a.FirstSeen, LastSeen: a.LastSeen, Advice: a.Advice}})
		}
	}
	for key := range w.attacks {
		if !open[key] {
			delete(w.attacks, key)
		}
	}
}
