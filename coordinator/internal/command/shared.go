package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// sharing reports whether the service is one of several replicas.
func (s *Service) sharing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shared != nil
}

// Changed tells the service that request id changed, on this replica or
// another (the store's notification), or with id "" that changes may have
// been missed (the listener reconnected, or the periodic re-read): it
// reads the request (or every request under way) from the store,
// publishes what is new to this replica's waiters and subscribers, and
// dispatches the hand-offs sealed to this replica. It does nothing on a
// service that is not shared.
func (s *Service) Changed(ctx context.Context, id string) {
	if !s.sharing() {
		return
	}
	if id == "" {
		s.resync(ctx)
	} else if s.refresh(ctx, id) != StatusApproved {
		return // only an approval can be a hand-off
	}
	s.takeHandoffs(ctx)
}

// refresh reads request id, publishes it if it moved on, and returns its
// status ("" when it cannot be read).
func (s *Service) refresh(ctx context.Context, id string) Status {
	r, err := s.Get(ctx, id)
	if err != nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishNewer(r)
	return r.Status
}

// publishNewer publishes r, read from the store, when this replica has not
// yet published it in its present status. Statuses never go back, so an
// older read than the last published is dropped. Called with s.mu held.
func (s *Service) publishNewer(r Request) {
	if s.seen == nil {
		return
	}
	if seen, ok := s.seen[r.ID]; ok && r.Status.rank() <= seen.status.rank() {
		return
	}
	s.relay(r.Status.kind(), r) // committed elsewhere: not this replica's to tell
}

// resync publishes every request under way that moved on since this
// replica last published it, and the end of those it followed that ended,
// then forgets what ended a while ago.
func (s *Service) resync(ctx context.Context) {
	rs, err := s.list(ctx, 10000, string(StatusPending), string(StatusApproved), string(StatusDispatched), string(StatusRunning))
	if err != nil {
		s.logger.Warn("re-read the requests under way", "err", err)
		return
	}
	active := make(map[string]bool, len(rs))
	s.mu.Lock()
	for _, r := range rs {
		active[r.ID] = true
		s.publishNewer(r)
	}
	var ended []string
	cutoff := s.cfg.Now().Add(-time.Minute)
	for id, st := range s.seen {
		switch {
		case st.status.Terminal() && st.at.Before(cutoff):
			delete(s.seen, id)
		case !st.status.Terminal() && !active[id]:
			ended = append(ended, id)
		}
	}
	s.mu.Unlock()
	for _, id := range ended {
		s.refresh(ctx, id)
	}
}

// notSentInTime ends a hand-off not taken within handoffLimit.
var notSentInTime = fmt.Sprintf("approved, but the coordinator holding the agent did not send it within %s; nothing ran; ask again", handoffLimit)

// takeHandoffs dispatches the approved commands other replicas handed to
// this one: it checks each one's authenticators, opens it with this
// replica's key and sends it as an approval made here would be, once its
// dispatch is committed (which fails if another replica ended it first).
func (s *Service) takeHandoffs(ctx context.Context) {
	s.mu.Lock()
	sh := s.shared
	s.mu.Unlock()
	hs, err := s.store.Handoffs(ctx, sh.Replica)
	if err != nil {
		s.logger.Warn("read the commands handed to this coordinator", "err", err)
		return
	}
	for _, h := range hs {
		s.takeHandoff(ctx, sh.Key, h)
	}
	s.mu.Lock()
	s.taken.forget(s.cfg.Now().Add(-2 * handoffLimit))
	s.mu.Unlock()
}

// takeHandoff dispatches one hand-off, if the approval and the hand-off
// read from the store verify against the request as stored (the unseal
// key made them), it was not taken before, and it is not too old.
func (s *Service) takeHandoff(ctx context.Context, key *HandoffKey, h store.Handoff) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.Get(ctx, h.RequestID)
	if err != nil || r.Status != StatusApproved {
		return // taken already, or ended: its hand-off went with the change
	}
	s.publishNewer(r)
	if err := s.authentic(r, h); err != nil {
		s.refuse(ctx, r, "unauthenticated", err)
		return
	}
	if s.taken.seen(h) {
		s.refuse(ctx, r, "replayed", errors.New("this hand-off was taken and sent before, and a copy of it was written back into the store"))
		return
	}
	if age := s.cfg.Now().Sub(r.DecidedAt); age > handoffLimit {
		// As a sweep would end it; and older than what taken remembers.
		s.fail(ctx, r, notSentInTime)
		return
	}
	a, err := key.open(r.ID, h.Sealed)
	if err != nil {
		s.fail(ctx, r, "approved, but the coordinator holding the agent could not open what was handed to it ("+err.Error()+"); nothing ran; ask again")
		return
	}
	s.taken.add(h, r.DecidedAt)
	if _, err := s.dispatch(ctx, r, a); err != nil {
		s.logger.Error("dispatch a command handed over by another coordinator", "request", r.ID, "err", err)
	}
}

// refuse ends an approved request read from the store that this
// coordinator will not send, as failed, and logs and counts the attempt:
// someone who can write the store tried to run a command. Called with
// s.mu held.
func (s *Service) refuse(ctx context.Context, r Request, reason string, why error) {
	s.logger.Error("refused an approved command whose approval this coordinator cannot trust (written into the store by someone without the unseal key, or by an older gridcity); nothing was sent", "request", r.ID, "server", r.Server,
		"reason", reason, "decided_by", r.DecidedBy, "err", why)
	s.cfg.Metrics.ForgedApproval(reason)
	s.fail(ctx, r, "not dispatched: "+why.Error()+"; nothing ran")
}

// approvedSweep is what one sweep reads, once, to judge approved requests
// on a shared store: the hand-offs and the live replicas.
type approvedSweep struct {
	read     bool
	handoffs map[string]store.Handoff
	live     map[string]bool
}

// sweepApproved says why an approved request that was not dispatched must
// end now, or "" to leave it. One coordinator alone ends every such
// request it finds (it dispatches under the lock the sweep takes, so an
// approved request in the store is one it stopped before sending). With
// replicas, another replica may be about to send it: a hand-off to a live
// replica is left for that replica to take (for up to handoffLimit), and
// an approval without one for the replica that made it to send (for
// handoffGrace). A hand-off to a replica that died cannot be taken by any
// other (its key died with it): the request fails, never runs late.
// Called with s.mu held.
func (s *Service) sweepApproved(ctx context.Context, sw *approvedSweep, r Request, now time.Time) string {
	const restarted = "approved but never dispatched: the coordinator restarted, or the store was unreachable, between approval and dispatch; it was never sent, so nothing ran; ask again"
	if s.shared == nil {
		return restarted
	}
	if !sw.read {
		hs, err := s.store.Handoffs(ctx, "")
		if err != nil {
			s.logger.Warn("read hand-offs; approved requests wait for the next sweep", "err", err)
			return ""
		}
		live, err := s.store.Replicas(ctx, now.Add(-s.shared.LiveFor))
		if err != nil {
			s.logger.Warn("read live replicas; approved requests wait for the next sweep", "err", err)
			return ""
		}
		sw.read, sw.handoffs, sw.live = true, map[string]store.Handoff{}, map[string]bool{}
		for _, h := range hs {
			sw.handoffs[h.RequestID] = h
		}
		for _, rep := range live {
			sw.live[rep.ID] = true
		}
	}
	age := now.Sub(r.DecidedAt)
	h, handed := sw.handoffs[r.ID]
	switch {
	case handed && !sw.live[h.Replica]:
		return "approved, but the coordinator holding the agent stopped before sending it; nothing ran; ask again"
	case handed && age > handoffLimit:
		return notSentInTime
	case !handed && age > handoffGrace:
		return restarted
	}
	return ""
}
