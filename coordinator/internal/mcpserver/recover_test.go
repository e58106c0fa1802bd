package mcpserver

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A panic in a tool's handler fails that call with an internal error and
// a logged stack; the server, and the session, go on.
func TestPanicInAHandlerFailsOnlyThatCall(t *testing.T) {
	var logs bytes.Buffer
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	s.AddReceivingMiddleware(RecoverPanics(slog.New(slog.NewTextHandler(&logs, nil))))
	mcp.AddTool(s, &mcp.Tool{Name: "boom"}, func(context.Context, *mcp.CallToolRequest, fleetview.NoInput) (*mcp.CallToolResult, fleetview.NoInput, error) {
		var m map[string]int
		m["x"]++ // a nil map: panics
		return nil, fleetview.NoInput{}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fine"}, func(context.Context, *mcp.CallToolRequest, fleetview.NoInput) (*mcp.CallToolResult, fleetview.NoInput, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, fleetview.NoInput{}, nil
	})
	ctx := context.Background()
	c1, c2 := net.Pipe()
	if _, err := s.Connect(ctx, &mcp.IOTransport{Reader: c2, Writer: c2}, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: c1, Writer: c1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "boom", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "internal error in gridcity while answering tools/call") {
		t.Fatalf("a panicking tool: %v; want an internal error", err)
	}
	if !strings.Contains(logs.String(), "panic in an MCP handler") || !strings.Contains(logs.String(), "assignment to entry in nil map") {
		t.Errorf("log %q; want the panic and its stack", logs.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fine", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("the next call: %v %+v; want it answered", err, res)
	}
}
