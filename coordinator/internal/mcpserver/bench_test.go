package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

type noServers struct{}

func (noServers) Servers() []fleet.Server { return nil }

type fixedStates map[string]resources.State

func (f fixedStates) State(id string) (resources.State, bool) { s, ok := f[id]; return s, ok }

// Versioned sources let the topology reuse its graph; the fleet and the
// prober are versioned.
type versionedServers struct{ noServers }

func (versionedServers) ShapeVersion() uint64 { return 1 }

type versionedStates struct{ fixedStates }

func (versionedStates) Version() uint64 { return 1 }

// syntheticTopology is the graph benchmarks' fleet shape as a config:
// n resources, 3n uses links (two to neighbours, one anywhere, one in a
// hundred pointing up), about 2% troubled, a district per hundred.
func syntheticTopology(n int, reuse bool) *topology.Source {
	r := rand.New(rand.NewPCG(10000, 30000))
	cfg := config.Default()
	states := fixedStates{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := func(i int) string { return fmt.Sprintf("t%05d", i) }
	for i := range n {
		cfg.Resources = append(cfg.Resources, config.Resource{ID: id(i), Kind: "probe", Engine: "tcp", Target: fmt.Sprintf("10.%d.%d.%d:80", i>>16, (i>>8)&255, i&255)})
		st := resources.State{ID: id(i), Status: "ok"}
		if r.IntN(100) < 2 {
			st.Status, st.Troubled, st.Reason, st.Since = "failed", true, "dial tcp: connection refused", t0.Add(time.Duration(r.IntN(3600))*time.Second)
		}
		states[id(i)] = st
		if i%100 == 0 {
			cfg.Districts = append(cfg.Districts, config.District{ID: fmt.Sprintf("d%03d", i/100)})
		}
		d := &cfg.Districts[len(cfg.Districts)-1]
		d.Members = append(d.Members, id(i))
	}
	for i := 1; i < n; i++ {
		picked := map[int]bool{}
		for k := 0; k < 3 && len(picked) < i; {
			var j int
			switch {
			case r.IntN(100) == 0:
				j = r.IntN(n)
			case k < 2:
				j = max(0, i-1-r.IntN(100))
			default:
				j = r.IntN(i)
			}
			if j == i || picked[j] {
				continue
			}
			picked[j] = true
			cfg.Links = append(cfg.Links, config.Link{From: id(i), To: id(j)})
			k++
		}
	}
	if reuse {
		return topology.New(cfg, versionedServers{}, versionedStates{states})
	}
	return topology.New(cfg, noServers{}, states)
}

// The tools' whole path on 10,000 targets and 30,000 links: the graph
// from the fleet and config, the report, and the SDK's encoding and
// output-schema validation, over an in-memory MCP session. "steady": the
// graph is reused, as it is while nothing changed; "cold": built anew for
// every call, as after every change.
func BenchmarkTools(b *testing.B) {
	b.Run("steady", func(b *testing.B) { benchTools(b, syntheticTopology(10000, true)) })
	b.Run("cold", func(b *testing.B) { benchTools(b, syntheticTopology(10000, false)) })
}

func benchTools(b *testing.B, topo *topology.Source) {
	s := NewServer(Deps{Deps: fleetview.Deps{Topology: topo, Logger: slog.New(slog.DiscardHandler)}}, store.ScopeRead)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"incident_report", map[string]any{}},
		{"get_topology", map[string]any{}},
		{"get_topology", map[string]any{"target": "t00000"}},
	} {
		label := tc.name
		if len(tc.args) > 0 {
			label += "_target"
		}
		b.Run(label, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.name, Arguments: tc.args})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", tc.name, err, res)
				}
			}
		})
	}
}
