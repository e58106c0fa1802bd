package mcpserver

import (
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
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

// judged is one server's judgement, which holds for every time from at to
// until, both included.
type judged[T any] struct {
	val       T
	at, until time.Time
}

func (j *judged[T]) holds(now time.Time) bool {
	return j != nil && !now.Before(j.at) && !now.After(j.until)
}

// perServer keeps one judgement for each server of a fleet's latest view,
// in the view's order.
type perServer[T any] struct {
	mu   sync.Mutex
	view *fleet.View
	memo []*judged[T]
}

// memoOf is the perServer kept in the fleet under key.
func memoOf[T any](f *fleet.Fleet, key any) *perServer[T] {
	return f.Memo(key, func() any { return &perServer[T]{} }).(*perServer[T])
}

// all returns the judgement of each server of v at now, in v's order:
// judge(server, now) returns the judgement and the last time it holds for
// (forever when it does not depend on the time). The caller must not
// change what it returns.
func (p *perServer[T]) all(v *fleet.View, now time.Time, judge func(*fleet.Server, time.Time) (T, time.Time)) []*judged[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	servers := v.Servers()
	if p.view != v {
		memo := make([]*judged[T], len(servers))
		// The same servers in the same order: keep the judgements of those
		// whose copy is the one they were made of.
		if p.view != nil && len(p.view.Servers()) == len(servers) {
			for i, s := range servers {
				if p.view.Servers()[i] == s {
					memo[i] = p.memo[i]
				}
			}
		}
		p.view, p.memo = v, memo
	}
	out := make([]*judged[T], len(servers))
	for i, s := range servers {
		if !p.memo[i].holds(now) {
			val, until := judge(s, now)
			p.memo[i] = &judged[T]{val: val, at: now, until: until}
		}
		out[i] = p.memo[i]
	}
	return out
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
