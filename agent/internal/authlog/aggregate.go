package authlog

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Bounds of the aggregate. An attacker decides how many addresses and user
// names reach the log; these keep the agent's memory bounded whatever they
// decide: 9.4 MiB measured at worst (4096 sources active in every hour of
// the window, every name bound reached), a few hundred KiB on a host under
// an ordinary day of scans.
const (
	// Window is how long an event counts. Events are kept in hourly
	// buckets, so one counts for between 24 and 25 hours.
	Window = 24 * time.Hour
	// MaxSources is how many source addresses are kept; the one seen least
	// recently makes room for a new one.
	MaxSources = 4096
	// MaxReported is how many sources a report holds, the busiest.
	MaxReported = 512
	// maxUsers is how many distinct user names are kept per source, and
	// maxUsersAll over all sources. Beyond them, maxOthers names per source
	// (maxOthersAll in all) are told apart by a hash alone, to count the
	// distinct names in users_more; beyond those, each attempt counts as a
	// name.
	maxUsers     = 64
	maxUsersAll  = 1 << 14
	maxOthers    = 1024
	maxOthersAll = 1 << 16
	// reportedUsers is how many names a report lists per source.
	reportedUsers = 16
	// maxConns bounds the connections followed at once.
	maxConns = 4096
	// connIdle is how long after its last line a connection is taken to be
	// over: sshd's LoginGraceTime is two minutes by default.
	connIdle = 10 * 60
	// bucketSeconds is the span of a bucket, liveBuckets how many past
	// buckets besides the current one count.
	bucketSeconds = 3600
	liveBuckets   = int64(Window / time.Hour)
)

// Aggregate counts SSH authentication per source address over the window,
// from the events of ParseMessage. It is not safe for concurrent use.
//
// It follows each connection (by the pid of sshd's per-connection process,
// which logs all of that connection's lines) so that one attempt is counted
// once, however many lines it leaves: "Failed password" and the
// "Connection closed by authenticating user" that follows are one attempt;
// "Invalid user admin", "Failed password for invalid user admin" and PAM's
// summary are one too. A connection's failures are the most that any one
// kind of its lines shows: its "Failed" lines, its PAM errors, PAM's
// "N more" + 1; and a connection that named a user and ended without
// authenticating and without any of those (a refused key, a user sshd
// refused outright, a client giving up) is one failure.
type Aggregate struct {
	sources map[netip.Addr]*source
	byLast  lastHeap
	conns   map[int]*conn
	users   int   // user names kept over all sources
	others  int   // hashes of other names over all sources
	hour    int64 // of the last prune
	version uint64
}

// bucket is one hour of a source's events.
type bucket struct {
	Hour       int64  `json:"h"`
	Failures   uint32 `json:"f,omitempty"`
	Invalid    uint32 `json:"i,omitempty"`
	Successes  uint32 `json:"s,omitempty"`
	OtherUsers uint32 `json:"o,omitempty"` // attempts with a name beyond all bounds
	First      int64  `json:"first"`
	Last       int64  `json:"last"`
}

type userCount struct {
	n    uint32
	hour int64 // of the latest attempt
}

type source struct {
	addr    netip.Addr
	buckets []bucket // by hour, oldest first
	users   map[string]userCount
	// others holds the hashes of names beyond maxUsers, with the hour of
	// their latest attempt; nil until needed.
	others map[uint32]int64
	// The latest accepted login, and the failures of its hour before it.
	successAt     int64
	successUser   string
	successBefore uint32
	last          int64 // the latest event, for eviction
	index         int   // in Aggregate.byLast
}

// conn is what the lines of one connection said so far.
type conn struct {
	addr                                 netip.Addr
	user                                 string
	hasUser, invalid, accepted, ended    bool
	noted                                bool // its user is counted in the source's names
	failed, pamErrors, pamTotal, counted uint32
	last                                 int64
}

// total is the connection's failures by the rule in Aggregate's comment.
func (c *conn) total() uint32 {
	t := max(c.failed, c.pamErrors, c.pamTotal)
	if t == 0 && c.ended && c.hasUser && !c.accepted {
		t = 1
	}
	return t
}

// NewAggregate returns an empty aggregate.
func NewAggregate() *Aggregate {
	return &Aggregate{sources: map[netip.Addr]*source{}, conns: map[int]*conn{}}
}

// Version changes whenever what Sources reports may have changed, so that
// a report can be kept until then.
func (a *Aggregate) Version() uint64 { return a.version }

// Observe adds an event that happened at at and was logged by process pid
// (0 if unknown). Events older than the window are not counted, though
// they still tell about their connection; events in the future (a clock
// set back) count as now.
func (a *Aggregate) Observe(now, at time.Time, pid int, ev Event) {
	a.prune(now)
	t := min(at.Unix(), now.Unix())
	var c *conn
	if pid > 0 {
		c = a.conns[pid]
		if c != nil && (t-c.last > connIdle || ev.Addr.IsValid() && c.addr.IsValid() && ev.Addr != c.addr) {
			// The pid belongs to another connection now.
			a.finish(now, pid, c)
			c = nil
		}
		if c == nil {
			if len(a.conns) >= maxConns {
				a.evictConns(now, t)
			}
			c = &conn{last: t}
			a.conns[pid] = c
		}
	} else {
		c = &conn{last: t}
	}
	if !c.addr.IsValid() && ev.Addr.IsValid() {
		c.addr = ev.Addr
	}
	if ev.HasUser && (!c.hasUser || ev.Kind != KindPAMFailures) {
		c.user, c.hasUser = ev.User, true
	}
	if ev.Invalid {
		c.invalid = true
	}
	c.last = max(c.last, t)
	switch ev.Kind {
	case KindFailed:
		c.failed = satAdd(c.failed, ev.Count)
	case KindPAMError:
		c.pamErrors = satAdd(c.pamErrors, ev.Count)
	case KindPAMFailures:
		c.pamTotal = max(c.pamTotal, ev.Count)
	case KindClosed, KindTooMany:
		// Without a pid the lines before are unknown: a close alone would
		// count an attempt already counted.
		c.ended = pid > 0
	}
	a.settle(now, t, c)
	if ev.Kind == KindAccepted && c.addr.IsValid() {
		c.accepted = true
		a.success(now, t, c.addr, ev.User)
	}
}

// Expire ends the connections idle for longer than sshd lets one
// authenticate, counting a failure for those that named a user and never
// authenticated, and drops what left the window. The caller calls it only
// once it has read its logs to their end: a connection's next line may be
// in what it has not read yet.
func (a *Aggregate) Expire(now time.Time) {
	a.prune(now)
	for pid, c := range a.conns {
		if now.Unix()-c.last > connIdle {
			a.finish(now, pid, c)
		}
	}
}

// finish ends a connection.
func (a *Aggregate) finish(now time.Time, pid int, c *conn) {
	c.ended = true
	a.settle(now, c.last, c)
	delete(a.conns, pid)
}

// evictConns makes room for a connection: first the idle ones go, then the
// quarter least recently heard from.
func (a *Aggregate) evictConns(now time.Time, t int64) {
	for pid, c := range a.conns {
		if t-c.last > connIdle {
			a.finish(now, pid, c)
		}
	}
	if len(a.conns) < maxConns {
		return
	}
	type pc struct {
		pid  int
		last int64
	}
	all := make([]pc, 0, len(a.conns))
	for pid, c := range a.conns {
		all = append(all, pc{pid, c.last})
	}
	// sort.Slice, not slices.SortFunc, here and below: a SortFunc over a
	// struct type compiles a sorter of its own, about 10 KiB of the binary;
	// every order here is total, so the result is the same.
	sort.Slice(all, func(i, j int) bool {
		return cmp.Or(cmp.Compare(all[i].last, all[j].last), cmp.Compare(all[i].pid, all[j].pid)) < 0
	})
	for _, p := range all[:len(all)/4] {
		a.finish(now, p.pid, a.conns[p.pid])
	}
}

// settle adds the failures of c not counted yet.
func (a *Aggregate) settle(now time.Time, t int64, c *conn) {
	total := c.total()
	if total <= c.counted || !c.addr.IsValid() {
		return
	}
	d := total - c.counted
	c.counted = total
	s, b := a.bucketFor(now, c.addr, t)
	if s == nil {
		return
	}
	b.Failures = satAdd(b.Failures, d)
	if c.invalid {
		b.Invalid = satAdd(b.Invalid, d)
	}
	if c.hasUser && c.user != "" {
		h := hourOf(t)
		if u, ok := s.users[c.user]; ok {
			s.users[c.user] = userCount{n: satAdd(u.n, d), hour: max(u.hour, h)}
		} else if !c.noted {
			if len(s.users) < maxUsers && a.users < maxUsersAll {
				s.users[c.user] = userCount{n: d, hour: h}
				a.users++
			} else {
				a.noteOther(s, b, c.user, h)
			}
		}
		c.noted = true
	}
	a.version++
}

// noteOther counts a name beyond those kept: by its hash while there is
// room, as an attempt after that.
func (a *Aggregate) noteOther(s *source, b *bucket, name string, h int64) {
	k := hash32(name)
	if old, ok := s.others[k]; ok {
		s.others[k] = max(old, h)
		return
	}
	if len(s.others) >= maxOthers || a.others >= maxOthersAll {
		b.OtherUsers = satAdd(b.OtherUsers, 1)
		return
	}
	if s.others == nil {
		s.others = map[uint32]int64{}
	}
	s.others[k] = h
	a.others++
}

// hash32 is FNV-1a.
func hash32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// success records an accepted login.
func (a *Aggregate) success(now time.Time, t int64, addr netip.Addr, user string) {
	s, b := a.bucketFor(now, addr, t)
	if s == nil {
		return
	}
	b.Successes = satAdd(b.Successes, 1)
	if t >= s.successAt {
		s.successAt, s.successUser, s.successBefore = t, user, b.Failures
	}
	a.version++
}

// bucketFor returns the source of addr and its bucket for t, creating them;
// nil when t is before the window.
func (a *Aggregate) bucketFor(now time.Time, addr netip.Addr, t int64) (*source, *bucket) {
	h := hourOf(t)
	if h < hourOf(now.Unix())-liveBuckets {
		return nil, nil
	}
	s := a.sources[addr]
	if s == nil {
		if len(a.sources) >= MaxSources {
			a.dropSource(a.byLast[0])
		}
		s = &source{addr: addr, users: map[string]userCount{}, last: t}
		a.sources[addr] = s
		heap.Push(&a.byLast, s)
	}
	if t > s.last {
		s.last = t
		heap.Fix(&a.byLast, s.index)
	}
	i, found := slices.BinarySearchFunc(s.buckets, h, func(b bucket, h int64) int { return cmp.Compare(b.Hour, h) })
	if !found {
		s.buckets = slices.Insert(s.buckets, i, bucket{Hour: h, First: t, Last: t})
	}
	b := &s.buckets[i]
	b.First, b.Last = min(b.First, t), max(b.Last, t)
	return s, b
}

func (a *Aggregate) dropSource(s *source) {
	heap.Remove(&a.byLast, s.index)
	delete(a.sources, s.addr)
	a.users -= len(s.users)
	a.others -= len(s.others)
	a.version++
}

// prune drops what left the window; it does the work once an hour.
func (a *Aggregate) prune(now time.Time) {
	nh := hourOf(now.Unix())
	if nh == a.hour {
		return
	}
	a.hour = nh
	oldest := nh - liveBuckets
	for _, s := range a.sources {
		n := 0
		for n < len(s.buckets) && s.buckets[n].Hour < oldest {
			n++
		}
		if n == 0 {
			continue
		}
		a.version++
		if n == len(s.buckets) {
			a.dropSource(s)
			continue
		}
		s.buckets = slices.Delete(s.buckets, 0, n)
		for name, u := range s.users {
			if u.hour < oldest {
				delete(s.users, name)
				a.users--
			}
		}
		for k, h := range s.others {
			if h < oldest {
				delete(s.others, k)
				a.others--
			}
		}
		if hourOf(s.successAt) < oldest {
			s.successAt, s.successUser, s.successBefore = 0, "", 0
		}
	}
}

// Sources reports the sources in the window, the busiest first (most
// failures, then most successes, then the latest seen), at most
// MaxReported.
func (a *Aggregate) Sources(now time.Time) []*gridcityv1.AuthSource {
	a.prune(now)
	all := make([]*source, 0, len(a.sources))
	for _, s := range a.sources {
		all = append(all, s)
	}
	reports := make([]*gridcityv1.AuthSource, len(all))
	for i, s := range all {
		reports[i] = s.report()
	}
	slices.SortFunc(reports, func(x, y *gridcityv1.AuthSource) int {
		return cmp.Or(
			cmp.Compare(y.Failures, x.Failures),
			cmp.Compare(y.Successes, x.Successes),
			cmp.Compare(y.LastSeenUnix, x.LastSeenUnix),
			strings.Compare(x.Address, y.Address),
		)
	})
	return reports[:min(len(reports), MaxReported)]
}

func (s *source) report() *gridcityv1.AuthSource {
	r := &gridcityv1.AuthSource{Address: s.addr.String(), FirstSeenUnix: math.MaxInt64}
	var other, before uint32
	successHour := hourOf(s.successAt)
	for _, b := range s.buckets {
		r.Failures = satAdd(r.Failures, b.Failures)
		r.InvalidUsers = satAdd(r.InvalidUsers, b.Invalid)
		r.Successes = satAdd(r.Successes, b.Successes)
		other = satAdd(other, b.OtherUsers)
		r.FirstSeenUnix = min(r.FirstSeenUnix, b.First)
		r.LastSeenUnix = max(r.LastSeenUnix, b.Last)
		if b.Hour < successHour {
			before = satAdd(before, b.Failures)
		}
	}
	if r.FirstSeenUnix == math.MaxInt64 {
		r.FirstSeenUnix = 0 // no bucket left: unknown, not the end of time (the coordinator refuses a time far ahead)
	}
	if s.successAt != 0 {
		r.LastSuccessUnix, r.LastSuccessUser = s.successAt, s.successUser
		r.FailuresBeforeSuccess = satAdd(before, s.successBefore)
	}
	type nc struct {
		name string
		n    uint32
	}
	names := make([]nc, 0, len(s.users))
	for name, u := range s.users {
		names = append(names, nc{name, u.n})
	}
	sort.Slice(names, func(i, j int) bool {
		return cmp.Or(cmp.Compare(names[j].n, names[i].n), strings.Compare(names[i].name, names[j].name)) < 0
	})
	for _, u := range names[:min(len(names), reportedUsers)] {
		r.Users = append(r.Users, u.name)
	}
	r.UsersMore = satAdd(uint32(len(names)-len(r.Users)+len(s.others)), other)
	return r
}

// lastHeap orders sources by their latest event, the oldest on top.
type lastHeap []*source

func (h lastHeap) Len() int { return len(h) }
func (h lastHeap) Less(i, j int) bool {
	return h[i].last < h[j].last || h[i].last == h[j].last && h[i].addr.Less(h[j].addr)
}
func (h lastHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *lastHeap) Push(x any) {
	s := x.(*source)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *lastHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}

// hourOf is the bucket of a unix time.
func hourOf(t int64) int64 {
	h := t / bucketSeconds
	if t < 0 && t%bucketSeconds != 0 {
		h--
	}
	return h
}

// satAdd adds without wrapping: a flood must not make a count small.
func satAdd(a, b uint32) uint32 {
	if a > math.MaxUint32-b {
		return math.MaxUint32
	}
	return a + b
}

// The aggregate as the state file keeps it.
type (
	savedAggregate struct {
		Sources []savedSource `json:"sources"`
		Conns   []savedConn   `json:"conns,omitempty"`
	}
	savedSource struct {
		Addr          string      `json:"addr"`
		Buckets       []bucket    `json:"buckets"`
		Users         []savedUser `json:"users,omitempty"`
		Others        [][2]int64  `json:"others,omitempty"` // hash, hour
		SuccessAt     int64       `json:"successAt,omitempty"`
		SuccessUser   string      `json:"successUser,omitempty"`
		SuccessBefore uint32      `json:"successBefore,omitempty"`
	}
	savedUser struct {
		Name string `json:"n"`
		N    uint32 `json:"c"`
		Hour int64  `json:"h"`
	}
	savedConn struct {
		PID       int    `json:"pid"`
		Addr      string `json:"addr,omitempty"`
		User      string `json:"user,omitempty"`
		HasUser   bool   `json:"hasUser,omitempty"`
		Invalid   bool   `json:"invalid,omitempty"`
		Accepted  bool   `json:"accepted,omitempty"`
		Ended     bool   `json:"ended,omitempty"`
		Noted     bool   `json:"noted,omitempty"`
		Failed    uint32 `json:"failed,omitempty"`
		PAMErrors uint32 `json:"pamErrors,omitempty"`
		PAMTotal  uint32 `json:"pamTotal,omitempty"`
		Counted   uint32 `json:"counted,omitempty"`
		Last      int64  `json:"last"`
	}
)

// save returns the aggregate for the state file, in a stable order.
func (a *Aggregate) save() savedAggregate {
	out := savedAggregate{Sources: make([]savedSource, 0, len(a.sources))}
	for _, s := range a.sources {
		ss := savedSource{Addr: s.addr.String(), Buckets: s.buckets, SuccessAt: s.successAt, SuccessUser: s.successUser, SuccessBefore: s.successBefore}
		for name, u := range s.users {
			ss.Users = append(ss.Users, savedUser{Name: name, N: u.n, Hour: u.hour})
		}
		sort.Slice(ss.Users, func(i, j int) bool { return ss.Users[i].Name < ss.Users[j].Name })
		for k, h := range s.others {
			ss.Others = append(ss.Others, [2]int64{int64(k), h})
		}
		sort.Slice(ss.Others, func(i, j int) bool { return ss.Others[i][0] < ss.Others[j][0] })
		out.Sources = append(out.Sources, ss)
	}
	sort.Slice(out.Sources, func(i, j int) bool { return out.Sources[i].Addr < out.Sources[j].Addr })
	for pid, c := range a.conns {
		sc := savedConn{PID: pid, User: c.user, HasUser: c.hasUser, Invalid: c.invalid, Accepted: c.accepted, Ended: c.ended, Noted: c.noted,
			Failed: c.failed, PAMErrors: c.pamErrors, PAMTotal: c.pamTotal, Counted: c.counted, Last: c.last}
		if c.addr.IsValid() {
			sc.Addr = c.addr.String()
		}
		out.Conns = append(out.Conns, sc)
	}
	sort.Slice(out.Conns, func(i, j int) bool { return out.Conns[i].PID < out.Conns[j].PID })
	return out
}

// loadAggregate rebuilds an aggregate from the state file, checking every
// bound: the file may be damaged, or older than a change of the bounds.
func loadAggregate(in savedAggregate) (*Aggregate, error) {
	a := NewAggregate()
	if len(in.Sources) > MaxSources || len(in.Conns) > maxConns {
		return nil, fmt.Errorf("%d sources, %d connections: over the bounds", len(in.Sources), len(in.Conns))
	}
	for _, ss := range in.Sources {
		addr, ok := parseAddr([]byte(ss.Addr))
		if !ok || a.sources[addr] != nil {
			return nil, fmt.Errorf("source %q: not an address, or twice", ss.Addr)
		}
		if len(ss.Buckets) == 0 || len(ss.Buckets) > int(liveBuckets)+2 || len(ss.Users) > maxUsers || len(ss.Others) > maxOthers {
			return nil, fmt.Errorf("source %s: %d buckets, %d users", ss.Addr, len(ss.Buckets), len(ss.Users))
		}
		s := &source{addr: addr, users: map[string]userCount{}, successAt: ss.SuccessAt, successUser: cleanUser([]byte(ss.SuccessUser)), successBefore: ss.SuccessBefore}
		for i, b := range ss.Buckets {
			if i > 0 && b.Hour <= ss.Buckets[i-1].Hour || hourOf(b.First) != b.Hour || hourOf(b.Last) != b.Hour || b.First > b.Last {
				return nil, fmt.Errorf("source %s: bucket %d out of order", ss.Addr, b.Hour)
			}
			s.last = max(s.last, b.Last)
		}
		s.buckets = slices.Clone(ss.Buckets)
		for _, u := range ss.Users {
			name := cleanUser([]byte(u.Name))
			if _, dup := s.users[name]; dup || name == "" || a.users >= maxUsersAll {
				continue
			}
			s.users[name] = userCount{n: u.N, hour: u.Hour}
			a.users++
		}
		for _, o := range ss.Others {
			if o[0] < 0 || o[0] > math.MaxUint32 || a.others >= maxOthersAll {
				continue
			}
			if s.others == nil {
				s.others = map[uint32]int64{}
			}
			if _, dup := s.others[uint32(o[0])]; !dup {
				s.others[uint32(o[0])] = o[1]
				a.others++
			}
		}
		a.sources[addr] = s
		heap.Push(&a.byLast, s)
	}
	for _, sc := range in.Conns {
		if sc.PID <= 0 || a.conns[sc.PID] != nil {
			return nil, fmt.Errorf("connection of pid %d: invalid or twice", sc.PID)
		}
		c := &conn{user: cleanUser([]byte(sc.User)), hasUser: sc.HasUser, invalid: sc.Invalid, accepted: sc.Accepted, ended: sc.Ended, noted: sc.Noted,
			failed: sc.Failed, pamErrors: sc.PAMErrors, pamTotal: sc.PAMTotal, counted: sc.Counted, last: sc.Last}
		if sc.Addr != "" {
			addr, ok := parseAddr([]byte(sc.Addr))
			if !ok {
				return nil, fmt.Errorf("connection of pid %d: address %q", sc.PID, sc.Addr)
			}
			c.addr = addr
		}
		a.conns[sc.PID] = c
	}
	return a, nil
}
