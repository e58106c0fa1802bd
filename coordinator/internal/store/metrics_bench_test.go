package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppendMetricsFullHistory is one minute's buckets for a fleet of
// 200 servers (cpu, memory, load and two disks each) whose history is
// already full (a day of minutes and a week of quarter hours: 2,112
// buckets per metric): the steady state of a coordinator that has been up
// a week, pruning included.
func BenchmarkAppendMetricsFullHistory(b *testing.B) {
	const servers = 200
	metrics := []string{"cpu", "memory", "load", "disk:/", "disk:/var"}
	s := open(b, b.TempDir())
	ctx := context.Background()
	keep := DefaultMetricRetention
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// Filled in SQL: appending a week minute by minute would take longer
	// than the benchmark.
	for _, r := range []struct{ step, keep time.Duration }{{MetricStep, keep.Raw}, {MetricRollupStep, keep.Rollup}} {
		if _, err := s.w.ExecContext(ctx, `WITH RECURSIVE
			srv(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM srv WHERE i + 1 < ?),
			t(at) AS (SELECT ? UNION ALL SELECT at + ? FROM t WHERE at + ? < ?),
			m(name) AS (SELECT value FROM json_each(?))
			INSERT INTO metric_buckets(server, step, at, metric, n, vmin, vsum, vmax)
			SELECT printf('sim-%03d', i), ?, at, name, 12, 1, 24, 3 FROM srv, t, m`,
			servers, bucket(now.Add(-r.keep), r.step), r.step.Milliseconds(), r.step.Milliseconds(), now.UnixMilli(),
			`["cpu","memory","load","disk:/","disk:/var"]`, int64(r.step/time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		flush := make([]MetricPoint, 0, servers*len(metrics))
		for j := range servers {
			for _, m := range metrics {
				p := MetricPoint{Server: fmt.Sprintf("sim-%03d", j), Metric: m, At: now}
				p.Add(2)
				flush = append(flush, p)
			}
		}
		now = now.Add(time.Minute)
		if err := s.AppendMetrics(ctx, flush, now, keep); err != nil {
			b.Fatal(err)
		}
	}
}
