package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/fleettest"
	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// A database stops answering: after failuresBeforeTroubled checks it is the
// root cause; the API that uses it (offline too) is explained by it, and
// the healthy web server in front is at risk. It answers again: no incident.
func TestIncidentReportNamesTheRootCause(t *testing.T) {
	ctx := context.Background()
	db, _ := net.Listen("tcp", "127.0.0.1:0")
	cache, _ := net.Listen("tcp", "127.0.0.1:0")
	defer cache.Close()
	go fleettest.AcceptAll(db)
	go fleettest.AcceptAll(cache)
	yaml := fmt.Sprintf(`
resources:
  - {id: orders-db, kind: database, engine: tcp, target: %q, timeout: 500ms, interval: 1s}
  - {id: cache, kind: database, engine: tcp, target: %q}
links:
  - {from: api-1, to: orders-db}
  - {from: web-1, to: api-1}
  - {from: web-1, to: cache}
probes: {interval: 15s, timeout: 1s, failuresBeforeTroubled: 2}
`, db.Addr().String(), cache.Addr().String())
	cfg, err := config.Parse(strings.NewReader(yaml), "incident.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := store.OpenSQLite(ctx, t.TempDir())
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, _ := fleet.New(ctx, st, logger)
	web := f.Connect(&gridcityv1.Hello{Name: "web-1"})
	// web-1 also runs a Postgres on all addresses and a Redis on loopback:
	// the first is a candidate resource, the second stays private.
	f.Apply("web-1", web, &gridcityv1.StateUpdate{Full: true, Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{
		{Proto: "tcp", Address: "0.0.0.0", Port: 5432, Process: "postgres"}, {Proto: "tcp6", Address: "::", Port: 5432, Process: "postgres"},
		{Proto: "tcp", Address: "127.0.0.1", Port: 6379, Process: "redis-server"}, {Proto: "tcp", Address: "0.0.0.0", Port: 22, Process: "sshd"}}}})
	api := f.Connect(&gridcityv1.Hello{Name: "api-1"})
	prober := resources.New(cfg, logger)
	topo := topology.New(cfg, f, prober)
	tracker := fleettest.Tracker(st, topo, logger)
	tok := "gc_incident"
	st.CreateToken(ctx, store.Token{Name: "t", Scope: store.ScopeRead, Hash: bearer.Hash(tok), CreatedAt: time.Now()})
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(Deps{Deps: fleetview.Deps{Fleet: f, Store: st, Commands: command.New(command.Config{}, st, f, nopDispatcher{}, logger), Topology: topo, Resources: prober, Incidents: tracker, Logger: logger}, Store: st}, DefaultGuardConfig()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	hc := &http.Client{Transport: headerTransport{http.DefaultTransport, map[string]string{"Authorization": "Bearer " + tok}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	report := func() fleetview.IncidentOutput {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "incident_report", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("incident_report: %v %+v", err, res)
		}
		var out fleetview.IncidentOutput
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		return out
	}

	prober.CheckAll(ctx)
	if r := report(); len(r.RootCauses) != 0 || r.Healthy != 4 || r.Total != 4 {
		t.Fatalf("all up: %+v", r)
	}
	db.Close()
	f.Disconnect("api-1", api) // the API falls over with its database
	prober.CheckAll(ctx)
	if r := report(); len(r.RootCauses) != 1 || r.RootCauses[0].ID != "api-1" {
		t.Fatalf("after one failed check the database is not troubled yet, so the API is its own root cause: %+v", r)
	}
	prober.CheckAll(ctx)
	if err := tracker.Observe(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := report()
	if len(r.RootCauses) != 1 {
		t.Fatalf("root causes %+v", r.RootCauses)
	}
	rc := r.RootCauses[0]
	if rc.ID != "orders-db" || !strings.Contains(rc.Reason, "connection refused") || strings.Join(rc.Explains, ",") != "api-1" || strings.Join(rc.AtRisk, ",") != "web-1" {
		t.Fatalf("root cause %+v", rc)
	}
	if r.Healthy != 2 || len(r.Troubled) != 2 || r.Troubled[0].RootCause != "orders-db" || r.Troubled[1].RootCause != "orders-db" {
		t.Fatalf("report %+v", r)
	}
	if len(r.Recent) != 1 || r.Recent[0].Target != "orders-db" || r.Recent[0].EndedAt != "" || rc.Since == "" {
		t.Fatalf("incident history %+v (since %q)", r.Recent, rc.Since)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_resources", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatal(err)
	}
	var lr fleetview.ResourcesOutput
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &lr)
	if len(lr.Candidates) != 1 || lr.Candidates[0].Server != "web-1" || lr.Candidates[0].Engine != "postgres" || lr.Candidates[0].Process != "postgres" {
		t.Fatalf("candidates %+v", lr.Candidates)
	}
	// Troubled resources come first.
	if len(lr.Resources) != 2 || lr.Resources[0].ID != "orders-db" || lr.Resources[0].Status != "failed" || !lr.Resources[0].Troubled || lr.Resources[1].Status != "ok" || lr.Resources[1].CheckedFrom != "coordinator" ||
		lr.ResourcesCount != 2 || lr.TroubledCount != 1 || lr.NextAfter != "" {
		t.Fatalf("resources %+v", lr.Resources)
	}
}
