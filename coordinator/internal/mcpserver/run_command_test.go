package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Calls nobody answers come back waiting with their id, every one of them,
// even when the end of the wait falls on a progress tick as it does in
// production (25 s and 45 s are multiples of the 5 s tick): here 1 s and
// 1.8 s with a 200 ms tick, the same ratios.
func TestUnansweredCallsAllReturnWaiting(t *testing.T) {
	e := newEnvTimed(t, DefaultGuardConfig(), timing{run: time.Second, again: 1800 * time.Millisecond, progress: 200 * time.Millisecond})
	e.fleet.Connect(&gridcityv1.Hello{Name: "web-1", CommandsEnabled: true, RunAs: "root"})
	cs := e.client(t, e.token)

	const calls = 12
	parallel := func(name string, args func(i int) map[string]any) []CommandResult {
		t.Helper()
		out := make([]CommandResult, calls)
		errs := make([]error, calls)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := &mcp.CallToolParams{Name: name, Arguments: args(i)}
				if i%2 == 0 { // half ask for progress, as Claude Code does
					p.SetProgressToken(fmt.Sprintf("%s-%d", name, i))
				}
				res, err := cs.CallTool(context.Background(), p)
				switch {
				case err != nil:
					errs[i] = err
				case res.IsError:
					errs[i] = fmt.Errorf("isError: %s", res.Content[0].(*mcp.TextContent).Text)
				default:
					b, _ := json.Marshal(res.StructuredContent)
					errs[i] = json.Unmarshal(b, &out[i])
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s call %d: %v; want status waiting with a requestId", name, i, err)
				continue
			}
			r := out[i]
			if r.Status != "waiting" || !strings.HasPrefix(r.RequestID, "cmd_") {
				t.Errorf("%s call %d: status %q, requestId %q; want waiting with an id", name, i, r.Status, r.RequestID)
			}
			if want := `wait_for_command with {"request_id":"` + r.RequestID + `"}`; !strings.Contains(r.Next, want) {
				t.Errorf("%s call %d: next %q; want it to say %s", name, i, r.Next, want)
			}
		}
		return out
	}

	started := parallel("run_command", func(i int) map[string]any {
		return map[string]any{"server": "web-1", "command": fmt.Sprintf("uptime # %d", i), "reason": "look", "timeout_seconds": 10}
	})
	if t.Failed() {
		t.FailNow()
	}
	parallel("wait_for_command", func(i int) map[string]any {
		return map[string]any{"request_id": started[i].RequestID}
	})
}
