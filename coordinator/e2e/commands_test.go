package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// approverApp is a person logged in to the approval app: the session
// cookie in the jar, and the login's csrfToken sent as X-Gridcity-Session
// on every call, as the app's page does.
type approverApp struct {
	t     *testing.T
	base  string
	hc    *http.Client
	token string
}

func (c *coordinator) login(t *testing.T) *approverApp {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(c.data, "admin-password"))
	if err != nil {
		t.Fatalf("first start wrote no admin password: %v", err)
	}
	return c.loginAs(t, "admin", strings.TrimSpace(string(pw)))
}

// loginAs logs in to the coordinator's app as an approver.
func (c *coordinator) loginAs(t *testing.T, name, password string) *approverApp {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	// The login checks a bcrypt hash (cost 12): about 0.25 s, but 2.8 s in
	// the race-built coordinators these tests run, and several times that
	// while the suite's other coordinators log in at once on two cores.
	a := &approverApp{t: t, base: "http://" + c.http, hc: &http.Client{Jar: jar, Timeout: 2 * time.Minute}}
	code, body := a.post("/api/login", map[string]string{"username": name, "password": password})
	a.hc.Timeout = 30 * time.Second
	if code != 200 {
		t.Fatalf("login: %d %s", code, body)
	}
	var ans struct{ CSRFToken string }
	if err := json.Unmarshal([]byte(body), &ans); err != nil || ans.CSRFToken == "" {
		t.Fatalf("login answered %s; want a csrfToken", body)
	}
	a.token = ans.CSRFToken
	return a
}

func (a *approverApp) post(path string, v any) (int, string) {
	a.t.Helper()
	b, _ := json.Marshal(v)
	req, _ := http.NewRequest("POST", a.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", a.base)
	if a.token != "" {
		req.Header.Set("X-Gridcity-Session", a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

type pendingCard struct {
	ID, Server, Command, Reason, Client, Token string
	Sudo                                       bool
	Input                                      *struct {
		Prompt string
		Secret bool
	}
}

// card waits for a pending request with this command to appear.
func (a *approverApp) card(command string) pendingCard {
	a.t.Helper()
	var found pendingCard
	eventually(a.t, 20*time.Second, "card for "+command, func() error {
		req, _ := http.NewRequest("GET", a.base+"/api/requests?status=pending", nil)
		req.Header.Set("X-Gridcity-Session", a.token)
		resp, err := a.hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("pending cards: %d %s", resp.StatusCode, body)
		}
		var cards []pendingCard
		if err := json.NewDecoder(resp.Body).Decode(&cards); err != nil {
			return err
		}
		for _, c := range cards {
			if c.Command == command {
				found = c
				return nil
			}
		}
		return fmt.Errorf("%d pending, none for %q", len(cards), command)
	})
	return found
}

type commandResult struct {
	Status, RequestID, Stdout, Stderr, Note, Detail string
	ExitCode                                        *int
	Truncated                                       *struct{ Stdout, Stderr int64 }
}

func tryCommand(cs *mcp.ClientSession, tool string, args map[string]any) (commandResult, error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return commandResult{}, fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		return commandResult{}, fmt.Errorf("%s: %s", tool, res.Content[0].(*mcp.TextContent).Text)
	}
	var out commandResult
	b, _ := json.Marshal(res.StructuredContent)
	return out, json.Unmarshal(b, &out)
}

func callCommand(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) commandResult {
	t.Helper()
	out, err := tryCommand(cs, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type asyncResult struct {
	commandResult
	err error
}

// runAsync calls run_command in the background, as an AI client waiting on
// a person does.
func runAsync(cs *mcp.ClientSession, args map[string]any) <-chan asyncResult {
	ch := make(chan asyncResult, 1)
	go func() {
		r, err := tryCommand(cs, "run_command", args)
		ch <- asyncResult{r, err}
	}()
	return ch
}

func (a asyncResult) must(t *testing.T) commandResult {
	t.Helper()
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.commandResult
}

func TestCommandApprovedDeniedAndMasked(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	startAgent(t, c, "cmd-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "cmd-1", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e-claude")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	app := c.login(t)

	// Approved with a note: the result comes back within run_command's wait.
	got := runAsync(cs, map[string]any{"server": "cmd-1", "command": "echo hello; echo oops >&2; exit 3", "reason": "e2e", "timeout_seconds": 30})
	card := app.card("echo hello; echo oops >&2; exit 3")
	if card.Server != "cmd-1" || card.Client != "e2e-claude" || card.Reason != "e2e" {
		t.Fatalf("card %+v", card)
	}
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{"note": "looks fine"}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	r := (<-got).must(t)
	if r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 3 || r.Stdout != "hello\n" || r.Stderr != "oops\n" || r.Note != "looks fine" {
		t.Fatalf("result %+v", r)
	}
	// Approving again is refused; nothing runs twice.
	if code, _ := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 409 {
		t.Fatalf("second approval: %d; want 409", code)
	}

	// Denied with a note.
	got = runAsync(cs, map[string]any{"server": "cmd-1", "command": "rm -rf /tmp/nothing", "reason": "e2e deny", "timeout_seconds": 5, "risky": true})
	card = app.card("rm -rf /tmp/nothing")
	if code, body := app.post("/api/requests/"+card.ID+"/deny", map[string]string{"note": "not today"}); code != 200 {
		t.Fatalf("deny: %d %s", code, body)
	}
	if r := (<-got).must(t); r.Status != "denied" || r.Note != "not today" || r.ExitCode != nil {
		t.Fatalf("denied result %+v", r)
	}

	// A secret input reaches stdin, is masked in the output, and is stored nowhere.
	got = runAsync(cs, map[string]any{"server": "cmd-1", "command": "read s; echo got:$s", "reason": "e2e secret", "timeout_seconds": 10,
		"input": map[string]any{"prompt": "the token", "secret": true}})
	card = app.card("read s; echo got:$s")
	if card.Input == nil || !card.Input.Secret {
		t.Fatalf("card lacks the input: %+v", card)
	}
	if code, _ := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 422 {
		t.Fatalf("approve without the input: %d; want 422", code)
	}
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{"input": "hunter2-secret"}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	r = (<-got).must(t)
	if r.Status != "completed" || r.Stdout != "got:********\n" {
		t.Fatalf("secret result %+v", r)
	}
	audit, err := run(t, "gridcity", "audit", "--json", "--data", c.data)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{`"requested"`, `"approved"`, `"denied"`, `"dispatched"`, `"started"`, `"finished"`} {
		if !strings.Contains(audit, step) {
			t.Errorf("audit lacks %s", step)
		}
	}
	// With the coordinator's unseal key (DATA/unseal.key), while it serves.
	auditVerifies(t, 2, "--data", c.data)
	for _, f := range []string{filepath.Join(c.data, "gridcity.db"), filepath.Join(c.data, "gridcity.db-wal")} {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("hunter2-secret")) {
			t.Errorf("the secret is in %s", f)
		}
	}
	if strings.Contains(audit+c.p.out.String(), "hunter2-secret") {
		t.Error("the secret is in the audit or the coordinator's log")
	}
}

// The coordinator is killed while a command runs and started again: the
// command ends once, its result reaches wait_for_command after the
// restart, and nothing runs twice.
func TestCommandSurvivesCoordinatorRestart(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	state := t.TempDir()
	agent := startAgent(t, c, "cmd-2", state, c.joinLine())
	c.waitStatus(tok, "cmd-2", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	app := c.login(t)
	marker := filepath.Join(t.TempDir(), "runs")
	cmd := fmt.Sprintf("echo run >> %s; sleep 4; echo finished", marker)
	got := runAsync(cs, map[string]any{"server": "cmd-2", "command": cmd, "reason": "restart test", "timeout_seconds": 60})
	card := app.card(cmd)
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	eventually(t, 10*time.Second, "command started", func() error {
		if _, err := os.Stat(marker); err != nil {
			return err
		}
		return nil
	})
	r := c.killRestartAndWait(t, cs, tok, card.ID, got)
	if r.Status != "completed" || r.Stdout != "finished\n" {
		t.Fatalf("after restart: %+v\nagent log:\n%s", r, agent.out.String())
	}
	if b, _ := os.ReadFile(marker); strings.Count(string(b), "run") != 1 {
		t.Fatalf("the command ran %d times; want once", strings.Count(string(b), "run"))
	}
	// The audit tells every step once, whether the coordinator heard it
	// live or from the agent's journal after the restart.
	if got := c.auditSteps(t, card.ID); got != "requested,approved,dispatched,accepted,started,finished" {
		t.Fatalf("audit steps %s; want each step once, in order", got)
	}
}

// The coordinator is stopped as soon as it has dispatched a command, so it
// never reads the agent's accepted and started, and is then killed: after
// the restart the audit has those steps, from the agent's journal, not
// only the end.
func TestCommandStepsFromTheJournalAfterCoordinatorKill(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	state := t.TempDir()
	agent := startAgent(t, c, "cmd-4", state, c.joinLine())
	c.waitStatus(tok, "cmd-4", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	app := c.login(t)
	cmd := "echo journaled"
	got := runAsync(cs, map[string]any{"server": "cmd-4", "command": cmd, "reason": "journal test", "timeout_seconds": 30})
	card := app.card(cmd)
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	c.p.signal(syscall.SIGSTOP) // what the agent sends now stays unread
	eventually(t, 20*time.Second, "the agent journals the command's end", func() error {
		b, err := os.ReadFile(filepath.Join(state, "journal.json"))
		if err != nil {
			return err
		}
		var j struct{ Entries []struct{ ID, State string } }
		if err := json.Unmarshal(b, &j); err != nil {
			return err
		}
		for _, e := range j.Entries {
			if e.ID == card.ID && e.State == "exited" {
				return nil
			}
		}
		return fmt.Errorf("not exited in the journal: %s", b)
	})
	r := c.killRestartAndWait(t, cs, tok, card.ID, got)
	if r.Status != "completed" || r.Stdout != "journaled\n" {
		t.Fatalf("after restart: %+v\nagent log:\n%s", r, agent.out.String())
	}
	if got := c.auditSteps(t, card.ID); got != "requested,approved,dispatched,accepted,started,finished" {
		t.Fatalf("audit steps %s; want accepted and started from the agent's journal too", got)
	}
}

// The agent is killed while a command runs and started again: the command
// ends as unknown, with the reason, and is never run again.
func TestCommandUnknownAfterAgentDeath(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	state := t.TempDir()
	agent := startAgent(t, c, "cmd-3", state, c.joinLine())
	c.waitStatus(tok, "cmd-3", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	app := c.login(t)
	marker := filepath.Join(t.TempDir(), "runs")
	cmd := fmt.Sprintf("echo run >> %s; sleep 3; echo finished", marker)
	got := runAsync(cs, map[string]any{"server": "cmd-3", "command": cmd, "reason": "agent death test", "timeout_seconds": 60})
	card := app.card(cmd)
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	eventually(t, 10*time.Second, "command started", func() error { _, err := os.Stat(marker); return err })
	agent.signal(syscall.SIGKILL)
	agent.exited(5 * time.Second)
	startAgent(t, c, "cmd-3", state, "")

	r := (<-got).must(t)
	for r.Status == "waiting" {
		r = callCommand(t, cs, "wait_for_command", map[string]any{"request_id": card.ID})
	}
	if r.Status != "unknown" || !strings.Contains(r.Detail, "agent restarted") {
		t.Fatalf("got %+v; want unknown because the agent restarted", r)
	}
	// A command asked after it: a rerun of the first, dispatched again or
	// run from the journal, would reach the agent before this one does.
	after := runAsync(cs, map[string]any{"server": "cmd-3", "command": "true", "reason": "agent death test: after", "timeout_seconds": 30})
	if code, body := app.post("/api/requests/"+app.card("true").ID+"/approve", map[string]string{}); code != 200 {
		t.Fatalf("approve the command after: %d %s", code, body)
	}
	r = (<-after).must(t)
	for r.Status == "waiting" {
		r = callCommand(t, cs, "wait_for_command", map[string]any{"request_id": r.RequestID})
	}
	if r.Status != "completed" {
		t.Fatalf("the command after: %+v", r)
	}
	if b, _ := os.ReadFile(marker); strings.Count(string(b), "run") != 1 {
		t.Fatalf("the command ran %d times; want once", strings.Count(string(b), "run"))
	}
	// Accepted and started are audited once, heard live or from the
	// journal of the agent that came back. Started may be missing: the
	// agent can die after the command wrote the marker and before its
	// start was journaled, and then nobody knows it started.
	if got := c.auditSteps(t, card.ID); got != "requested,approved,dispatched,accepted,started,unknown" && got != "requested,approved,dispatched,accepted,unknown" {
		t.Fatalf("audit steps %s; want each step once, in order", got)
	}
}

// killRestartAndWait kills the coordinator (running or stopped), closes
// the MCP session cs, waits for got (the call in flight ends with the
// coordinator), starts it again and waits through a new session until the
// request is no longer waiting.
func (c *coordinator) killRestartAndWait(t *testing.T, cs *mcp.ClientSession, tok, id string, got <-chan asyncResult) commandResult {
	t.Helper()
	c.p.signal(syscall.SIGKILL)
	c.p.exited(5 * time.Second)
	cs.Close()
	<-got
	c.start()
	cs, err := c.mcpClient(tok, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var r commandResult
	eventually(t, 60*time.Second, "result after restart", func() error {
		var err error
		if r, err = tryCommand(cs, "wait_for_command", map[string]any{"request_id": id}); err != nil {
			return err
		}
		if r.Status == "waiting" {
			return fmt.Errorf("still waiting")
		}
		return nil
	})
	return r
}

// auditSteps lists the audit's steps for a request in order, without
// "shown" (an approver's page may show a card more than once).
func (c *coordinator) auditSteps(t *testing.T, id string) string {
	t.Helper()
	audit, err := run(t, append([]string{"gridcity", "audit", "--json", "--data", c.data, "--request", id}, c.storeArgs()...)...)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for line := range strings.Lines(audit) {
		var row struct{ Step string }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if row.Step != "shown" {
			steps = append(steps, row.Step)
		}
	}
	return strings.Join(steps, ",")
}

// auditVerifies runs `gridcity audit verify --json` with args: the chain
// must hold, and at least approvals approvals' authenticators verify.
func auditVerifies(t *testing.T, approvals int, args ...string) {
	t.Helper()
	out, err := run(t, append([]string{"gridcity", "audit", "verify", "--json"}, args...)...)
	var verified struct {
		OK             bool
		Entries        int
		Authenticators struct {
			Checked  bool
			Verified int
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &verified) != nil || !verified.OK || verified.Entries == 0 ||
		!verified.Authenticators.Checked || verified.Authenticators.Verified < approvals {
		t.Errorf("audit verify: %s, %v; want ok, %d approvals' authenticators verified", out, err, approvals)
	}
}
