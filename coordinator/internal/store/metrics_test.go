package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// minute is the one-minute bucket of metric m at t0 plus i minutes holding
// the samples vs.
func minute(server, m string, i int, vs ...float64) MetricPoint {
	p := MetricPoint{Server: server, Metric: m, At: t0.Add(time.Duration(i) * time.Minute)}
	for _, v := range vs {
		p.Add(v)
	}
	return p
}

// TestMetricBucketsMergeAtBothResolutions: each minute is kept as it is
// and merged into its quarter hour; a minute written twice (a restart in
// its middle) merges with itself.
func TestMetricBucketsMergeAtBothResolutions(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for i := range 30 {
			if err := s.AppendMetrics(ctx, []MetricPoint{minute("web-1", "cpu", i, float64(i), float64(i)+1), minute("web-1", "disk:/var", i, 50)}, t0.Add(time.Duration(i)*time.Minute), DefaultMetricRetention); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AppendMetrics(ctx, []MetricPoint{minute("web-1", "cpu", 29, 100)}, t0.Add(30*time.Minute), DefaultMetricRetention); err != nil {
			t.Fatal(err)
		}
		raw, err := s.MetricHistory(ctx, "web-1", MetricStep, t0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != 60 {
			t.Fatalf("got %d one-minute buckets; want 30 minutes × 2 metrics", len(raw))
		}
		last := raw[len(raw)-2] // ordered by time, then metric: cpu before disk:/var
		if last.Metric != "cpu" || !last.At.Equal(t0.Add(29*time.Minute)) || last.N != 3 || last.Min != 29 || last.Max != 100 || last.Avg() != (29+30+100)/3.0 {
			t.Errorf("minute 29 of cpu = %+v; want 3 samples 29, 30 and 100 merged", last)
		}
		roll, err := s.MetricHistory(ctx, "web-1", MetricRollupStep, t0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct {
			metric string
			at     time.Duration
			n      int
			lo, hi float64
			avg    float64
		}{
			{"cpu", 0, 30, 0, 15, 7.5},
			{"disk:/var", 0, 15, 50, 50, 50},
			{"cpu", 15 * time.Minute, 31, 15, 100, (675 + 100) / 31.0}, // minutes 15–29 hold i and i+1, minute 29 also 100
			{"disk:/var", 15 * time.Minute, 15, 50, 50, 50},
		}
		if len(roll) != len(want) {
			t.Fatalf("got %d quarter-hour buckets %+v; want %d", len(roll), roll, len(want))
		}
		for i, w := range want {
			g := roll[i]
			if g.Metric != w.metric || !g.At.Equal(t0.Add(w.at)) || g.N != w.n || g.Min != w.lo || g.Max != w.hi || math.Abs(g.Avg()-w.avg) > 1e-9 {
				t.Errorf("rollup %d = %+v (avg %v); want %+v", i, g, g.Avg(), w)
			}
		}
		if _, err := s.MetricHistory(ctx, "web-1", 5*time.Minute, t0, 0); err == nil {
			t.Error("MetricHistory with a step that is not kept: no error")
		}
		if _, err := s.MetricHistory(ctx, "web-1", MetricRollupStep, t0, 20*time.Minute); err == nil {
			t.Error("MetricHistory merging quarter hours into 20 minutes: no error")
		}
		// Merged into ten minutes as it is read.
		ten, err := s.MetricHistory(ctx, "web-1", MetricStep, t0.Add(5*time.Minute), 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ten {
			if p.Metric == "cpu" {
				got = append(got, fmt.Sprintf("%s %d %g %g %g", p.At.Format("15:04"), p.N, p.Min, p.Avg(), p.Max))
			}
		}
		// 00:00 holds minutes 5–9 only (since is 00:05); 00:20 also the 100.
		if want := []string{"00:00 10 5 7.5 10", "00:10 20 10 15 20", fmt.Sprintf("00:20 21 20 %g 100", 600/21.0)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("cpu in ten-minute buckets %q; want %q", got, want)
		}
	})
}

// TestMetricRetentionPrunesByAge runs a history for eight hours on an
// injected clock with a one-hour raw and three-hour rollup retention: each
// resolution holds what its retention says, never more than a bucket
// beyond it, and a server that stopped reporting is pruned as well.
func TestMetricRetentionPrunesByAge(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		keep := MetricRetention{Raw: time.Hour, Rollup: 3 * time.Hour}
		if err := s.AppendMetrics(ctx, []MetricPoint{minute("gone", "cpu", 0, 1)}, t0, keep); err != nil {
			t.Fatal(err)
		}
		for i := range 8 * 60 {
			now := t0.Add(time.Duration(i+1) * time.Minute)
			if err := s.AppendMetrics(ctx, []MetricPoint{minute("web-1", "cpu", i, 1), minute("web-1", "load", i, 2)}, now, keep); err != nil {
				t.Fatal(err)
			}
			for _, r := range []struct {
				step, keep time.Duration
			}{{MetricStep, keep.Raw}, {MetricRollupStep, keep.Rollup}} {
				got, err := s.MetricHistory(ctx, "web-1", r.step, time.Time{}, 0)
				if err != nil {
					t.Fatal(err)
				}
				oldest := got[0].At
				if edge := now.Add(-r.keep).Truncate(r.step); oldest.Before(edge) {
					t.Fatalf("at %s the %s history starts at %s; want nothing before %s", now, r.step, oldest, edge)
				}
				if most := 2 * (int(r.keep/r.step) + 1); len(got) > most {
					t.Fatalf("at %s the %s history holds %d buckets; want at most %d", now, r.step, len(got), most)
				}
				if now.Sub(t0) > r.keep+r.step && now.Sub(oldest) < r.keep {
					t.Fatalf("at %s the %s history starts at %s: less than %s kept", now, r.step, oldest, r.keep)
				}
			}
		}
		for _, step := range []time.Duration{MetricStep, MetricRollupStep} {
			if got, _ := s.MetricHistory(ctx, "gone", step, time.Time{}, 0); len(got) != 0 {
				t.Errorf("a server gone for eight hours still has %d buckets of %s", len(got), step)
			}
		}
	})
}

// TestAppendMetricsSkipsOnlyTheBadPoint: the store writes the finite
// buckets of a batch and names the one it did not.
func TestAppendMetricsSkipsOnlyTheBadPoint(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		err := s.AppendMetrics(ctx, []MetricPoint{minute("a", "cpu", 0, 1), minute("b", "load", 0, math.Inf(1)), minute("c", "memory", 0, 3)}, t0, DefaultMetricRetention)
		if !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), "metric sample of b: load min = +Inf") {
			t.Errorf("AppendMetrics = %v; want b's sample named", err)
		}
		for _, srv := range []string{"a", "c"} {
			if m, _ := s.MetricHistory(ctx, srv, MetricStep, t0, 0); len(m) != 1 {
				t.Errorf("%s has %d buckets; want 1", srv, len(m))
			}
		}
		if m, _ := s.MetricHistory(ctx, "b", MetricStep, t0, 0); len(m) != 0 {
			t.Errorf("b has %d buckets; want none", len(m))
		}
	})
}

// TestMetricSamplesBecomeBuckets opens a database of schema 6, whose
// history is one row per sample (a +Inf among them, as an unchecked
// coordinator wrote), and finds the samples in buckets of both
// resolutions after the upgrade, without the +Inf (that row's memory and
// load, which are numbers, are kept).
func TestMetricSamplesBecomeBuckets(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "gridcity.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_version (version INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:6] {
		if _, err := db.ExecContext(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
		db.ExecContext(ctx, `INSERT INTO schema_version(version) VALUES (?)`, i+1)
	}
	for i := range 20 { // every 30 s for 10 minutes from 00:10
		at := t0.Add(10*time.Minute + time.Duration(i)*30*time.Second).UnixMilli()
		if _, err := db.ExecContext(ctx, `INSERT INTO metrics(server, at, cpu, mem, load1) VALUES ('web-1', ?, ?, 40, 1)`, at, float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	db.ExecContext(ctx, `INSERT INTO metrics(server, at, cpu, mem, load1) VALUES ('web-1', ?, 9e999, 40, 1)`, t0.Add(10*time.Minute).UnixMilli())
	db.Close()

	s := open(t, dir)
	raw, err := s.MetricHistory(ctx, "web-1", MetricStep, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 30 {
		t.Fatalf("got %d one-minute buckets; want 10 minutes × cpu, load, memory", len(raw))
	}
	if p := raw[0]; p.Metric != "cpu" || !p.At.Equal(t0.Add(10*time.Minute)) || p.N != 2 || p.Min != 0 || p.Max != 1 {
		t.Errorf("first bucket %+v; want cpu at 00:10 from samples 0 and 1, the +Inf left out", p)
	}
	roll, _ := s.MetricHistory(ctx, "web-1", MetricRollupStep, t0, 0)
	got := map[string]string{}
	for _, p := range roll {
		got[p.Metric+"@"+p.At.Format("15:04")] = fmt.Sprintf("%d %g %g %g", p.N, p.Min, p.Avg(), p.Max)
	}
	want := map[string]string{
		"cpu@00:00": "10 0 4.5 9", "cpu@00:15": "10 10 14.5 19",
		"memory@00:00": "11 40 40 40", "memory@00:15": "10 40 40 40",
		"load@00:00": "11 1 1 1", "load@00:15": "10 1 1 1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("quarter hours %v; want %v", got, want)
	}
}
