package doctor

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/lib/probe"

	"github.com/gridcity/gridcity/coordinator/internal/resources"
)

// AgentProber asks a server's agent for one probe now (resources.Prober).
type AgentProber interface {
	ProbeFrom(ctx context.Context, server, engine, target string, timeout time.Duration) (resources.Check, error)
}

// Live makes real attempts: from the coordinator with agent/probe, from a
// server through its agent, and lookups with the coordinator's resolver.
type Live struct {
	Agents AgentProber // nil: only the coordinator makes attempts
}

// Probe runs one probe from the coordinator.
func (l Live) Probe(ctx context.Context, engine, target string, timeout time.Duration) probe.Result {
	return probe.Run(ctx, probe.Spec{Engine: engine, Target: target, Timeout: timeout})
}

// ProbeFrom asks server's agent to run one probe and waits for its answer.
func (l Live) ProbeFrom(ctx context.Context, server, engine, target string, timeout time.Duration) (probe.Result, error) {
	if l.Agents == nil {
		return probe.Result{}, errors.New("no agents are connected to this coordinator")
	}
	c, err := l.Agents.ProbeFrom(ctx, server, engine, target, timeout)
	if err != nil {
		return probe.Result{}, err
	}
	return probe.Result{OK: c.Status == "ok", Reason: c.Reason, Latency: c.Latency, Metrics: c.Metrics}, nil
}

// LookupHost resolves host with the coordinator's resolver.
func (l Live) LookupHost(ctx context.Context, host string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, host)
}

// Attempt purposes.
const (
	purposeReach     = "reachable"
	purposeHandshake = "handshake"
	purposeSelf      = "reachable from the host itself"
	purposeHostUp    = "host up"
	purposeResolve   = "resolve"
)

// spec is an attempt to make.
type spec struct {
	from, purpose, engine, target string
}

// attempt makes one attempt within the attempt timeout.
func (s *session) attempt(ctx context.Context, sp spec) Attempt {
	timeout := s.d.attemptTimeout()
	a := Attempt{From: sp.from, Purpose: sp.purpose, Engine: sp.engine, Target: sp.target}
	if sp.from == Coordinator {
		r := s.d.Prober.Probe(ctx, sp.engine, sp.target, timeout)
		a.Answered, a.OK, a.Reason, a.Latency = true, r.OK, r.Reason, r.Latency
	} else {
		// The agent's own timeout, plus the way there and back.
		actx, cancel := context.WithTimeout(ctx, timeout+time.Second)
		r, err := s.d.Prober.ProbeFrom(actx, sp.from, sp.engine, sp.target, timeout)
		cancel()
		if err != nil {
			a.Reason = "the agent on " + sp.from + " was asked but gave no answer: " + err.Error()
		} else {
			a.Answered, a.OK, a.Reason, a.Latency = true, r.OK, r.Reason, r.Latency
		}
	}
	if ctx.Err() != nil && !a.OK {
		a.Answered, a.Reason = false, "the diagnosis ran out of time before this attempt finished"
	}
	if a.OK {
		a.Reason = ""
	}
	a.Reason = probe.Clean(a.Reason)
	return a
}

// lookup resolves a name from the coordinator and logs it as an attempt.
func (s *session) lookup(ctx context.Context, host string) ([]string, Attempt) {
	ctx, cancel := context.WithTimeout(ctx, s.d.attemptTimeout())
	defer cancel()
	start := time.Now()
	addrs, err := s.d.Prober.LookupHost(ctx, host)
	a := Attempt{From: Coordinator, Purpose: purposeResolve, Engine: "dns", Target: host, Answered: true, Latency: time.Since(start)}
	if err != nil {
		a.Reason = probe.Clean(err.Error())
	} else if len(addrs) == 0 {
		a.Reason = "lookup " + host + ": no addresses"
	} else {
		slices.Sort(addrs)
		a.OK = true
		if len(addrs) > maxItems {
			addrs = addrs[:maxItems]
		}
		a.Addresses = addrs
	}
	s.log(a)
	if !a.OK {
		return nil, a
	}
	return addrs, a
}

func (s *session) log(a Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = append(s.attempts, a)
}

// runAll makes the attempts in parallel, logs them in order and returns them.
func (s *session) runAll(ctx context.Context, specs []spec) []Attempt {
	out := make([]Attempt, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() { out[i] = s.attempt(ctx, sp) })
	}
	wg.Wait()
	for _, a := range out {
		s.log(a)
	}
	return out
}

// Ways an attempt can fail, told apart by the error text.

func refused(a Attempt) bool {
	return a.Answered && !a.OK && strings.Contains(strings.ToLower(a.Reason), "connection refused")
}

func timedOut(a Attempt) bool {
	r := strings.ToLower(a.Reason)
	return a.Answered && !a.OK && (strings.Contains(r, "i/o timeout") || strings.Contains(r, "no answer within") ||
		strings.Contains(r, "deadline exceeded") || strings.Contains(r, "timed out"))
}

func unresolved(a Attempt) bool {
	r := strings.ToLower(a.Reason)
	return a.Answered && !a.OK && (strings.Contains(r, "no such host") || strings.Contains(r, "server misbehaving"))
}

// describe says what an attempt found, for a detail or evidence line.
func describe(a Attempt) string {
	switch {
	case !a.Answered:
		return "no answer from " + a.From + " (" + qr(a.Reason) + ")"
	case a.OK && a.Engine == "tcp":
		return "from " + a.From + ": connected to " + a.Target + " in " + ms(a.Latency)
	case a.OK:
		return "from " + a.From + ": " + engineName(a.Engine) + " answered at " + a.Target + " in " + ms(a.Latency)
	case refused(a):
		return "from " + a.From + ": refused: " + qr(a.Reason)
	case timedOut(a):
		return "from " + a.From + ": no answer (timeout): " + qr(a.Reason)
	}
	return "from " + a.From + ": failed: " + qr(a.Reason)
}
