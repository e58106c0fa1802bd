// Package resources probes the resources named in the coordinator's config
// (databases, buckets, URLs, load balancers) with the real protocols and
// keeps each one's state: the last result, the real error text, and
// whether it is troubled — failing at least failuresBeforeTroubled checks
// in a row, so that one lost packet does not raise an incident.
//
// A resource is checked from where it is used: the agents of the servers
// named in its probeFrom, else of the servers that use it (declared or
// discovered links), run the probe and send their results. Only a resource
// with no such agent online — or whose agents have stopped answering — is
// probed from the coordinator. Each vantage point is damped on its own; the
// resource is troubled when it is troubled from every fresh vantage point,
// and degraded when only some of them fail.
package resources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gridcity/gridcity/lib/probe"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

// Coordinator is the vantage point name of checks the coordinator runs.
const Coordinator = "coordinator"

// Check is one vantage point's view of a resource.
type Check struct {
	From      string // a server name, or Coordinator
	Status    string // ok or failed
	Troubled  bool   // failing at least failuresBeforeTroubled checks in a row
	Reason    string
	Latency   time.Duration
	CheckedAt time.Time
	Failures  int
	firstFail time.Time
	// Fresh: recent enough to count (within two intervals and a timeout).
	Fresh       bool
	Metrics     map[string]float64
	TLSNotAfter time.Time
}

// State is one resource as last probed.
type State struct {
	ID, Name, Kind, Engine, Target string
	// Status: unknown (not probed yet), ok, failed (from every vantage
	// point) or degraded (failing from some of them).
	Status   string
	Troubled bool
	Reason   string
	Metrics  map[string]float64
	Latency  time.Duration
	// CheckedAt and CheckedFrom: when the latest check that counts ran,
	// and from where (the vantage points that count, comma-separated).
	CheckedAt   time.Time
	CheckedFrom string
	// Failures counts the checks failed in a row (the fewest over the
	// vantage points that count); Since is when the current status began:
	// for a troubled resource, its first failed check in the row, not the
	// one that crossed the threshold.
	Failures    int
	Since       time.Time
	TLSNotAfter time.Time
	// Checks holds every vantage point's view, sorted by From.
	Checks []Check
}

// Agents reaches the agents that probe from their servers (the agent API).
type Agents interface {
	// AssignProbes replaces the probes a server's agent runs.
	AssignProbes(server string, specs []*gridcityv1.ProbeSpec) error
	// RunProbe asks a server's agent to probe once, now.
	RunProbe(server string, spec *gridcityv1.ProbeSpec) error
}

// Vantages says, for each resource id, the servers whose agents should
// probe it now (online, running probes); a resource left out is probed
// from the coordinator.
type Vantages func() map[string][]string

// AssignEvery is how often the assignment of probes to agents is revisited
// (a server connects, a link is discovered); a connecting agent asks for a
// revisit at once.
const AssignEvery = 5 * time.Second

// Prober probes every configured resource at its interval.
type Prober struct {
	cfg    *config.Config
	logger *slog.Logger
	now    func() time.Time

	mu       sync.RWMutex
	states   map[string]*resource
	agents   Agents
	vantages Vantages
	assigned map[string][]*gridcityv1.ProbeSpec // by server, as last sent
	waiters  map[string]chan Check              // on-demand probes by probe id
	kick     chan struct{}
	// recheck asks for the troubled resources to be checked again now:
	// one has recovered, and what it explained may have too.
	recheck chan struct{}
	// version counts changes to what the topology shows of resources:
	// status, troubled, reason, since.
	version atomic.Uint64
	// shared is set when replicas share the store (see Share); dirty holds
	// the checks recorded here and not yet written to it.
	shared *Shared
	dirty  map[checkKey]bool
	// metrics counts the checks recorded here (nil: none).
	metrics *telemetry.Metrics
	// asks are the on-demand probes asked of, or by, other replicas.
	asks *asks
}

// Version changes whenever a resource's status, trouble, reason or since
// changes.
func (p *Prober) Version() uint64 { return p.version.Load() }

type resource struct {
	cfg    config.Resource
	state  State
	checks map[string]*Check // by vantage point
	// from is the set of servers assigned to probe it now.
	from []string
}

// Option sets an optional part of a Prober.
type Option func(*Prober)

// WithMetrics makes the prober count every check it records, by resource,
// result and vantage.
func WithMetrics(m *telemetry.Metrics) Option { return func(p *Prober) { p.metrics = m } }

// New returns a prober for the config's resources.
func New(cfg *config.Config, logger *slog.Logger, opts ...Option) *Prober {
	p := &Prober{cfg: cfg, logger: logger, now: time.Now, states: map[string]*resource{},
		assigned: map[string][]*gridcityv1.ProbeSpec{}, waiters: map[string]chan Check{}, kick: make(chan struct{}, 1),
		recheck: make(chan struct{}, 1), asks: newAsks()}
	for _, o := range opts {
		o(p)
	}
	for _, r := range cfg.Resources {
		name := r.Name
		if name == "" {
			name = r.ID
		}
		p.states[r.ID] = &resource{cfg: r, checks: map[string]*Check{},
			state: State{ID: r.ID, Name: name, Kind: r.Kind, Engine: r.Engine, Target: r.Target, Status: "unknown", Metrics: map[string]float64{}}}
	}
	return p
}

// SetAgents connects the agents and the rule that picks vantage points;
// until then (and for resources no agent probes) the coordinator probes.
func (p *Prober) SetAgents(a Agents, v Vantages) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.agents, p.vantages = a, v
}

// Run probes each resource on its own schedule until ctx ends; a slow
// target never delays the others. It also keeps the agents' assignments
// current.
func (p *Prober) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { p.assignLoop(ctx) })
	wg.Go(func() { p.recheckLoop(ctx) })
	wg.Go(func() { p.shareLoop(ctx) })
	wg.Go(func() { p.answerLoop(ctx) })
	for _, r := range p.cfg.Resources {
		interval, timeout := p.timing(r)
		wg.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				changed := p.leadChanged()
				if !p.agentsProbe(r.ID) && p.leads() {
					p.check(ctx, r, timeout)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				case <-changed:
				}
			}
		})
	}
	wg.Wait()
}

// CheckAll probes every resource once from the coordinator, concurrently,
// and returns when all are done.
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

// freshFor is how long a check from a vantage point counts: two intervals
// and a timeout, so that one late result does not make it drop out. Agents
// probe no more often than probe.AgentMinInterval.
func (p *Prober) freshFor(r config.Resource, from string) time.Duration {
	interval, timeout := p.timing(r)
	if from != Coordinator {
		interval = max(interval, probe.AgentMinInterval)
	}
	return 2*interval + timeout + time.Second
}

// agentsProbe reports whether some agent's check of the resource is fresh,
// so that the coordinator need not probe it itself.
func (p *Prober) agentsProbe(id string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r := p.states[id]
	now := p.now()
	for from, c := range r.checks {
		if from != Coordinator && slices.Contains(r.from, from) && now.Sub(c.CheckedAt) <= p.freshFor(r.cfg, from) {
			return true
		}
	}
	return false
}

func (p *Prober) check(ctx context.Context, r config.Resource, timeout time.Duration) {
	res := probe.Run(ctx, probe.Spec{Engine: r.Engine, Target: r.Target, Timeout: timeout})
	if ctx.Err() != nil {
		return // stopping: a canceled probe says nothing about the target
	}
	p.record(r.ID, Coordinator, res)
}

// record adds one vantage point's result and re-judges the resource.
func (p *Prober) record(id, from string, res probe.Result) {
	now := p.now().UTC()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.states[id]
	vantage := "agent"
	if from == Coordinator {
		vantage = Coordinator
	}
	p.metrics.ProbeCheck(id, res.OK, vantage)
	c := r.checks[from]
	if c == nil {
		c = &Check{From: from}
		r.checks[from] = c
	}
	c.CheckedAt, c.Latency, c.Reason, c.Metrics, c.TLSNotAfter = now, res.Latency, res.Reason, res.Metrics, res.TLSNotAfter
	if res.OK {
		c.Status, c.Failures, c.Troubled = "ok", 0, false
	} else {
		if c.Failures == 0 {
			c.firstFail = now
		}
		c.Status, c.Failures = "failed", c.Failures+1
		c.Troubled = c.Failures >= p.cfg.Probes.FailuresBeforeTroubled
	}
	if p.dirty != nil {
		p.dirty[checkKey{id, from}] = true
	}
	p.judge(r, now)
}

// judge recomputes a resource's state from its vantage points: the fresh
// checks of the agents assigned to it when there are any, else the
// coordinator's, else whatever was seen last.
func (p *Prober) judge(r *resource, now time.Time) {
	var agents, coord, all []*Check
	for _, from := range slices.Sorted(maps.Keys(r.checks)) {
		c := r.checks[from]
		c.Fresh = now.Sub(c.CheckedAt) <= p.freshFor(r.cfg, from)
		all = append(all, c)
		switch {
		case !c.Fresh:
		case from == Coordinator:
			coord = append(coord, c)
		case slices.Contains(r.from, from):
			agents = append(agents, c)
		}
	}
	use := agents
	if len(use) == 0 {
		use = coord
	}
	if len(use) == 0 {
		use = all
	}
	if len(use) == 0 {
		return
	}
	s := &r.state
	wasTroubled, wasStatus, wasReason, wasSince := s.Troubled, s.Status, s.Reason, s.Since
	defer func() {
		if s.Troubled != wasTroubled || s.Status != wasStatus || s.Reason != wasReason || !s.Since.Equal(wasSince) {
			p.version.Add(1)
		}
	}()
	var failed, ok, froms []string
	latest := use[0]
	s.Troubled, s.Failures = true, -1
	var since time.Time
	for _, c := range use {
		froms = append(froms, c.From)
		if c.CheckedAt.After(latest.CheckedAt) {
			latest = c
		}
		if c.Status == "failed" {
			failed = append(failed, c.From)
		} else {
			ok = append(ok, c.From)
		}
		s.Troubled = s.Troubled && c.Troubled
		if s.Failures < 0 || c.Failures < s.Failures {
			s.Failures = c.Failures
		}
		if c.firstFail.After(since) {
			since = c.firstFail // troubled from everywhere since the last place began failing
		}
	}
	s.CheckedAt, s.CheckedFrom, s.Latency = latest.CheckedAt, strings.Join(froms, ","), latest.Latency
	s.Metrics, s.TLSNotAfter = latest.Metrics, latest.TLSNotAfter
	switch {
	case len(failed) == 0:
		s.Status, s.Reason = "ok", ""
	case len(ok) == 0:
		s.Status, s.Reason = "failed", reasons(use, failed)
	default:
		s.Status = "degraded"
		s.Reason = fmt.Sprintf("failing from %s; ok from %s", reasons(use, failed), strings.Join(ok, ", "))
	}
	if s.Since.IsZero() || s.Troubled != wasTroubled || (s.Status != wasStatus && !s.Troubled) {
		s.Since = now
		if s.Troubled {
			s.Since = since
		}
		if s.Troubled && !wasTroubled {
			p.logger.Warn("resource troubled", "resource", r.cfg.ID, "reason", s.Reason, "from", s.CheckedFrom, "failures", s.Failures)
		} else if wasTroubled && !s.Troubled {
			p.logger.Info("resource recovered", "resource", r.cfg.ID, "status", s.Status)
		}
		if s.Troubled != wasTroubled {
			// What depends on it is likely to follow, either way.
			select {
			case p.recheck <- struct{}{}:
			default:
			}
		}
	}
}

// recheckLoop checks the failing resources again whenever one becomes
// troubled or recovers, at most once a second: what depends on it tends to
// follow, and should do so now rather than at its next scheduled check (up
// to an agent's interval later). A recovered database's dependents then
// recover with it instead of looking like root causes of their own, and a
// failed one's dependents are explained by it sooner.
func (p *Prober) recheckLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.recheck:
		}
		p.recheckTroubled(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (p *Prober) recheckTroubled(ctx context.Context) {
	type job struct {
		cfg  config.Resource
		from []string // agents to ask; none: the coordinator probes
	}
	var jobs []job
	p.mu.RLock()
	agents := p.agents
	for _, rc := range p.cfg.Resources {
		r := p.states[rc.ID]
		if r.state.Status != "failed" && r.state.Status != "degraded" {
			continue
		}
		j := job{cfg: rc}
		if agents != nil {
			j.from = slices.Clone(r.from)
		}
		jobs = append(jobs, j)
	}
	p.mu.RUnlock()
	for _, j := range jobs {
		_, timeout := p.timing(j.cfg)
		if len(j.from) == 0 || !p.agentsProbe(j.cfg.ID) {
			if p.leads() {
				go p.check(ctx, j.cfg, timeout)
			}
			continue
		}
		// The answer carries the resource's own probe id, so it counts as
		// the agent's regular check.
		spec := &gridcityv1.ProbeSpec{Id: j.cfg.ID, ResourceId: j.cfg.ID, Engine: j.cfg.Engine, Target: j.cfg.Target,
			TimeoutSeconds: uint32(max(timeout/time.Second, 1))}
		for _, srv := range j.from {
			if err := agents.RunProbe(srv, spec); err != nil {
				p.logger.Debug("recheck not sent", "server", srv, "resource", j.cfg.ID, "err", err)
			}
		}
	}
}

// reasons is the failure text of the named vantage points: the reason
// alone when there is one, else each prefixed with where it was seen.
func reasons(checks []*Check, failed []string) string {
	var parts []string
	for _, c := range checks {
		if slices.Contains(failed, c.From) {
			parts = append(parts, c.From+": "+c.Reason)
		}
	}
	if len(parts) == 1 && len(checks) == 1 {
		return checks[0].Reason
	}
	return strings.Join(parts, "; ")
}

// States returns a copy of every resource's state, sorted by id.
func (p *Prober) States() []State {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]State, 0, len(p.states))
	for _, r := range p.states {
		out = append(out, p.copyState(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// State returns one resource's state.
func (p *Prober) State(id string) (State, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.states[id]
	if !ok {
		return State{}, false
	}
	return p.copyState(r), true
}

func (p *Prober) copyState(r *resource) State {
	c := r.state
	c.Metrics = maps.Clone(r.state.Metrics)
	if c.Metrics == nil {
		c.Metrics = map[string]float64{}
	}
	now := p.now()
	c.Checks = make([]Check, 0, len(r.checks))
	for _, from := range slices.Sorted(maps.Keys(r.checks)) {
		ch := *r.checks[from]
		ch.Fresh = now.Sub(ch.CheckedAt) <= p.freshFor(r.cfg, from)
		ch.Metrics = maps.Clone(ch.Metrics)
		c.Checks = append(c.Checks, ch)
	}
	return c
}

// ---- probes run by agents ----

// Kick asks for the assignment to be revisited now (an agent connected).
func (p *Prober) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// ProbesFor is what a server's agent should run, as last assigned.
func (p *Prober) ProbesFor(server string) []*gridcityv1.ProbeSpec {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.assigned[server]
}

func (p *Prober) assignLoop(ctx context.Context) {
	if len(p.cfg.Resources) == 0 {
		return // nothing to assign: don't walk the fleet for it
	}
	t := time.NewTicker(AssignEvery)
	defer t.Stop()
	for {
		p.Assign()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
			// Kicks come with every connecting agent; after a restart
			// thousands arrive at once. One pass a second serves them all.
			select {
			case <-ctx.Done():
				return
			case <-time.After(assignCoalesce):
			}
		}
	}
}

// assignCoalesce gathers the kicks of agents connecting close together
// into one assignment pass.
const assignCoalesce = time.Second

// Assign works out which agents probe which resource and sends each agent
// whose share changed its new list.
func (p *Prober) Assign() {
	p.mu.RLock()
	agents, vantages := p.agents, p.vantages
	p.mu.RUnlock()
	if agents == nil || vantages == nil {
		return
	}
	v := vantages()
	want := map[string][]*gridcityv1.ProbeSpec{}
	p.mu.Lock()
	for _, rc := range p.cfg.Resources {
		r := p.states[rc.ID]
		r.from = slices.Sorted(slices.Values(v[rc.ID]))
		interval, timeout := p.timing(rc)
		interval = max(interval, probe.AgentMinInterval)
		for _, srv := range r.from {
			want[srv] = append(want[srv], &gridcityv1.ProbeSpec{Id: rc.ID, ResourceId: rc.ID, Engine: rc.Engine, Target: rc.Target,
				IntervalSeconds: uint32(interval / time.Second), TimeoutSeconds: uint32(max(timeout/time.Second, 1))})
		}
		// A vantage point no longer assigned drops out at once.
		for from := range r.checks {
			if from != Coordinator && !slices.Contains(r.from, from) {
				delete(r.checks, from)
			}
		}
	}
	var send []string
	for srv := range want {
		if !slices.EqualFunc(want[srv], p.assigned[srv], func(a, b *gridcityv1.ProbeSpec) bool { return proto.Equal(a, b) }) {
			send = append(send, srv)
		}
	}
	for srv := range p.assigned {
		if _, ok := want[srv]; !ok {
			send = append(send, srv)
		}
	}
	p.assigned = want
	p.mu.Unlock()
	sort.Strings(send)
	for _, srv := range send {
		if err := agents.AssignProbes(srv, want[srv]); err != nil {
			p.logger.Debug("probe assignment not sent", "server", srv, "err", err)
		}
	}
}

// maxMetrics bounds what an agent's result may carry.
const maxMetrics = 32

// HandleResult records a probe result an agent sent: an answer to an
// on-demand probe, or a check of a resource the agent's server is assigned.
// Anything else is dropped; text from an agent is cleaned and bounded like
// text from a probed server.
func (p *Prober) HandleResult(server string, m *gridcityv1.ProbeResult) {
	res := probe.Result{OK: m.GetStatus() == "ok", Reason: probe.Clean(m.GetReason()), Latency: time.Duration(m.GetLatencyUs()) * time.Microsecond,
		Metrics: map[string]float64{}}
	if !res.OK && res.Reason == "" {
		res.Reason = "the agent reported a failure without a reason"
	}
	if res.OK {
		res.Reason = ""
	}
	for _, k := range slices.Sorted(maps.Keys(m.GetMetrics())) {
		if len(res.Metrics) == maxMetrics {
			break
		}
		// Not a number, or not a finite one, says nothing.
		if v := m.GetMetrics()[k]; len(k) <= 64 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			res.Metrics[probe.Clean(k)] = v
		}
	}
	if t := m.GetTlsNotAfterUnix(); t > 0 {
		res.TLSNotAfter = time.Unix(t, 0).UTC()
	}
	p.mu.Lock()
	if w, ok := p.waiters[server+"\x00"+m.GetProbeId()]; ok {
		delete(p.waiters, server+"\x00"+m.GetProbeId())
		p.mu.Unlock()
		w <- Check{From: server, Status: map[bool]string{true: "ok", false: "failed"}[res.OK], Reason: res.Reason, Latency: res.Latency,
			CheckedAt: p.now().UTC(), Metrics: res.Metrics, TLSNotAfter: res.TLSNotAfter}
		return
	}
	r, ok := p.states[m.GetResourceId()]
	assigned := ok && m.GetProbeId() == m.GetResourceId() && slices.Contains(r.from, server)
	p.mu.Unlock()
	if !assigned {
		p.logger.Debug("probe result dropped: not assigned", "server", server, "probe", m.GetProbeId(), "resource", m.GetResourceId())
		return
	}
	p.record(m.GetResourceId(), server, res)
}

// ErrNoAnswer is returned when an agent did not answer an on-demand probe in time.
var ErrNoAnswer = errors.New("the agent did not answer the probe in time")

// ProbeFrom asks a server's agent to probe engine/target once now and
// waits for its answer (for diagnose: "is it reachable from where it is
// used?"). It changes nothing: a probe is a read-only connection attempt.
// With several replicas, an agent whose stream another replica holds is
// asked through that replica (see ask.go).
func (p *Prober) ProbeFrom(ctx context.Context, server, engine, target string, timeout time.Duration) (Check, error) {
	if s, holder := p.holder(server); holder != "" {
		return p.askHolder(ctx, s, holder, server, engine, target, timeout)
	}
	return p.probeLocal(ctx, server, engine, target, timeout)
}

// probeLocal asks the agent of a server whose stream this replica holds.
func (p *Prober) probeLocal(ctx context.Context, server, engine, target string, timeout time.Duration) (Check, error) {
	p.mu.RLock()
	agents := p.agents
	p.mu.RUnlock()
	if agents == nil {
		return Check{}, errors.New("no agents are connected to this prober")
	}
	id := probeID()
	w := make(chan Check, 1)
	key := server + "\x00" + id
	p.mu.Lock()
	p.waiters[key] = w
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiters, key)
		p.mu.Unlock()
	}()
	secs := uint32(max(timeout/time.Second, 1))
	if err := agents.RunProbe(server, &gridcityv1.ProbeSpec{Id: id, Engine: engine, Target: target, TimeoutSeconds: secs}); err != nil {
		return Check{}, err
	}
	// The agent's own timeout, plus the way there and back.
	wait := time.NewTimer(time.Duration(secs)*time.Second + 5*time.Second)
	defer wait.Stop()
	select {
	case c := <-w:
		return c, nil
	case <-wait.C:
		return Check{}, ErrNoAnswer
	case <-ctx.Done():
		return Check{}, ctx.Err()
	}
}
