package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// peers is what a store shared by several coordinators (PostgreSQL) gives
// them to serve one fleet: notifications of what the others commit, and
// the election of the one that judges.
type peers interface {
	Listen(ctx context.Context, channel string, logger *slog.Logger, f func(payload string))
	Lead(ctx context.Context, interval time.Duration, logger *slog.Logger, leading func(bool))
}

// openServe opens the store for serve and, when it can be shared (a
// PostgreSQL store), the peers of the replicas on it; nil peers: a lone
// coordinator on its SQLite file.
func (f storeFlags) openServe(ctx context.Context) (store.Store, peers, error) {
	st, err := f.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	if pg, ok := st.(*store.Postgres); ok {
		return st, pg, nil
	}
	return st, nil, nil
}

// replication is the one difference between a lone coordinator and
// replicas sharing a store: alone, or replicated.
type replication interface {
	// unsealKey is the key, never in the store, that the CA key is sealed
	// with and approvals are authenticated with.
	unsealKey() unsealKey
	// handoffKey is the key approved commands are sealed to when another
	// replica hands them to this one (nil alone).
	handoffKey() *command.HandoffKey
	// shareFleet shows the agents every replica holds.
	shareFleet(fl *fleet.Fleet, heart *replicas.Heart)
	// shareCommands hands approved commands to the replica holding the agent.
	shareCommands(cmds *command.Service, heart *replicas.Heart)
	// shareProber probes from the leader only, shares every replica's
	// agents' checks, and asks the replica holding an agent for diagnose's
	// probes.
	shareProber(prober *resources.Prober, st store.Store, fl *fleet.Fleet, heart *replicas.Heart)
	// run starts what replication runs: notifications and the election.
	run(ctx context.Context, wg *sync.WaitGroup, cmds *command.Service, prober *resources.Prober)
	// leads says whether this coordinator does the fleet's judgement (nil:
	// a lone coordinator judges on its own).
	leads() func() bool
	leader() *replicas.Leader
	// health adds this replica's part to /healthz.
	health(h map[string]any, heart *replicas.Heart)
}

// unsealKey is the unseal key and what to do when the store's CA was
// sealed with another.
type unsealKey struct {
	key *sealing.Key
	// remedy completes "the CA key in the store is sealed with another
	// unseal key: …".
	remedy string
}

// errNoUnsealKey is a replica started without the unseal key.
var errNoUnsealKey = errors.New("replicas on PostgreSQL need the same unseal key: give --unseal-key-file FILE (or GRIDCITY_UNSEAL_KEY_FILE) on every replica; " + sealing.MakeOne)

// replicationOf is a lone coordinator (no peers) with the unseal key
// given, or else its own in the data directory (made at its first
// start); or a replica, which must be given the key every replica of its
// store is given.
func replicationOf(p peers, keyFile, data string, logger *slog.Logger) (replication, error) {
	if p == nil {
		if keyFile != "" {
			key, err := sealing.ReadFile(keyFile)
			if err != nil {
				return nil, fmt.Errorf("--unseal-key-file (GRIDCITY_UNSEAL_KEY_FILE): %w", err)
			}
			return alone{unseal: unsealKey{key: key, remedy: "give the --unseal-key-file it was sealed with"}}, nil
		}
		key, created, err := sealing.InDir(data)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(data, sealing.FileName)
		remedy := "put back the " + path + " it was sealed with, from a backup of the data directory"
		if created {
			logger.Info("made the unseal key, which seals the CA key in the store: back it up apart from the store; without it the CA cannot be opened and every agent must enroll again", "file", path)
			remedy = path + " was missing and a new one was made: " + remedy
		}
		return alone{unseal: unsealKey{key: key, remedy: remedy}}, nil
	}
	if keyFile == "" {
		return nil, errNoUnsealKey
	}
	unseal, err := sealing.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--unseal-key-file (GRIDCITY_UNSEAL_KEY_FILE): %w", err)
	}
	key, err := command.NewHandoffKey()
	if err != nil {
		return nil, err
	}
	return &replicated{peers: p, key: key, unseal: unsealKey{key: unseal, remedy: "give the unseal key the other replicas use"}, lead: replicas.NewLeader(logger), logger: logger}, nil
}

// alone is one coordinator on its SQLite file: no one to share with.
type alone struct {
	unseal unsealKey
}

func (a alone) unsealKey() unsealKey                                                    { return a.unseal }
func (alone) handoffKey() *command.HandoffKey                                           { return nil }
func (alone) shareFleet(*fleet.Fleet, *replicas.Heart)                                  {}
func (alone) shareCommands(*command.Service, *replicas.Heart)                           {}
func (alone) shareProber(*resources.Prober, store.Store, *fleet.Fleet, *replicas.Heart) {}
func (alone) run(context.Context, *sync.WaitGroup, *command.Service, *resources.Prober) {}
func (alone) leads() func() bool                                                        { return nil }
func (alone) leader() *replicas.Leader                                                  { return nil }
func (alone) health(map[string]any, *replicas.Heart)                                    {}

// replicated is one of several coordinators on one PostgreSQL store.
type replicated struct {
	peers  peers
	key    *command.HandoffKey
	unseal unsealKey
	lead   *replicas.Leader
	logger *slog.Logger
}

func (r *replicated) unsealKey() unsealKey            { return r.unseal }
func (r *replicated) handoffKey() *command.HandoffKey { return r.key }

func (r *replicated) shareFleet(fl *fleet.Fleet, heart *replicas.Heart) {
	fl.Share(heart.ID(), heart.LiveFor())
}

func (r *replicated) shareCommands(cmds *command.Service, heart *replicas.Heart) {
	cmds.Share(command.Shared{Replica: heart.ID(), Key: r.key, LiveFor: heart.LiveFor()})
}

func (r *replicated) shareProber(prober *resources.Prober, st store.Store, fl *fleet.Fleet, heart *replicas.Heart) {
	// diagnose's on-demand probes from an agent another replica holds
	// are asked of that replica through the store.
	heldBy := func(server string) string {
		if info := fl.ServerInfo(server); !info.Online {
			return info.Replica
		}
		return ""
	}
	prober.Share(resources.Shared{Store: st, Replica: heart.ID(), Leads: r.lead.Leads, Changed: r.lead.Changed, Asks: st, HeldBy: heldBy})
}

func (r *replicated) run(ctx context.Context, wg *sync.WaitGroup, cmds *command.Service, prober *resources.Prober) {
	// Changes other replicas make, as they commit.
	wg.Go(func() {
		r.peers.Listen(ctx, store.RequestsChannel, r.logger, func(id string) { cmds.Changed(ctx, id) })
	})
	wg.Go(func() { r.peers.Listen(ctx, store.ProbesChannel, r.logger, prober.Notified) })
	wg.Go(func() { r.peers.Lead(ctx, time.Second, r.logger, r.lead.Set) })
}

func (r *replicated) leads() func() bool       { return r.lead.Leads }
func (r *replicated) leader() *replicas.Leader { return r.lead }

func (r *replicated) health(h map[string]any, heart *replicas.Heart) {
	// Which replica this is, and whether it does the fleet's judgement.
	h["replica"], h["leader"] = heart.ID(), r.lead.Leads()
}
