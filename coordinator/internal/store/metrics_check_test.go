package store

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestAppendMetricsSkipsOnlyTheBadSample: the store writes the finite
// samples of a batch and names the one it did not.
func TestAppendMetricsSkipsOnlyTheBadSample(t *testing.T) {
	ctx := context.Background()
	st, err := OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.AppendMetrics(ctx, []MetricSample{{Server: "a", CPUPercent: 1}, {Server: "b", Load1: math.Inf(1)}, {Server: "c", MemoryPercent: 3}}, 10)
	if !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), "metric sample of b: load1 = +Inf") {
		t.Errorf("AppendMetrics = %v; want b's sample named", err)
	}
	for _, s := range []string{"a", "c"} {
		if m, _ := st.Metrics(ctx, s, 10); len(m) != 1 {
			t.Errorf("%s has %d samples; want 1", s, len(m))
		}
	}
}
