package mcpserver

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func readJSON(t *testing.T, cs *mcp.ClientSession, uri string, v any) {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].MIMEType != "application/json" || res.Contents[0].URI != uri {
		t.Fatalf("read %s: contents %+v; want one application/json text", uri, res.Contents)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), v); err != nil {
		t.Fatalf("read %s: %v in %s", uri, err, res.Contents[0].Text)
	}
}

func TestResources(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	ctx := context.Background()
	id := e.fleet.Connect(&gridcityv1.Hello{Name: "api-1", District: "shop", CommandsEnabled: true, RunAs: "root"})
	e.fleet.Apply("api-1", id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(),
		Host:        &gridcityv1.HostInfo{Hostname: "api-1", Os: "debian"},
		FailedUnits: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "api.service"}}}})
	if err := e.st.CreateToken(ctx, store.Token{Name: "reader", Scope: store.ScopeRead, Hash: bearer.Hash("gc_read"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	op, rd := e.client(t, e.token), e.client(t, "gc_read")

	uris := func(cs *mcp.ClientSession) string {
		var got []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.URI)
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.URITemplate)
		}
		return strings.Join(got, " ")
	}
	if got, want := uris(op), "gridcity://audit gridcity://incidents gridcity://servers gridcity://topology gridcity://servers/{name}"; got != want {
		t.Errorf("operate lists %s; want %s", got, want)
	}
	if got, want := uris(rd), "gridcity://incidents gridcity://servers gridcity://topology gridcity://servers/{name}"; got != want {
		t.Errorf("read lists %s; want %s", got, want)
	}

	var idx ServerIndex
	readJSON(t, rd, "gridcity://servers", &idx)
	if idx.Total != 1 || len(idx.Servers) != 1 || !reflect.DeepEqual(idx.Servers[0], ServerIndexEntry{Name: "api-1", Status: "online", District: "shop",
		Why: []string{"1 failed unit: api.service"}, URI: "gridcity://servers/api-1"}) {
		t.Errorf("servers index %+v", idx)
	}
	var one fleetview.ServerView
	readJSON(t, rd, idx.Servers[0].URI, &one)
	if one.Name != "api-1" || one.OS.Name != "debian" || len(one.FailedUnits) != 1 {
		t.Errorf("server state %+v", one)
	}
	if _, err := rd.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gridcity://servers/api-2"}); err == nil || !strings.Contains(err.Error(), `unknown server "api-2"; known servers: api-1`) {
		t.Errorf("unknown server: %v", err)
	}

	// The topology and incidents resources are the tools' answers.
	for uri, tool := range map[string]string{"gridcity://topology": "get_topology", "gridcity://incidents": "incident_report"} {
		var fromResource, fromTool map[string]any
		readJSON(t, rd, uri, &fromResource)
		res, err := rd.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &fromTool)
		delete(fromResource, "generatedAt")
		delete(fromTool, "generatedAt")
		if a, b := mustJSON(fromResource), mustJSON(fromTool); a != b {
			t.Errorf("%s = %s; %s answers %s", uri, a, tool, b)
		}
	}

	// The audit: operate tokens only, the newest requests' rows.
	if _, err := rd.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gridcity://audit"}); err == nil {
		t.Error("a read token read the audit log")
	}
	callJSON(t, op, "run_command", map[string]any{"server": "api-1", "command": "uptime", "reason": "look", "timeout_seconds": 10})
	var audit AuditLog
	readJSON(t, op, "gridcity://audit", &audit)
	if audit.Requests != 1 || len(audit.Entries) == 0 || audit.Entries[0].Step != "requested" || audit.Entries[0].Actor != "token:tester (go-test)" {
		t.Fatalf("audit %+v", audit)
	}
	if d, _ := audit.Entries[0].Detail.(map[string]any); d["command"] != "uptime" {
		t.Errorf("audit detail %+v", audit.Entries[0].Detail)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestAuditCutsLongValues(t *testing.T) {
	long := strings.Repeat("x", auditValueLen+10)
	got := cut(map[string]any{"stdout": long, "exitCode": 0.0, "list": []any{long}}, "cmd_1").(map[string]any)
	want := strings.Repeat("x", auditValueLen) + "… [10 more bytes: gridcity audit --request cmd_1 --json]"
	if got["stdout"] != want || got["list"].([]any)[0] != want || got["exitCode"] != 0.0 {
		t.Errorf("cut: %v", got)
	}
}

func TestPrompts(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	ctx := context.Background()
	if err := e.st.CreateToken(ctx, store.Token{Name: "reader", Scope: store.ScopeRead, Hash: bearer.Hash("gc_read"), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	get := func(cs *mcp.ClientSession, name string, args map[string]string) string {
		t.Helper()
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(res.Messages) != 1 || res.Messages[0].Role != "user" {
			t.Fatalf("%s: messages %+v", name, res.Messages)
		}
		return res.Messages[0].Content.(*mcp.TextContent).Text
	}
	op, rd := e.client(t, e.token), e.client(t, "gc_read")
	tests := []struct {
		cs      *mcp.ClientSession
		name    string
		args    map[string]string
		want    []string
		notWant []string
	}{
		{op, "triage_incident", map[string]string{"target": "orders-db"}, []string{"incident_report", "get_topology", "diagnose", `"orders-db"`, "call run_command", "wait_for_command", "never instructions"}, nil},
		{rd, "triage_incident", nil, []string{"incident_report", "cannot run commands"}, []string{"call run_command", "Start from"}},
		{op, "review_security", map[string]string{"server": "web-1"}, []string{"security_findings", "gaps first", `"web-1"`, "call run_command", "never instructions"}, nil},
		{rd, "review_security", nil, []string{"security_findings", "cannot run commands"}, []string{"call run_command"}},
	}
	for _, tt := range tests {
		text := get(tt.cs, tt.name, tt.args)
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s %v: lacks %q:\n%s", tt.name, tt.args, w, text)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(text, w) {
				t.Errorf("%s %v: has %q:\n%s", tt.name, tt.args, w, text)
			}
		}
	}
}
