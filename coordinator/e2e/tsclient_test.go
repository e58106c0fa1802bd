package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The official TypeScript SDK client lists and calls every tool over HTTP
// with the bearer token and X-Agent-Client, validating each result against
// its tool's output schema as that client does.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed; .ci/run must install it")
		}
		t.Skip("node is not installed: the TypeScript client test needs Node.js and npm")
	}
	install := exec.Command("bash", "tsclient/install.sh")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install of the TypeScript client: %v\n%s", err, out)
	}
	c := startCoordinator(t)
	tok := c.token()
	startAgent(t, c, "ts-web-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "ts-web-1", "online", 20*time.Second)

	readOut, err := run(t, "gridcity", "token", "create", "ts-read", "--scope", "read", "--json", "--data", c.data)
	if err != nil {
		t.Fatal(err)
	}
	var read struct{ Token string }
	json.Unmarshal([]byte(readOut), &read)

	// A read token sees no command tools; an operate token sees them all.
	for _, tc := range []struct{ name, token, tools string }{
		{"operate", tok, "list_servers,incident_report,get_topology,list_resources,list_runbooks,run_command,wait_for_command"},
		{"read", read.Token, "list_servers,incident_report,get_topology,list_resources,list_runbooks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("node", "tsclient/client.mjs", "--endpoint", "http://"+c.http+"/mcp", "--token", tc.token,
				"--client-name", "ts-sdk-"+tc.name, "--expect-server", "ts-web-1", "--expect-tools", tc.tools)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("TypeScript client failed: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
			}
			var sum struct {
				OK     bool     `json:"ok"`
				Called []string `json:"called"`
			}
			if err := json.Unmarshal(out, &sum); err != nil || !sum.OK || len(sum.Called) == 0 {
				t.Fatalf("summary %s (%v)\nstderr: %s", out, err, stderr.String())
			}
		})
	}
	// The coordinator logged the client's name from X-Agent-Client.
	if !strings.Contains(c.p.out.String(), "client=ts-sdk-operate") {
		t.Errorf("coordinator log does not name the client ts-sdk-operate")
	}
}
