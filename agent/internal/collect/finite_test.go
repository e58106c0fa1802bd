package collect

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
)

// nanCollector is a collector whose arithmetic went wrong.
type nanCollector struct{ load float64 }

func (c nanCollector) update(_ context.Context, out *gridcityv1.StateUpdate, _ *notes) error {
	out.Cpu = &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(10), Load1: c.load}
	return nil
}

// TestNonFiniteSectionBecomesAGap: the coordinator refuses a state holding
// NaN or ±Inf, so such a section is left out at the source with a gap
// naming the value, and the next good sample brings it back.
func TestNonFiniteSectionBecomesAGap(t *testing.T) {
	c := &nanCollector{load: math.NaN()}
	s := &Set{logger: slog.New(slog.DiscardHandler), gaps: map[string][]*gridcityv1.Gap{},
		entries: []*entry{{name: "cpu", tier: TierFast, c: c, lock: make(chan struct{}, 1)}}}
	u := s.Collect(context.Background(), TierFast)
	if u.Cpu != nil {
		t.Errorf("cpu = %v; want it left out", u.Cpu)
	}
	if g := u.GetGaps().GetItems(); len(g) != 1 || g[0].GetCheck() != "cpu" || !strings.Contains(g[0].GetReason(), "not a number (cpu.load1 = NaN)") {
		t.Errorf("gaps = %v; want one for cpu naming load1 = NaN", g)
	}
	c.load = 0.5
	if u := s.Collect(context.Background(), TierFast); u.GetCpu().GetLoad1() != 0.5 || len(u.GetGaps().GetItems()) != 0 {
		t.Errorf("after a good sample: cpu %v, gaps %v; want cpu back and no gap", u.Cpu, u.Gaps)
	}
}

func TestNotFinite(t *testing.T) {
	for _, c := range []struct {
		u    *gridcityv1.StateUpdate
		want string
	}{
		{&gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Load1: 1}, Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{UsedPercent: 5}}}}, ""},
		{&gridcityv1.StateUpdate{Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{}, {UsedPercent: math.Inf(1)}}}}, "disks.items[1].usedPercent = +Inf"},
		{&gridcityv1.StateUpdate{Memory: &gridcityv1.Memory{UsedPercent: math.Inf(-1)}}, "memory.usedPercent = -Inf"},
	} {
		if got := notFinite(c.u.ProtoReflect()); got != c.want {
			t.Errorf("notFinite(%v) = %q; want %q", c.u, got, c.want)
		}
	}
	r := &gridcityv1.ProbeResult{Metrics: map[string]float64{"days_left": math.NaN()}}
	if got := notFinite(r.ProtoReflect()); got != "metrics[days_left] = NaN" {
		t.Errorf("notFinite(probe result) = %q", got)
	}
}
