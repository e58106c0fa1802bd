package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGetMetricsFromARealAgent: a real agent's samples reach get_metrics
// within seconds (the minute in progress is read from the fleet), as
// series of cpu, memory, load and the host's disks, and the retention of
// the coordinator's config is what the tool says it keeps.
func TestGetMetricsFromARealAgent(t *testing.T) {
	t.Parallel()
	c := startCoordinatorWithConfig(t, "collect: {fast: 1s}\nmetrics: {raw: 2h, rollup: 24h}\n")
	tok := c.token()
	startAgent(t, c, "metrics-1", t.TempDir(), c.joinLine())
	view := c.waitStatus(tok, "metrics-1", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e-test")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var out struct {
		Step   string
		Series []struct {
			Metric string
			Points [][4]any
		}
		Disks []struct{ Mount string }
	}
	eventually(t, 30*time.Second, "get_metrics with points of cpu, memory and load", func() error {
		if err := callTool(cs, "get_metrics", map[string]any{"target": "metrics-1"}, &out); err != nil {
			return err
		}
		got := map[string]int{}
		for _, s := range out.Series {
			got[s.Metric] = len(s.Points)
		}
		if got["cpu"] == 0 || got["memory"] == 0 || got["load"] == 0 {
			return fmt.Errorf("points per series: %v", got)
		}
		return nil
	})
	if out.Step != "1m" {
		t.Errorf("step %q; want 1m for the default hour", out.Step)
	}
	if len(view.Disks) > 0 && len(out.Disks) == 0 {
		t.Errorf("list_servers shows %d disks, get_metrics none", len(view.Disks))
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_metrics", Arguments: map[string]any{"target": "metrics-1", "since": "2d"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Content)
	if !res.IsError || !strings.Contains(string(b), "2h at one-minute and 1d at fifteen-minute resolution") {
		t.Errorf("since 2d with a day kept: %s; want an error saying what the config keeps", b)
	}
}
