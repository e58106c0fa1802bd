package link

import (
	"testing"
	"time"
)

func TestBackoffGrowsJitteredAndCapped(t *testing.T) {
	base, max := time.Second, time.Minute
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := Backoff(n, base, max)
			if d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %s; want within [%s, %s]", n, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("Backoff(%d) took only %d distinct values in 200 draws; want jitter", n, len(seen))
		}
	}
	if d := Backoff(1000, base, max); d < max/2 || d > max {
		t.Fatalf("Backoff(1000) = %s; want capped at %s", d, max)
	}
}
