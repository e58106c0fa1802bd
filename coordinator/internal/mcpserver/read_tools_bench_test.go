package mcpserver

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// The writes BenchmarkReadToolsUnderWrites makes while it reads: what
// 10,000 agents send (a change of CPU and memory every 5 s each), and an
// agent reconnecting with its full state every second somewhere in the
// fleet, which changes the fleet's shape and so the topology.
const (
	writesPerSecond  = 2000
	reconnectEvery   = time.Second
	writeTick        = 5 * time.Millisecond
	historyServer    = 0 // simfleet index of the server with a week of metric history
	readToolsMinRuns = 20
)

// historyStore is the big fleet's store with a week of metric history for
// one server, read from SQLite as the coordinator's own store does.
type historyStore struct {
	memStore
	history store.Store
}

func (s historyStore) MetricHistory(ctx context.Context, server string, step time.Duration, since time.Time, every time.Duration) ([]store.MetricPoint, error) {
	return s.history.MetricHistory(ctx, server, step, since, every)
}

// BenchmarkReadToolsUnderWrites calls every read tool, resource and app
// view on the big fleet (10,000 servers, 1,000 resources, 40,000 links)
// while a goroutine writes the fleet as 10,000 agents do (writesPerSecond
// changes, a reconnect every reconnectEvery), and reports each call's
// median and 95th percentile (p50-ms, p95-ms) beside its allocations.
// Run it with a count of calls, e.g. -benchtime 40x: a percentile of a
// handful of calls says little.
func BenchmarkReadToolsUnderWrites(b *testing.B) {
	ctx := context.Background()
	streams := map[string]uint64{}
	d := buildBigFleet(streams)
	hist, err := store.OpenSQLite(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hist.Close() })
	metrics := []string{"cpu", "memory", "load", "disk:/", "disk:/var", "disk:/boot/efi"}
	fillHistory(b, hist, simfleet.Name(historyServer), time.Now(), 7*24*time.Hour, metrics,
		func(m string, at time.Time) float64 { return 40 + 30*math.Sin(float64(at.Unix())/3600) })
	hs := historyStore{memStore: d.Store.(memStore), history: hist}
	d.Store, d.Deps.Store = hs, hs // the tools' store and the read model's
	cs := memSession(b, d)
	app := fleetview.New(d.Deps)

	stop := writeFleet(d.Fleet, streams)
	defer stop()

	name := simfleet.Name(historyServer)
	tool := func(tool string, args map[string]any) func() error {
		return func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err == nil && res.IsError {
				b.Fatalf("%s %v: %s", tool, args, res.Content[0].(*mcp.TextContent).Text)
			}
			return err
		}
	}
	resource := func(uri string) func() error {
		return func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			return err
		}
	}
	for _, c := range []struct {
		label string
		call  func() error
	}{
		{"list_servers/no_arguments", tool("list_servers", nil)},
		{"list_servers/name", tool("list_servers", map[string]any{"name": name})},
		{"list_servers/attention", tool("list_servers", map[string]any{"attention": true})},
		{"list_servers/district", tool("list_servers", map[string]any{"district": simfleet.District(42)})},
		{"incident_report/no_arguments", tool("incident_report", nil)},
		{"incident_report/root_cause", tool("incident_report", map[string]any{"root_cause": bigRoot})},
		{"get_topology/no_arguments", tool("get_topology", nil)},
		{"get_topology/target", tool("get_topology", map[string]any{"target": name})},
		{"security_findings/no_arguments", tool("security_findings", nil)},
		{"security_findings/server", tool("security_findings", map[string]any{"server": name})},
		{"list_resources/no_arguments", tool("list_resources", nil)},
		{"list_resources/status", tool("list_resources", map[string]any{"status": "failed"})},
		{"list_runbooks/no_arguments", tool("list_runbooks", nil)},
		{"get_metrics/target", tool("get_metrics", map[string]any{"target": name})},
		{"get_metrics/week", tool("get_metrics", map[string]any{"target": name, "since": "7d"})},
		{"diagnose/server", tool("diagnose", map[string]any{"target": name})},
		{"resource/servers", resource(uriServers)},
		{"resource/server", resource(serverURI(name))},
		{"resource/topology", resource(uriTopology)},
		{"resource/incidents", resource(uriIncidents)},
		{"app/fleet", func() error { _, err := app.Fleet(ctx, ""); return err }},
		{"app/server", func() error { _, err := app.Server(ctx, name); return err }},
		{"app/incidents", func() error { _, err := app.Incidents(ctx); return err }},
		{"app/security", func() error { _, err := app.Security(ctx, ""); return err }},
	} {
		b.Run(c.label, func(b *testing.B) {
			b.ReportAllocs()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatalf("%s: %v", c.label, err)
				}
				took = append(took, time.Since(start))
			}
			if len(took) < readToolsMinRuns {
				b.Logf("%s: %d calls; percentiles want at least %d (-benchtime %dx)", c.label, len(took), readToolsMinRuns, readToolsMinRuns)
			}
			slices.Sort(took)
			b.ReportMetric(percentile(took, 50), "p50-ms")
			b.ReportMetric(percentile(took, 95), "p95-ms")
		})
	}
}

// percentile is the p-th percentile of sorted durations, in milliseconds:
// the smallest value at least p% of them are no greater than.
func percentile(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := max(0, (len(sorted)*p+99)/100-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// writeFleet writes the fleet as its agents do until stop is called:
// writesPerSecond changes of CPU and memory, round the online servers,
// and a reconnect with the full state every reconnectEvery.
func writeFleet(f *fleet.Fleet, streams map[string]uint64) (stop func()) {
	type agent struct {
		i      int
		name   string
		stream uint64
	}
	var online []*agent
	for i := range bigServers {
		if i%2 == 0 { // the big fleet's odd-numbered servers are offline
			online = append(online, &agent{i: i, name: simfleet.Name(i), stream: streams[simfleet.Name(i)]})
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		r := rand.New(rand.NewPCG(7, 11))
		tick := time.NewTicker(writeTick)
		defer tick.Stop()
		start, sent, reconnects, next := time.Now(), 0, 0, 0
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			elapsed := time.Since(start)
			for ; sent < int(elapsed.Seconds()*writesPerSecond); sent++ {
				a := online[next%len(online)]
				next++
				f.Apply(a.name, a.stream, cpuMemoryChange(r))
			}
			for ; reconnects < int(elapsed/reconnectEvery); reconnects++ {
				a := online[r.IntN(len(online))]
				f.Disconnect(a.name, a.stream)
				a.stream = f.Connect(simfleet.Hello(a.i, "0.9.0"))
				st := simfleet.State(a.i, bigServers, r, time.Now())
				simfleet.AddTrouble(st, a.i, time.Now())
				f.Apply(a.name, a.stream, st)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// cpuMemoryChange is a change as an agent's fast tier sends it: new CPU and
// memory figures, nothing else.
func cpuMemoryChange(r *rand.Rand) *gridcityv1.StateUpdate {
	busy, mem := 5+60*r.Float64(), 30+50*r.Float64()
	return &gridcityv1.StateUpdate{CollectedUnixMs: time.Now().UnixMilli(),
		Cpu:    &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(busy), Load1: busy / 25, Load5: busy / 25, Load15: busy / 25},
		Memory: &gridcityv1.Memory{TotalBytes: 8 * simfleet.GiB, UsedBytes: uint64(mem / 100 * 8 * simfleet.GiB), AvailableBytes: uint64((100 - mem) / 100 * 8 * simfleet.GiB), UsedPercent: mem}}
}
