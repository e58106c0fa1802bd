// Package fleet is the coordinator's live model of its servers: the merged
// state each agent streamed, whether its stream is up, and when it was last
// heard from. Writes reach the store behind the model, in batches, so that a
// busy fleet costs one transaction every few seconds rather than one per
// message; nothing a restart needs lives only here for longer than that.
package fleet

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Status of a server.
const (
	StatusOnline  = "online"
	StatusOffline = "offline"
)

// MetricHistory is how many samples per server the store keeps (at one
// sample per flush interval, several hours).
const MetricHistory = 4320

// Server is a read-only copy of one server's live state.
type Server struct {
	Name     string
	Online   bool
	LastSeen time.Time
	// ConnectedAt is when the current stream opened (zero when offline).
	ConnectedAt time.Time
	Hello       *gridcityv1.Hello
	State       *gridcityv1.StateUpdate
}

// Status is "online" or "offline".
func (s Server) Status() string {
	if s.Online {
		return StatusOnline
	}
	return StatusOffline
}

type server struct {
	Server
	// stream identifies the current stream, so that a stale stream's end
	// does not mark a reconnected server offline.
	stream uint64
	dirty  bool
	sample bool // a new metric sample is due at the next flush
}

// Fleet is safe for concurrent use.
type Fleet struct {
	store  store.Store
	logger *slog.Logger
	now    func() time.Time

	mu      sync.RWMutex
	servers map[string]*server
	streams uint64
	// shape counts changes to what the topology is built from: servers
	// coming and going, their addresses, listeners and connections.
	shape uint64
}

// ShapeVersion changes whenever something the topology is built from
// changes (a server connects or goes offline, its addresses, listeners or
// connections change), so that a graph built at one version can be reused
// until the next.
func (f *Fleet) ShapeVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.shape
}

// New loads the servers the store remembers; all of them start offline until
// their agents reconnect.
func New(ctx context.Context, st store.Store, logger *slog.Logger) (*Fleet, error) {
	f := &Fleet{store: st, logger: logger, now: time.Now, servers: map[string]*server{}}
	recs, err := st.Servers(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		s := &server{Server: Server{Name: r.Name, LastSeen: r.LastSeen, Hello: &gridcityv1.Hello{}, State: &gridcityv1.StateUpdate{}}}
		if err := proto.Unmarshal(r.State, s.State); err != nil {
			logger.Warn("stored state unreadable; waiting for the agent to send it again", "server", r.Name, "err", err)
		}
		if err := proto.Unmarshal(r.Hello, s.Hello); err != nil {
			logger.Warn("stored hello unreadable", "server", r.Name, "err", err)
		}
		f.servers[r.Name] = s
	}
	return f, nil
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
	s.Online, s.ConnectedAt, s.LastSeen = true, now, now
	s.Hello = proto.Clone(hello).(*gridcityv1.Hello)
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
	s.dirty = true
	f.shape++
}

// Touch records that the server was heard from.
func (f *Fleet) Touch(name string, stream uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.servers[name]; s != nil && s.stream == stream {
		s.LastSeen = f.now()
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
	s.dirty = true
	if u.Cpu != nil || u.Memory != nil {
		s.sample = true
	}
	if u.GetFull() || u.Host != nil || u.Listeners != nil || u.Connections != nil {
		f.shape++
	}
}

// Servers returns copies of every server, sorted by name.
func (f *Fleet) Servers() []Server {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Server, 0, len(f.servers))
	for _, s := range f.servers {
		out = append(out, s.copy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Server returns a copy of one server.
func (f *Fleet) Server(name string) (Server, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.servers[name]
	if !ok {
		return Server{}, false
	}
	return s.copy(), true
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
// StateUpdate, so copy clones that top-level message).
func (s *server) copy() Server {
	c := s.Server
	c.State = shallowState(s.State)
	return c
}

func shallowState(u *gridcityv1.StateUpdate) *gridcityv1.StateUpdate {
	out := &gridcityv1.StateUpdate{Full: u.GetFull()}
	gridcityv1.MergeState(out, u)
	return out
}

// Flush writes every changed server and due metric sample to the store.
func (f *Fleet) Flush(ctx context.Context) error {
	f.mu.Lock()
	var recs []store.ServerRecord
	var samples []store.MetricSample
	now := f.now()
	for _, s := range f.servers {
		if s.sample {
			samples = append(samples, store.MetricSample{
				Server: s.Name, At: now,
				CPUPercent: s.State.GetCpu().GetBusyPercent(), MemoryPercent: s.State.GetMemory().GetUsedPercent(),
				Load1: s.State.GetCpu().GetLoad1(),
			})
			s.sample = false
		}
		if !s.dirty {
			continue
		}
		state, err := proto.Marshal(s.State)
		if err != nil {
			f.mu.Unlock()
			return err
		}
		hello, err := proto.Marshal(s.Hello)
		if err != nil {
			f.mu.Unlock()
			return err
		}
		recs = append(recs, store.ServerRecord{Name: s.Name, State: state, Hello: hello, LastSeen: s.LastSeen})
		s.dirty = false
	}
	f.mu.Unlock()
	if err := f.store.SaveServers(ctx, recs); err != nil {
		f.markDirty(recs)
		return err
	}
	return f.store.AppendMetrics(ctx, samples, MetricHistory)
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

// Run flushes changes every interval until ctx ends, then once more.
func (f *Fleet) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The parent context is gone; give the last flush its own deadline.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := f.Flush(fctx); err != nil {
				f.logger.Error("final flush of fleet state failed", "err", err)
			}
			cancel()
			return
		case <-t.C:
			if err := f.Flush(ctx); err != nil && ctx.Err() == nil {
				f.logger.Error("flush fleet state", "err", err)
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
	return command.ServerInfo{Known: true, Online: s.Online, CommandsEnabled: s.Hello.GetCommandsEnabled(), RunAs: s.Hello.GetRunAs()}
}
