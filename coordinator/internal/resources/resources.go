// Package resources probes the resources named in the coordinator's config
// (databases, buckets, URLs, load balancers) with the real protocols and
// keeps each one's state: the last result, the real error text, and
// whether it is troubled — failing at least failuresBeforeTroubled checks
// in a row, so that one lost packet does not raise an incident.
//
// Probes run from the coordinator; running them from the agents of the
// servers that use a resource is the next step.
package resources

import (
	"context"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/gridcity/gridcity/agent/probe"

	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// State is one resource as last probed.
type State struct {
	ID, Name, Kind, Engine, Target string
	// Status: unknown (not probed yet), ok or failed (the last check).
	Status   string
	Troubled bool
	Reason   string
	Metrics  map[string]float64
	Latency  time.Duration
	// CheckedAt and CheckedFrom: when and from where the last check ran.
	CheckedAt   time.Time
	CheckedFrom string
	// Failures counts the checks failed in a row; Since is when the
	// current status began: for a troubled resource, its first failed check
	// in the row, not the one that crossed the threshold.
	Failures    int
	Since       time.Time
	firstFail   time.Time
	TLSNotAfter time.Time
}

// Prober probes every configured resource at its interval.
type Prober struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time

	mu     sync.RWMutex
	states map[string]*State
}

// New returns a prober for the config's resources.
func New(cfg *config.Config, logger *slog.Logger) *Prober {
	p := &Prober{cfg: cfg, logger: logger, now: time.Now, states: map[string]*State{}}
	for _, r := range cfg.Resources {
		name := r.Name
		if name == "" {
			name = r.ID
		}
		p.states[r.ID] = &State{ID: r.ID, Name: name, Kind: r.Kind, Engine: r.Engine, Target: r.Target, Status: "unknown", Metrics: map[string]float64{}}
	}
	return p
}

// Run probes each resource on its own schedule until ctx ends; a slow
// target never delays the others.
func (p *Prober) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range p.cfg.Resources {
		interval, timeout := p.timing(r)
		wg.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				p.check(ctx, r, timeout)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
}

// CheckAll probes every resource once, concurrently, and returns when all
// are done.
func (p *Prober) CheckAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, r := range p.cfg.Resources {
		_, timeout := p.timing(r)
		wg.Go(func() { p.check(ctx, r, timeout) })
	}
	wg.Wait()
}

func (p *Prober) timing(r config.Resource) (interval, timeout time.Duration) {
	interval, timeout = p.cfg.Probes.Interval, p.cfg.Probes.Timeout
	if r.Interval > 0 {
		interval = r.Interval
	}
	if r.Timeout > 0 {
		timeout = r.Timeout
	}
	return interval, timeout
}

func (p *Prober) check(ctx context.Context, r config.Resource, timeout time.Duration) {
	res := probe.Run(ctx, probe.Spec{Engine: r.Engine, Target: r.Target, Timeout: timeout})
	if ctx.Err() != nil {
		return // stopping: a canceled probe says nothing about the target
	}
	now := p.now().UTC()
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.states[r.ID]
	wasTroubled := s.Troubled
	s.CheckedAt, s.CheckedFrom, s.Latency, s.Reason, s.TLSNotAfter = now, "coordinator", res.Latency, res.Reason, res.TLSNotAfter
	s.Metrics = res.Metrics
	if res.OK {
		s.Status, s.Failures, s.Troubled = "ok", 0, false
	} else {
		if s.Failures == 0 {
			s.firstFail = now
		}
		s.Status, s.Failures = "failed", s.Failures+1
		s.Troubled = s.Failures >= p.cfg.Probes.FailuresBeforeTroubled
	}
	if s.Since.IsZero() || s.Troubled != wasTroubled {
		s.Since = now
		if s.Troubled {
			s.Since = s.firstFail
		}
		if s.Troubled {
			p.logger.Warn("resource troubled", "resource", r.ID, "reason", res.Reason, "failures", s.Failures)
		} else if wasTroubled {
			p.logger.Info("resource recovered", "resource", r.ID)
		}
	}
}

// States returns a copy of every resource's state, sorted by id.
func (p *Prober) States() []State {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]State, 0, len(p.states))
	for _, s := range p.states {
		c := *s
		c.Metrics = maps.Clone(s.Metrics)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// State returns one resource's state.
func (p *Prober) State(id string) (State, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.states[id]
	if !ok {
		return State{}, false
	}
	c := *s
	c.Metrics = maps.Clone(s.Metrics)
	return c, true
}
