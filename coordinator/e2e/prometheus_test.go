package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs a metrics path as Prometheus does (text format) and returns
// the body and its status.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// promtool runs `promtool check metrics` (Debian's prometheus package) on
// a scrape: the exposition's format and Prometheus' naming conventions.
func promtool(t *testing.T, what, body string) {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must install promtool (Debian's prometheus package)")
		}
		t.Skip("promtool not found: apt-get install prometheus")
	}
	cmd := exec.Command(p, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on %s: %v\n%s", what, err, out)
	}
}

// families parses a text exposition.
func families(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse the scrape: %v\n%s", err, body)
	}
	return fs
}

// sample is the value of the series of family name whose labels include
// every pair of want; ok is false when there is none.
func sample(fs map[string]*dto.MetricFamily, name string, want ...string) (v float64, ok bool) {
	f := fs[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// A real coordinator with a real agent, a refused enrollment and a command
// through approval, scraped as Prometheus would: both endpoints pass
// promtool, and the metrics say what happened, by name and value.
func TestPrometheusMetrics(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t)
	tok := c.token()
	startAgent(t, c, "prom-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "prom-1", "online", 20*time.Second)

	// An enrollment with a join token no one issued is refused.
	line := strings.Replace(c.joinLine(), "gridcity://"+c.grpc+"/", "gridcity://"+c.grpc+"/x", 1)
	if out, err := run(t, "gridcity-agent", "enroll", "--state", t.TempDir(), "--name", "intruder", "--join", line); err == nil {
		t.Fatalf("an agent enrolled with a forged join token: %s", out)
	}

	cs, err := c.mcpClient(tok, "e2e-prom")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	app := c.login(t)
	got := runAsync(cs, map[string]any{"server": "prom-1", "command": "echo scraped", "reason": "e2e metrics", "timeout_seconds": 30})
	card := app.card("echo scraped")
	time.Sleep(300 * time.Millisecond) // a decision that took a moment
	if code, body := app.post("/api/requests/"+card.ID+"/approve", map[string]string{}); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	if r := (<-got).must(t); r.Status != "completed" || r.Stdout != "scraped\n" {
		t.Fatalf("result %+v", r)
	}
	var listed map[string]any
	if err := callTool(cs, "list_servers", map[string]any{"name": "prom-1"}, &listed); err != nil {
		t.Fatal(err)
	}

	code, body := scrape(t, "http://"+c.http+"/metrics", "")
	if code != 200 {
		t.Fatalf("GET /metrics on loopback without a token: %d %s", code, body)
	}
	promtool(t, "/metrics", body)
	fs := families(t, body)
	checks := []struct {
		name   string
		labels []string
		min    float64
		max    float64
	}{
		{"gridcity_agents_connected", nil, 1, 1},
		{"gridcity_agent_streams", nil, 1, 1},
		{"gridcity_agent_messages_received_total", []string{"kind", "hello"}, 1, 1e9},
		{"gridcity_agent_messages_received_total", []string{"kind", "state"}, 1, 1e9},
		{"gridcity_agent_messages_received_total", []string{"kind", "command_event"}, 1, 1e9},
		{"gridcity_enrollment_refusals_total", []string{"reason", "token_unknown"}, 1, 1e9},
		{"gridcity_mcp_tool_calls_total", []string{"tool", "run_command", "outcome", "ok"}, 1, 1},
		{"gridcity_mcp_tool_calls_total", []string{"tool", "list_servers", "outcome", "ok"}, 1, 1e9},
		{"gridcity_mcp_tool_call_duration_seconds", []string{"tool", "run_command"}, 1, 1},
		{"gridcity_command_requests_total", []string{"status", "pending"}, 1, 1},
		{"gridcity_command_requests_total", []string{"status", "approved"}, 1, 1},
		{"gridcity_command_requests_total", []string{"status", "completed"}, 1, 1},
		{"gridcity_approval_decision_duration_seconds", []string{"decision", "approved"}, 1, 1},
		{"gridcity_approvals_pending", nil, 0, 0},
		{"gridcity_commands_running", nil, 0, 0},
		{"gridcity_incidents_open", nil, 0, 0},
		{"gridcity_store_operation_duration_seconds", []string{"operation", "SwapRequestAudited"}, 3, 1e9},
		{"gridcity_store_operation_duration_seconds", []string{"operation", "Enroll"}, 2, 1e9},
		{"gridcity_build_info", nil, 1, 1},
		{"go_goroutines", nil, 1, 1e9},
		{"process_resident_memory_bytes", nil, 1 << 20, 1 << 40},
	}
	for _, ch := range checks {
		v, ok := sample(fs, ch.name, ch.labels...)
		if !ok {
			t.Errorf("/metrics lacks %s%v", ch.name, ch.labels)
			continue
		}
		if v < ch.min || v > ch.max {
			t.Errorf("%s%v = %v; want %v..%v", ch.name, ch.labels, v, ch.min, ch.max)
		}
	}
	// The approval waited at least the pause above.
	if f := fs["gridcity_approval_decision_duration_seconds"]; f != nil {
		if h := f.GetMetric()[0].GetHistogram(); h.GetSampleSum() < 0.3 {
			t.Errorf("decision took %v s; want at least 0.3", h.GetSampleSum())
		}
	}

	code, body = scrape(t, "http://"+c.http+"/metrics/fleet", "")
	if code != 200 {
		t.Fatalf("GET /metrics/fleet: %d %s", code, body)
	}
	promtool(t, "/metrics/fleet", body)
	fs = families(t, body)
	for _, ch := range []struct {
		name string
		min  float64
	}{
		{"gridcity_server_up", 1},
		{"gridcity_server_cpu_cores", 1},
		{"gridcity_server_memory_total_bytes", 1 << 20},
		{"gridcity_server_memory_used_bytes", 1},
		{"gridcity_server_load1", 0},
		{"gridcity_server_last_seen_timestamp_seconds", float64(time.Now().Add(-time.Minute).Unix())},
	} {
		v, ok := sample(fs, ch.name, "server", "prom-1")
		if !ok || v < ch.min {
			t.Errorf("/metrics/fleet %s{server=prom-1} = %v (present %v); want at least %v", ch.name, v, ok, ch.min)
		}
	}
	if _, ok := sample(fs, "gridcity_server_disk_total_bytes", "server", "prom-1", "mountpoint", "/"); !ok {
		t.Errorf("/metrics/fleet lacks the root file system of prom-1:\n%s", body)
	}

	// A token of scope metrics is no MCP token.
	out, err := run(t, "gridcity", "token", "create", "prom", "--scope", "metrics", "--json", "--data", c.data)
	if err != nil {
		t.Fatal(err)
	}
	var mt struct{ Token, Scope string }
	if err := json.Unmarshal([]byte(out), &mt); err != nil || mt.Scope != "metrics" {
		t.Fatalf("token create --scope metrics: %q, %v", out, err)
	}
	if _, err := c.mcpClient(mt.Token, "e2e-prom"); err == nil {
		t.Fatal("an MCP client connected with a token of scope metrics")
	} else if !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("MCP with a metrics token: %v; want 401", err)
	}
}

// Off loopback, /metrics and /metrics/fleet need a token of scope metrics:
// none, an unknown one and an MCP token are refused with 401, and the
// metrics token scrapes both.
func TestMetricsNeedATokenOffLoopback(t *testing.T) {
	t.Parallel()
	needRoot(t)
	n := newTestNet(t)
	c := &coordinator{t: t, data: t.TempDir(), http: n.freePort(), grpc: n.freePort()}
	c.p = start(t, "coordinator", "gridcity", "serve", "--data", c.data, "--http", c.http, "--public-http", "--grpc", c.grpc, "--advertise", c.grpc)
	c.waitHealthy()
	out, err := run(t, "gridcity", "token", "create", "prom", "--scope", "metrics", "--json", "--data", c.data)
	if err != nil {
		t.Fatal(err)
	}
	var mt struct{ Token string }
	json.Unmarshal([]byte(out), &mt)
	mcpTok := c.token()
	for _, path := range []string{"/metrics", "/metrics/fleet"} {
		url := "http://" + c.http + path
		for what, tok := range map[string]string{"no token": "", "an unknown token": "gc_" + strings.Repeat("0", 43), "an MCP token": mcpTok} {
			code, body := scrape(t, url, tok)
			if code != 401 || !strings.Contains(body, "scope metrics") {
				t.Errorf("GET %s with %s: %d %q; want 401 naming the scope", path, what, code, body)
			}
		}
		code, body := scrape(t, url, mt.Token)
		// No agent here: the fleet's answer is empty.
		if code != 200 || (path == "/metrics" && !bytes.Contains([]byte(body), []byte("gridcity_"))) {
			t.Errorf("GET %s with the metrics token: %d %.200q; want the metrics", path, code, body)
		}
	}
}
