package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// fillHistory writes span of a server's history as the fleet would have:
// quarter hours up to a day before now, minutes for the last day, each
// metric's value from value at the bucket's start.
func fillHistory(t testing.TB, st store.Store, server string, now time.Time, span time.Duration, metrics []string, value func(metric string, at time.Time) float64) {
	t.Helper()
	ctx := context.Background()
	keep := store.DefaultMetricRetention
	start := now.Add(-span).Truncate(store.MetricRollupStep)
	var batch []store.MetricPoint
	for at := start; at.Before(now.Truncate(store.MetricStep)); {
		step, n := store.MetricStep, 1
		if now.Sub(at) > keep.Raw {
			step, n = store.MetricRollupStep, 15
		}
		for _, m := range metrics {
			v := value(m, at)
			batch = append(batch, store.MetricPoint{Server: server, Metric: m, At: at, N: n, Min: v - 1, Sum: v * float64(n), Max: v + 1})
		}
		at = at.Add(step)
		if len(batch) > 5000 {
			if err := st.AppendMetrics(ctx, batch, now, keep); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := st.AppendMetrics(ctx, batch, now, keep); err != nil {
		t.Fatal(err)
	}
}

// connectWithDisks puts a server online with live figures for cpu,
// memory, load and the disks' used percentages.
func connectWithDisks(f *fleet.Fleet, name string, cpu, mem float64, disks map[string]float64) {
	id := f.Connect(&gridcityv1.Hello{Name: name})
	u := &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(cpu), Load1: 0.5},
		Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedPercent: mem}, Disks: &gridcityv1.Disks{}}
	for m, used := range disks {
		u.Disks.Items = append(u.Disks.Items, &gridcityv1.Disk{Mount: m, TotalBytes: 100 << 30, UsedBytes: uint64(used) << 30, UsedPercent: used})
	}
	f.Apply(name, id, u)
}

func callMetrics(t *testing.T, cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, fleetview.MetricsOutput, int, int) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_metrics", Arguments: args})
	if err != nil {
		t.Fatalf("get_metrics %v: %v", args, err)
	}
	var out fleetview.MetricsOutput
	text := 0
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += len(tc.Text)
		}
	}
	if res.IsError {
		return res, out, text, 0
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return res, out, text, len(b)
}

func series(t *testing.T, out fleetview.MetricsOutput, metric string) fleetview.SeriesView {
	t.Helper()
	for _, s := range out.Series {
		if s.Metric == metric {
			return s
		}
	}
	t.Fatalf("no %s series in %+v", metric, out.Series)
	return fleetview.SeriesView{}
}

// TestGetMetricsTrendsAndFullIn: over a day in which /var fills by one
// point an hour (to 60% now), / stays flat, cpu falls and memory rises,
// get_metrics says /var is full in 40 h, / is not filling, and each
// trend's sign, with at most 120 buckets per series.
func TestGetMetricsTrendsAndFullIn(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	now := time.Now()
	connectWithDisks(e.fleet, "web-1", 20, 70, map[string]float64{"/": 30, "/var": 60})
	fillHistory(t, e.st, "web-1", now, 24*time.Hour, []string{"cpu", "memory", "load", "disk:/", "disk:/var"}, func(m string, at time.Time) float64 {
		h := now.Sub(at).Hours() // hours ago
		switch m {
		case "cpu":
			return 20 + 2*h
		case "memory":
			return 70 - h
		case "disk:/var":
			return 60 - h
		case "disk:/":
			return 30
		}
		return 0.5
	})
	for _, since := range []string{"24h", "1d", "6h", ""} {
		out, err := fleetview.New(fleetview.Deps{Fleet: e.fleet, Store: e.st}).Metrics(context.Background(), fleetview.MetricsInput{Target: "web-1", Since: since}, now)
		if err != nil {
			t.Fatalf("since %q: %v", since, err)
		}
		if len(out.Series) != 5 || len(out.Disks) != 2 {
			t.Fatalf("since %q: %d series, %d disks; want cpu, memory, load, / and /var", since, len(out.Series), len(out.Disks))
		}
		for _, s := range out.Series {
			if len(s.Points) == 0 || len(s.Points) > fleetview.MaxBuckets {
				t.Errorf("since %q: %s has %d points; want 1 to %d", since, s.Metric, len(s.Points), fleetview.MaxBuckets)
			}
		}
		if cpu, mem := series(t, out, "cpu"), series(t, out, "memory"); cpu.TrendPerHour >= 0 || mem.TrendPerHour <= 0 || cpu.Now != 20 || mem.Now != 70 {
			t.Errorf("since %q: cpu trend %v now %v, memory trend %v now %v; want cpu falling to 20, memory rising to 70", since, cpu.TrendPerHour, cpu.Now, mem.TrendPerHour, mem.Now)
		}
		root, vr := out.Disks[0], out.Disks[1]
		if root.Mount != "/" || !root.NotFilling || root.FullIn != "" {
			t.Errorf("since %q: / = %+v; want not filling", since, root)
		}
		if math.Abs(vr.TrendPerHour-1) > 0.01 || vr.UsedPercent != 60 || vr.NotFilling {
			t.Errorf("since %q: /var = %+v; want 60%% used, filling at 1 point an hour", since, vr)
		}
		// (100-60)/1 h = 40 h, give or take the trend's rounding.
		if in, err := time.Parse(time.RFC3339, vr.FullAt); err != nil || in.Sub(now) < 39*time.Hour || in.Sub(now) > 41*time.Hour || !strings.HasPrefix(vr.FullIn, "1d1") {
			t.Errorf("since %q: /var full in %q at %q; want about 1d16h from now", since, vr.FullIn, vr.FullAt)
		}
	}
	// Over MCP: the default answer is an hour at one minute, within the budget.
	res, out, text, structured := callMetrics(t, e.client(t, e.token), map[string]any{"target": "web-1"})
	if res.IsError || out.Step != "1m" || out.Since != "1h" || len(series(t, out, "cpu").Points) < 59 {
		t.Fatalf("default answer: error %v, step %q since %q, %d cpu points; want an hour of minutes", res.IsError, out.Step, out.Since, len(series(t, out, "cpu").Points))
	}
	if text > 16_000 || structured > 16_000 {
		t.Errorf("default answer is %d characters of text and %d structured; want at most 16,000 each", text, structured)
	}
	t.Logf("default answer: %d characters of text, %d structured", text, structured)
}

// TestGetMetricsFitsTheBudget: a server with 32 disks and a full week of
// history answers within 16,000 characters by default and 48,000 with
// arguments, in both forms, each series at most 120 buckets; the disks'
// series left out are named, with their trends kept.
func TestGetMetricsFitsTheBudget(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	now := time.Now()
	disks := map[string]float64{}
	metrics := []string{"cpu", "memory", "load"}
	for i := range 32 {
		m := fmt.Sprintf("/srv/volume-with-a-long-name-%02d", i)
		disks[m] = float64(40 + i)
		metrics = append(metrics, "disk:"+m)
	}
	connectWithDisks(e.fleet, "db-1", 50, 50, disks)
	fillHistory(t, e.st, "db-1", now, 7*24*time.Hour, metrics, func(m string, at time.Time) float64 {
		return 40 + 30*math.Sin(float64(at.Unix())/3600) // noisy enough that no value repeats
	})
	cs := e.client(t, e.token)
	for _, args := range []map[string]any{
		{"target": "db-1"},
		{"target": "db-1", "since": "7d"},
		{"target": "db-1", "since": "1d"},
		{"target": "db-1", "since": "90m"},
		{"target": "db-1", "since": "7d", "metrics": metrics},
		{"target": "db-1", "since": "2h", "metrics": []string{"cpu", "disk:/srv/volume-with-a-long-name-07"}},
	} {
		res, out, text, structured := callMetrics(t, cs, args)
		if res.IsError {
			t.Fatalf("%v: %v", args, res.Content[0].(*mcp.TextContent).Text)
		}
		limit := 48_000
		if len(args) == 1 {
			limit = 16_000
		}
		if text > limit || structured > limit {
			t.Errorf("%v: %d characters of text and %d structured; want at most %d each", args, text, structured, limit)
		}
		for _, s := range out.Series {
			if len(s.Points) > fleetview.MaxBuckets || len(s.Points) == 0 {
				t.Errorf("%v: %s has %d points; want 1 to %d", args, s.Metric, len(s.Points), fleetview.MaxBuckets)
			}
		}
		if _, ok := args["metrics"]; !ok && len(out.Disks) != 32 {
			t.Errorf("%v: %d disks' trends; want all 32", args, len(out.Disks))
		}
		if _, ok := args["metrics"]; !ok && len(out.Series) < 35 && !strings.Contains(out.Note, "left out") {
			t.Errorf("%v: %d series for 35 metrics, and the note %q does not say which are left out", args, len(out.Series), out.Note)
		}
		t.Logf("%v: step %s, %d series, %d characters of text, %d structured", args, out.Step, len(out.Series), text, structured)
	}
}

// TestGetMetricsLongMounts: 32 disks whose mount points are a thousand
// characters long (the most an agent may send) still answer within the
// budget: their series, then their trends are left out, and the note
// counts them.
func TestGetMetricsLongMounts(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	now := time.Now()
	disks := map[string]float64{}
	metrics := []string{"cpu", "memory", "load"}
	for i := range 32 {
		m := fmt.Sprintf("/%s%02d", strings.Repeat("m", 1000), i)
		disks[m] = float64(i)
		metrics = append(metrics, "disk:"+m)
	}
	connectWithDisks(e.fleet, "web-1", 10, 10, disks)
	fillHistory(t, e.st, "web-1", now, 20*time.Minute, metrics, func(string, time.Time) float64 { return 10 })
	res, out, text, structured := callMetrics(t, e.client(t, e.token), map[string]any{"target": "web-1"})
	if res.IsError || text > 16_000 || structured > 16_000 {
		t.Fatalf("error %v; %d characters of text and %d structured; want an answer within 16,000", res.IsError, text, structured)
	}
	if len(out.Series) != 3 || !strings.Contains(out.Note, "the series of 32 disks are left out") || !strings.Contains(out.Note, "left out of disks too") {
		t.Errorf("%d series, %d disks, note %.200q…; want cpu, memory and load, and the note to count the disks left out", len(out.Series), len(out.Disks), out.Note)
	}
}

// TestGetMetricsRefusesBadInput: each mistake is an error that says what
// to do, without structured content.
func TestGetMetricsRefusesBadInput(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	connectWithDisks(e.fleet, "web-1", 10, 10, map[string]float64{"/var": 10})
	fillHistory(t, e.st, "web-1", time.Now(), time.Hour, []string{"cpu", "disk:/var"}, func(string, time.Time) float64 { return 10 })
	cs := e.client(t, e.token)
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"target": "web-2"}, `unknown server "web-2"; known servers: web-1`},
		{map[string]any{"target": "web-1", "metrics": []string{"cpu", "disk:/data"}}, `unknown metric "disk:/data" for web-1; its metrics: cpu, memory, load, disk:/var`},
		{map[string]any{"target": "web-1", "since": "30d"}, "since 30d is more than the coordinator keeps: 1d at one-minute and 7d at fifteen-minute resolution (metrics: in its config); ask for since up to 7d"},
		{map[string]any{"target": "web-1", "since": "yesterday"}, `since "yesterday" is not a duration: write 30m, 6h, 1d or 7d`},
		{map[string]any{"target": "web-1", "since": "10s"}, `shorter than a minute`},
	} {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_metrics", Arguments: c.args})
		if res == nil || !res.IsError || res.StructuredContent != nil || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, c.want) {
			t.Errorf("%v: got %+v; want an error saying %q", c.args, res, c.want)
		}
	}
}

// TestGetMetricsWithoutHistory: a server that has not sent a minute yet
// answers empty series and a note, not an error.
func TestGetMetricsWithoutHistory(t *testing.T) {
	e := newEnv(t, DefaultGuardConfig())
	e.fleet.Connect(&gridcityv1.Hello{Name: "new-1"})
	res, out, _, _ := callMetrics(t, e.client(t, e.token), map[string]any{"target": "new-1"})
	if res.IsError || len(out.Series) != 0 || len(out.Disks) != 0 || !strings.Contains(out.Note, "no metric history of new-1") {
		t.Fatalf("got error %v, %+v; want empty series and a note", res.IsError, out)
	}
}

// BenchmarkGetMetricsWeek is get_metrics' whole path over an in-memory
// MCP session for one server with a full week of history (cpu, memory,
// load and four disks) in the embedded store: the default hour, a day and
// the week.
func BenchmarkGetMetricsWeek(b *testing.B) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.DiscardHandler)
	fl, err := fleet.New(ctx, st, logger)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	disks := map[string]float64{"/": 40, "/var": 60, "/home": 20, "/srv": 80}
	metrics := []string{"cpu", "memory", "load", "disk:/", "disk:/var", "disk:/home", "disk:/srv"}
	fillHistory(b, st, "web-1", now, 7*24*time.Hour, metrics, func(m string, at time.Time) float64 { return 40 + 30*math.Sin(float64(at.Unix())/3600) })
	connectWithDisks(fl, "web-1", 20, 50, disks)
	s := NewServer(Deps{Deps: fleetview.Deps{Fleet: fl, Store: st, Logger: logger}, Store: st}, store.ScopeRead)
	ct, sst := mcp.NewInMemoryTransports()
	if _, err := s.Connect(ctx, sst, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	for _, since := range []string{"", "1d", "7d"} {
		args := map[string]any{"target": "web-1"}
		label := "default"
		if since != "" {
			args["since"], label = since, since
		}
		b.Run(label, func(b *testing.B) {
			b.ReportAllocs()
			var text, structured int
			for b.Loop() {
				text, structured, _ = answerSizes(b, cs, "get_metrics", args)
			}
			reportSizes(b, "get_metrics", text, structured, args)
		})
	}
}
