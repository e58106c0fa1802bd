// Package fleet is the coordinator's live model of its servers: the merged
// state each agent streamed, whether its stream is up, and when it was last
// heard from. Writes reach the store behind the model, in batches, so that a
// busy fleet costs one transaction every few seconds rather than one per
// message; nothing a restart needs lives only here for longer than that.
//
// After a restart every server is offline until its agent dials again, which
// takes up to the agents' reconnect backoff (capped at a minute). So that a
// restart does not read as the whole fleet going down, a server that was
// most likely online when the coordinator stopped is "reconnecting", not
// "offline", for a startup grace; see DefaultStartupGrace and SeenWithin.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/statecheck"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Status of a server.
const (
	StatusOnline  = "online"
	StatusOffline = "offline"
	// StatusReconnecting is an offline server during the startup grace
	// whose agent was most likely connected when the coordinator stopped.
	StatusReconnecting = "reconnecting"
	// StatusRevoked is a server whose agent's certificate was revoked: it
	// is retired, and its absence is no trouble.
	StatusRevoked = "revoked"
)

// DefaultStartupGrace is how long after a start the fleet waits for the
// agents that were connected before it to dial again before it counts them
// offline: agents retry at least once per backoff cap (60 s, see the agent's
// link.Backoff), and 15 s more covers the handshake and the first full state
// of a fleet returning at once (a load test saw 200 agents back in 5–17 s).
const DefaultStartupGrace = 75 * time.Second

// SeenWithin tells, after a restart, which servers were most likely online
// when the coordinator stopped: those last heard from within SeenWithin of
// the newest last-seen time in the store, which is about when the
// coordinator last heard from anyone. It is measured against that, not
// against the start, so that a coordinator that was down for an hour still
// waits for its fleet; and its size only has to cover how far a connected
// server's stored LastSeen lags: at most seenRefresh plus a heartbeat (5 s)
// and a flush (2 s), about 40 s, with room to spare. A server that went
// down shortly before the restart, within this bound, is told apart by its
// open incident (see New); one without an incident yet waits out the grace
// and then counts offline since it was last heard from.
const SeenWithin = 2 * time.Minute

// seenRefresh bounds how stale the stored LastSeen of a connected server
// gets: heartbeats alone (no state change) write it again this often.
const seenRefresh = 30 * time.Second

// maxHistoryDisks bounds the disks of one server kept in the metric
// history (the largest by size): a host may report hundreds of mounts,
// and each costs the history a series.
const maxHistoryDisks = 32

// Server is a read-only copy of one server's live state.
type Server struct {
	Name     string
	Online   bool
	LastSeen time.Time
	// ConnectedAt is when the current stream opened (zero when offline).
	ConnectedAt time.Time
	Hello       *gridcityv1.Hello
	State       *gridcityv1.StateUpdate
	// Reconnecting is set on an offline server during the startup grace
	// when it was most likely online as the coordinator stopped: its agent
	// is probably waiting out its backoff. Restarted is when the
	// coordinator started and GraceEnds when it stops waiting; both are
	// zero unless Reconnecting.
	Reconnecting         bool
	Restarted, GraceEnds time.Time
	// RevokedAt is when its agent's certificate was revoked (zero while
	// valid), as the store had it at the fleet's last look (SyncRevoked).
	RevokedAt time.Time
	// Refused says why the coordinator refused the agent's latest state
	// update (a value out of range), and RefusedAt when; both are cleared
	// by the next update it accepts. State is what came before.
	Refused   string
	RefusedAt time.Time
	// Replica is, on a store shared by several replicas (see Share), the
	// other replica that holds the server's stream when it is online
	// there rather than here; "" when this replica holds it or no one does.
	Replica string
}

// Status is "online", "revoked", "reconnecting" or "offline". A revoked
// agent's stream is closed within the revocation check's interval; until
// then it is still online.
func (s Server) Status() string { return status(s.Online, !s.RevokedAt.IsZero(), s.Reconnecting) }

func status(online, revoked, reconnecting bool) string {
	switch {
	case online:
		return StatusOnline
	case revoked:
		return StatusRevoked
	case reconnecting:
		return StatusReconnecting
	}
	return StatusOffline
}

type server struct {
	Server
	// stream identifies the current stream, so that a stale stream's end
	// does not mark a reconnected server offline.
	stream uint64
	dirty  bool
	// unsaved: the figures (see figuresOnly) changed since the state was
	// last written. Alone they do not make a server dirty on a store of
	// its own: they are written with the next write of the server, at
	// most seenRefresh later (Touch), and by FlushAll.
	unsaved bool
	sample  bool // a new metric sample is due at the next flush
	// open holds the samples of the current minute, one bucket per
	// metric, written to the store when the minute has passed: the
	// history keeps minutes, and a flush every few seconds need not
	// rewrite them.
	open []store.MetricPoint
	// saved is the LastSeen last written to the store.
	saved time.Time
	// awaited: the server was most likely online when the coordinator
	// stopped and has not connected since; cleared when the grace ends.
	awaited bool
	// On a shared store (see Share): lease is the replica the store says
	// holds the stream ("" released or never leased) and leaseSince when
	// it opened there; leaseDirty says this replica's own lease (taken at
	// Connect, released at Disconnect) is still to be written.
	lease      string
	leaseSince time.Time
	leaseDirty bool
	// read is what a reload last read of the server's state and hello
	// as another replica saved them (see decodeState).
	read readSections
}

// local says this replica holds the server's stream.
func (s *server) local() bool { return s.Online && s.Replica == "" }

// Store is the part of the coordinator's store the fleet model loads from
// and writes behind to.
type Store interface {
	// Servers and OpenIncidents are read once, at New: the servers last
	// known and what was troubled when the coordinator stopped.
	Servers(ctx context.Context) ([]store.ServerRecord, error)
	OpenIncidents(ctx context.Context) ([]store.Incident, error)
	// Agents is read by SyncRevoked for revocations made by the CLI.
	Agents(ctx context.Context) ([]store.Agent, error)
	SaveServers(ctx context.Context, servers []store.ServerRecord) error
	AppendMetrics(ctx context.Context, points []store.MetricPoint, now time.Time, keep store.MetricRetention) error

	// The shared view (see Share): the leases of the streams this replica
	// holds are written at every flush that has a change; the others'
	// leases, the live replicas and the servers they saved are read at
	// every Reload.
	SaveStreamLeases(ctx context.Context, replica string, held []store.StreamLease, released []string, now time.Time) error
	StreamLeases(ctx context.Context, since time.Time) ([]store.StreamLease, error)
	Replicas(ctx context.Context, since time.Time) ([]store.Replica, error)
	ServersSeenSince(ctx context.Context, since time.Time, wanted func(name string, lastSeen time.Time) bool) ([]store.ServerRecord, error)
}

// Fleet is safe for concurrent use.
type Fleet struct {
	store  Store
	logger *slog.Logger
	now    func() time.Time

	mu      sync.RWMutex
	servers map[string]*server
	streams uint64
	// shape counts changes to what the topology is built from: servers
	// coming and going, their addresses, listeners and connections.
	shape uint64

	// The startup grace: started is when New ran, grace how long it waits
	// for the awaited servers, awaiting how many of them have not connected
	// yet. inGrace is set while awaiting > 0 and the grace has not been
	// closed, so that readers after it skip the write lock.
	started  time.Time
	grace    time.Duration
	awaiting int
	inGrace  atomic.Bool

	// keep is how long the store keeps each resolution of the metric history.
	keep store.MetricRetention

	// On a store shared with other replicas (see Share): this replica's
	// id, which replicas count live by their heartbeats, and
	// the times of the last Reload's reads (this replica's clock).
	replica                string
	live                   *replicas.Liveness
	leasesRead, serverRead time.Time
	// outage is set while the store cannot be reached (see StoreOutage).
	outage StoreOutage
	// unsent are the metric minutes flushes could not write while the
	// store was unreachable, oldest first, written by the first flush that
	// reaches it (at most maxUnsent; see keepUnsent).
	unsent []store.MetricPoint
	// replicaHTTP is each live replica's HTTP address by id, as of the
	// last Reload: where a command for a server it holds can be asked.
	replicaHTTP map[string]string

	// views is the read side's last View (view.go); no write touches it.
	views views
}

// Option changes a default of New.
type Option func(*Fleet)

// WithStartupGrace sets how long after its start the fleet shows the
// servers that were most likely online before it as reconnecting rather
// than offline (DefaultStartupGrace); 0 turns the grace off.
func WithStartupGrace(d time.Duration) Option { return func(f *Fleet) { f.grace = d } }

// WithMetricRetention sets how long the metric history is kept at each
// resolution (store.DefaultMetricRetention).
func WithMetricRetention(r store.MetricRetention) Option { return func(f *Fleet) { f.keep = r } }

// MetricRetention is how long the metric history is kept at each resolution.
func (f *Fleet) MetricRetention() store.MetricRetention { return f.keep }

// WithClock makes the fleet read the time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(f *Fleet) { f.now = now } }

// ShapeVersion changes whenever something the topology is built from
// changes (a server connects or goes offline, its addresses, listeners or
// connections change, the startup grace ends), so that a graph built at one
// version can be reused until the next.
func (f *Fleet) ShapeVersion() uint64 {
	f.endGraceIfDue()
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.shape
}

// New loads the servers the store remembers; all of them start offline until
// their agents reconnect. Those that were most likely online when the
// coordinator stopped show as reconnecting for the startup grace: last heard
// from within SeenWithin of the newest last-seen time, and not troubled in
// an open incident (the target of one, or explained by one), which keeps a
// server that was already down at the stop, and its incident, as they were.
func New(ctx context.Context, st Store, logger *slog.Logger, opts ...Option) (*Fleet, error) {
	f := &Fleet{store: st, logger: logger, now: time.Now, servers: map[string]*server{}, grace: DefaultStartupGrace, keep: store.DefaultMetricRetention}
	for _, o := range opts {
		o(f)
	}
	f.started = f.now()
	recs, err := st.Servers(ctx)
	if err != nil {
		return nil, err
	}
	var newest time.Time
	for _, r := range recs {
		s := &server{Server: Server{Name: r.Name, LastSeen: r.LastSeen, Hello: &gridcityv1.Hello{}, State: &gridcityv1.StateUpdate{}}, saved: r.LastSeen}
		if err := proto.Unmarshal(r.State, s.State); err != nil {
			logger.Warn("stored state unreadable; waiting for the agent to send it again", "server", r.Name, "err", err)
			s.State = &gridcityv1.StateUpdate{}
		}
		// A coordinator before the agent API checked values may have kept
		// one that no answer can carry (NaN); such a section is dropped
		// here, and written back without it at the next flush.
		if bad := statecheck.Repair(s.State, f.started); len(bad) > 0 {
			logger.Warn("stored state had impossible values; those sections are dropped until the agent sends them again",
				"server", r.Name, "problems", errors.Join(bad...))
			s.dirty = true
		}
		if err := proto.Unmarshal(r.Hello, s.Hello); err != nil {
			logger.Warn("stored hello unreadable", "server", r.Name, "err", err)
		}
		f.servers[r.Name] = s
		if r.LastSeen.After(newest) {
			newest = r.LastSeen
		}
	}
	if err := f.SyncRevoked(ctx); err != nil {
		return nil, err
	}
	if f.grace <= 0 || newest.IsZero() {
		return f, nil
	}
	down, err := troubled(ctx, st)
	if err != nil {
		return nil, err
	}
	for _, s := range f.servers {
		if !s.LastSeen.IsZero() && newest.Sub(s.LastSeen) <= SeenWithin && !down[s.Name] && s.RevokedAt.IsZero() {
			s.awaited = true
			f.awaiting++
		}
	}
	if f.awaiting > 0 {
		f.inGrace.Store(true)
		logger.Info("waiting for the agents that were connected before the restart; until they return or the grace ends they show as reconnecting",
			"agents", f.awaiting, "of", len(f.servers), "grace", f.grace, "until", f.started.Add(f.grace))
	}
	return f, nil
}

// SyncRevoked reads which agents are revoked from the store and marks
// their servers: `gridcity agents revoke` writes the store from another
// process, so the fleet looks again from time to time (Run does, every
// revokedEvery). A change alters the shape: a revoked server leaves the
// troubled.
func (f *Fleet) SyncRevoked(ctx context.Context) error {
	agents, err := f.store.Agents(ctx)
	if err != nil {
		return fmt.Errorf("read the enrolled agents: %w", err)
	}
	revoked := make(map[string]time.Time, len(agents))
	for _, a := range agents {
		if a.Revoked() {
			revoked[a.Name] = a.RevokedAt
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	for name, s := range f.servers {
		if at := revoked[name]; !at.Equal(s.RevokedAt) {
			s.RevokedAt, changed = at, true
			if !at.IsZero() {
				f.unawait(s) // retired: not awaited after a restart
			}
		}
	}
	if changed {
		f.shape++
	}
	return nil
}

// revokedEvery is how often Run looks for revocations made by the CLI.
const revokedEvery = 30 * time.Second

// troubled names the targets of the open incidents and the targets they
// explain: what was troubled when the coordinator stopped.
func troubled(ctx context.Context, st Store) (map[string]bool, error) {
	ins, err := st.OpenIncidents(ctx)
	if err != nil {
		return nil, fmt.Errorf("read open incidents for the startup grace: %w", err)
	}
	out := map[string]bool{}
	for _, in := range ins {
		out[in.Target] = true
		for _, e := range in.Explains {
			out[e] = true
		}
	}
	return out, nil
}

// unawait stops waiting for s after a restart (it connected, or was
// revoked). The caller holds f.mu.
func (f *Fleet) unawait(s *server) {
	if !s.awaited {
		return
	}
	s.awaited = false
	if f.awaiting--; f.awaiting == 0 {
		f.inGrace.Store(false) // no one left to wait for: nothing to end
	}
}

// endGraceIfDue ends the startup grace once it has run out: the servers
// still awaited count offline from then on, and the shape changes, so that
// no graph built during the grace is reused after it.
func (f *Fleet) endGraceIfDue() {
	if !f.inGrace.Load() {
		return
	}
	f.mu.Lock()
	if !f.inGrace.Load() || f.now().Before(f.started.Add(f.grace)) {
		f.mu.Unlock()
		return
	}
	var late []string
	for _, s := range f.servers {
		if s.awaited {
			s.awaited = false
			late = append(late, s.Name)
		}
	}
	f.awaiting = 0
	f.inGrace.Store(false)
	f.shape++
	f.mu.Unlock()
	sort.Strings(late)
	f.logger.Warn("startup grace over; agents that have not reconnected count offline since they were last heard from",
		"grace", f.grace, "missing", len(late), "servers", late[:min(len(late), 20)])
}

// Connect records a new stream for the server named in hello and returns
// its stream id.
func (f *Fleet) Connect(hello *gridcityv1.Hello) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	s := f.servers[hello.GetName()]
	if s == nil {
		s = &server{Server: Server{Name: hello.GetName(), State: &gridcityv1.StateUpdate{}}}
		f.servers[s.Name] = s
	}
	f.streams++
	s.stream = f.streams
	f.unawait(s)
	s.Online, s.ConnectedAt, s.LastSeen = true, now, now
	s.Replica, s.leaseDirty = "", f.replica != ""
	s.RevokedAt = time.Time{} // its stream was accepted: enrolled anew
	s.Hello, s.read = proto.Clone(hello).(*gridcityv1.Hello), readSections{}
	s.Hello.Journal = nil // command state is kept by the command log, not here
	s.dirty = true
	f.shape++
	return s.stream
}

// Disconnect marks the server offline if stream is still its current one.
func (f *Fleet) Disconnect(name string, stream uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.servers[name]
	if s == nil || s.stream != stream {
		return
	}
	s.Online, s.ConnectedAt = false, time.Time{}
	s.dirty, s.leaseDirty = true, f.replica != ""
	f.shape++
}

// Touch records that the server was heard from.
func (f *Fleet) Touch(name string, stream uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.servers[name]; s != nil && s.stream == stream {
		s.LastSeen = f.now()
		// Keep the stored LastSeen fresh on a quiet server too: after a
		// crash it tells who was online (see SeenWithin), and since when
		// one that does not return has been gone.
		if s.LastSeen.Sub(s.saved) >= seenRefresh {
			s.dirty = true
		}
	}
}

// Apply merges a state update from the server's current stream.
func (f *Fleet) Apply(name string, stream uint64, u *gridcityv1.StateUpdate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.servers[name]
	if s == nil || s.stream != stream {
		return
	}
	if u.GetFull() {
		s.State = proto.Clone(u).(*gridcityv1.StateUpdate)
	} else {
		gridcityv1.MergeState(s.State, u)
	}
	s.LastSeen = f.now()
	s.Refused, s.RefusedAt = "", time.Time{}
	// Every agent sends its figures every few seconds. Only a shared
	// store needs them written that often, for the other replicas' view;
	// a coordinator of its own reads its store only when it starts, when
	// figures a few seconds older are as good (the server shows as
	// reconnecting until its agent sends them afresh).
	if f.replica == "" && figuresOnly(u) {
		s.unsaved = true
		if s.LastSeen.Sub(s.saved) >= seenRefresh {
			s.dirty = true
		}
	} else {
		s.dirty = true
	}
	if u.Cpu != nil || u.Memory != nil || u.Disks != nil {
		s.sample = true
	}
	if u.GetFull() || u.Host != nil || u.Listeners != nil || u.Connections != nil {
		f.shape++
	}
}

// figuresOnly says the update carries nothing but the figures that the
// agent samples every few seconds (CPU, memory, the top processes): any
// other section, the gaps among them, is a change of what the server is.
func figuresOnly(u *gridcityv1.StateUpdate) bool {
	only := true
	u.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		only = figureFields[fd.Name()]
		return only
	})
	return only
}

// figureFields are the StateUpdate fields that figuresOnly allows.
var figureFields = map[protoreflect.Name]bool{"collected_unix_ms": true, "cpu": true, "memory": true, "processes": true}

// Refuse records that a state update from the server's agent was refused,
// and why; the state it had stays. Kept in memory only: an agent whose
// state stays bad is refused again as soon as it reconnects.
func (f *Fleet) Refuse(name, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.servers[name]; s != nil {
		s.Refused, s.RefusedAt = reason, f.now()
	}
}

// Servers returns copies of every server, sorted by name.
func (f *Fleet) Servers() []Server {
	f.endGraceIfDue()
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Server, 0, len(f.servers))
	for _, s := range f.servers {
		out = append(out, f.copy(s))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Server returns a copy of one server.
func (f *Fleet) Server(name string) (Server, bool) {
	f.endGraceIfDue()
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.servers[name]
	if !ok {
		return Server{}, false
	}
	return f.copy(s), true
}

// Names returns the known server names, sorted.
func (f *Fleet) Names() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.servers))
	for n := range f.servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// copy shares the protobuf messages: they are replaced whole, never mutated
// in place once published (merge swaps section pointers on the model's own
// StateUpdate, so copy clones that top-level message). The caller holds
// f.mu and has ended a grace that ran out.
func (f *Fleet) copy(s *server) Server {
	c := s.Server
	c.State = shallowState(s.State)
	if s.awaited {
		c.Reconnecting, c.Restarted, c.GraceEnds = true, f.started, f.started.Add(f.grace)
	}
	return c
}

func shallowState(u *gridcityv1.StateUpdate) *gridcityv1.StateUpdate {
	out := &gridcityv1.StateUpdate{Full: u.GetFull()}
	gridcityv1.MergeState(out, u)
	return out
}

// Flush writes every changed server and the metric minutes that have
// passed to the store.
func (f *Fleet) Flush(ctx context.Context) error { return f.flush(ctx, false) }

// FlushAll writes what Flush does and the minutes still open, as a
// coordinator that stops does: a minute continued after a restart merges
// with what was written of it.
func (f *Fleet) FlushAll(ctx context.Context) error { return f.flush(ctx, true) }

func (f *Fleet) flush(ctx context.Context, all bool) error {
	f.mu.Lock()
	var recs []store.ServerRecord
	var points []store.MetricPoint
	var skipped []error
	var held []store.StreamLease
	var released []string
	now := f.now()
	minute := now.Truncate(store.MetricStep)
	points, f.unsent = f.unsent, nil
	for _, s := range f.servers {
		if len(s.open) > 0 && !s.open[0].At.Equal(minute) {
			points, s.open = append(points, s.open...), nil
		}
		if s.sample {
			// One server's bad sample must not cost the others theirs.
			skipped = append(skipped, s.addSample(minute)...)
			s.sample = false
		}
		if all && len(s.open) > 0 {
			points, s.open = append(points, s.open...), nil
		}
		if all && s.unsaved {
			s.dirty = true
		}
		if s.leaseDirty {
			if s.local() {
				held = append(held, store.StreamLease{Server: s.Name, Since: s.ConnectedAt})
			} else {
				released = append(released, s.Name)
			}
			s.leaseDirty = false
		}
		// A server another replica holds is that replica's to write.
		if !s.dirty || s.Replica != "" {
			continue
		}
		state, err := proto.Marshal(s.State)
		if err == nil {
			var hello []byte
			if hello, err = proto.Marshal(s.Hello); err == nil {
				recs = append(recs, store.ServerRecord{Name: s.Name, State: state, Hello: hello, LastSeen: s.LastSeen})
			}
		}
		if err != nil {
			// Left dirty: written when it can be; the others are written now.
			skipped = append(skipped, fmt.Errorf("state of %s not saved: %w", s.Name, err))
			continue
		}
		s.dirty, s.unsaved, s.saved = false, false, s.LastSeen
	}
	f.mu.Unlock()
	if err := f.store.SaveServers(ctx, recs); err != nil {
		f.markDirty(recs)
		f.markLeasesDirty(held, released)
		f.keepUnsent(points, err)
		f.noteOutage(now, err)
		return err
	}
	if f.replica != "" {
		if err := f.store.SaveStreamLeases(ctx, f.replica, held, released, now); err != nil {
			f.markLeasesDirty(held, released)
			f.keepUnsent(points, err)
			f.noteOutage(now, err)
			return err
		}
	}
	if err := f.store.AppendMetrics(ctx, points, now, f.keep); err != nil {
		f.keepUnsent(points, err)
		f.noteOutage(now, err)
		return err
	}
	return errors.Join(skipped...)
}

// addSample counts the server's current figures into its open minute. A
// figure that is unknown (an agent's first sample has no busy share, a
// collector failed) is left out rather than counted as 0, which would draw
// a dip to idle. The caller holds f.mu.
func (s *server) addSample(minute time.Time) []error {
	var bad []error
	add := func(metric string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad = append(bad, fmt.Errorf("metric sample of %s: %s = %v is not a number: %w", s.Name, metric, v, store.ErrNotFinite))
			return
		}
		for i := range s.open {
			if s.open[i].Metric == metric {
				s.open[i].Add(v)
				return
			}
		}
		p := store.MetricPoint{Server: s.Name, Metric: metric, At: minute}
		p.Add(v)
		s.open = append(s.open, p)
	}
	if c := s.State.GetCpu(); c != nil {
		if c.BusyPercent != nil {
			add("cpu", c.GetBusyPercent())
		}
		add("load", c.GetLoad1())
	}
	if m := s.State.GetMemory(); m != nil {
		add("memory", m.GetUsedPercent())
	}
	for _, d := range historyDisks(s.State.GetDisks().GetItems()) {
		add("disk:"+d.GetMount(), d.GetUsedPercent())
	}
	return bad
}

// historyDisks are the disks kept in the metric history: those with a
// size, the largest maxHistoryDisks of them.
func historyDisks(disks []*gridcityv1.Disk) []*gridcityv1.Disk {
	out := make([]*gridcityv1.Disk, 0, len(disks))
	for _, d := range disks {
		if d.GetTotalBytes() > 0 && d.GetMount() != "" {
			out = append(out, d)
		}
	}
	if len(out) > maxHistoryDisks {
		sort.SliceStable(out, func(i, j int) bool { return out[i].GetTotalBytes() > out[j].GetTotalBytes() })
		out = out[:maxHistoryDisks]
	}
	return out
}

// OpenMetrics returns copies of the server's buckets of the current minute,
// not yet in the store.
func (f *Fleet) OpenMetrics(name string) []store.MetricPoint {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if s := f.servers[name]; s != nil {
		return slices.Clone(s.open)
	}
	return nil
}

// maxUnsent bounds the metric minutes kept for a store that is
// unreachable: some minutes of a large fleet (a point is about 100 bytes).
const maxUnsent = 200_000

// keepUnsent keeps points that a flush could not write because the store
// was unreachable, to write at the next flush, the newest maxUnsent of
// them. Were the write to have committed after all (the connection lost
// as it did), a minute written twice counts its samples twice: its
// average, minimum and maximum stay the same. Other errors are the
// write's refusal and the points go.
func (f *Fleet) keepUnsent(points []store.MetricPoint, err error) {
	if len(points) == 0 || !errors.Is(err, store.ErrUnavailable) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unsent = append(points, f.unsent...)
	if over := len(f.unsent) - maxUnsent; over > 0 {
		f.logger.Warn("the store has been unreachable too long to keep every metric minute; the oldest are dropped", "dropped", over)
		f.unsent = slices.Clone(f.unsent[over:])
	}
}

func (f *Fleet) markDirty(recs []store.ServerRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs {
		if s := f.servers[r.Name]; s != nil {
			s.dirty = true
		}
	}
}

func (f *Fleet) markLeasesDirty(held []store.StreamLease, released []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range held {
		if s := f.servers[l.Server]; s != nil {
			s.leaseDirty = true
		}
	}
	for _, name := range released {
		if s := f.servers[name]; s != nil {
			s.leaseDirty = true
		}
	}
}

// Run flushes changes every interval until ctx ends, then once more; on a
// shared store (see Share) it reloads what the other replicas hold after
// every flush.
func (f *Fleet) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	lastSync := time.Now()
	for {
		select {
		case <-ctx.Done():
			// The parent context is gone; give the last flush its own deadline.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := f.FlushAll(fctx); err != nil {
				f.logger.Error("final flush of fleet state failed", "err", err)
			}
			cancel()
			return
		case <-t.C:
			// An outage of the store is logged once as it begins and
			// once as it ends (noteOutage, Reload), not at every tick.
			if err := f.Flush(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
				f.logger.Error("flush fleet state", "err", err)
			}
			if err := f.Reload(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrUnavailable) {
				f.logger.Warn("read the servers other replicas hold; retrying at the next flush", "err", err)
			}
			if time.Since(lastSync) >= revokedEvery {
				lastSync = time.Now()
				if err := f.SyncRevoked(ctx); err != nil && ctx.Err() == nil {
					f.logger.Error("look for revoked agents", "err", err)
				}
			}
		}
	}
}

// ServerInfo tells the command service whether a server can take a command.
func (f *Fleet) ServerInfo(name string) command.ServerInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.servers[name]
	if !ok {
		return command.ServerInfo{}
	}
	// Only a stream this replica holds can take a command from it.
	info := command.ServerInfo{Known: true, Online: s.local(), CommandsEnabled: s.Hello.GetCommandsEnabled(), RunAs: s.Hello.GetRunAs()}
	if s.Online && s.Replica != "" {
		info.HeldBy, info.Replica = cmp.Or(f.replicaHTTP[s.Replica], "replica "+s.Replica), s.Replica
	}
	return info
}
