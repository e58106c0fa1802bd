package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/agentapi"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/security"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// registerGauges adds the gauges read at each scrape: what this replica
// holds (agents, streams), what the store holds for every replica
// (pending approvals, running commands), the open incidents and, with
// replicas, whether this one leads.
func registerGauges(m *telemetry.Metrics, api *agentapi.Server, fl *fleet.Fleet, cmds *command.Service, tracker *incidents.Tracker, self string, lead *replicas.Leader, logger *slog.Logger) {
	m.Gauge("agents_connected", "Agent streams this coordinator holds.", func() float64 { return float64(len(api.Connected())) })
	m.GaugeByLabel("agent_streams", "Connected agents by the coordinator (replica id) that holds their stream, as this one sees the fleet.", "replica", func() map[string]float64 {
		by := map[string]float64{}
		for _, s := range fl.Servers() {
			if !s.Online {
				continue
			}
			r := s.Replica
			if r == "" {
				r = self
			}
			by[r]++
		}
		return by
	})
	counts := &requestCounts{cmds: cmds, logger: logger}
	m.GaugeIfKnown("approvals_pending", "Command requests waiting for a person, in the store (the same on every replica); absent while the store does not answer.",
		func() (float64, bool) { p, _, ok := counts.get(); return p, ok })
	m.GaugeIfKnown("commands_running", "Approved commands dispatched to their agent and not yet ended, in the store (the same on every replica); absent while the store does not answer.",
		func() (float64, bool) { _, r, ok := counts.get(); return r, ok })
	m.Gauge("incidents_open", "Open incidents: targets that are the root cause of trouble now.", func() float64 { return float64(len(tracker.Open())) })
	if lead != nil {
		m.Gauge("replica_leader", "1 while this replica does the fleet's judgement (probes from the coordinator, incidents), 0 otherwise.", func() float64 {
			if lead.Leads() {
				return 1
			}
			return 0
		})
	}
}

// requestCounts reads the pending and running counts once for both
// gauges of a scrape (they are read one after the other); when the store
// does not answer, the counts are unknown and the gauges left out.
type requestCounts struct {
	cmds   *command.Service
	logger *slog.Logger

	mu               sync.Mutex
	at               time.Time
	pending, running float64
	ok               bool
}

func (c *requestCounts) get() (pending, running float64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < time.Second {
		return c.pending, c.running, c.ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p, r, err := c.cmds.Counts(ctx)
	if err != nil {
		c.logger.Debug("metrics: requests not counted", "err", err)
	}
	c.at, c.pending, c.running, c.ok = time.Now(), float64(p), float64(r), err == nil
	return c.pending, c.running, c.ok
}

// fleetSource gives /metrics/fleet the servers with their districts (the
// one the agent declares, else the config's) and open attacks, and the
// resources' status.
func fleetSource(fl *fleet.Fleet, topo *topology.Source, prober *resources.Prober) telemetry.FleetSource {
	return telemetry.FleetSource{
		Servers: func() []telemetry.FleetServer {
			member := map[string]string{}
			for _, d := range topo.Config().Districts {
				for _, m := range d.Members {
					if member[m] == "" {
						member[m] = d.ID
					}
				}
			}
			now := time.Now()
			opts := security.DefaultOptions()
			servers := fl.Servers()
			out := make([]telemetry.FleetServer, 0, len(servers))
			for _, s := range servers {
				fs := telemetry.FleetServer{Name: s.Name, District: s.Hello.GetDistrict(), Online: s.Online, LastSeen: s.LastSeen, State: s.State}
				if fs.District == "" {
					fs.District = member[s.Name]
				}
				if s.Online && s.State.GetLogins() != nil {
					fs.OpenAttacks = len(security.OpenAttacks(s.Name, s.State, now, opts))
				}
				out = append(out, fs)
			}
			return out
		},
		Resources: func() []telemetry.FleetResource {
			states := prober.States()
			out := make([]telemetry.FleetResource, 0, len(states))
			for _, r := range states {
				out = append(out, telemetry.FleetResource{ID: r.ID, Kind: r.Kind, Status: r.Status})
			}
			return out
		},
	}
}
