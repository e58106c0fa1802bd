package collect

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCPUBusyNeedsTwoSamples: the first sample reports no busy share (the
// counters alone are the average since boot), with a gap; the second does.
func TestCPUBusyNeedsTwoSamples(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("loadavg", "0.50 0.40 0.30 1/100 42\n")
	write("stat", "cpu  900 0 100 9000 0 0 0 0 0 0\ncpu0 900 0 100 9000 0 0 0 0 0 0\n")
	s := New(Config{ProcRoot: dir}, nil)
	s.entries = slices.DeleteFunc(s.entries, func(e *entry) bool { return e.name != "cpu" })

	u := s.Collect(context.Background(), TierFast)
	if u.GetCpu() == nil || u.GetCpu().BusyPercent != nil || u.GetCpu().GetLoad1() != 0.5 || !strings.HasPrefix(gapText(u), "cpu:busy: not collected yet") {
		t.Fatalf("first sample: got cpu %v, gaps %q; want cores and load, no busy share, a cpu:busy gap", u.GetCpu(), gapText(u))
	}
	write("stat", "cpu  950 0 100 9050 0 0 0 0 0 0\ncpu0 950 0 100 9050 0 0 0 0 0 0\n")
	u = s.Collect(context.Background(), TierFast)
	if u.GetCpu().BusyPercent == nil || u.GetCpu().GetBusyPercent() != 50 || gapText(u) != "" {
		t.Fatalf("second sample: got cpu %v, gaps %q; want 50%% busy and no gap", u.GetCpu(), gapText(u))
	}
}
