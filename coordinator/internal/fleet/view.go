package fleet

import (
	"slices"
	"strings"
	"sync"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// View is every server as of one call of Fleet.View, sorted by name: what
// a read of the whole fleet (a listing, a judgement of every server)
// takes instead of Servers. Servers copies each of ten thousand servers
// anew, tens of milliseconds and as many allocations each time; a View
// copies only the servers that changed since the view before it and
// shares the others' copies with it, so that a read made while agents
// write costs a pass over the fleet and the copies of what they wrote.
//
// A View is as current as the Servers call made at the same moment: it is
// not a cache that may be behind. It is immutable, as are the servers it
// holds, and callers may keep a server's pointer as the identity of that
// server's state: an unchanged server is the same pointer in the next view.
type View struct {
	servers []*Server
	shape   uint64
}

// Servers are the view's servers, sorted by name. Neither the slice nor the
// servers may be changed.
func (v *View) Servers() []*Server { return v.servers }

// Server returns the view's server of that name.
func (v *View) Server(name string) (*Server, bool) {
	i, ok := slices.BinarySearchFunc(v.servers, name, func(s *Server, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return nil, false
	}
	return v.servers[i], true
}

// Shape is the fleet's ShapeVersion as of the view.
func (v *View) Shape() uint64 { return v.shape }

// views is the last view a fleet made and the model's servers it was made
// from, in the same order, to compare with at the next call.
type views struct {
	mu   sync.Mutex // one view is made at a time; readers of a view take no lock
	last *View
	from []*server
	// memo holds the read side's judgements of the views' servers (see Memo).
	memo sync.Map
}

// Memo returns the value kept under key for the readers of this fleet's
// views, keeping init's first: the read tools and the app keep what they
// judged of each server's copy there, so that all of them share it and
// judge again only the servers that changed. key must be comparable.
func (f *Fleet) Memo(key any, init func() any) any {
	if v, ok := f.views.memo.Load(key); ok {
		return v
	}
	v, _ := f.views.memo.LoadOrStore(key, init())
	return v
}

// View returns the servers as they are now (see View). Concurrent callers
// share the work: each compares the model with the last view and copies
// what changed since.
func (f *Fleet) View() *View {
	f.endGraceIfDue()
	f.views.mu.Lock()
	defer f.views.mu.Unlock()
	f.mu.RLock()
	defer f.mu.RUnlock()
	prev, from := f.views.last, f.views.from
	// Servers are never removed from the model nor replaced in it, so the
	// same count means the same servers, in the order of the last view.
	aligned := prev != nil && len(from) == len(f.servers)
	if !aligned {
		// Servers joined: the model's servers in order, and the last
		// view's copies are matched to them by name below.
		from = make([]*server, 0, len(f.servers))
		for _, s := range f.servers {
			from = append(from, s)
		}
		slices.SortFunc(from, func(a, b *server) int { return strings.Compare(a.Name, b.Name) })
	}
	if aligned && f.unchanged(prev, from) {
		if prev.shape == f.shape {
			return prev
		}
		v := &View{servers: prev.servers, shape: f.shape}
		f.views.last = v
		return v
	}
	var old []*Server
	if prev != nil {
		old = prev.servers
	}
	v := &View{servers: make([]*Server, len(from)), shape: f.shape}
	j := 0 // the next of old's copies, both sorted by name
	for i, s := range from {
		var c *Server
		if aligned {
			c = old[i]
		} else {
			for j < len(old) && old[j].Name < s.Name {
				j++
			}
			if j < len(old) && old[j].Name == s.Name {
				c = old[j]
			}
		}
		if c != nil && f.same(c, s) {
			v.servers[i] = c
			continue
		}
		cp := f.copy(s)
		v.servers[i] = &cp
	}
	f.views.last, f.views.from = v, from
	return v
}

// unchanged says whether no server of from changed since prev, which was
// made from the same servers in the same order. The caller holds f.mu.
func (f *Fleet) unchanged(prev *View, from []*server) bool {
	for i, s := range from {
		if !f.same(prev.servers[i], s) {
			return false
		}
	}
	return true
}

// same says whether c, a copy made by f.copy, is still what a copy of s
// would be now. The caller holds f.mu.
func (f *Fleet) same(c *Server, s *server) bool {
	now := s.Server
	now.State = c.State // compared section by section below
	if s.awaited {
		now.Reconnecting, now.Restarted, now.GraceEnds = true, f.started, f.started.Add(f.grace)
	}
	return now == *c && sameShallow(c.State, s.State)
}

// sameShallow says whether the shallow copy c (see shallowState) still
// holds every section of u: sections are replaced whole, never changed in
// place, so a changed section is a different pointer.
func sameShallow(c, u *gridcityv1.StateUpdate) bool {
	return c.GetFull() == u.GetFull() && c.GetCollectedUnixMs() == u.GetCollectedUnixMs() &&
		c.Host == u.Host && c.Cpu == u.Cpu && c.Memory == u.Memory && c.Disks == u.Disks &&
		c.Listeners == u.Listeners && c.Connections == u.Connections && c.FailedUnits == u.FailedUnits &&
		c.Containers == u.Containers && c.Updates == u.Updates && c.Gaps == u.Gaps &&
		c.Logins == u.Logins && c.Defenses == u.Defenses && c.Processes == u.Processes
}
