package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppendMetricsFullHistory is one flush's samples for a fleet of
// 200 servers whose history is already full (4,320 samples each, as after
// six hours at one sample per 5 s): the steady state of a coordinator that
// has been up a while.
func BenchmarkAppendMetricsFullHistory(b *testing.B) {
	const servers, keep = 200, 4320
	s := open(b, b.TempDir())
	ctx := context.Background()
	base := time.Unix(1_700_000_000, 0)
	batch := make([]MetricSample, 0, servers*keep/10)
	for i := range keep {
		for j := range servers {
			batch = append(batch, MetricSample{Server: fmt.Sprintf("sim-%03d", j), At: base.Add(time.Duration(i) * 5 * time.Second), CPUPercent: 1})
		}
		if len(batch) >= cap(batch)-servers || i == keep-1 {
			// Fill without pruning: keep larger than what is there.
			if err := s.AppendMetrics(ctx, batch, 1<<30); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	at := base.Add(keep * 5 * time.Second)
	b.ResetTimer()
	for b.Loop() {
		at = at.Add(5 * time.Second)
		flush := make([]MetricSample, servers)
		for j := range flush {
			flush[j] = MetricSample{Server: fmt.Sprintf("sim-%03d", j), At: at, CPUPercent: 2}
		}
		if err := s.AppendMetrics(ctx, flush, keep); err != nil {
			b.Fatal(err)
		}
	}
}
