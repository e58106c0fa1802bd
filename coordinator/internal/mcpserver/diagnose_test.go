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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/lib/probe"
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

// probingAgents stands in for the agents: asked for a probe, it runs it
// here and hands the result to the prober, as an agent's stream would.
type probingAgents struct {
	prober *resources.Prober
	asked  chan string
}

func (probingAgents) AssignProbes(string, []*gridcityv1.ProbeSpec) error { return nil }

func (a probingAgents) RunProbe(server string, spec *gridcityv1.ProbeSpec) error {
	select {
	case a.asked <- server + " " + spec.GetEngine() + " " + spec.GetTarget():
	default:
	}
	go func() {
		res := probe.Run(context.Background(), probe.Spec{Engine: spec.GetEngine(), Target: spec.GetTarget(), Timeout: time.Duration(spec.GetTimeoutSeconds()) * time.Second})
		status := "failed"
		if res.OK {
			status = "ok"
		}
		a.prober.HandleResult(server, &gridcityv1.ProbeResult{ProbeId: spec.GetId(), ResourceId: spec.GetResourceId(), Status: status,
			Reason: res.Reason, LatencyUs: res.Latency.Microseconds(), CheckedUnixMs: time.Now().UnixMilli()})
	}()
	return nil
}

// A TCP service that web-1 uses: diagnose passes while it listens; once it
// stops, the ladder fails at reachable with web-1's real refusal, and the
// runbook that starts it is verified by that refusal. An unknown target is
// an error naming the close matches; a read token may diagnose.
func TestDiagnose(t *testing.T) {
	ctx := context.Background()
	svc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go fleettest.AcceptAll(svc)
	addr := svc.Addr().String()
	cfg, err := config.Parse(strings.NewReader(fmt.Sprintf(`
resources:
  - {id: orders-db, name: Orders, kind: database, engine: tcp, target: %q}
links:
  - {from: web-1, to: orders-db}
runbooks:
  - {name: start-orders, description: Start the orders service, command: systemctl start orders, match: {id: orders-db}}
`, addr)), "diagnose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	f, _ := fleet.New(ctx, st, logger)
	web := f.Connect(&gridcityv1.Hello{Name: "web-1", Capabilities: []string{"commands", "probes"}, CommandsEnabled: true, RunAs: "root"})
	f.Apply("web-1", web, &gridcityv1.StateUpdate{Full: true, Host: &gridcityv1.HostInfo{Addresses: []string{"192.0.2.10"}}})
	prober := resources.New(cfg, logger)
	topo := topology.New(cfg, f, prober)
	asked := make(chan string, 16)
	prober.SetAgents(probingAgents{prober: prober, asked: asked}, topo.Vantages)
	tok := "gc_diagnose"
	st.CreateToken(ctx, store.Token{Name: "reader", Scope: store.ScopeRead, Hash: bearer.Hash(tok), CreatedAt: time.Now()})
	mux := http.NewServeMux()
	mux.Handle("/mcp", Handler(Deps{Deps: fleetview.Deps{Fleet: f, Store: st, Commands: command.New(command.Config{}, st, f, nopDispatcher{}, logger), Topology: topo, Resources: prober, Logger: logger}, Store: st}, DefaultGuardConfig()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	hc := &http.Client{Transport: headerTransport{http.DefaultTransport, map[string]string{"Authorization": "Bearer " + tok}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	diagnose := func(target string) (*mcp.CallToolResult, fleetview.DiagnoseOutput) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "diagnose", Arguments: map[string]any{"target": target}})
		if err != nil {
			t.Fatal(err)
		}
		var out fleetview.DiagnoseOutput
		if !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &out); err != nil {
				t.Fatal(err)
			}
			if len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"ladder"`) {
				t.Errorf("text content lacks the JSON: %+v", res.Content)
			}
		}
		return res, out
	}
	rungs := func(out fleetview.DiagnoseOutput) string {
		var s []string
		for _, r := range out.Ladder {
			s = append(s, r.Rung+"="+r.Status)
		}
		return strings.Join(s, " ")
	}

	// Up: by name, case-insensitively.
	res, out := diagnose("orders")
	if res.IsError || out.Target != "orders-db" || out.Status != "ok" || out.StoppedAt != "" {
		t.Fatalf("up: %+v %+v", res.Content, out)
	}
	if got := rungs(out); got != "agent=skip host=skip service=skip port=skip reachable=pass handshake=pass dependencies=pass" {
		t.Errorf("up ladder %s", got)
	}
	if r := out.Ladder[4]; !strings.Contains(r.Detail, "from web-1: connected to "+addr) {
		t.Errorf("reachable %+v", r)
	}
	if len(out.Fixes) != 0 || len(out.Diagnoses) != 0 || !slices.Contains(out.Runbooks, "start-orders") {
		t.Errorf("up: fixes %+v diagnoses %+v runbooks %v", out.Fixes, out.Diagnoses, out.Runbooks)
	}
	select {
	case got := <-asked:
		if got != "web-1 tcp "+addr {
			t.Errorf("web-1's agent was asked %q", got)
		}
	default:
		t.Error("web-1's agent was not asked to connect")
	}

	// Down: refused from web-1.
	svc.Close()
	_, out = diagnose("orders-db")
	if got := rungs(out); out.Status != "fail" || out.StoppedAt != "reachable" || got != "agent=skip host=skip service=skip port=skip reachable=fail handshake=skip dependencies=skip" {
		t.Fatalf("down: %s %+v", got, out)
	}
	if !strings.Contains(out.Ladder[4].Detail, "from web-1: refused") || !strings.Contains(out.Ladder[4].Detail, "connection refused") {
		t.Errorf("reachable %+v", out.Ladder[4])
	}
	if len(out.Diagnoses) != 1 || !strings.Contains(strings.Join(out.Diagnoses[0].Evidence, "\n"), "connect: connection refused") {
		t.Errorf("diagnoses %+v", out.Diagnoses)
	}
	if len(out.Fixes) != 1 {
		t.Fatalf("fixes %+v", out.Fixes)
	}
	fix := out.Fixes[0]
	if fix.Runbook != "start-orders" || fix.Command != "systemctl start orders" || fix.Server != "" || fix.Via != "by hand" || !fix.Verified ||
		!strings.Contains(fix.Verification, "a TCP connection from web-1 was refused just now") {
		t.Errorf("fix %+v", fix)
	}
	if n := len(out.Attempts); n != 1 || out.Attempts[0].From != "web-1" || !out.Attempts[0].Answered || out.Attempts[0].OK {
		t.Errorf("attempts %+v", out.Attempts)
	}

	// Unknown.
	res, _ = diagnose("orders-dbb")
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `unknown target "orders-dbb"; known targets: orders-db`) {
		t.Errorf("unknown target: %+v", res.Content)
	}
	res, _ = diagnose("web-3")
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "known targets: web-1") {
		t.Errorf("unknown server: %+v", res.Content)
	}
}
