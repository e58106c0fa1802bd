package resources

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// ShareStore is what replicas sharing a store need of it to share checks.
type ShareStore interface {
	PutProbeChecks(ctx context.Context, checks []store.ProbeCheck, now time.Time) error
	ProbeChecks(ctx context.Context, since time.Time) ([]store.ProbeCheck, error)
}

// Shared connects a prober to the other replicas of the fleet. Each
// replica hears the checks of the agents it holds; it writes them to the
// store, and reads every other replica's, so that each judges a resource
// from all its vantage points. Only the leader probes from the
// coordinator, so a resource no agent probes is probed once, not once per
// replica.
type Shared struct {
	Store ShareStore
	// Replica is this replica's id, recorded with its checks.
	Replica string
	// Leads says whether this replica leads now; Changed returns a
	// channel closed at the next change, so that a new leader probes what
	// the old one did at once rather than at the next interval.
	Leads   func() bool
	Changed func() <-chan struct{}
	// Every is how often checks are written and read (default a second).
	Every time.Duration
	// Asks, with HeldBy, lets diagnose's on-demand probes reach agents
	// whose streams other replicas hold (see ask.go); nil: only this
	// replica's agents are asked.
	Asks AskStore
	// HeldBy names the replica holding server's stream ("" for none).
	HeldBy func(server string) string
}

// shareWindow is how far back a read of the shared checks reaches: older
// checks no longer count (see freshFor), and replicas' clocks may differ
// by a little.
const shareWindow = 10 * time.Minute

// Share makes the prober one of several replicas' (before Run).
func (p *Prober) Share(s Shared) {
	if s.Every <= 0 {
		s.Every = time.Second
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shared = &s
	p.dirty = map[checkKey]bool{}
}

type checkKey struct{ resource, from string }

// leadChanged is closed when this replica starts or stops leading; nil
// (never) for a lone coordinator.
func (p *Prober) leadChanged() <-chan struct{} {
	p.mu.RLock()
	s := p.shared
	p.mu.RUnlock()
	if s == nil || s.Changed == nil {
		return nil
	}
	return s.Changed()
}

// leads says whether this prober probes from the coordinator: always,
// unless it is one of several replicas and another leads.
func (p *Prober) leads() bool {
	p.mu.RLock()
	s := p.shared
	p.mu.RUnlock()
	return s == nil || s.Leads == nil || s.Leads()
}

// shareLoop writes this replica's new checks and reads the others' every
// s.Every until ctx ends.
func (p *Prober) shareLoop(ctx context.Context) {
	p.mu.RLock()
	s := p.shared
	p.mu.RUnlock()
	if s == nil || len(p.cfg.Resources) == 0 {
		return
	}
	t := time.NewTicker(s.Every)
	defer t.Stop()
	failing := false // said once per outage, not every second
	for {
		err := p.SyncShared(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			p.logger.Warn("probe checks not shared with the other replicas; retrying every interval, judging from what this replica holds meanwhile", "every", s.Every, "err", err)
			failing = true
		case err == nil && failing:
			p.logger.Info("probe checks shared with the other replicas again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SyncShared writes the checks this replica recorded since the last call
// and merges the ones the other replicas recorded. A check that could not
// be written is written at the next call, unless a newer one replaced it.
func (p *Prober) SyncShared(ctx context.Context) error {
	p.mu.Lock()
	s := p.shared
	if s == nil {
		p.mu.Unlock()
		return nil
	}
	var out []store.ProbeCheck
	for _, k := range slices.SortedFunc(maps.Keys(p.dirty), func(a, b checkKey) int {
		return cmp.Or(strings.Compare(a.resource, b.resource), strings.Compare(a.from, b.from))
	}) {
		if c := p.states[k.resource].checks[k.from]; c != nil {
			out = append(out, toStored(k.resource, s.Replica, c))
		}
	}
	sent := p.dirty
	p.dirty = map[checkKey]bool{}
	p.mu.Unlock()

	now := p.now().UTC()
	if len(out) > 0 {
		if err := s.Store.PutProbeChecks(ctx, out, now); err != nil {
			p.mu.Lock()
			for k := range sent { // again next time, unless recorded anew meanwhile
				p.dirty[k] = true
			}
			p.mu.Unlock()
			return err
		}
	}
	in, err := s.Store.ProbeChecks(ctx, now.Add(-shareWindow))
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	touched := map[string]*resource{}
	for _, sc := range in {
		r, ok := p.states[sc.Resource]
		if !ok {
			continue // a resource this replica's config does not name
		}
		if sc.From != Coordinator && !slices.Contains(r.from, sc.From) {
			continue // not a vantage point of it as this replica sees the fleet
		}
		if c := r.checks[sc.From]; c != nil && !sc.CheckedAt.After(c.CheckedAt) {
			continue // what this replica holds is as new
		}
		r.checks[sc.From] = fromStored(sc)
		touched[sc.Resource] = r
	}
	for _, id := range slices.Sorted(maps.Keys(touched)) {
		p.judge(touched[id], now)
	}
	return nil
}

func toStored(resource, replica string, c *Check) store.ProbeCheck {
	return store.ProbeCheck{Resource: resource, From: c.From, Replica: replica, Status: c.Status, Troubled: c.Troubled,
		Failures: c.Failures, FirstFail: c.firstFail, Reason: c.Reason, Latency: c.Latency, CheckedAt: c.CheckedAt,
		Metrics: maps.Clone(c.Metrics), TLSNotAfter: c.TLSNotAfter}
}

func fromStored(sc store.ProbeCheck) *Check {
	return &Check{From: sc.From, Status: sc.Status, Troubled: sc.Troubled, Reason: sc.Reason, Latency: sc.Latency,
		CheckedAt: sc.CheckedAt, Failures: sc.Failures, firstFail: sc.FirstFail, Metrics: sc.Metrics, TLSNotAfter: sc.TLSNotAfter}
}
