package fleetview

import (
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// A judgement of one server's state (why its row needs attention, its
// security findings) costs microseconds; of ten thousand servers, tens of
// milliseconds, at every call of a tool that reads the whole fleet. The
// fleet's View keeps a server's copy (the same pointer) while nothing
// changes it, so a judgement made of that copy is kept with it and made
// again only for the servers that changed, or when the time it holds for
// has passed: what is kept is exactly what judging anew would give.

// forever is the end of a judgement that does not depend on the time.
var forever = time.Unix(1<<62, 0)

// judged is one server's judgement, made of the copy of, which holds for
// every time from at to until, both included.
type judged[T any] struct {
	val       T
	of        *fleet.Server
	at, until time.Time
}

func (j *judged[T]) holds(of *fleet.Server, now time.Time) bool {
	return j != nil && j.of == of && !now.Before(j.at) && !now.After(j.until)
}

// perServer keeps one judgement for each server of a fleet's latest view,
// in the view's order.
type perServer[T any] struct {
	mu   sync.Mutex
	memo []*judged[T]
	// equal, when set, tells two judgements apart, and version counts the
	// calls of all after which some judgement is not what it was: a
	// caller may keep what it made of all the judgements while the
	// version stays.
	equal   func(a, b T) bool
	version uint64
}

// memoOf is the perServer kept in the fleet under key.
func memoOf[T any](f *fleet.Fleet, key any, equal func(a, b T) bool) *perServer[T] {
	return f.Memo(key, func() any { return &perServer[T]{equal: equal} }).(*perServer[T])
}

// all returns the judgement of each server of v at now, in v's order, and
// the version (see perServer): judge(server, now) returns the judgement
// and the last time it holds for (forever when it does not depend on the
// time). The caller must not change what it returns.
func (p *perServer[T]) all(v *fleet.View, now time.Time, judge func(*fleet.Server, time.Time) (T, time.Time)) ([]*judged[T], uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	servers := v.Servers()
	if len(p.memo) != len(servers) {
		// Servers joined: the judgements move to where their copies are.
		of := make(map[*fleet.Server]*judged[T], len(p.memo))
		for _, j := range p.memo {
			if j != nil {
				of[j.of] = j
			}
		}
		p.memo = make([]*judged[T], len(servers))
		for i, s := range servers {
			p.memo[i] = of[s]
		}
		p.version++
	}
	changed := false
	out := make([]*judged[T], len(servers))
	for i, s := range servers {
		if old := p.memo[i]; !old.holds(s, now) {
			val, until := judge(s, now)
			p.memo[i] = &judged[T]{val: val, of: s, at: now, until: until}
			changed = changed || p.equal == nil || old == nil || old.of.Name != s.Name || !p.equal(old.val, val)
		}
		out[i] = p.memo[i]
	}
	if changed {
		p.version++
	}
	return out, p.version
}

// viewServers are the servers of v as Fleet.Servers returns them: copies
// of the view's, which share its state messages and copy nothing else.
func viewServers(v *fleet.View) []fleet.Server {
	out := make([]fleet.Server, len(v.Servers()))
	for i, s := range v.Servers() {
		out[i] = *s
	}
	return out
}

// listeningMemo keys the fleet's kept listening index (see listeningOf).
type listeningMemo struct{}

// listening is topology.ListeningIndex of a view's servers, at the view's
// shape.
type listening struct {
	mu    sync.Mutex
	shape uint64
	idx   map[string]string
}

// listeningOf is topology.ListeningIndex of v's servers, made again only
// when the fleet's shape has changed: what a server listens on and its
// addresses are part of the shape. The index is shared: the caller must
// not change it.
func listeningOf(d Deps, v *fleet.View) map[string]string {
	l := d.Fleet.Memo(listeningMemo{}, func() any { return &listening{} }).(*listening)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idx == nil || l.shape != v.Shape() {
		l.idx, l.shape = topology.ListeningIndex(viewServers(v)), v.Shape()
	}
	return l.idx
}

// incidentsMemo keys the kept incident reports of the latest graph (see
// incidentsOf).
type incidentsMemo struct{}

// incidentReports are the reports made of one graph, by options.
type incidentReports struct {
	mu   sync.Mutex
	g    *graph.Graph
	reps map[graph.IncidentOptions]graph.Report
}

// incidentsOf is g.IncidentsWith(o), made once per graph: a graph never
// changes, and a new one is built when what it is built from does. The
// report is shared: the caller must not change it.
func incidentsOf(d Deps, g *graph.Graph, o graph.IncidentOptions) graph.Report {
	if d.Fleet == nil {
		return g.IncidentsWith(o)
	}
	in := d.Fleet.Memo(incidentsMemo{}, func() any { return &incidentReports{} }).(*incidentReports)
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.g != g {
		in.g, in.reps = g, map[graph.IncidentOptions]graph.Report{}
	}
	rep, ok := in.reps[o]
	if !ok {
		rep = g.IncidentsWith(o)
		in.reps[o] = rep
	}
	return rep
}
