package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/pgtest"
)

// approver adds an approver to the store of replica c and logs in to c's app.
func (c *coordinator) approver(t *testing.T, name string) *approverApp {
	t.Helper()
	out, err := run(t, append([]string{"gridcity", "approver", "add", name, "--json", "--data", c.data}, c.storeArgs()...)...)
	var cred struct{ Name, Password string }
	if err != nil || json.Unmarshal([]byte(out), &cred) != nil || cred.Password == "" {
		t.Fatalf("gridcity approver add %s: %q, %v", name, out, err)
	}
	return c.loginAs(t, name, cred.Password)
}

// TestCommandAcrossThreeReplicas: three `gridcity serve` replicas on one
// PostgreSQL and a real agent whose stream replica B holds. An AI client
// asks through replica A's MCP endpoint for a command that reads a secret
// input; a person approves it in replica C's app, typing the secret. B
// dispatches it once with the secret (sealed to B on its way through the
// store), the agent runs it, and the result reaches the run_command call
// waiting on A, and wait_for_command on C. The secret is in no replica's
// log and not in the audit.
func TestCommandAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	a, b, c := startReplica(t, url), startReplica(t, url), startReplica(t, url)
	startAgent(t, b, "ha-cmd-1", t.TempDir(), b.joinLine("--store", url))
	tokA := a.token()
	b.waitStatus(b.token(), "ha-cmd-1", "online", 30*time.Second)
	a.waitStatus(tokA, "ha-cmd-1", "online", 15*time.Second) // the shared view: A knows B holds it
	if n := connected(t, b); n != 1 {
		t.Fatalf("replica B holds %d agent streams; want 1", n)
	}

	csA, err := a.mcpClient(tokA, "e2e-claude")
	if err != nil {
		t.Fatal(err)
	}
	defer csA.Close()
	app := c.approver(t, "carol")
	const command = "read s; echo got:$s; echo ran-once"
	got := runAsync(csA, map[string]any{"server": "ha-cmd-1", "command": command, "reason": "e2e across replicas", "timeout_seconds": 30,
		"input": map[string]any{"prompt": "the token", "secret": true}})
	card := app.card(command)
	if card.Server != "ha-cmd-1" || card.Client != "e2e-claude" || card.Input == nil {
		t.Fatalf("card on C: %+v", card)
	}
	approved := time.Now()
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{"note": "from C", "input": "hunter2-across"}); code != 200 {
		t.Fatalf("approve on C: %d %s", code, body)
	}
	r := (<-got).must(t)
	t.Logf("approval on C to the result on A (agent on B): %s", time.Since(approved).Round(time.Millisecond))
	if r.Status != "completed" || r.RequestID != card.ID || r.Stdout != "got:********\nran-once\n" || r.Note != "from C" || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("run_command on A: %+v", r)
	}
	// Approving again, on any replica, is refused.
	if code, _ := app.post("/api/requests/"+card.ID+"/approve", map[string]string{"input": "x"}); code != 409 {
		t.Fatalf("second approval on C: %d; want 409", code)
	}

	csC, err := c.mcpClient(c.token(), "e2e-other")
	if err != nil {
		t.Fatal(err)
	}
	defer csC.Close()
	if w := callCommand(t, csC, "wait_for_command", map[string]any{"request_id": card.ID}); w.Status != "completed" || w.Stdout != r.Stdout {
		t.Fatalf("wait_for_command on C: %+v; want A's result", w)
	}
	if steps := c.auditSteps(t, card.ID); steps != "requested,approved,dispatched,accepted,started,finished" {
		t.Fatalf("audit %s; want one approval and one dispatch", steps)
	}
	audit, err := run(t, "gridcity", "audit", "--json", "--data", c.data, "--store", url)
	if err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{audit, a.p.out.String(), b.p.out.String(), c.p.out.String()} {
		if strings.Contains(where, "hunter2-across") {
			t.Fatal("the secret is in the audit or a replica's log")
		}
	}
}
