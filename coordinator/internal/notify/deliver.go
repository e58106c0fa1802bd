package notify

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// sender delivers one message to one receiver.
type sender interface {
	// send makes one attempt, bounded by ctx. A *refusal means that
	// trying again cannot help. Errors never hold the receiver's secrets
	// (a Slack URL, a token, a password).
	send(ctx context.Context, m *message) error
}

// refusal is an answer that trying again cannot change (a 4xx, a
// recipient refused): the message is dropped at once.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// notifier is one configured receiver: its queue and the goroutine that
// empties it.
type notifier struct {
	cfg       config.Notifier
	s         sender
	opts      Options
	events    map[string]bool // nil: every event
	districts []string        // empty: every district

	mu       sync.Mutex
	queue    []Event
	wake     chan struct{}
	lastWarn time.Time // of a full queue, to log it once a minute

	// Run's own state, touched by its goroutine only.
	told    map[string]time.Time // kind and subject → when last told
	named   map[string]int64     // server → open incident a message named it in
	quieted map[int64]bool       // incidents whose opening was kept quiet
}

func newNotifier(c config.Notifier, s sender, opts Options) *notifier {
	n := &notifier{cfg: c, s: s, opts: opts, districts: c.Districts, wake: make(chan struct{}, 1),
		told: map[string]time.Time{}, named: map[string]int64{}, quieted: map[int64]bool{}}
	if len(c.Events) > 0 {
		n.events = map[string]bool{}
		for _, e := range c.Events {
			n.events[e] = true
		}
	}
	return n
}

func (n *notifier) wants(kind string) bool { return n.events == nil || n.events[kind] }

// push queues e, dropping the oldest waiting event when the queue is full.
func (n *notifier) push(e Event) {
	n.mu.Lock()
	if len(n.queue) >= n.cfg.Queue {
		old := n.queue[0]
		n.queue = slices.Delete(n.queue, 0, 1)
		n.opts.Metrics.NotificationDropped(n.cfg.Name, "queue_full")
		if now := n.opts.Now(); now.Sub(n.lastWarn) >= time.Minute {
			n.lastWarn = now
			n.opts.Logger.Warn("notification dropped: the notifier's queue is full (its receiver is slow or down); the oldest waiting goes first",
				"notifier", n.cfg.Name, "event", old.Kind, "queue", n.cfg.Queue)
		}
	}
	n.queue = append(n.queue, e)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest waiting event, one at a time: while one is being
// delivered the rest stay in the bounded queue.
func (n *notifier) pop() (Event, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queue) == 0 {
		return Event{}, false
	}
	e := n.queue[0]
	n.queue[0] = Event{}
	n.queue = n.queue[1:]
	return e, true
}

// group is events of one kind waiting out the notifier's groupWait.
type group struct {
	events []Event
	due    time.Time
}

func (n *notifier) run(ctx context.Context) {
	groups := map[string]*group{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if next, ok := earliest(groups); ok {
			timer.Reset(max(next.Sub(n.opts.Now()), 0))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
			for e, ok := n.pop(); ok; e, ok = n.pop() {
				n.accept(ctx, e, groups)
				if ctx.Err() != nil {
					return
				}
			}
		case <-due:
		}
		now := n.opts.Now()
		for _, kind := range slices.Sorted(maps.Keys(groups)) {
			if g := groups[kind]; !now.Before(g.due) {
				delete(groups, kind)
				n.deliver(ctx, g.events)
			}
		}
	}
}

func earliest(groups map[string]*group) (time.Time, bool) {
	var t time.Time
	for _, g := range groups {
		if t.IsZero() || g.due.Before(t) {
			t = g.due
		}
	}
	return t, !t.IsZero()
}

// accept filters e by district, keeps it quiet when it says again what
// was said lately, and sends it: a request at once, trouble once its
// kind's group is due.
func (n *notifier) accept(ctx context.Context, e Event, groups map[string]*group) {
	if n.opts.Districts != nil {
		e.districts = n.opts.Districts(e.targets())
	}
	if len(n.districts) > 0 && !slices.ContainsFunc(e.districts, func(d string) bool { return slices.Contains(n.districts, d) }) {
		return
	}
	if !alert(e.Kind) {
		n.deliver(ctx, []Event{e})
		return
	}
	if reason := n.quiet(e); reason != "" {
		n.opts.Metrics.NotificationSuppressed(n.cfg.Name, reason)
		n.opts.Logger.Debug("notification kept quiet", "notifier", n.cfg.Name, "event", e.Kind, "target", e.subject(), "reason", reason)
		return
	}
	if n.cfg.GroupWait <= 0 {
		n.deliver(ctx, []Event{e})
		return
	}
	g := groups[e.Kind]
	if g == nil {
		g = &group{due: n.opts.Now().Add(n.cfg.GroupWait)}
		groups[e.Kind] = g
	}
	g.events = append(g.events, e)
}

// quiet says why e is not to be told ("" to tell it), and records what
// telling it means for the events after it.
func (n *notifier) quiet(e Event) string {
	now := n.opts.Now()
	key := e.Kind + "\x00" + e.subject()
	recent := func() bool {
		last, ok := n.told[key]
		return ok && now.Sub(last) < n.cfg.MinInterval
	}
	// The memory of what was told need not outlive the interval.
	if len(n.told) > 4096 {
		for k, t := range n.told {
			if now.Sub(t) >= n.cfg.MinInterval {
				delete(n.told, k)
			}
		}
	}
	switch e.Kind {
	case IncidentOpened:
		in := e.Incident
		if recent() {
			n.quieted[in.ID] = true
			return "min_interval"
		}
		n.told[key] = now
		for _, t := range e.targets() {
			n.named[t] = in.ID
		}
	case IncidentEnded:
		in := e.Incident
		for t, id := range n.named {
			if id == in.ID {
				delete(n.named, t)
			}
		}
		if n.quieted[in.ID] {
			delete(n.quieted, in.ID)
			return "min_interval"
		}
	case AgentOffline:
		if _, ok := n.named[e.Offline.Server]; ok {
			return "incident"
		}
		if recent() {
			return "min_interval"
		}
		n.told[key] = now
	case AttackOpened:
		a := e.Attack
		key = e.Kind + "\x00" + a.Server + "\x00" + a.Source
		if last, ok := n.told[key]; ok && now.Sub(last) < n.cfg.MinInterval {
			return "min_interval"
		}
		n.told[key] = now
	}
	return ""
}

// deliver sends one message for events (of one kind), retrying with
// exponential backoff until it is delivered, refused, or older than the
// notifier's dropAfter.
func (n *notifier) deliver(ctx context.Context, events []Event) {
	m := build(events, n.opts.AppURL)
	oldest := events[0].At
	for _, e := range events {
		if e.At.Before(oldest) {
			oldest = e.At
		}
	}
	deadline := oldest.Add(n.cfg.DropAfter)
	wait := n.opts.Backoff
	log := n.opts.Logger.With("notifier", n.cfg.Name, "kind", n.cfg.Kind, "event", m.event, "count", len(events))
	for attempt := 1; ; attempt++ {
		left := deadline.Sub(n.opts.Now())
		if left <= 0 {
			n.opts.Metrics.NotificationDropped(n.cfg.Name, "expired")
			log.Warn("notification dropped: not delivered within dropAfter", "dropAfter", n.cfg.DropAfter, "attempts", attempt-1)
			return
		}
		actx, cancel := context.WithTimeout(ctx, min(n.cfg.Timeout, left))
		err := n.s.send(actx, m)
		cancel()
		if err == nil {
			n.opts.Metrics.NotificationSent(n.cfg.Name, m.event)
			log.Debug("notification sent", "attempts", attempt)
			return
		}
		if ctx.Err() != nil {
			return // stopping
		}
		if r := (*refusal)(nil); errors.As(err, &r) {
			n.opts.Metrics.NotificationDropped(n.cfg.Name, "refused")
			log.Warn("notification dropped: the receiver refused it; check the notifier's settings", "err", err, "attempts", attempt)
			return
		}
		log.Warn("notification not delivered; trying again", "err", err, "attempt", attempt, "in", wait)
		// Jitter keeps the notifiers of several coordinators apart.
		pause := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(pause, max(left, 0))):
		}
		wait = min(wait*2, n.opts.Cap)
	}
}
