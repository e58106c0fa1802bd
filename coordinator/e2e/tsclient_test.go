package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The official TypeScript clients list and call every tool — the SDK 1.x
// client in a 2025-11-25 session, over HTTP with the bearer token and
// X-Agent-Client and over the stdio bridge (`gridcity mcp --stdio` with
// GRIDCITY_URL and GRIDCITY_TOKEN), and the v2 client over HTTP pinned to the
// stateless revision 2026-07-28 — validating each result against its tool's
// output schema with the pinned Ajv, as the client itself does; they read
// every resource and get every prompt. run_command goes through a person:
// approved over HTTP (it runs on the agent), denied over stdio.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node := nodeClients(t)
	c := startCoordinator(t)
	tok := c.token()
	startAgent(t, c, "ts-web-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "ts-web-1", "online", 20*time.Second)
	app := c.login(t)

	readOut, err := run(t, "gridcity", "token", "create", "ts-read", "--scope", "read", "--json", "--data", c.data)
	if err != nil {
		t.Fatal(err)
	}
	var read struct{ Token string }
	json.Unmarshal([]byte(readOut), &read)

	const (
		allTools  = "diagnose,get_metrics,get_topology,incident_report,list_resources,list_runbooks,list_servers,run_command,security_findings,wait_for_command"
		readTools = "diagnose,get_metrics,get_topology,incident_report,list_resources,list_runbooks,list_servers,security_findings"
		readRes   = "gridcity://servers,gridcity://topology,gridcity://incidents,gridcity://servers/{name}"
		prompts   = "triage_incident,review_security"
	)
	for _, tc := range []struct {
		name, sdk, transport, token string
		args                        []string
		// command, when set, is what run_command asks; a person approves
		// or denies its card.
		command string
		approve bool
		wantRun string
	}{
		{name: "http-operate", sdk: "v1", transport: "http", token: tok, command: "echo tsclient over http", approve: true, wantRun: "completed",
			args: []string{"--expect-tools", allTools, "--expect-resources", "gridcity://audit," + readRes}},
		{name: "http-read", sdk: "v1", transport: "http", token: read.Token,
			args: []string{"--expect-tools", readTools, "--expect-refused", "run_command,wait_for_command",
				"--expect-resources", readRes, "--expect-unreadable", "gridcity://audit"}},
		{name: "stdio-operate", sdk: "v1", transport: "stdio", token: tok, command: "echo tsclient over stdio", approve: false, wantRun: "denied",
			args: []string{"--expect-tools", allTools, "--expect-resources", "gridcity://audit," + readRes}},
		{name: "stdio-read", sdk: "v1", transport: "stdio", token: read.Token,
			args: []string{"--expect-tools", readTools, "--expect-refused", "run_command,wait_for_command",
				"--expect-resources", readRes, "--expect-unreadable", "gridcity://audit"}},
		// The stateless revision: no initialize, no session, every request
		// on its own.
		{name: "v2-http-operate", sdk: "v2", transport: "http", token: tok, command: "echo tsclient v2 over stateless http", approve: true, wantRun: "completed",
			args: []string{"--expect-tools", allTools, "--expect-resources", "gridcity://audit," + readRes}},
		{name: "v2-http-read", sdk: "v2", transport: "http", token: read.Token,
			args: []string{"--expect-tools", readTools, "--expect-refused", "run_command,wait_for_command",
				"--expect-resources", readRes, "--expect-unreadable", "gridcity://audit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := "ts-sdk-" + tc.name
			args := []string{"tsclient/client.mjs", "--sdk", tc.sdk, "--endpoint", "http://" + c.http + "/mcp", "--token", tc.token,
				"--client-name", client, "--expect-server", "ts-web-1", "--expect-prompts", prompts, "--timeout", "120"}
			if tc.transport == "stdio" {
				args = append(args, "--stdio", filepath.Join(bin, "gridcity"))
			}
			decided := make(chan error, 1)
			if tc.command != "" {
				args = append(args, "--run-command", tc.command, "--expect-run", tc.wantRun)
				go func() { decided <- decide(app, "ts-web-1", tc.command, client, tc.approve, 60*time.Second) }()
			} else {
				decided <- nil
			}
			cmd := exec.Command(node, append(args, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("TypeScript client (--sdk %s) failed: %v\nstdout: %s\nstderr: %s", tc.sdk, err, out, stderr.String())
			}
			var sum struct {
				OK        bool
				SDK, Era  string
				Transport string
				Called    []string
				Read      []string
				Prompts   []string
				Run       *struct {
					Status, WaitStatus string
					Progress           int
				}
			}
			wantEra := map[string]string{"v1": "legacy", "v2": "modern"}[tc.sdk]
			if err := json.Unmarshal(out, &sum); err != nil || !sum.OK || sum.Transport != tc.transport || sum.Era != wantEra {
				t.Fatalf("summary %s (%v); want ok over %s in the %s era\nstderr: %s", out, err, tc.transport, wantEra, stderr.String())
			}
			// Every listed tool was called, with its arguments.
			want := readTools
			if tc.command != "" {
				want = allTools
			}
			if got := strings.Join(slices.Sorted(slices.Values(sum.Called)), ","); got != want {
				t.Errorf("called %s; want every tool: %s\nstderr: %s", got, want, stderr.String())
			}
			// Every resource, and the template for ts-web-1.
			wantRead := 4
			if tc.command != "" {
				wantRead = 5 // and the audit log
			}
			if len(sum.Read) != wantRead || len(sum.Prompts) != 2 {
				t.Errorf("read %v, prompts %v", sum.Read, sum.Prompts)
			}
			if tc.command != "" {
				if err := <-decided; err != nil {
					t.Fatal(err)
				}
				// The person's decision reached the client; progress
				// notifications came while it waited, over both transports.
				if sum.Run == nil || sum.Run.Status != tc.wantRun || sum.Run.WaitStatus != tc.wantRun || sum.Run.Progress == 0 {
					t.Errorf("run %+v; want %s with progress notifications", sum.Run, tc.wantRun)
				}
			}
		})
	}
	// The coordinator logged the clients' names from X-Agent-Client: the
	// bridge passes GRIDCITY_CLIENT on.
	for _, name := range []string{"client=ts-sdk-http-operate", "client=ts-sdk-stdio-operate", "client=ts-sdk-v2-http-operate"} {
		if !strings.Contains(c.p.out.String(), name) {
			t.Errorf("coordinator log does not name the client %s", name)
		}
	}
}

// decide waits for the card of command asked by client on server and
// approves or denies it, as the person in the app does. It runs beside the
// client, so it reports errors instead of failing the test itself.
func decide(app *approverApp, server, command, client string, approve bool, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", app.base+"/api/requests?status=pending", nil)
		req.Header.Set("X-Gridcity-Session", app.token)
		resp, err := app.hc.Do(req)
		if err != nil {
			return err
		}
		var cards []pendingCard
		err = json.NewDecoder(resp.Body).Decode(&cards)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("pending cards: %v", err)
		}
		for _, card := range cards {
			if card.Command != command {
				continue
			}
			if card.Client != client || card.Server != server {
				return fmt.Errorf("card %+v; want client %s on %s", card, client, server)
			}
			verb, note := "deny", "tsclient e2e: denied"
			if approve {
				verb, note = "approve", "tsclient e2e: approved"
			}
			b, _ := json.Marshal(map[string]string{"note": note})
			req, _ := http.NewRequest("POST", app.base+"/api/requests/"+card.ID+"/"+verb, strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", app.base)
			req.Header.Set("X-Gridcity-Session", app.token)
			resp, err := app.hc.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("%s %s: HTTP %d", verb, card.ID, resp.StatusCode)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no card for %q within %s", command, within)
}
