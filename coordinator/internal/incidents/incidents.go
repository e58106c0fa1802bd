// Package incidents turns the incident report into a recorded history: an
// incident opens when a target becomes a root cause, follows its reason and
// what it explains, and ends when it is a root cause no more. Incidents are
// kept in the store, so a restart neither loses the history nor resets the
// start of a trouble that is still going on. Nor does a restart open
// incidents of its own: the fleet shows the servers whose agents have yet
// to reconnect as reconnecting, not troubled, for a startup grace, and
// keeps troubled those its open incidents name (see fleet.New).
//
// Flapping is damped upstream (a resource is troubled only after several
// failed checks in a row). One more damping happens here: when an incident
// ends, or stops explaining a target, that target usually recovers too, but
// at its own next check; meanwhile it looks like a root cause of its own
// (also when something between it and the root cause recovered first). It
// opens an incident only if it still is one Grace after it was last
// explained.
package incidents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// DefaultGrace covers an agent's probe interval and a check or two.
const DefaultGrace = 20 * time.Second

// Store is the part of the coordinator's store that keeps incidents.
type Store interface {
	// OpenIncident records a new open incident and returns its id;
	// store.ErrExists when the target already has an open one.
	OpenIncident(ctx context.Context, in store.Incident) (int64, error)
	UpdateIncident(ctx context.Context, id int64, reason string, explains []string) error
	EndIncident(ctx context.Context, id int64, at time.Time) error
	OpenIncidents(ctx context.Context) ([]store.Incident, error)
	// Incidents lists incidents, open and ended, newest start first, at most limit.
	Incidents(ctx context.Context, limit int) ([]store.Incident, error)
}

// Tracker records the root causes of successive incident reports as
// incidents. Its methods are safe for concurrent use.
type Tracker struct {
	st     Store
	report func() (graph.Report, error)
	logger *slog.Logger

	// work serializes Load and Observe, which write to the store.
	work   sync.Mutex
	loaded bool
	// lastEnd is when each target's last incident ended in this process,
	// so that a new one never starts before it.
	lastEnd map[string]time.Time
	// orphaned is when each target stopped being explained by an open
	// incident (the incident ended, or no longer explains it).
	orphaned map[string]time.Time
	// Grace is how long a target explained by an ended incident may stay
	// a root cause before it opens an incident of its own.
	Grace time.Duration

	// mu guards open, which mirrors exactly the open incidents committed to
	// the store, by target.
	mu   sync.RWMutex
	open map[string]store.Incident
}

// New returns a tracker over the store; report computes the current
// incident report (typically building the topology and calling Incidents).
func New(st Store, report func() (graph.Report, error), logger *slog.Logger) *Tracker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{st: st, report: report, logger: logger, lastEnd: map[string]time.Time{},
		orphaned: map[string]time.Time{}, Grace: DefaultGrace, open: map[string]store.Incident{}}
}

// Load reads the open incidents from the store. After a restart, an
// incident that is still a root cause at the next Observe keeps its
// original start; one that is not is ended then. Observe loads on its own
// when Load was not called or failed.
func (t *Tracker) Load(ctx context.Context) error {
	t.work.Lock()
	defer t.work.Unlock()
	return t.load(ctx)
}

func (t *Tracker) load(ctx context.Context) error {
	ins, err := t.st.OpenIncidents(ctx)
	if err != nil {
		return fmt.Errorf("load open incidents: %w", err)
	}
	open := make(map[string]store.Incident, len(ins))
	for _, in := range ins {
		open[in.Target] = in
	}
	t.mu.Lock()
	t.open = open
	t.mu.Unlock()
	t.loaded = true
	return nil
}

// Observe computes the report and brings the incidents in line with it:
// it ends the incidents of targets that are no longer root causes, updates
// the reason and explains of those still open when they changed, and opens
// one for each new root cause, starting when the target became troubled
// (the report's Since) or at now when that is unknown. Each write is
// committed before the next and only then reflected in Since; the first
// failing write stops Observe with its error, and the next Observe carries
// on from what was committed.
func (t *Tracker) Observe(ctx context.Context, now time.Time) error {
	t.work.Lock()
	defer t.work.Unlock()
	if !t.loaded {
		if err := t.load(ctx); err != nil {
			return err
		}
		t.recall(ctx, now)
	}
	rep, err := t.report()
	if err != nil {
		return fmt.Errorf("incident report: %w", err)
	}
	for id, ended := range t.orphaned {
		if now.Sub(ended) >= t.Grace {
			delete(t.orphaned, id)
		}
	}
	roots := make(map[string]graph.RootCause, len(rep.RootCauses))
	for _, rc := range rep.RootCauses {
		roots[rc.ID] = rc
	}

	t.mu.RLock()
	open := make([]store.Incident, 0, len(t.open))
	for _, in := range t.open {
		open = append(open, in)
	}
	t.mu.RUnlock()
	slices.SortFunc(open, func(a, b store.Incident) int { return cmp.Compare(a.ID, b.ID) })

	// Ends first, so that the history reads in order when a root cause moves.
	for _, in := range open {
		if _, still := roots[in.Target]; still {
			continue
		}
		if err := t.st.EndIncident(ctx, in.ID, now); err != nil {
			t.reloadIfStale(err)
			return fmt.Errorf("end the incident on %s: %w", in.Target, err)
		}
		t.mu.Lock()
		delete(t.open, in.Target)
		t.mu.Unlock()
		t.lastEnd[in.Target] = now
		for _, e := range in.Explains {
			t.orphaned[e] = now
		}
		t.logger.Info("incident ended", "target", in.Target, "incident", in.ID, "started", in.StartedAt, "duration", now.Sub(in.StartedAt).Round(time.Second))
	}
	for _, in := range open {
		rc, still := roots[in.Target]
		if !still || (rc.Reason == in.Reason && slices.Equal(rc.Explains, in.Explains)) {
			continue
		}
		explains := slices.Clone(rc.Explains)
		if explains == nil {
			explains = []string{}
		}
		// What it no longer explains recovers at its own next check, or
		// is stuck on its own: the grace tells which.
		for _, e := range in.Explains {
			if !slices.Contains(explains, e) {
				t.orphaned[e] = now
			}
		}
		if err := t.st.UpdateIncident(ctx, in.ID, rc.Reason, explains); err != nil {
			t.reloadIfStale(err)
			return fmt.Errorf("update the incident on %s: %w", in.Target, err)
		}
		in.Reason, in.Explains = rc.Reason, explains
		t.mu.Lock()
		t.open[in.Target] = in
		t.mu.Unlock()
	}
	for _, rc := range rep.RootCauses { // sorted by id
		t.mu.RLock()
		_, known := t.open[rc.ID]
		t.mu.RUnlock()
		if known {
			continue
		}
		if ended, ok := t.orphaned[rc.ID]; ok && now.Sub(ended) < t.Grace {
			continue // likely recovering with what explained it
		}
		start := rc.Since
		if start.IsZero() || start.After(now) {
			start = now
		}
		if end, ok := t.lastEnd[rc.ID]; ok && start.Before(end) {
			start = end
		}
		explains := slices.Clone(rc.Explains)
		if explains == nil {
			explains = []string{}
		}
		in := store.Incident{Target: rc.ID, Kind: rc.Kind, Reason: rc.Reason, StartedAt: start, Explains: explains}
		id, err := t.st.OpenIncident(ctx, in)
		if err != nil {
			t.reloadIfStale(err)
			return fmt.Errorf("open an incident on %s: %w", rc.ID, err)
		}
		in.ID = id
		t.mu.Lock()
		t.open[rc.ID] = in
		t.mu.Unlock()
		t.logger.Warn("incident opened", "target", rc.ID, "kind", rc.Kind, "incident", id, "reason", rc.Reason, "explains", len(explains))
	}
	return nil
}

// recallDepth is how many of the newest incidents recall reads.
const recallDepth = 200

// recall takes the damping memory of the incidents that ended within the
// grace from the store: a coordinator that starts, or a replica that
// takes the lead, did not see them end. Without it, a target an ended
// incident explained would look like a root cause of its own until its
// next check, and a new leader would open an incident on it that the old
// one would not have. It reads the incidents that started last (an
// incident that ended recently after a long run behind many newer ones is
// missed, and its targets get no grace); a failed read costs only that
// grace, so it is logged and Observe goes on.
func (t *Tracker) recall(ctx context.Context, now time.Time) {
	ins, err := t.st.Incidents(ctx, recallDepth)
	if err != nil {
		t.logger.Warn("recent incidents not read: targets they explained get no grace", "err", err)
		return
	}
	for _, in := range ins {
		if in.Open() || now.Sub(in.EndedAt) >= t.Grace || in.EndedAt.After(now) {
			continue
		}
		if in.EndedAt.After(t.lastEnd[in.Target]) {
			t.lastEnd[in.Target] = in.EndedAt
		}
		for _, e := range in.Explains {
			if in.EndedAt.After(t.orphaned[e]) {
				t.orphaned[e] = in.EndedAt
			}
		}
	}
}

// reloadIfStale makes the next Observe read the open incidents again when a
// write shows that the store no longer matches what the tracker holds
// (another process opened or ended an incident).
func (t *Tracker) reloadIfStale(err error) {
	if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrNotFound) {
		t.loaded = false
	}
}

// Run observes at once and then every interval until ctx is done, logging
// failures; a failed Observe is retried at the next tick.
//
// When leads is given (replicas sharing a store), Run observes only while
// it says this replica leads, so that incidents are recorded once, and
// otherwise follows: it reads the open incidents the leader recorded, so
// that every replica answers the same. Either way it does so at least
// every FollowEvery, so that a change of leader or of incident reaches
// every replica within seconds.
func (t *Tracker) Run(ctx context.Context, every time.Duration, leads func() bool) {
	if leads != nil {
		every = min(every, FollowEvery)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if leads == nil || leads() {
			if err := t.Observe(ctx, time.Now()); err != nil && ctx.Err() == nil {
				t.logger.Error("incidents not recorded", "err", err)
			}
		} else if err := t.Follow(ctx); err != nil && ctx.Err() == nil {
			t.logger.Warn("the leader's incidents not read; answering with the last read", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// FollowEvery is how often replicas sharing a store observe (the leader)
// or read the open incidents the leader recorded (the others).
const FollowEvery = 2 * time.Second

// Follow reads the open incidents from the store, as another replica (the
// leader) recorded them. The next Observe reads them again, so that a
// follower that becomes the leader starts from what is committed.
func (t *Tracker) Follow(ctx context.Context) error {
	t.work.Lock()
	defer t.work.Unlock()
	err := t.load(ctx)
	t.loaded = false
	return err
}

// Since returns when the open incident on target started: since when the
// root cause has been troubled, across restarts. ok is false when target
// has no open incident (it is healthy, or only explained by another).
func (t *Tracker) Since(target string) (time.Time, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	in, ok := t.open[target]
	return in.StartedAt, ok
}

// Open returns the open incidents, oldest first.
func (t *Tracker) Open() []store.Incident {
	t.mu.RLock()
	out := make([]store.Incident, 0, len(t.open))
	for _, in := range t.open {
		in.Explains = slices.Clone(in.Explains)
		out = append(out, in)
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b store.Incident) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// History returns recorded incidents, open and ended, newest first, at
// most limit.
func (t *Tracker) History(ctx context.Context, limit int) ([]store.Incident, error) {
	return t.st.Incidents(ctx, limit)
}
