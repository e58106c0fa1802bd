package stdiobridge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bridge accepts logging/setLevel, so it advertises logging.
func TestStdioBridgeAdvertisesLoggingItAccepts(t *testing.T) {
	t.Parallel()
	c := newTestCoordinator(t, 300*time.Millisecond)
	c.start()
	r := startRaw(t, Config{Endpoint: c.endpoint(), Token: operateToken})
	init := r.initialize(t, "2025-11-25")
	var res struct {
		Capabilities map[string]json.RawMessage
	}
	if err := json.Unmarshal(init.Result, &res); err != nil {
		t.Fatal(err)
	}
	r.send(t, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}`)
	setLevel := r.answer(t, 2)
	_, advertised := res.Capabilities["logging"]
	if accepted := setLevel.Error == nil; accepted != advertised {
		t.Errorf("logging/setLevel accepted: %v, logging advertised: %v (capabilities %s); want both", accepted, advertised, init.Result)
	}
}

// The level a client sets reaches the coordinator, and the coordinator's
// log messages at or above it reach the client.
func TestStdioBridgePassesLogMessages(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "logs", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "warn_me"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: "noise"})
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: "disk filling"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	sc := startBridgeAt(t, Config{Endpoint: hs.URL + "/mcp", Token: "any"}, "2025-11-25")
	ctx := context.Background()
	if got := toolNames(t, sc.ClientSession); got != "warn_me" { // the list is the coordinator's once it answers
		t.Fatalf("tools %s; want warn_me", got)
	}
	if err := sc.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if res := sc.call(t, "warn_me", map[string]any{}); res.IsError {
		t.Fatalf("warn_me: %s", text(res))
	}
	select {
	case got := <-sc.logs:
		if got != "warning disk filling" {
			t.Errorf("log message %q; want only the warning (the client's level is info)", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no log message came through the bridge\nlog:\n%s", sc.log.String())
	}
	select {
	case got := <-sc.logs:
		if strings.Contains(got, "noise") {
			t.Errorf("a debug message came through at level info: %q", got)
		}
	default:
	}
}
