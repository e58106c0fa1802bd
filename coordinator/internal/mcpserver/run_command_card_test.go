package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// TestRunCommandRefusesWhatTheCardCannotShow: a command the card would draw
// as something else is an isError naming the field, the code point and the
// byte, with no structured content, and no card is made.
func TestRunCommandRefusesWhatTheCardCannotShow(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	cs := e.client(t, e.token)
	for _, args := range []map[string]any{
		{"command": "ls /tmp\u00a0# ; touch /tmp/x", "reason": "look"},
		{"command": "ls", "reason": "look", "input": map[string]any{"prompt": "token\u3000", "secret": true}},
	} {
		args["server"], args["timeout_seconds"] = "web-1", 10
		res, _ := callJSON(t, cs, "run_command", args)
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || res.StructuredContent != nil {
			t.Fatalf("%v: got %+v; want isError without structured content", args, res)
		}
		if !strings.Contains(text, "command holds U+00A0 at byte 7") && !strings.Contains(text, "input.prompt holds U+3000 at byte 5") {
			t.Errorf("%v: message %q does not name the field, code point and byte", args, text)
		}
	}
	if pending, _ := e.cmds.Pending(context.Background()); len(pending) != 0 {
		t.Fatalf("%d cards made for refused commands", len(pending))
	}
}

// TestRunCommandNamesTheRunbook: a command that is exactly a runbook's is
// recorded with the runbook's name, for the card and the history.
func TestRunCommandNamesTheRunbook(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	cs := e.client(t, e.token)
	for _, c := range []string{"systemctl restart postgresql", "systemctl restart postgresql; rm -rf /tmp/x"} {
		if res, _ := callJSON(t, cs, "run_command", map[string]any{"server": "web-1", "command": c, "reason": "db stuck", "timeout_seconds": 10}); res.IsError {
			t.Fatalf("%s: %+v", c, res.Content)
		}
	}
	pending, _ := e.cmds.Pending(context.Background())
	if len(pending) != 2 || pending[0].Runbook != "restart-postgres" || pending[1].Runbook != "" {
		t.Fatalf("pending %+v; want the runbook named for its exact command only", pending)
	}
}
