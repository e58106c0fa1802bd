package fleetview

import (
	"testing"
	"time"
)

// TestParseSince reads Go durations and days.
func TestParseSince(t *testing.T) {
	for in, want := range map[string]time.Duration{"1h": time.Hour, "90m": 90 * time.Minute, "1d": 24 * time.Hour, "7d": 168 * time.Hour, "1d12h": 36 * time.Hour} {
		if got, err := parseSince(in); err != nil || got != want {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1w", "-1h", "1d-2h", "99999999999d"} {
		if _, err := parseSince(in); err == nil {
			t.Errorf("parseSince(%q): no error", in)
		}
	}
}
