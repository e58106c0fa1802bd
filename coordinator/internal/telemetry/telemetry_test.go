package telemetry

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/store"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Every method works on nil: packages tested without metrics need none.
func TestNilMetricsDoNothing(t *testing.T) {
	var m *Metrics
	m.AgentMessage("state")
	m.AgentRefused("state")
	m.EnrollmentRefused("token_unknown")
	m.StreamRefused("revoked")
	m.ToolCall("list_servers", "ok", time.Millisecond)
	m.Request("pending")
	m.Decision("approved", time.Second)
	m.ProbeCheck("db", true, "agent")
	m.StoreOperation("Agent", time.Millisecond, nil)
	m.ForgedApproval("unauthenticated")
}

// The coordinator's metrics follow Prometheus' conventions (promlint, as
// promtool applies it) and count what they are told.
func TestMetricsCountAndLint(t *testing.T) {
	m := New("test")
	m.AgentMessage("state")
	m.AgentMessage("state")
	m.EnrollmentRefused("token_used")
	m.ToolCall("run_command", "ok", 3*time.Second)
	m.Request("pending")
	m.Decision("approved", 12*time.Second)
	m.Decision("expired", -time.Second) // a clock step back is not a negative wait
	m.ProbeCheck("db", false, "coordinator")
	m.StoreOperation("Agent", time.Millisecond, store.ErrNotFound)
	m.ForgedApproval("replayed")
	m.Gauge("agents_connected", "Agents.", func() float64 { return 3 })
	m.GaugeByLabel("agent_streams", "Streams.", "replica", func() map[string]float64 { return map[string]float64{"a": 2, "b": 1} })
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if v := testutil.ToFloat64(m.agentMessages.WithLabelValues("state")); v != 2 {
		t.Errorf("state messages %v; want 2", v)
	}
	if v := testutil.ToFloat64(m.storeErrors.WithLabelValues("Agent")); v != 1 {
		t.Errorf("store errors %v; want 1", v)
	}
	if v := testutil.ToFloat64(m.forgedApprovals.WithLabelValues("replayed")); v != 1 {
		t.Errorf("forged approvals %v; want 1", v)
	}
	want := `
# HELP gridcity_agent_streams Streams.
# TYPE gridcity_agent_streams gauge
gridcity_agent_streams{replica="a"} 2
gridcity_agent_streams{replica="b"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "gridcity_agent_streams"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.decisionSeconds); n != 2 {
		t.Errorf("%d decision series; want 2", n)
	}
}

func fleetBody(t *testing.T, src FleetSource, query string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	FleetHandler(src).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/fleet"+query, nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics/fleet%s: %d %s", query, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func fullState() *gridcityv1.StateUpdate {
	disks := []*gridcityv1.Disk{{Mount: "/", TotalBytes: 100, UsedBytes: 40}}
	for i := range 20 {
		disks = append(disks, &gridcityv1.Disk{Mount: "/srv/" + strings.Repeat("x", i), TotalBytes: uint64(1000 + i), UsedBytes: 1})
	}
	return &gridcityv1.StateUpdate{
		Cpu:         &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(25), Load1: 1.5, Load5: 1, Load15: 0.5},
		Memory:      &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 2 << 30},
		Disks:       &gridcityv1.Disks{Items: disks},
		FailedUnits: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "nginx.service"}}},
		Updates:     &gridcityv1.Updates{Pending: 7, Security: 2},
		Logins:      &gridcityv1.Logins{},
	}
}

// The fleet as metrics: a value not collected is absent (never 0), an
// offline server shows only that it is down, a server's disks are its
// largest few, and names from hostile agents become valid, bounded
// labels that never break the scrape.
func TestFleetMetrics(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	hostile := strings.Repeat("é", 100) + "\xff"
	src := FleetSource{
		Servers: func() []FleetServer {
			return []FleetServer{
				{Name: "web-1", District: "edge", Online: true, LastSeen: now, State: fullState(), OpenAttacks: 3},
				// Just connected: busy share, failed units, updates and logins not known yet.
				{Name: "new-1", District: "edge", Online: true, LastSeen: now, State: &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2}}},
				{Name: "gone-1", District: "core", Online: false, LastSeen: now.Add(-time.Hour), State: fullState()},
				{Name: "first-1", Online: true},
				{Name: hostile, Online: true, State: &gridcityv1.StateUpdate{Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{
					{Mount: hostile + "a", TotalBytes: 2}, {Mount: hostile + "b", TotalBytes: 1}, {Mount: "", TotalBytes: 5}}}}},
			}
		},
		Resources: func() []FleetResource {
			return []FleetResource{{ID: "db", Kind: "database", Status: "failed"}, {ID: "cache", Kind: "database", Status: "unknown"}}
		},
	}
	body := fleetBody(t, src, "")
	has := func(line string) bool {
		for _, l := range strings.Split(body, "\n") {
			if l == line {
				return true
			}
		}
		return false
	}
	for _, line := range []string{
		`gridcity_server_up{district="edge",server="web-1"} 1`,
		`gridcity_server_cpu_busy_ratio{district="edge",server="web-1"} 0.25`,
		`gridcity_server_failed_units{district="edge",server="web-1"} 1`,
		`gridcity_server_updates_security{district="edge",server="web-1"} 2`,
		`gridcity_server_attacks_open{district="edge",server="web-1"} 3`,
		`gridcity_server_disk_used_bytes{district="edge",mountpoint="/srv/xxxxxxxxxxxxxxxxxxx",server="web-1"} 1`,
		`gridcity_server_up{district="core",server="gone-1"} 0`,
		`gridcity_server_up{district="",server="first-1"} 1`,
		`gridcity_resource_status{kind="database",resource="db",status="failed"} 1`,
		`gridcity_resource_status{kind="database",resource="db",status="ok"} 0`,
		`gridcity_resource_status{kind="database",resource="cache",status="unknown"} 1`,
	} {
		if !has(line) {
			t.Errorf("no line %s", line)
		}
	}
	for _, absent := range []string{
		`gridcity_server_cpu_busy_ratio{district="edge",server="new-1"}`,
		`gridcity_server_failed_units{district="edge",server="new-1"}`,
		`gridcity_server_updates_pending{district="edge",server="new-1"}`,
		`gridcity_server_attacks_open{district="edge",server="new-1"}`,
		`gridcity_server_cpu_cores{district="core",server="gone-1"}`,
		`gridcity_server_memory_used_bytes{district="core",server="gone-1"}`,
		`mountpoint="/"`, // the smallest of web-1's 21 disks
		`mountpoint=""`,
	} {
		if strings.Contains(body, absent) {
			t.Errorf("%s is in the answer; want it absent", absent)
		}
	}
	if n := strings.Count(body, `gridcity_server_disk_total_bytes{district="edge",`); n != MaxFleetDisks {
		t.Errorf("%d disks of web-1; want the largest %d", n, MaxFleetDisks)
	}
	// The hostile names: valid UTF-8, cut at a character boundary, and the
	// two mounts that are the same once cut give one series, not a
	// duplicate that would fail the scrape.
	cut := Label(hostile)
	if len(cut) > MaxLabelBytes || !strings.HasPrefix(hostile, cut) {
		t.Errorf("label %q (%d bytes); want a prefix of at most %d", cut, len(cut), MaxLabelBytes)
	}
	if n := strings.Count(body, `gridcity_server_disk_total_bytes{district="",mountpoint="`+cut+`"`); n != 1 {
		t.Errorf("%d series for the hostile mounts; want 1\n%s", n, body)
	}
	// It parses, and passes the lint promtool applies.
	lint(t, body)

	// One district: its servers, no resources.
	edge := fleetBody(t, src, "?district=EDGE")
	if !strings.Contains(edge, `server="web-1"`) || strings.Contains(edge, `server="gone-1"`) || strings.Contains(edge, "gridcity_resource_status") {
		t.Errorf("district=edge:\n%s", edge)
	}
}

func TestLabelBounds(t *testing.T) {
	for _, s := range []string{"", "web-1", strings.Repeat("a", 500), strings.Repeat("日本", 100), "\xff\xfe", "a\x00b"} {
		l := Label(s)
		if len(l) > MaxLabelBytes {
			t.Errorf("Label(%q) = %q", s, l)
		}
		if !isValidUTF8(l) {
			t.Errorf("Label(%q) = %q is not valid UTF-8", s, l)
		}
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "?") == s }

type tokens map[string]store.Token

func (ts tokens) TokenByHash(_ context.Context, hash []byte) (store.Token, error) {
	if t, ok := ts[string(hash)]; ok {
		return t, nil
	}
	return store.Token{}, store.ErrNotFound
}

// Off loopback, only a token of scope metrics scrapes; refused guesses
// from one address are limited without locking out another.
func TestRequireToken(t *testing.T) {
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return string(h[:]) }
	ts := tokens{
		hash("gc_prom"): {Name: "prom", Scope: store.ScopeMetrics},
		hash("gc_op"):   {Name: "claude", Scope: store.ScopeOperate},
	}
	h := RequireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics") }), ts, slog.New(slog.DiscardHandler))
	get := func(auth, remote string) (int, string) {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.RemoteAddr = remote
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for auth, want := range map[string]int{"": 401, "Basic Zm9vOmJhcg==": 401, "Bearer ": 401, "Bearer gc_nope": 401, "Bearer gc_op": 401, "Bearer gc_prom": 200, "bearer gc_prom": 200} {
		if code, body := get(auth, "192.0.2.1:5000"); code != want {
			t.Errorf("Authorization %q: %d %q; want %d", auth, code, body, want)
		} else if code == 401 && !strings.Contains(body, "scope metrics") {
			t.Errorf("Authorization %q refused with %q; want the scope named", auth, body)
		}
	}
	limited := false
	for range 30 {
		if code, _ := get("Bearer gc_guess", "192.0.2.9:1"); code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Error("30 wrong tokens in a row from one address were never limited")
	}
	if code, _ := get("Bearer gc_prom", "192.0.2.10:1"); code != 200 {
		t.Errorf("another address with the right token: %d; want 200", code)
	}
}

// Label takes names from agents, which may be hostile: whatever the
// bytes, the label is valid UTF-8 of at most MaxLabelBytes, and a valid
// name is kept as its own prefix.
func FuzzLabel(f *testing.F) {
	for _, s := range []string{"", "web-1", strings.Repeat("é", 100), "\xff\xfe", "/srv/data"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := Label(s)
		if len(l) > MaxLabelBytes || !isValidUTF8(l) {
			t.Fatalf("Label(%q) = %q", s, l)
		}
		if isValidUTF8(s) && !strings.HasPrefix(s, l) {
			t.Fatalf("Label(%q) = %q is not a prefix", s, l)
		}
	})
}

// lint parses a text exposition and lints it as promtool does.
func lint(t *testing.T, body string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the answer does not parse: %v\n%s", err, body)
	}
	var mfs []*dto.MetricFamily
	for _, f := range fams {
		mfs = append(mfs, f)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// A gauge whose value cannot be read now is left out, not 0.
func TestGaugeIfKnown(t *testing.T) {
	m := New("test")
	known := false
	m.GaugeIfKnown("approvals_pending", "Pending.", func() (float64, bool) { return 0, known })
	if n, err := testutil.GatherAndCount(m.Registry(), "gridcity_approvals_pending"); err != nil || n != 0 {
		t.Fatalf("unknown: %d series (%v); want none", n, err)
	}
	known = true
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader("# HELP gridcity_approvals_pending Pending.\n# TYPE gridcity_approvals_pending gauge\ngridcity_approvals_pending 0\n"), "gridcity_approvals_pending"); err != nil {
		t.Error(err)
	}
}
