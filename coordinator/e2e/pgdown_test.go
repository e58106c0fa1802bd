package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestPostgresRestartedUnderLoad runs three replicas on a PostgreSQL of
// the test's own, with five real agents streaming (two on A, two on B, one
// on C), and stops PostgreSQL with a request waiting for approval. While
// it is down: every replica says so on /healthz and keeps its agents'
// streams; list_servers on each still lists all five servers, online,
// with a gap saying the store is unreachable and the other replicas'
// servers are stale; the approval is refused with what is wrong, what
// waits and that nothing was approved; run_command is refused the same
// way. Once PostgreSQL is started again, every replica is healthy within
// seconds, with no restart of its own, and one of them leads again; the
// refused approval then goes through and a new command on another replica
// too, each running once.
func TestPostgresRestartedUnderLoad(t *testing.T) {
	t.Parallel()
	pg := pgtest.Own(t)
	url := pg.Database(t, "")
	a, b, c := startReplica(t, url), startReplica(t, url), startReplica(t, url)
	tokA, tokB, tokC := a.token(), b.token(), c.token()
	pw, err := os.ReadFile(filepath.Join(a.data, "admin-password"))
	if err != nil {
		t.Fatal(err)
	}
	// The approver is in the store: B's app takes the password A printed.
	if err := os.WriteFile(filepath.Join(b.data, "admin-password"), pw, 0o600); err != nil {
		t.Fatal(err)
	}
	appA, appB := a.login(t), b.login(t)
	agents := map[*coordinator][]string{a: {"pgd-a1", "pgd-a2"}, b: {"pgd-b1", "pgd-b2"}, c: {"pgd-c1"}}
	for c, names := range agents {
		for _, n := range names {
			startAgent(t, c, n, t.TempDir(), c.joinLine("--store", url))
		}
	}
	csA, csB := session(t, a, tokA), session(t, b, tokB)
	sessions := map[string]*mcp.ClientSession{"A": csA, "B": csB, "C": session(t, c, tokC)}
	replicas := map[string]*coordinator{"A": a, "B": b, "C": c}
	for name, cs := range sessions {
		eventually(t, 60*time.Second, "replica "+name+" lists the five agents online", func() error {
			g, err := glanceOf(cs)
			if err == nil && g.Online != 5 {
				err = fmt.Errorf("%d of %d online", g.Online, g.Total)
			}
			return err
		})
	}

	counter := filepath.Join(t.TempDir(), "ran")
	cmd1 := fmt.Sprintf("echo ran >> %s && wc -l < %s", counter, counter)
	r1 := runAsync(csA, map[string]any{"server": "pgd-a1", "command": cmd1, "reason": "count the runs", "timeout_seconds": 30})
	card := appA.card(cmd1)

	pg.Halt()
	halted := time.Now()
	for name, c := range replicas {
		eventually(t, 15*time.Second, "replica "+name+" says the store is unreachable", func() error {
			if h := health(t, c); h.Status != "degraded" || !strings.Contains(h.Store, "unreachable since") {
				return fmt.Errorf("/healthz: %+v", h)
			}
			return nil
		})
	}
	t.Logf("outage: every replica reported the store unreachable %s after PostgreSQL stopped", time.Since(halted).Round(time.Millisecond))
	unreachable := "the store (PostgreSQL at " + pg.Addr() + ") is unreachable"
	for name, cs := range sessions {
		g, err := glanceOf(cs)
		if err != nil {
			t.Fatalf("list_servers on replica %s with PostgreSQL down: %v", name, err)
		}
		if g.Total != 5 || g.Online != 5 {
			t.Errorf("list_servers on replica %s with PostgreSQL down: %d of %d online; want all five, online", name, g.Online, g.Total)
		}
		if len(g.Gaps) != 1 || !strings.HasPrefix(g.Gaps[0].Reason, unreachable+" since") || !strings.Contains(g.Gaps[0].Reason, "stale") {
			t.Errorf("list_servers on replica %s with PostgreSQL down: gaps %+v; want the store unreachable, other replicas' servers stale", name, g.Gaps)
		}
	}
	code, body := appA.post("/api/requests/"+card.ID+"/approve", map[string]string{"note": "go"})
	if code != http.StatusServiceUnavailable || !strings.Contains(body, unreachable+": approvals and commands wait until it is back; nothing was approved") {
		t.Errorf("approval with PostgreSQL down: %d %s; want 503 saying the store is unreachable and nothing was approved", code, body)
	}
	if _, err := tryCommand(csB, "run_command", map[string]any{"server": "pgd-b1", "command": "uptime", "reason": "look", "timeout_seconds": 5}); err == nil ||
		!strings.Contains(err.Error(), unreachable+": approvals and commands wait until it is back; the request was not recorded") {
		t.Errorf("run_command with PostgreSQL down: %v; want it refused, saying the store is unreachable and nothing was recorded", err)
	}
	for c, names := range agents {
		if n := connected(t, c); n != len(names) {
			t.Errorf("replica %s holds %d agent streams with PostgreSQL down; want its %d", c.grpc, n, len(names))
		}
	}
	if _, err := os.Stat(counter); !os.IsNotExist(err) {
		t.Fatalf("the command ran with PostgreSQL down: %v", err)
	}

	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	for name, c := range replicas {
		eventually(t, 20*time.Second, "replica "+name+" healthy again", func() error {
			if h := health(t, c); h.Status != "ok" {
				return fmt.Errorf("/healthz: %+v", h)
			}
			g, err := glanceOf(sessions[name])
			if err == nil && (g.Online != 5 || len(g.Gaps) != 0) {
				err = fmt.Errorf("%d of %d online, gaps %+v", g.Online, g.Total, g.Gaps)
			}
			return err
		})
	}
	t.Logf("recovery: every replica healthy, five agents online, no stale gap, %s after PostgreSQL started again", time.Since(resumed).Round(time.Millisecond))
	for c, names := range agents {
		if n := connected(t, c); n != len(names) {
			t.Errorf("replica %s holds %d agent streams after the outage; want its %d", c.grpc, n, len(names))
		}
	}
	// The lead was lost with the connections; one replica leads again.
	waitLeader(t, []*coordinator{a, b, c})

	// The approval refused during the outage goes through now, once.
	if code, body := appA.post("/api/requests/"+card.ID+"/approve", map[string]string{"note": "go"}); code != http.StatusOK {
		t.Fatalf("approval once PostgreSQL is back: %d %s", code, body)
	}
	res := (<-r1).must(t)
	for res.Status == "waiting" {
		res = callCommand(t, csA, "wait_for_command", map[string]any{"request_id": card.ID})
	}
	if res.Status != "completed" || strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("the approved command: %s %q %s; want completed, run once", res.Status, res.Stdout, res.Detail)
	}

	// A new command on the other replica, approved in its own app.
	cmd2 := fmt.Sprintf("echo ran >> %s.b && wc -l < %s.b", counter, counter)
	r2 := runAsync(csB, map[string]any{"server": "pgd-b1", "command": cmd2, "reason": "count the runs", "timeout_seconds": 30})
	card2 := appB.card(cmd2)
	if code, body := appB.post("/api/requests/"+card2.ID+"/approve", map[string]string{"note": "go"}); code != http.StatusOK {
		t.Fatalf("approval on replica B after the outage: %d %s", code, body)
	}
	res = (<-r2).must(t)
	for res.Status == "waiting" {
		res = callCommand(t, csB, "wait_for_command", map[string]any{"request_id": card2.ID})
	}
	if res.Status != "completed" || strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("the new command on replica B: %s %q %s; want completed, run once", res.Status, res.Stdout, res.Detail)
	}
	for _, f := range []string{counter, counter + ".b"} {
		if got, err := os.ReadFile(f); err != nil || string(got) != "ran\n" {
			t.Errorf("%s: %q, %v; want one run", f, got, err)
		}
	}
	for c := range agents {
		log := c.p.out.String()
		if strings.Contains(log, pg.Password()) {
			t.Errorf("replica %s logged the store's password", c.grpc)
		}
		// Every stream lasted through the outage: none ended, none was refused.
		for _, ended := range []string{"agent disconnected", "agent stream ended", "agent stream closed"} {
			if n := strings.Count(log, ended); n != 0 {
				t.Errorf("replica %s logged %q %d times; want the agents' streams kept through the outage", c.grpc, ended, n)
			}
		}
	}
}

// session is an MCP session with the replica, closed when the test ends.
func session(t *testing.T, c *coordinator, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := c.mcpClient(token, "e2e-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type glanceView struct {
	Total, Online int
	Gaps          []struct{ Check, Reason string }
}

// glanceOf is list_servers without arguments: the fleet at a glance.
func glanceOf(cs *mcp.ClientSession) (glanceView, error) {
	var g glanceView
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_servers"})
	if err != nil {
		return g, err
	}
	if res.IsError {
		return g, fmt.Errorf("list_servers: %+v", res.Content)
	}
	b, _ := json.Marshal(res.StructuredContent)
	return g, json.Unmarshal(b, &g)
}

type healthView struct {
	Status, Store, Replica string
	AgentsConnected        int
	// Leader: this replica does the fleet's judgement.
	Leader bool
}

// health is the coordinator's /healthz.
func health(t *testing.T, c *coordinator) healthView {
	t.Helper()
	resp, err := http.Get("http://" + c.http + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h healthView
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("%s/healthz: %v", c.http, err)
	}
	return h
}
