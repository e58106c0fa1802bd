package fleetview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// The app's pages see what the tools see: a database that stops is the
// map's root cause, the API it takes down is explained by it, the web
// server that uses the API is at risk; a server's page has its place in
// the topology, its commands and its history; bad arguments and unknown
// servers are told apart from failures.
func TestAppViews(t *testing.T) {
	ctx := context.Background()
	db, _ := net.Listen("tcp", "127.0.0.1:0")
	go fleettest.AcceptAll(db)
	yaml := fmt.Sprintf(`
districts:
  - {id: shop, name: Shop, members: [web-1, api-1, orders-db]}
resources:
  - {id: orders-db, kind: database, engine: tcp, target: %q, timeout: 500ms}
links:
  - {from: api-1, to: orders-db}
  - {from: web-1, to: api-1}
probes: {interval: 15s, timeout: 1s, failuresBeforeTroubled: 2}
`, db.Addr().String())
	cfg, err := config.Parse(strings.NewReader(yaml), "app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := store.OpenSQLite(ctx, t.TempDir())
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, _ := fleet.New(ctx, st, logger)
	web := f.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	f.Apply("web-1", web, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(),
		Host:   &gridcityv1.HostInfo{Hostname: "web-1", Os: "debian", Kernel: "6.1"},
		Cpu:    &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(37.5), Load1: 0.5},
		Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 2 << 30, UsedPercent: 25},
		Disks:  &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100 << 30, UsedBytes: 91 << 30, UsedPercent: 91}, {Mount: "/boot", TotalBytes: 1 << 30, UsedPercent: 10}}}})
	api := f.Connect(&gridcityv1.Hello{Name: "api-1"})
	prober := resources.New(cfg, logger)
	topo := topology.New(cfg, f, prober)
	tracker := fleettest.Tracker(st, topo, logger)
	cmds := command.New(command.Config{}, st, f, nopDispatcher{}, logger)
	app := New(Deps{Fleet: f, Store: st, Commands: cmds, Topology: topo, Resources: prober, Incidents: tracker, Logger: logger})

	if _, err := cmds.Submit(ctx, command.Submission{Server: "web-1", Command: "df -h", Reason: "disk filling", TimeoutSeconds: 10, Client: "claude", Token: "t"}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f.Disconnect("api-1", api)
	prober.CheckAll(ctx)
	prober.CheckAll(ctx)
	if err := tracker.Observe(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}

	m, err := app.Fleet(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]AppTarget{}
	for _, x := range m.Targets {
		byID[x.ID] = x
	}
	dbT, apiT, webT := byID["orders-db"], byID["api-1"], byID["web-1"]
	if !dbT.RootCause || !dbT.Troubled || dbT.Kind != "database" || dbT.District != "shop" {
		t.Errorf("orders-db on the map: %+v", dbT)
	}
	if apiT.RootCause || apiT.ExplainedBy != "orders-db" || apiT.Status != "offline" {
		t.Errorf("api-1 on the map: %+v", apiT)
	}
	if webT.AtRiskFrom != "orders-db" || webT.CPU == nil || *webT.CPU != 37.5 || webT.Disk == nil || *webT.Disk != 91 || len(webT.Why) == 0 {
		t.Errorf("web-1 on the map: %+v", webT)
	}
	if apiT.CPU != nil {
		t.Errorf("an offline server's figures are stale, not shown: %+v", apiT)
	}
	if len(m.Incidents) != 1 || m.Incidents[0].Target != "orders-db" || !slices.Equal(m.Incidents[0].Explains, []string{"api-1"}) || m.Incidents[0].Since == "" {
		t.Errorf("incidents %+v", m.Incidents)
	}
	if m.Total != 2 || m.ByStatus["online"] != 1 || m.ByStatus["offline"] != 1 || m.TargetsTotal != 3 || len(m.Links) != 2 || m.NextAfter != "" {
		t.Errorf("map %+v", m)
	}
	if len(m.Districts) != 1 || m.Districts[0].Members != 3 || m.Districts[0].Troubled != 2 {
		t.Errorf("districts %+v", m.Districts)
	}
	// A page starts after the id given, whether that target is still there or not.
	if p, _ := app.Fleet(ctx, "api-1"); len(p.Targets) != 2 || p.Targets[0].ID != "orders-db" {
		t.Errorf("after api-1: %+v", p.Targets)
	}
	if p, _ := app.Fleet(ctx, "b-gone"); len(p.Targets) != 2 || p.Targets[0].ID != "orders-db" {
		t.Errorf("after b-gone: %+v", p.Targets)
	}

	s, err := app.Server(ctx, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Uses, []string{"api-1"}) || !slices.Equal(s.AtRiskFrom, []string{"orders-db"}) || s.BlastRadiusCount != 0 ||
		s.Server.District != "shop" || s.Server.CPU == nil || len(s.Commands) != 1 || s.Commands[0].Command != "df -h" || s.Commands[0].Status != "pending" {
		t.Errorf("web-1's page: %+v", s)
	}
	d, err := app.Server(ctx, "orders-db")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("a resource's server page: %+v, %v; want ErrNotFound", d, err)
	}
	a, err := app.Server(ctx, "api-1")
	if err != nil || a.ExplainedBy != "orders-db" || !slices.Equal(a.UsedBy, []string{"web-1"}) || len(a.Recent) != 1 {
		t.Errorf("api-1's page: %+v, %v", a, err)
	}
	if _, err := app.Server(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown server: %v; want ErrNotFound", err)
	}

	if h, err := app.ServerMetrics(ctx, "web-1", "6h"); err != nil || h.Target != "web-1" {
		t.Errorf("metrics: %+v, %v", h, err)
	}
	if _, err := app.ServerMetrics(ctx, "web-1", "forever"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("since=forever: %v; want ErrBadRequest", err)
	}
	if _, err := app.ServerMetrics(ctx, "nope", "1h"); !errors.Is(err, ErrNotFound) {
		t.Errorf("metrics of an unknown server: %v; want ErrNotFound", err)
	}

	inc, err := app.Incidents(ctx)
	if err != nil || len(inc.Open.RootCauses) != 1 || len(inc.History) != 1 || inc.History[0].Target != "orders-db" || inc.History[0].EndedAt != "" || inc.History[0].DurationSeconds < 0 {
		t.Errorf("incidents page: %+v, %v", inc, err)
	}
	if _, err := app.Security(ctx, ""); err != nil {
		t.Errorf("security page: %v", err)
	}
	if _, err := app.Security(ctx, "no such attack"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("security after a key never listed: %v; want ErrBadRequest", err)
	}
}
