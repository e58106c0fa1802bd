// Package replicas keeps this coordinator registered in the store beside
// the other replicas of the fleet, with a heartbeat, and keeps its agents
// told where every live replica is, so that an agent whose coordinator
// dies reconnects to another.
package replicas

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Store is what the heartbeat needs of the store.
type Store interface {
	HeartbeatReplica(ctx context.Context, r store.Replica, forgetBefore time.Time) error
	Replicas(ctx context.Context, since time.Time) ([]store.Replica, error)
	RemoveReplica(ctx context.Context, id string) error
}

// Config says who this replica is and how often it beats.
type Config struct {
	// GRPC is the address agents dial (--advertise); HTTP where the MCP
	// endpoint and the app listen.
	GRPC, HTTP string
	// Interval between heartbeats (default 5 s). A replica is live while
	// its last heartbeat is less than 3 intervals old, and forgotten after
	// ForgetAfter (default an hour) of silence.
	Interval, ForgetAfter time.Duration
	// HandoffKey is the public key other replicas seal the approved
	// commands for this one's agents to (command.HandoffKey).
	HandoffKey []byte
}

// Heart registers one replica and beats for it.
type Heart struct {
	st     Store
	self   store.Replica
	cfg    Config
	tell   func(grpcAddrs []string) error
	logger *slog.Logger
	now    func() time.Time
	told   []string
	live   *Liveness
}

// New returns the heart of a replica with a new id (the host's name and a
// random suffix, so that an operator can tell replicas apart in the
// table). tell receives the live replicas' gRPC addresses, first started
// first, after every beat.
func New(st Store, cfg Config, tell func(grpcAddrs []string) error, logger *slog.Logger) *Heart {
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = time.Hour
	}
	host, _ := os.Hostname()
	suffix := make([]byte, 4)
	rand.Read(suffix)
	id := hex.EncodeToString(suffix)
	if host != "" {
		id = host + "-" + id
	}
	return &Heart{st: st, self: store.Replica{ID: id, GRPC: cfg.GRPC, HTTP: cfg.HTTP, HandoffKey: cfg.HandoffKey}, cfg: cfg, tell: tell, logger: logger, now: time.Now, live: NewLiveness(3 * cfg.Interval)}
}

// ID is this replica's id in the store.
func (h *Heart) ID() string { return h.self.ID }

// LiveFor is how long a replica counts live after its last heartbeat:
// three intervals.
func (h *Heart) LiveFor() time.Duration { return h.live.For }

// Beat records this replica as alive now (registering it the first time)
// and tells the live replicas' addresses. Serve calls it once before it
// starts, so that a store that cannot record it stops the start.
func (h *Heart) Beat(ctx context.Context) error {
	now := h.now()
	if h.self.StartedAt.IsZero() {
		h.self.StartedAt = now
	}
	h.self.HeartbeatAt = now
	if err := h.st.HeartbeatReplica(ctx, h.self, now.Add(-h.cfg.ForgetAfter)); err != nil {
		h.live.Read(now, false)
		return fmt.Errorf("register this coordinator (replica %s, gRPC %s) in the store: %w", h.self.ID, h.self.GRPC, err)
	}
	h.live.Read(now, true)
	// After an outage of the store the others have not beaten again yet:
	// the agents keep hearing of them (see Liveness).
	live, err := h.st.Replicas(ctx, h.live.Since(now))
	if err != nil {
		h.live.Read(now, false)
		return err
	}
	addrs := make([]string, 0, len(live))
	for _, r := range live {
		// A replica another version registered with an address agents
		// cannot dial is left out rather than spoil the list.
		if err := gridcityv1.CheckReplicaAddress(r.GRPC); err != nil {
			h.logger.Warn("a replica's address is left out of the agents' list", "replica", r.ID, "err", err)
			continue
		}
		if !slices.Contains(addrs, r.GRPC) && len(addrs) < gridcityv1.MaxReplicas {
			addrs = append(addrs, r.GRPC)
		}
	}
	if slices.Equal(addrs, h.told) {
		return nil
	}
	if err := h.tell(addrs); err != nil {
		return err
	}
	h.logger.Info("live coordinators", "replicas", addrs)
	h.told = addrs
	return nil
}

// Run beats every interval until ctx ends, then removes this replica from
// the store: a clean stop is not left for the others to time out.
func (h *Heart) Run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := h.st.RemoveReplica(rctx, h.self.ID); err != nil {
				h.logger.Warn("this coordinator could not remove itself from the replicas; the others stop listing it within three heartbeats", "replica", h.self.ID, "err", err)
			}
			return
		case <-t.C:
			if err := h.Beat(ctx); err != nil && ctx.Err() == nil {
				h.logger.Warn("replica heartbeat failed; retrying at the next beat", "replica", h.self.ID, "err", err)
			}
		}
	}
}
