// Package doctor is the diagnose ladder. For one server or resource it
// climbs agent connected → host resources → the unit or process that serves
// it → port listening → reachable from the servers that use it → protocol
// handshake → dependencies, stops at the first rung that fails, and says why
// (diagnoses with their evidence) and what would fix it.
//
// The doctor reads facts the coordinator already holds (the agents' state,
// the graph, the prober's results) and makes read-only connection attempts
// through a Prober: TCP connects and protocol handshakes, from the servers
// that use the target (asked of their agents) or from the coordinator, and
// name lookups. It never changes anything. A fix that needs a command names
// the command and the server; run_command, and so a person's approval, runs
// it. A fix is verified only when a connection attempt made during this
// diagnosis proved its premise; otherwise its verification says what was
// not proven.
//
// Every attempt is made even when an earlier rung fails (a refused connect
// is what proves that a restarted unit can bind its port), but the ladder
// reports only up to the first failed rung: the rungs after it are skipped,
// and what the attempts showed reaches the caller through the diagnoses,
// the fixes' verifications and the list of attempts.
package doctor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/lib/probe"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// Rungs, in the order the ladder climbs them. They are stable ids.
const (
	RungAgent        = "agent"
	RungHost         = "host"
	RungService      = "service"
	RungPort         = "port"
	RungReachable    = "reachable"
	RungHandshake    = "handshake"
	RungDependencies = "dependencies"
)

// Rungs lists the rung ids in order.
var Rungs = []string{RungAgent, RungHost, RungService, RungPort, RungReachable, RungHandshake, RungDependencies}

// Rung statuses.
const (
	Pass = "pass"
	Fail = "fail"
	Warn = "warn"
	Skip = "skip"
)

// Report statuses.
const (
	StatusOK   = "ok"   // every rung that was judged passed
	StatusWarn = "warn" // nothing failed, something needs a look
	StatusFail = "fail" // a rung failed: see StoppedAt
)

// Coordinator is the vantage point of attempts the coordinator makes itself.
const Coordinator = resources.Coordinator

// Via says how a fix's command reaches its server.
const (
	ViaRunCommand = "run_command" // a person approves it in the app; the server's agent runs it
	ViaByHand     = "by hand"     // no agent can run it there: a person does it on the host
)

// Report is the diagnosis of one target.
type Report struct {
	Target string
	Name   string
	Kind   string // server, or the resource's kind
	// Engine, Endpoint (host:port, empty for a DNS name) and HostedOn (the
	// server it runs on, empty when none is known) are set for resources.
	Engine, Endpoint, HostedOn string
	Status                     string
	// StoppedAt is the first rung that failed, empty when none did.
	StoppedAt string
	// Summary is one line: where the ladder stopped and why.
	Summary   string
	Ladder    []Rung
	Diagnoses []Diagnosis
	Fixes     []Fix
	// Attempts is every read-only connection attempt and lookup made.
	Attempts []Attempt
	// Runbooks are the configured runbooks that match the target.
	Runbooks    []string
	GeneratedAt time.Time
	Duration    time.Duration
}

// Rung is one step of the ladder.
type Rung struct {
	Rung, Status, Detail string
}

// Diagnosis is a finding with the facts that show it.
type Diagnosis struct {
	// Rung is where the finding belongs; About is the target it is about
	// when that is not the diagnosed one (a troubled dependency).
	Rung, About string
	Summary     string
	Evidence    []string
}

// Fix is a way out: a command or a runbook, where to run it, and whether
// a connection attempt proved its premise.
type Fix struct {
	Summary string
	Command string
	Runbook string
	Server  string
	// ReadOnly: the command only looks (run it first, to be sure).
	ReadOnly bool
	// Via is ViaRunCommand or ViaByHand.
	Via          string
	Verified     bool
	Verification string
}

// Attempt is one read-only connection attempt or name lookup.
type Attempt struct {
	From    string // a server name, or Coordinator
	Purpose string // e.g. "reachable", "handshake", "host up", "alternative orders-db-replica"
	Engine  string
	Target  string
	// Answered is false when the agent asked to make the attempt did not
	// answer: the outcome is unknown, not a failure.
	Answered bool
	OK       bool
	Reason   string
	Latency  time.Duration
	// Addresses is what a lookup resolved to.
	Addresses []string
}

// Prober makes read-only connection attempts.
type Prober interface {
	// Probe makes one attempt from the coordinator.
	Probe(ctx context.Context, engine, target string, timeout time.Duration) probe.Result
	// ProbeFrom asks a server's agent to make one; an error means it
	// could not be asked or did not answer.
	ProbeFrom(ctx context.Context, server, engine, target string, timeout time.Duration) (probe.Result, error)
	// LookupHost resolves a name from the coordinator.
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// Facts is what the doctor reads.
type Facts struct {
	Config  *config.Config
	Graph   *graph.Graph
	Servers []fleet.Server
	// Listening is topology.ListeningIndex(Servers) when the caller has it
	// (nil: made for the diagnosis): it changes only with the fleet's
	// shape, and costs milliseconds on a large fleet.
	Listening map[string]string
	// Resource is a resource's probed state (nil: none known).
	Resource func(id string) (resources.State, bool)
	Now      time.Time
}

// Doctor diagnoses targets.
type Doctor struct {
	Prober Prober
	// AttemptTimeout bounds each attempt (default 2 s); an agent gets one
	// more second for the way there and back.
	AttemptTimeout time.Duration
	// Budget bounds all the attempts of one diagnosis (default 10 s).
	Budget time.Duration
}

// ErrUnknownTarget is returned for a target that is neither an id nor a name.
var ErrUnknownTarget = errors.New("unknown target")

// Find resolves a target given by id or by name (case-insensitive); more
// than one match by name is ambiguous and returns their ids.
func Find(g *graph.Graph, query string) (graph.Target, []string, bool) {
	if t, ok := g.Target(query); ok {
		return t, nil, true
	}
	var found []graph.Target
	for _, t := range g.Targets() {
		if strings.EqualFold(t.ID, query) || strings.EqualFold(t.Name, query) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return graph.Target{}, nil, false
	case 1:
		return found[0], nil, true
	}
	ids := make([]string, len(found))
	for i, t := range found {
		ids[i] = t.ID
	}
	return graph.Target{}, ids, false
}

// Diagnose climbs the ladder for the target with this id.
func (d *Doctor) Diagnose(ctx context.Context, f Facts, id string) (Report, error) {
	start := time.Now()
	t, ok := f.Graph.Target(id)
	if !ok {
		return Report{}, ErrUnknownTarget
	}
	if f.Now.IsZero() {
		f.Now = start
	}
	if f.Config == nil {
		f.Config = config.Default()
	}
	ctx, cancel := context.WithTimeout(ctx, d.budget())
	defer cancel()
	s := newSession(d, f)
	rep := Report{Target: t.ID, Name: t.Name, Kind: t.Kind, GeneratedAt: f.Now}
	if t.Kind == "server" {
		s.diagnoseServer(ctx, t, &rep)
	} else {
		rc, ok := s.resource(t.ID)
		if !ok {
			return Report{}, ErrUnknownTarget
		}
		s.diagnoseResource(ctx, rc, &rep)
	}
	rep.Attempts = s.attemptLog()
	rep.Duration = time.Since(start)
	return rep, nil
}

func (d *Doctor) attemptTimeout() time.Duration {
	if d.AttemptTimeout > 0 {
		return d.AttemptTimeout
	}
	return 2 * time.Second
}

func (d *Doctor) budget() time.Duration {
	if d.Budget > 0 {
		return d.Budget
	}
	return 10 * time.Second
}

// session is one diagnosis: the facts, indexed, and the attempts made.
type session struct {
	d         *Doctor
	f         Facts
	listening map[string]string // "addr:port" → server (topology.ListeningIndex)
	// servers is Facts.Servers by name when they are not sorted (see server).
	servers     map[string]fleet.Server
	serversOnce sync.Once

	mu       sync.Mutex
	attempts []Attempt

	// byAddress maps each address a server has to the servers that have
	// it, in the order of Facts.Servers: made at the first look, once per
	// diagnosis rather than once for every resource located.
	byAddress     map[string][]string
	byAddressOnce sync.Once
}

// owners maps each address to the servers that have it (byAddress).
func (s *session) owners() map[string][]string {
	s.byAddressOnce.Do(func() {
		s.byAddress = map[string][]string{}
		for _, srv := range s.f.Servers {
			for _, a := range srv.State.GetHost().GetAddresses() {
				// An address listed twice by one server names it once.
				if own := s.byAddress[a]; len(own) == 0 || own[len(own)-1] != srv.Name {
					s.byAddress[a] = append(own, srv.Name)
				}
			}
		}
	})
	return s.byAddress
}

func newSession(d *Doctor, f Facts) *session {
	s := &session{d: d, f: f, listening: f.Listening}
	if s.listening == nil {
		s.listening = topology.ListeningIndex(f.Servers)
	}
	return s
}

// server returns the server of that name in Facts.Servers: by a binary
// search when they are sorted by name, as the fleet gives them, else by a
// map made at the first look.
func (s *session) server(name string) (fleet.Server, bool) {
	s.serversOnce.Do(func() {
		if slices.IsSortedFunc(s.f.Servers, func(a, b fleet.Server) int { return strings.Compare(a.Name, b.Name) }) {
			return
		}
		s.servers = make(map[string]fleet.Server, len(s.f.Servers))
		for _, srv := range s.f.Servers {
			s.servers[srv.Name] = srv
		}
	})
	if s.servers != nil {
		srv, ok := s.servers[name]
		return srv, ok
	}
	i, ok := slices.BinarySearchFunc(s.f.Servers, name, func(srv fleet.Server, n string) int { return strings.Compare(srv.Name, n) })
	if !ok {
		return fleet.Server{}, false
	}
	return s.f.Servers[i], true
}

func (s *session) resource(id string) (config.Resource, bool) {
	i := slices.IndexFunc(s.f.Config.Resources, func(r config.Resource) bool { return r.ID == id })
	if i < 0 {
		return config.Resource{}, false
	}
	return s.f.Config.Resources[i], true
}

func (s *session) resourceState(id string) (resources.State, bool) {
	if s.f.Resource == nil {
		return resources.State{}, false
	}
	return s.f.Resource(id)
}

func (s *session) attemptLog() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attempts)
}

// ladder turns the verdicts of every rung into the reported ladder: up to
// and including the first failure, then skipped.
func ladder(verdicts map[string]Rung, rep *Report) {
	rep.Ladder = make([]Rung, 0, len(Rungs))
	warn := false
	for _, id := range Rungs {
		v := verdicts[id]
		v.Rung = id
		if v.Status == "" {
			v.Status, v.Detail = Skip, "not checked"
		}
		if rep.StoppedAt != "" {
			v.Status, v.Detail = Skip, "not judged: the "+rep.StoppedAt+" rung failed first"
		}
		switch v.Status {
		case Fail:
			rep.StoppedAt = id
		case Warn:
			warn = true
		}
		rep.Ladder = append(rep.Ladder, v)
	}
	switch {
	case rep.StoppedAt != "":
		rep.Status = StatusFail
	case warn:
		rep.Status = StatusWarn
	default:
		rep.Status = StatusOK
	}
}

// rungDetail is the detail of a rung in the reported ladder.
func rungDetail(rep *Report, id string) string {
	for _, r := range rep.Ladder {
		if r.Rung == id {
			return r.Detail
		}
	}
	return ""
}

// summarize writes the report's one-line summary.
func summarize(rep *Report) {
	switch rep.Status {
	case StatusFail:
		rep.Summary = rep.Target + " fails at the " + rep.StoppedAt + " rung: " + rungDetail(rep, rep.StoppedAt)
	case StatusWarn:
		var warns []string
		for _, r := range rep.Ladder {
			if r.Status == Warn {
				warns = append(warns, r.Rung)
			}
		}
		rep.Summary = rep.Target + " passes every rung it was judged on, with warnings at " + strings.Join(warns, ", ")
	default:
		var skipped []string
		for _, r := range rep.Ladder {
			if r.Status == Skip {
				skipped = append(skipped, r.Rung)
			}
		}
		rep.Summary = rep.Target + " passes every rung it was judged on"
		if len(skipped) > 0 {
			rep.Summary += " (not judged: " + strings.Join(skipped, ", ") + ")"
		}
	}
}
