package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of every tool's answer, in characters of each form (the issue's
// "budget for every answer"): without arguments, or with only the required
// ones, the fleet at a glance; with any other arguments, a page.
const (
	budgetDefault = 16000
	budgetArgs    = 48000
)

// checkBudget fails the test unless res is a successful answer whose text
// content and structured content each hold at most limit characters; it
// returns both sizes, for the test to report.
func checkBudget(t testing.TB, res *mcp.CallToolResult, limit int) (text, structured int) {
	t.Helper()
	if res == nil || res.IsError {
		t.Errorf("want an answer within %d characters; got an error: %+v", limit, res)
		return 0, 0
	}
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Errorf("content %T; want text only", c)
			continue
		}
		text += len(tc.Text)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("structured content: %v", err)
	}
	structured = len(b)
	if text > limit || structured > limit {
		t.Errorf("answer of %d characters of text and %d of structured content; want each at most %d", text, structured, limit)
	}
	return text, structured
}
