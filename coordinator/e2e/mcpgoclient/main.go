// Command mcpgoclient checks gridcity's MCP endpoint with mark3labs/mcp-go
// used as its README shows, with its defaults: Initialize probes the server
// with server/discover and, when the server offers 2026-07-28, speaks the
// stateless revision (every request carries its version and capabilities in
// _meta; no session). It lists the tools, calls a read tool and run_command
// (someone approves the card meanwhile: the e2e test does), waits for the
// command with wait_for_command when it is still waiting, and validates each
// structuredContent against its tool's outputSchema.
//
// It is a module of its own, used only by coordinator/e2e, so that the
// product modules never depend on mcp-go; it is not in go.work.
//
//	mcpgoclient -endpoint URL -token T -client-name NAME -server AGENT -run-command CMD [-want-protocol V] [-timeout 2m]
//
// stdout: one JSON line, {"client","protocolVersion","tools","called","run":{…},"ok","errors"};
// exit 0 when every check passed, 1 when one failed, 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// label names the client, with the version go.mod pins, in every failure.
var label = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/mark3labs/mcp-go" {
				return "mcp-go " + d.Version
			}
		}
	}
	return "mcp-go"
}()

type summary struct {
	Client          string   `json:"client"`
	ProtocolVersion string   `json:"protocolVersion"`
	Tools           []string `json:"tools"`
	Called          []string `json:"called"`
	Run             *run     `json:"run"`
	OK              bool     `json:"ok"`
	Errors          []string `json:"errors,omitempty"`
}

type run struct {
	Status     string `json:"status"`
	WaitStatus string `json:"waitStatus,omitempty"`
	RequestID  string `json:"requestId"`
	Progress   int64  `json:"progress"`
	Stdout     string `json:"stdout,omitempty"`
}

type checker struct {
	sum   summary
	tools map[string]mcp.Tool
}

func (c *checker) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.sum.Errors = append(c.sum.Errors, msg)
	fmt.Fprintf(os.Stderr, "mcpgoclient: FAIL: %s\n", msg)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcpgoclient: "+format+"\n", args...)
}

func main() {
	endpoint := flag.String("endpoint", "", "the coordinator's MCP endpoint, http://HOST:PORT/mcp")
	token := flag.String("token", "", "a bearer token of scope operate")
	clientName := flag.String("client-name", "mcp-go", "sent as X-Agent-Client and as clientInfo.name")
	server := flag.String("server", "", "the agent that run_command runs on, and that list_servers must show")
	command := flag.String("run-command", "", "the command run_command asks for")
	wantProtocol := flag.String("want-protocol", "2026-07-28", "the protocol version mcp-go must settle on")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if *endpoint == "" || *token == "" || *server == "" || *command == "" {
		fmt.Fprintln(os.Stderr, "mcpgoclient: -endpoint, -token, -server and -run-command are required")
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	c := &checker{sum: summary{Client: label}}
	c.check(ctx, *endpoint, *token, *clientName, *server, *command, *wantProtocol)
	c.sum.OK = len(c.sum.Errors) == 0
	json.NewEncoder(os.Stdout).Encode(c.sum)
	if !c.sum.OK {
		os.Exit(1)
	}
}

func (c *checker) check(ctx context.Context, endpoint, token, clientName, server, command, wantProtocol string) {
	cl, err := client.NewStreamableHttpClient(endpoint, transport.WithHTTPHeaders(map[string]string{
		"Authorization":  "Bearer " + token,
		"X-Agent-Client": clientName,
	}))
	if err != nil {
		c.fail("%s: new client: %v", label, err)
		return
	}
	defer cl.Close()
	var progress atomic.Int64
	cl.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			progress.Add(1)
		}
	})
	if err := cl.Start(ctx); err != nil {
		c.fail("%s: start: %v", label, err)
		return
	}

	// 1. Connect with the defaults: no protocol version asked for.
	init, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: clientName, Version: "1.0.0"},
	}})
	if err != nil {
		c.fail("%s: initialize (server/discover, then initialize if the server is not stateless): %v", label, err)
		return
	}
	c.sum.ProtocolVersion = cl.ProtocolVersion()
	logf("connected: protocol %s, server %s %s", c.sum.ProtocolVersion, init.ServerInfo.Name, init.ServerInfo.Version)
	if wantProtocol != "" && c.sum.ProtocolVersion != wantProtocol {
		c.fail("%s: settled on protocol %q; want %q (the server's server/discover answer decides)", label, c.sum.ProtocolVersion, wantProtocol)
	}

	// 2. The tools.
	list, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		c.fail("%s: tools/list: %v", label, err)
		return
	}
	c.tools = map[string]mcp.Tool{}
	for _, t := range list.Tools {
		c.tools[t.Name] = t
		c.sum.Tools = append(c.sum.Tools, t.Name)
	}
	logf("tools: %v", c.sum.Tools)
	for _, name := range []string{"list_servers", "run_command", "wait_for_command"} {
		if _, ok := c.tools[name]; !ok {
			c.fail("%s: tools/list does not list %s (got %v)", label, name, c.sum.Tools)
			return
		}
	}

	// 3. A read tool: the fleet at a glance shows the agent online.
	var glance struct {
		Rows []struct{ Name, Status string }
	}
	if !c.call(ctx, cl, "list_servers", map[string]any{}, nil, &glance) {
		return
	}
	if i := slices.IndexFunc(glance.Rows, func(r struct{ Name, Status string }) bool { return r.Name == server }); i < 0 {
		c.fail("%s: list_servers: no row for %s (rows %+v)", label, server, glance.Rows)
	} else if glance.Rows[i].Status != "online" {
		c.fail("%s: list_servers: %s is %q; want online", label, server, glance.Rows[i].Status)
	}

	// 4. run_command, asking for progress; a person approves it meanwhile.
	var res struct {
		Status, RequestID, Stdout string
		ExitCode                  *int
	}
	args := map[string]any{"server": server, "command": command, "reason": "mcpgoclient e2e: see that commands go through a person", "timeout_seconds": 30}
	if !c.call(ctx, cl, "run_command", args, &mcp.Meta{ProgressToken: "mcpgoclient-run"}, &res) {
		return
	}
	c.sum.Run = &run{Status: res.Status, RequestID: res.RequestID}
	for res.Status == "waiting" && ctx.Err() == nil {
		if !c.call(ctx, cl, "wait_for_command", map[string]any{"request_id": c.sum.Run.RequestID}, nil, &res) {
			return
		}
		c.sum.Run.WaitStatus = res.Status
	}
	c.sum.Run.Progress = progress.Load()
	c.sum.Run.Stdout = res.Stdout
	if res.Status != "completed" || res.ExitCode == nil || *res.ExitCode != 0 {
		c.fail("%s: run_command %q: ended %q (exit code %v); want completed with exit code 0", label, command, res.Status, res.ExitCode)
	}
}

// call calls a tool and checks its answer as a client validating output
// would: no error, structuredContent present and valid against the tool's
// outputSchema. It decodes structuredContent into out.
func (c *checker) call(ctx context.Context, cl *client.Client, name string, args map[string]any, meta *mcp.Meta, out any) bool {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	req.Params.Meta = meta
	res, err := cl.CallTool(ctx, req)
	if err != nil {
		c.fail("%s: tools/call %s %v: %v", label, name, args, err)
		return false
	}
	c.sum.Called = append(c.sum.Called, name)
	if res.IsError {
		c.fail("%s: tools/call %s %v: isError: %+v", label, name, args, res.Content)
		return false
	}
	if res.StructuredContent == nil {
		c.fail("%s: tools/call %s: no structuredContent", label, name)
		return false
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if err := validate(c.tools[name].OutputSchema, sc); err != nil {
		c.fail("%s: tools/call %s: structuredContent does not match the outputSchema: %v", label, name, err)
		return false
	}
	if err := json.Unmarshal(sc, out); err != nil {
		c.fail("%s: tools/call %s: structuredContent %s: %v", label, name, sc, err)
		return false
	}
	logf("called %s: ok", name)
	return true
}

// validate checks a value against an outputSchema as mcp-go parsed it.
func validate(schema mcp.ToolOutputSchema, value []byte) error {
	b, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("outputSchema %s: %w", b, err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("outputSchema: %w", err)
	}
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return err
	}
	return resolved.Validate(v)
}
