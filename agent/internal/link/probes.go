package link

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/lib/probe"
)

// Bounds on what a coordinator may ask of an agent's prober: the agent is
// a guest on its server and keeps its footprint small whatever it is sent.
const (
	MaxProbes        = 256
	MinProbeInterval = probe.AgentMinInterval
	MaxProbeTimeout  = time.Minute
	maxProbeField    = 2048
	// probeParallel bounds the probes in flight at once.
	probeParallel = 16
)

// Probes runs, from this server, the probes the coordinator assigns it:
// checks of the resources this server uses, so that a database is judged
// from where it is used rather than from the coordinator's network.
type Probes struct {
	logger *slog.Logger
	out    chan *gridcityv1.AgentMessage
	slots  chan struct{}

	mu      sync.Mutex
	running map[string]runningProbe // by probe id
}

type runningProbe struct {
	spec   *gridcityv1.ProbeSpec
	cancel context.CancelFunc
}

// NewProbes returns a prober; its results queue on out (shared with the
// stream, whichever is connected).
func NewProbes(logger *slog.Logger) *Probes {
	return &Probes{logger: logger, out: make(chan *gridcityv1.AgentMessage, 256),
		slots: make(chan struct{}, probeParallel), running: map[string]runningProbe{}}
}

// ValidateProbe says what is wrong with a spec the coordinator sent, or nil.
func ValidateProbe(s *gridcityv1.ProbeSpec) error {
	switch {
	case s.GetId() == "" || len(s.GetId()) > maxProbeField:
		return fmt.Errorf("probe id empty or longer than %d bytes", maxProbeField)
	case len(s.GetResourceId()) > maxProbeField || len(s.GetTarget()) > maxProbeField:
		return fmt.Errorf("probe %q: resource id or target longer than %d bytes", s.GetId(), maxProbeField)
	case !slices.Contains(probe.Engines(), s.GetEngine()):
		return fmt.Errorf("probe %q: unknown engine %q (this agent knows %v)", s.GetId(), s.GetEngine(), probe.Engines())
	case s.GetTarget() == "":
		return fmt.Errorf("probe %q: empty target", s.GetId())
	}
	return nil
}

// timing clamps a spec's interval and timeout to the agent's bounds.
func timing(s *gridcityv1.ProbeSpec) (interval, timeout time.Duration) {
	interval = max(time.Duration(s.GetIntervalSeconds())*time.Second, MinProbeInterval)
	timeout = time.Duration(s.GetTimeoutSeconds()) * time.Second
	if timeout <= 0 {
		timeout = probe.DefaultTimeout
	}
	return interval, min(timeout, MaxProbeTimeout, interval)
}

// Set replaces the assigned probes with specs: new ones start at once,
// changed ones restart, dropped ones stop. A spec the agent cannot run is
// skipped with a log line; so is everything past MaxProbes.
func (p *Probes) Set(ctx context.Context, specs []*gridcityv1.ProbeSpec) {
	want := map[string]*gridcityv1.ProbeSpec{}
	for _, s := range specs {
		if err := ValidateProbe(s); err != nil {
			p.logger.Warn("probe refused", "err", err)
			continue
		}
		if len(want) == MaxProbes {
			p.logger.Warn("too many probes assigned; the rest are ignored", "max", MaxProbes, "assigned", len(specs))
			break
		}
		want[s.GetId()] = s
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, r := range p.running {
		if w, ok := want[id]; !ok || !proto.Equal(w, r.spec) {
			r.cancel()
			delete(p.running, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if _, ok := p.running[id]; ok {
			continue
		}
		s := want[id]
		pctx, cancel := context.WithCancel(ctx)
		p.running[id] = runningProbe{spec: s, cancel: cancel}
		go p.loop(pctx, s)
	}
}

// Assigned returns the ids of the probes running now, sorted.
func (p *Probes) Assigned() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.running))
}

// Stop ends every probe; results already queued stay queued.
func (p *Probes) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, r := range p.running {
		r.cancel()
		delete(p.running, id)
	}
}

func (p *Probes) loop(ctx context.Context, s *gridcityv1.ProbeSpec) {
	interval, _ := timing(s)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if res := p.run(ctx, s); res != nil {
			// A periodic result that finds the queue full is dropped:
			// the next one supersedes it anyway.
			select {
			case p.out <- res:
			default:
				p.logger.Debug("probe result dropped: the stream is not keeping up", "probe", s.GetId())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce runs a probe now (the coordinator's RunProbe) and queues its
// result, waiting for room: somebody is waiting for this answer.
func (p *Probes) RunOnce(ctx context.Context, s *gridcityv1.ProbeSpec) {
	if err := ValidateProbe(s); err != nil {
		p.queue(ctx, &gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_ProbeResult{ProbeResult: &gridcityv1.ProbeResult{
			ProbeId: s.GetId(), ResourceId: s.GetResourceId(), Status: "failed", Reason: "the agent refused the probe: " + err.Error(),
			CheckedUnixMs: time.Now().UnixMilli()}}})
		return
	}
	go func() {
		if res := p.run(ctx, s); res != nil {
			p.queue(ctx, res)
		}
	}()
}

func (p *Probes) queue(ctx context.Context, m *gridcityv1.AgentMessage) {
	select {
	case p.out <- m:
	case <-ctx.Done():
	}
}

// run probes once, within the parallelism bound; nil when ctx ended first
// (a canceled probe says nothing about its target).
func (p *Probes) run(ctx context.Context, s *gridcityv1.ProbeSpec) *gridcityv1.AgentMessage {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	defer func() { <-p.slots }()
	_, timeout := timing(s)
	res := probe.Run(ctx, probe.Spec{Engine: s.GetEngine(), Target: s.GetTarget(), Timeout: timeout})
	if ctx.Err() != nil {
		return nil
	}
	r := &gridcityv1.ProbeResult{ProbeId: s.GetId(), ResourceId: s.GetResourceId(), Status: "ok", Reason: res.Reason,
		LatencyUs: res.Latency.Microseconds(), CheckedUnixMs: time.Now().UnixMilli(), Metrics: finiteMetrics(res.Metrics)}
	if !res.OK {
		r.Status = "failed"
	}
	if !res.TLSNotAfter.IsZero() {
		r.TlsNotAfterUnix = res.TLSNotAfter.Unix()
	}
	return &gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_ProbeResult{ProbeResult: r}}
}

// finiteMetrics leaves out a metric that is not a number (NaN, ±Inf): the
// coordinator refuses a result holding one, and the result's status and
// latency are worth more than one metric.
func finiteMetrics(m map[string]float64) map[string]float64 {
	bad := func(_ string, v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	for k, v := range m {
		if bad(k, v) {
			m = maps.Clone(m) // the probe's own map stays as it is
			maps.DeleteFunc(m, bad)
			break
		}
	}
	return m
}
