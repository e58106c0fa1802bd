package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// The two resolutions of the metric history: buckets of one minute, kept
// for MetricRetention.Raw, rolled up into buckets of a quarter hour, kept
// for MetricRetention.Rollup.
const (
	MetricStep       = time.Minute
	MetricRollupStep = 15 * time.Minute
)

// MetricRetention is how long each resolution of the history is kept.
type MetricRetention struct {
	Raw    time.Duration // one-minute buckets
	Rollup time.Duration // quarter-hour buckets
}

// DefaultMetricRetention keeps a day at one minute and a week at a
// quarter hour: per server and metric 1,440 + 672 rows. The coordinator's
// config (metrics: {raw, rollup}) sets it.
var DefaultMetricRetention = MetricRetention{Raw: 24 * time.Hour, Rollup: 7 * 24 * time.Hour}

// MetricPoint is one bucket of one metric of one server: the N samples
// taken in [At, At+step), by their least, sum and greatest value.
type MetricPoint struct {
	Server string
	// Metric is cpu, memory, load or disk:MOUNT.
	Metric        string
	At            time.Time
	N             int
	Min, Sum, Max float64
}

// Add counts one more sample into the bucket.
func (p *MetricPoint) Add(v float64) {
	if p.N == 0 {
		p.Min, p.Max = v, v
	}
	p.N++
	p.Sum += v
	p.Min, p.Max = min(p.Min, v), max(p.Max, v)
}

// Merge counts another bucket's samples into this one.
func (p *MetricPoint) Merge(o MetricPoint) {
	if o.N == 0 {
		return
	}
	if p.N == 0 {
		p.Min, p.Max = o.Min, o.Max
	}
	p.N += o.N
	p.Sum += o.Sum
	p.Min, p.Max = min(p.Min, o.Min), max(p.Max, o.Max)
}

// Avg is the mean of the bucket's samples.
func (p MetricPoint) Avg() float64 { return p.Sum / float64(max(p.N, 1)) }

// Check says whether the bucket can be kept: named, with samples, every
// value a real number. SQLite cannot hold NaN in a NOT NULL column (it
// stores NULL), and no answer can carry NaN or ±Inf as JSON.
func (p MetricPoint) Check() error {
	if p.Metric == "" || p.N <= 0 {
		return fmt.Errorf("metric bucket of %s: %q with %d samples: want a metric name and samples", p.Server, p.Metric, p.N)
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"min", p.Min}, {"sum", p.Sum}, {"max", p.Max}} {
		if math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			return fmt.Errorf("metric sample of %s: %s %s = %v is not a number: %w", p.Server, p.Metric, v.name, v.v, ErrNotFinite)
		}
	}
	return nil
}

// bucket is the start of the bucket of size step that holds t, in Unix
// milliseconds.
func bucket(t time.Time, step time.Duration) int64 {
	ms := t.UnixMilli()
	return ms - ms%step.Milliseconds()
}

func (s *SQLite) AppendMetrics(ctx context.Context, points []MetricPoint, now time.Time, keep MetricRetention) error {
	if len(points) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// A bucket written twice (a restart within its minute, a rollup fed
	// by fifteen minutes) merges with what is there.
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO metric_buckets(server, step, at, metric, n, vmin, vsum, vmax) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT(server, step, at, metric) DO UPDATE SET n = n + excluded.n,
			vmin = min(vmin, excluded.vmin), vsum = vsum + excluded.vsum, vmax = max(vmax, excluded.vmax)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	var skipped []error
	for _, p := range points {
		if err := p.Check(); err != nil {
			skipped = append(skipped, err)
			continue
		}
		for _, step := range []time.Duration{MetricStep, MetricRollupStep} {
			if _, err := stmt.ExecContext(ctx, p.Server, int64(step/time.Second), bucket(p.At, step), p.Metric, p.N, p.Min, p.Sum, p.Max); err != nil {
				return fmt.Errorf("append metric %s of %q: %w", p.Metric, p.Server, err)
			}
		}
	}
	// By age, for every server at once (the index on step and at finds
	// them): a server that left stops holding rows after the retention.
	for _, r := range []struct {
		step time.Duration
		keep time.Duration
	}{{MetricStep, keep.Raw}, {MetricRollupStep, keep.Rollup}} {
		if _, err := tx.ExecContext(ctx, `DELETE FROM metric_buckets WHERE step = ? AND at < ?`,
			int64(r.step/time.Second), bucket(now.Add(-r.keep), r.step)); err != nil {
			return fmt.Errorf("prune metric history older than %s: %w", r.keep, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return errors.Join(skipped...)
}

// historyStep checks a MetricHistory call's step and every, and returns
// the size of the buckets to merge into.
func historyStep(step, every time.Duration) (time.Duration, error) {
	if step != MetricStep && step != MetricRollupStep {
		return 0, fmt.Errorf("metric history has steps of %s and %s, not %s", MetricStep, MetricRollupStep, step)
	}
	if every <= 0 {
		every = step
	}
	if every%step != 0 {
		return 0, fmt.Errorf("metric history of step %s cannot be merged into buckets of %s: not a whole number of steps", step, every)
	}
	return every, nil
}

func (s *SQLite) MetricHistory(ctx context.Context, server string, step time.Duration, since time.Time, every time.Duration) ([]MetricPoint, error) {
	every, err := historyStep(step, every)
	if err != nil {
		return nil, err
	}
	// Merged in SQL: a week of quarter hours is read as a few hundred
	// rows instead of thousands.
	e := every.Milliseconds()
	rows, err := s.db.QueryContext(ctx, `SELECT at / ? * ? AS b, metric, sum(n), min(vmin), sum(vsum), max(vmax) FROM metric_buckets
		WHERE server = ? AND step = ? AND at >= ? GROUP BY b, metric ORDER BY b, metric`, e, e, server, int64(step/time.Second), since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read metric history of %q: %w", server, err)
	}
	defer rows.Close()
	rs, err := collect(rows, scanMetric)
	return metricPoints(server, rs), err
}
