package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tsclientInstall is the one install of the pinned Node.js clients
// (tsclient/package-lock.json) for the whole test binary: tests run in
// parallel, and two `npm ci` in one directory would tread on each other.
var tsclientInstall struct {
	once sync.Once
	node string
	err  error
}

// nodeClients installs the pinned TypeScript MCP clients and returns the
// pinned Node.js 22 that runs them (the Inspector and the conformance suite
// need Node 22; the machine's node only runs npm).
func nodeClients(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is not installed; .ci/run must install Node.js and npm")
		}
		t.Skip("npm is not installed: the TypeScript client tests need Node.js and npm")
	}
	tsclientInstall.once.Do(func() {
		out, err := exec.Command("bash", "tsclient/install.sh").CombinedOutput()
		if err != nil {
			tsclientInstall.err = fmt.Errorf("npm install of the TypeScript clients (tsclient/install.sh): %v\n%s", err, out)
			return
		}
		tsclientInstall.node, tsclientInstall.err = filepath.Abs("tsclient/node_modules/.bin/node")
	})
	if tsclientInstall.err != nil {
		t.Fatal(tsclientInstall.err)
	}
	return tsclientInstall.node
}

// runClient runs a client to completion within d and returns its stdout and
// stderr; a client that hangs is killed, and says so in err.
func runClient(d time.Duration, env []string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after %s: %w", d, err)
	}
	return o.String(), e.String(), err
}

// allToolNames is every tool an operate token sees, sorted.
const allToolNames = "diagnose,get_metrics,get_topology,incident_report,list_resources,list_runbooks,list_servers,run_command,security_findings,wait_for_command"

// TestMCPClients runs MCP clients other than the TypeScript SDK's (which
// TestTypeScriptClient runs, in both eras) against a real coordinator and
// agent: mcp-go with its defaults (which speak the stateless 2026-07-28
// revision to a server that offers it), the Inspector CLI in both of its
// eras, and the official conformance suite's server scenarios that apply to
// gridcity. Each failure names the client, the step and the answer.
func TestMCPClients(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	const agent = "mx-web-1"
	startAgent(t, c, agent, t.TempDir(), c.joinLine())
	c.waitStatus(tok, agent, "online", 20*time.Second)
	app := c.login(t)
	endpoint := "http://" + c.http + "/mcp"

	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run("go-sdk-"+version, func(t *testing.T) { testGoSDK(t, c, app, tok, agent, version) })
	}
	t.Run("mcp-go", func(t *testing.T) { testMCPGo(t, c, app, tok, agent) })
	for _, era := range []string{"legacy", "modern"} {
		t.Run("inspector-"+era, func(t *testing.T) { testInspector(t, nodeClients(t), endpoint, tok, agent, era) })
	}
	t.Run("conformance", func(t *testing.T) { testConformance(t, nodeClients(t), endpoint, tok) })
}

// testGoSDK connects the go-sdk client in one protocol era (stateless
// 2026-07-28, or a 2025-11-25 session), lists the tools, reads a server in
// full and runs a command a person approves, the answers validated by the
// client against the output schemas.
func testGoSDK(t *testing.T, c *coordinator, app *approverApp, tok, agent, version string) {
	client := "go-sdk-" + version
	hc := &http.Client{Transport: headerTransport{map[string]string{"Authorization": "Bearer " + tok, "X-Agent-Client": client}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + c.http + "/mcp", HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s: connect: %v", client, err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("%s: speaks %s", client, got)
	}
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("%s: tools/list: %v", client, err)
		}
		names = append(names, tool.Name)
	}
	if got := strings.Join(slices.Sorted(slices.Values(names)), ","); got != allToolNames {
		t.Errorf("%s: tools/list gave %s; want %s", client, got, allToolNames)
	}
	v, err := oneServer(cs, agent)
	if err != nil || v.Status != "online" || len(v.Disks) == 0 {
		t.Errorf("%s: list_servers {name}: %+v, %v", client, v, err)
	}
	command := "echo go-sdk speaks " + version
	decided := make(chan error, 1)
	go func() { decided <- decide(app, agent, command, client, true, 60*time.Second) }()
	res := callCommand(t, cs, "run_command", map[string]any{"server": agent, "command": command, "reason": "e2e: the go-sdk client in each era", "timeout_seconds": 30})
	if err := <-decided; err != nil {
		t.Fatalf("%s: approving its run_command: %v", client, err)
	}
	if res.Status == "waiting" {
		res = callCommand(t, cs, "wait_for_command", map[string]any{"request_id": res.RequestID})
	}
	if res.Status != "completed" || !strings.Contains(res.Stdout, "go-sdk speaks "+version) {
		t.Errorf("%s: run_command gave %+v", client, res)
	}
}

// testMCPGo builds the test-only mcp-go module (coordinator/e2e/mcpgoclient,
// outside go.work) and runs it: tools/list, list_servers, run_command that a
// person approves, validated against the output schemas.
func testMCPGo(t *testing.T, c *coordinator, app *approverApp, tok, agent string) {
	exe := filepath.Join(t.TempDir(), "mcpgoclient")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir = "mcpgoclient"
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("mcp-go: building coordinator/e2e/mcpgoclient: %v\n%s", err, out)
	}
	const client, command = "mcp-go-e2e", "echo mcp-go over stateless http"
	decided := make(chan error, 1)
	go func() { decided <- decide(app, agent, command, client, true, 60*time.Second) }()
	out, stderr, err := runClient(2*time.Minute, nil, exe, "-endpoint", "http://"+c.http+"/mcp", "-token", tok,
		"-client-name", client, "-server", agent, "-run-command", command)
	var sum struct {
		Client, ProtocolVersion string
		Tools, Called, Errors   []string
		OK                      bool
		Run                     *struct {
			Status, WaitStatus, Stdout string
			Progress                   int
		}
	}
	if jerr := json.Unmarshal([]byte(out), &sum); err != nil || jerr != nil || !sum.OK {
		t.Fatalf("mcp-go failed: %v\nsummary: %s\nstderr: %s", err, out, stderr)
	}
	if err := <-decided; err != nil {
		t.Fatalf("mcp-go: approving its run_command: %v", err)
	}
	if got := strings.Join(slices.Sorted(slices.Values(sum.Tools)), ","); got != allToolNames {
		t.Errorf("%s: tools/list gave %s; want %s", sum.Client, got, allToolNames)
	}
	// The person's decision reached the client, with progress notifications
	// inside the answer (mcp-go asked for them with a progress token).
	if sum.Run == nil || !strings.Contains(sum.Run.Stdout, "mcp-go over stateless http") || sum.Run.Progress == 0 {
		t.Errorf("%s: run_command gave %+v; want the command's output and progress notifications\nstderr: %s", sum.Client, sum.Run, stderr)
	}
}

// testInspector runs the Inspector CLI: tools/list (with --strict, whose
// schema portability report must name no input schema: a tool's inputs are
// what Gemini's function declarations and other single-type dialects
// translate) and tools/call of a read tool.
func testInspector(t *testing.T, node, endpoint, tok, agent, era string) {
	inspector := filepath.Join("tsclient", "node_modules", ".bin", "mcp-inspector")
	client := "inspector-" + era
	// The Inspector keeps a catalog and its storage under $HOME.
	env := []string{"HOME=" + t.TempDir()}
	cli := func(method string, extra ...string) (string, string, error) {
		args := []string{inspector, "--cli", endpoint, "--transport", "http",
			"--header", "Authorization: Bearer " + tok, "--header", "X-Agent-Client: " + client,
			"--protocol-era", era, "--format", "json", "--method", method}
		return runClient(time.Minute, env, node, append(args, extra...)...)
	}

	out, stderr, err := cli("tools/list", "--strict")
	// Exit 6 is --strict's verdict on error-severity findings, judged below.
	if err != nil && !strings.Contains(err.Error(), "exit status 6") {
		t.Fatalf("Inspector (%s era) tools/list: %v\nstdout: %s\nstderr: %s", era, err, out, stderr)
	}
	var inputs, others []string
	for _, f := range portabilityFindings(stderr) {
		if strings.Contains(f, "Path: inputSchema") {
			inputs = append(inputs, f)
		} else {
			others = append(others, f)
		}
	}
	if len(inputs) > 0 {
		t.Errorf("Inspector (%s era) tools/list --strict: %d input schema(s) a single-type dialect cannot express:\n%s",
			era, len(inputs), strings.Join(inputs, "\n"))
	}
	if len(others) > 0 {
		t.Errorf("Inspector (%s era) tools/list --strict: %d finding(s) about output schemas:\n%s", era, len(others), strings.Join(others, "\n"))
	}
	if err == nil {
		var list struct {
			Result struct{ Tools []struct{ Name string } }
		}
		if jerr := json.Unmarshal([]byte(out), &list); jerr != nil {
			t.Fatalf("Inspector (%s era) tools/list: answer %q: %v\nstderr: %s", era, out, jerr, stderr)
		}
		var names []string
		for _, tl := range list.Result.Tools {
			names = append(names, tl.Name)
		}
		if got := strings.Join(slices.Sorted(slices.Values(names)), ","); got != allToolNames {
			t.Errorf("Inspector (%s era) tools/list gave %s; want %s", era, got, allToolNames)
		}
	} else {
		// --strict answered its verdict instead of the list: list again.
		out, stderr, err = cli("tools/list")
		if err != nil || !strings.Contains(out, `"name":"run_command"`) {
			t.Errorf("Inspector (%s era) tools/list: %v\nstdout: %s\nstderr: %s", era, err, out, stderr)
		}
	}

	out, stderr, err = cli("tools/call", "--tool-name", "list_servers")
	if err != nil {
		t.Fatalf("Inspector (%s era) tools/call list_servers: %v\nstdout: %s\nstderr: %s", era, err, out, stderr)
	}
	var call struct {
		Result struct {
			IsError           bool
			Content           []struct{ Type, Text string }
			StructuredContent struct {
				Rows []struct{ Name, Status string }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &call); err != nil {
		t.Fatalf("Inspector (%s era) tools/call list_servers: answer %q: %v", era, out, err)
	}
	r := call.Result
	if r.IsError || len(r.Content) == 0 || !slices.Contains(r.StructuredContent.Rows, struct{ Name, Status string }{agent, "online"}) {
		t.Errorf("Inspector (%s era) tools/call list_servers: %s; want structuredContent with %s online", era, out, agent)
	}
}

// portabilityFindings splits the Inspector's --strict report (stderr) into
// its findings, each "Warning: tool …" or "Error: tool …" with its lines.
func portabilityFindings(report string) []string {
	var out []string
	for _, line := range strings.Split(report, "\n") {
		switch {
		case strings.HasPrefix(line, "Warning: tool ") || strings.HasPrefix(line, "Error: tool "):
			out = append(out, line)
		case len(out) > 0 && strings.HasPrefix(line, "  "):
			out[len(out)-1] += "\n" + line
		}
	}
	return out
}

// conformanceScenarios are the server scenarios of
// @modelcontextprotocol/conformance 0.1.16 that apply to gridcity. The suite
// has 32; the others need what gridcity does not have, and fail against any
// server without it:
//   - the suite's fixture tools, prompts and resources (test_simple_text,
//     test_image_content, test_tool_with_progress, test_sampling,
//     test_elicitation…, json_schema_2020_12_tool, test_reconnection,
//     test_simple_prompt…, test://static-text…): tools-call-* (10),
//     elicitation-sep1034-defaults, elicitation-sep1330-enums,
//     json-schema-2020-12, server-sse-polling, prompts-get-* (4),
//     resources-read-text, resources-read-binary, resources-templates-read;
//   - capabilities gridcity does not advertise: completion-complete
//     (completions), resources-subscribe and resources-unsubscribe
//     (resources.subscribe).
//
// The suite speaks the 2025 sessions only (it has no 2026-07-28 scenario).
var conformanceScenarios = []string{
	"server-initialize", "ping", "logging-set-level", "tools-list", "resources-list", "prompts-list",
	"server-sse-multiple-streams", "dns-rebinding-protection",
}

// testConformance runs each applicable scenario. The suite cannot send a
// header, so it talks to gridcity through a loopback proxy that adds the
// bearer token and keeps every other header, Host and Origin included (the
// dns-rebinding scenario judges gridcity's own answer to them).
func testConformance(t *testing.T, node, endpoint, tok string) {
	target, _ := url.Parse(endpoint)
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+tok)
			r.Out.Header.Set("X-Agent-Client", "conformance")
		},
		FlushInterval: -1, // SSE answers pass as they come
	})
	t.Cleanup(proxy.Close)
	suite := filepath.Join("tsclient", "node_modules", ".bin", "conformance")
	for _, sc := range conformanceScenarios {
		t.Run(sc, func(t *testing.T) {
			t.Parallel() // each is a Node.js start, most of its second
			dir := t.TempDir()
			out, stderr, err := runClient(time.Minute, nil, node, suite, "server", "--url", proxy.URL+"/mcp", "--scenario", sc, "-o", dir)
			checks, cerr := conformanceChecks(dir)
			if cerr != nil {
				t.Fatalf("conformance %s: %v (run: %v)\nstdout: %s\nstderr: %s", sc, cerr, err, out, stderr)
			}
			passed := 0
			for _, ch := range checks {
				switch ch.Status {
				case "SUCCESS":
					passed++
				case "INFO":
				default:
					t.Errorf("conformance %s: check %s is %s: %s %s", sc, ch.ID, ch.Status, ch.ErrorMessage, ch.Details)
				}
			}
			if err != nil || passed == 0 {
				t.Errorf("conformance %s: %v, %d checks passed\nstdout: %s\nstderr: %s", sc, err, passed, out, stderr)
			}
		})
	}
}

type conformanceCheck struct {
	ID, Status, ErrorMessage string
	Details                  json.RawMessage
}

// conformanceChecks reads the checks.json the suite wrote for one scenario.
func conformanceChecks(dir string) ([]conformanceCheck, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "checks.json"))
	if len(files) != 1 {
		return nil, fmt.Errorf("want one checks.json under %s, found %v", dir, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	var checks []conformanceCheck
	if err := json.Unmarshal(b, &checks); err != nil {
		return nil, fmt.Errorf("%s: %w", files[0], err)
	}
	return checks, nil
}
