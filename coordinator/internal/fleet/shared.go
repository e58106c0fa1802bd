package fleet

import (
	"context"
	"errors"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// reloadOverlap is how far back each Reload reads again what the one
// before it read: leases and servers are stamped with their writer's
// clock, up to a flush after the change, so the overlap covers that lag
// and the clock skew between replicas. It bounds what a reload reads to
// what changed within it, never the whole fleet.
const reloadOverlap = 30 * time.Second

// Share makes the fleet one of several replicas' views of one store:
// id is this replica's id (replicas.Heart.ID), and a replica counts live
// while its last heartbeat is under liveFor old. From then on this fleet
// leases the streams it holds in the store (written at the next flush
// after each connect and disconnect), and Reload shows the servers whose
// stream another live replica holds as online, with the state that
// replica saved. Call it before Run; a fleet that is not shared (SQLite,
// one replica) shows only its own streams online.
func (f *Fleet) Share(id string, liveFor time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replica, f.live = id, replicas.NewLiveness(liveFor)
	// New read every server; what changed since comes with the overlap.
	f.serverRead = f.started
	for _, s := range f.servers {
		if s.local() {
			s.leaseDirty = true
		}
	}
}

// Reload reads, on a shared fleet, the leases changed and the servers
// saved since the last Reload (with the overlap) and the live replicas,
// and shows each server whose stream another live replica holds as online
// there (Server.Replica names it), and offline once its lease is released
// or its replica has gone silent. A server whose stream this replica holds
// is never overwritten from the store; if the store says another replica
// holds it, this one's lease is written again at the next flush.
//
// While the store cannot be reached, Reload changes nothing: the servers
// other replicas hold stay as last read (StoreOutage says since when),
// never offline for want of a read; and when it is back, the replicas
// live as it went down stay live until they have had time to beat again
// (replicas.Liveness).
func (f *Fleet) Reload(ctx context.Context) error {
	f.mu.RLock()
	id, live, leasesSince, serversSince := f.replica, f.live, f.leasesRead, f.serverRead
	f.mu.RUnlock()
	if id == "" {
		return nil
	}
	now := f.now()
	alive, http, leases, recs, err := f.read(ctx, live, now, leasesSince, serversSince)
	if err != nil {
		f.noteOutage(now, err)
		return err
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.outage.Since.IsZero() {
		f.logger.Info("the store answers again; what other replicas hold is read anew and this replica's changes are written", "unreachableFor", now.Sub(f.outage.Since).Round(time.Second))
	}
	f.outage = StoreOutage{}
	f.replicaHTTP = http
	f.leasesRead, f.serverRead = now, now
	for _, l := range leases {
		s := f.known(l.Server)
		s.lease, s.leaseSince = l.Replica, l.Since
		if s.local() && l.Replica != id {
			s.leaseDirty = true // the store lost track of this stream: say it again
		}
	}
	for _, r := range recs {
		s := f.known(r.Name)
		if s.local() || !r.LastSeen.After(s.LastSeen) {
			continue // this replica's own, or nothing newer than what it has
		}
		read := s.read
		state, shape, err := decodeState(r.State, s.State, &read)
		if errors.Is(err, errRepeated) {
			state, shape, read.sections = &gridcityv1.StateUpdate{}, true, [maxSection + 1]uint64{}
			err = proto.Unmarshal(r.State, state)
		}
		if err != nil {
			f.logger.Warn("a server's state saved by another replica is unreadable; keeping the one before", "server", r.Name, "err", err)
			continue
		}
		hello, helloChanged, err := decodeHello(r.Hello, s.Hello, &read)
		if err != nil {
			f.logger.Warn("a server's hello saved by another replica is unreadable; keeping the one before", "server", r.Name, "err", err)
			continue
		}
		if shape || helloChanged {
			f.shape++
		}
		s.read = read
		s.State, s.Hello, s.LastSeen, s.saved = state, hello, r.LastSeen, r.LastSeen
		s.dirty = false // the store has it from its writer
	}
	for _, s := range f.servers {
		if s.local() {
			continue
		}
		holder := ""
		if s.lease != "" && s.lease != id && alive[s.lease] {
			holder = s.lease
		}
		switch {
		case holder != "" && (s.Replica != holder || !s.Online):
			f.unawait(s)
			s.Online, s.Replica, s.ConnectedAt = true, holder, s.leaseSince
			f.shape++
		case holder == "" && s.Replica != "":
			s.Online, s.Replica, s.ConnectedAt = false, "", time.Time{}
			f.shape++
		}
	}
	return nil
}

// read is what Reload reads of the store: the live replicas (by id, with
// their HTTP addresses), the leases changed since leasesSince and the
// servers saved since serversSince, each with the overlap.
func (f *Fleet) read(ctx context.Context, live *replicas.Liveness, now, leasesSince, serversSince time.Time) (alive map[string]bool, http map[string]string, leases []store.StreamLease, recs []store.ServerRecord, err error) {
	rs, err := f.store.Replicas(ctx, live.Since(now))
	live.Read(now, err == nil)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	alive, http = make(map[string]bool, len(rs)), make(map[string]string, len(rs))
	for _, r := range rs {
		alive[r.ID], http[r.ID] = true, r.HTTP
	}
	if !leasesSince.IsZero() {
		leasesSince = leasesSince.Add(-reloadOverlap)
	}
	if leases, err = f.store.StreamLeases(ctx, leasesSince); err != nil {
		return nil, nil, nil, nil, err
	}
	if recs, err = f.store.ServersSeenSince(ctx, serversSince.Add(-reloadOverlap), f.newer); err != nil {
		return nil, nil, nil, nil, err
	}
	return alive, http, leases, recs, nil
}

// StoreOutage is a store that this replica cannot reach (store.ErrUnavailable).
type StoreOutage struct {
	// Since is when a read or write of the fleet first failed, Err the
	// latest failure; AsOf is when the servers other replicas hold were
	// last read (zero: never), which is how old their state here is.
	Since, AsOf time.Time
	Err         error
}

// StoreOutage says whether the store has been unreachable since the last
// read that reached it, and since when: while it is, the servers another
// replica holds are as of the outage's AsOf, and commands and approvals
// cannot be recorded. This replica's own streams stay live.
func (f *Fleet) StoreOutage() (StoreOutage, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.outage, !f.outage.Since.IsZero()
}

// noteOutage records a failure to reach the store; other errors (a row
// refused) are not an outage.
func (f *Fleet) noteOutage(now time.Time, err error) {
	if !errors.Is(err, store.ErrUnavailable) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.replica == "" {
		return // only a shared fleet reads what others hold, and notices it back
	}
	if f.outage.Since.IsZero() {
		f.outage.Since, f.outage.AsOf = now, f.leasesRead
		f.logger.Warn("the store is unreachable: this replica keeps its agents' streams and serves what it holds, the servers other replicas hold as last read; approvals and commands wait until it is back; its changes are written then", "err", err)
	}
	f.outage.Err = err
}

// newer says whether a server another replica saved as last seen at
// lastSeen is news to this one: not one it holds, nor one it has read as
// it is (Reload skips those too).
func (f *Fleet) newer(name string, lastSeen time.Time) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.servers[name]
	return s == nil || (!s.local() && lastSeen.After(s.LastSeen))
}

// known returns the server of that name, adding it (offline, with no
// state yet) when another replica's agent is new to this one. The caller
// holds f.mu.
func (f *Fleet) known(name string) *server {
	s := f.servers[name]
	if s == nil {
		s = &server{Server: Server{Name: name, Hello: &gridcityv1.Hello{}, State: &gridcityv1.StateUpdate{}}}
		f.servers[name] = s
		f.shape++
	}
	return s
}
