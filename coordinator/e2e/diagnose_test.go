package e2e

// The Doctor against a real PostgreSQL: web-1's agent is asked to connect, and the ladder stops
// where the database stops answering.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// orders-db (a real PostgreSQL on loopback) is used by web-1 (a declared link), whose agent runs
// on this machine. While it runs, diagnose passes every rung it can judge; once it is stopped,
// the ladder fails at reachable with web-1's real "connection refused", and the fix — start it,
// by hand, since no agent is known to run where a loopback address points — is verified by that
// refusal and nothing more. Started again, diagnose passes.
func TestDiagnoseRealPostgres(t *testing.T) {
	t.Parallel()
	pg := startIncidentPostgres(t)

	c := startCoordinatorWithConfig(t, fmt.Sprintf(`resources:
  - id: orders-db
    kind: database
    engine: postgres
    target: %s
    interval: 1s
    timeout: 500ms
links:
  - {from: web-1, to: orders-db}
probes: {interval: 1s, timeout: 500ms, failuresBeforeTroubled: 2}
runbooks:
  - name: restart-postgres
    description: Restart PostgreSQL on a database server
    command: systemctl restart postgresql
    match: {engine: postgres}
`, pg.addr))
	tok := c.token()
	startAgent(t, c, "web-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "web-1", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e-diagnose")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	var rep diagnosis
	eventually(t, 15*time.Second, "diagnose passes while PostgreSQL runs", func() error {
		var err error
		if rep, _, err = diagnose(cs, "orders-db"); err != nil {
			return err
		}
		if rep.Status != "ok" || rep.rung("handshake").Status != "pass" {
			return fmt.Errorf("%s", rep.ladder())
		}
		return nil
	})
	if d := rep.rung("handshake").Detail; !strings.Contains(d, "from web-1: PostgreSQL answered at "+pg.addr) {
		t.Errorf("handshake detail %q; want PostgreSQL answering web-1's agent", d)
	}

	pg.stop()
	start := time.Now()
	rep, raw, err := diagnose(cs, "orders-db")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("diagnose orders-db with PostgreSQL stopped (%s):\n%s", took.Round(time.Millisecond), raw)
	if took > 12*time.Second {
		t.Errorf("diagnose took %s; its attempts are bounded to about 10 s", took)
	}
	if want := "agent=skip host=skip service=skip port=skip reachable=fail handshake=skip dependencies=skip"; rep.Status != "fail" || rep.StoppedAt != "reachable" || rep.ladder() != want {
		t.Fatalf("status %s, stopped at %q, ladder %s; want fail at reachable: %s", rep.Status, rep.StoppedAt, rep.ladder(), want)
	}
	// No agent runs where the target points: a loopback address names no one server.
	if d := rep.rung("agent").Detail; !strings.Contains(d, "loopback") {
		t.Errorf("agent rung %q; want it skipped because 127.0.0.1 is loopback", d)
	}
	if d := rep.rung("reachable").Detail; !strings.Contains(d, "from web-1: refused") || !strings.Contains(d, "connection refused") || !strings.Contains(d, pg.addr) {
		t.Errorf("reachable rung %q; want web-1's real refusal of %s", d, pg.addr)
	}
	var evidence string
	for _, d := range rep.Diagnoses {
		evidence += d.Summary + "\n" + strings.Join(d.Evidence, "\n") + "\n"
	}
	if !strings.Contains(evidence, "nothing accepts connections at "+pg.addr) || !strings.Contains(evidence, "dial tcp "+pg.addr+": connect: connection refused") {
		t.Errorf("diagnoses %+v; want the refusal as evidence", rep.Diagnoses)
	}
	if len(rep.Fixes) != 1 {
		t.Fatalf("fixes %+v; want one: start it", rep.Fixes)
	}
	fix := rep.Fixes[0]
	// Verified only by what an attempt proved: web-1 was refused, so nothing listens there and a
	// started server can bind the port; and no server to run it on is claimed.
	if !fix.Verified || !strings.Contains(fix.Verification, "a TCP connection from web-1 was refused just now") ||
		fix.Server != "" || fix.Via != "by hand" || fix.Runbook != "restart-postgres" || fix.Command != "systemctl restart postgresql" {
		t.Errorf("fix %+v; want the runbook, by hand, verified by web-1's refusal", fix)
	}
	for _, a := range rep.Attempts {
		if a.From != "web-1" || !a.Answered || a.OK {
			t.Errorf("attempt %+v; want only web-1's agent, refused", a)
		}
	}

	pg.start()
	eventually(t, 15*time.Second, "diagnose passes once PostgreSQL is back", func() error {
		var err error
		if rep, _, err = diagnose(cs, "orders-db"); err != nil {
			return err
		}
		if rep.Status != "ok" || len(rep.Fixes) != 0 {
			return fmt.Errorf("%s %s", rep.Status, rep.ladder())
		}
		return nil
	})
}

type diagnosis struct {
	Target, Status, StoppedAt, Summary string
	Ladder                             []struct{ Rung, Status, Detail string }
	Diagnoses                          []struct {
		Summary  string
		Evidence []string
	}
	Fixes []struct {
		Summary, Command, Runbook, Server, Via, Verification string
		Verified, ReadOnly                                   bool
	}
	Attempts []struct {
		From, Engine, Target, Reason string
		Answered, OK                 bool
	}
}

func (d diagnosis) rung(id string) struct{ Rung, Status, Detail string } {
	for _, r := range d.Ladder {
		if r.Rung == id {
			return r
		}
	}
	return struct{ Rung, Status, Detail string }{Rung: id, Status: "missing"}
}

func (d diagnosis) ladder() string {
	var s []string
	for _, r := range d.Ladder {
		s = append(s, r.Rung+"="+r.Status)
	}
	return strings.Join(s, " ")
}

// diagnose calls the tool with room for its bounded attempts; raw is the JSON as sent.
func diagnose(cs *mcp.ClientSession, target string) (diagnosis, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "diagnose", Arguments: map[string]any{"target": target}})
	if err != nil {
		return diagnosis{}, "", err
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		return diagnosis{}, "", fmt.Errorf("diagnose error: %s", b)
	}
	b, err := json.MarshalIndent(res.StructuredContent, "", "  ")
	if err != nil {
		return diagnosis{}, "", err
	}
	var d diagnosis
	return d, string(b), json.Unmarshal(b, &d)
}
