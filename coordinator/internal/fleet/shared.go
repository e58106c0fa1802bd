package fleet

import (
	"context"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
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
	f.replica, f.liveFor = id, liveFor
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
func (f *Fleet) Reload(ctx context.Context) error {
	f.mu.RLock()
	id, liveFor, leasesSince, serversSince := f.replica, f.liveFor, f.leasesRead, f.serverRead
	f.mu.RUnlock()
	if id == "" {
		return nil
	}
	now := f.now()
	live, err := f.store.Replicas(ctx, now.Add(-liveFor))
	if err != nil {
		return err
	}
	if !leasesSince.IsZero() {
		leasesSince = leasesSince.Add(-reloadOverlap)
	}
	leases, err := f.store.StreamLeases(ctx, leasesSince)
	if err != nil {
		return err
	}
	recs, err := f.store.ServersSeenSince(ctx, serversSince.Add(-reloadOverlap))
	if err != nil {
		return err
	}
	alive := make(map[string]bool, len(live))
	http := make(map[string]string, len(live))
	for _, r := range live {
		alive[r.ID], http[r.ID] = true, r.HTTP
	}

	f.mu.Lock()
	defer f.mu.Unlock()
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
		state, hello := &gridcityv1.StateUpdate{}, &gridcityv1.Hello{}
		if err := proto.Unmarshal(r.State, state); err != nil {
			f.logger.Warn("a server's state saved by another replica is unreadable; keeping the one before", "server", r.Name, "err", err)
			continue
		}
		if err := proto.Unmarshal(r.Hello, hello); err != nil {
			f.logger.Warn("a server's hello saved by another replica is unreadable; keeping the one before", "server", r.Name, "err", err)
			continue
		}
		s.State, s.Hello, s.LastSeen, s.saved = state, hello, r.LastSeen, r.LastSeen
		s.dirty = false // the store has it from its writer
		f.shape++
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
