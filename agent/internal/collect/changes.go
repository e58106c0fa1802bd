package collect

import (
	"math"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// The sections are walked by reflection so that a section added to the
// proto is diffed and merged without touching this file.
var (
	stateFields = (&gridcityv1.StateUpdate{}).ProtoReflect().Descriptor().Fields()
	hostField   = stateFields.ByName("host")
	procsField  = stateFields.ByName("processes")
	gapsField   = stateFields.ByName("gaps")
)

// Changes returns an update holding the sections of next that differ from
// prev (proto.Equal per section), nil when none does. A section unset in
// next is not a change: it was not collected this time. HostInfo ignores
// uptime_seconds, which changes every second and follows from boot_unix;
// Processes counts only a meaningful change (see processesClose).
// When anything changed, the result carries next's whole gap list too,
// since a set Gaps always means the whole list. The result shares its
// sections with next.
func Changes(prev, next *gridcityv1.StateUpdate) *gridcityv1.StateUpdate {
	if next == nil {
		return nil
	}
	if prev == nil {
		prev = &gridcityv1.StateUpdate{}
	}
	pr, nr := prev.ProtoReflect(), next.ProtoReflect()
	out := &gridcityv1.StateUpdate{CollectedUnixMs: next.GetCollectedUnixMs()}
	or := out.ProtoReflect()
	changed := false
	nr.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		if pr.Has(fd) && sectionEqual(fd, pr.Get(fd).Message().Interface(), v.Message().Interface()) {
			return true
		}
		or.Set(fd, v)
		changed = true
		return true
	})
	if !changed {
		return nil
	}
	if nr.Has(gapsField) {
		or.Set(gapsField, nr.Get(gapsField))
	}
	return out
}

// sectionEqual compares one section of two updates.
func sectionEqual(fd protoreflect.FieldDescriptor, a, b proto.Message) bool {
	if fd == procsField {
		return processesClose(a.(*gridcityv1.Processes), b.(*gridcityv1.Processes))
	}
	if fd != hostField {
		return proto.Equal(a, b)
	}
	ha, hb := a.(*gridcityv1.HostInfo), b.(*gridcityv1.HostInfo)
	if ha.GetUptimeSeconds() == hb.GetUptimeSeconds() {
		return proto.Equal(ha, hb)
	}
	// Compare a copy with the uptime aligned; the inputs stay untouched.
	hc := proto.CloneOf(hb)
	hc.UptimeSeconds = ha.GetUptimeSeconds()
	return proto.Equal(ha, hc)
}

// Merge applies the update src onto the state dst; see
// gridcityv1.MergeState, which the coordinator uses too.
func Merge(dst, src *gridcityv1.StateUpdate) { gridcityv1.MergeState(dst, src) }

// Tolerances of processesClose: a CPU share moves by a few points between
// any two readings, and memory by a few pages.
const (
	cpuTolerance      = 5.0 // points of one core
	cpuToleranceShare = 0.25
	rssTolerance      = 16 << 20
	rssToleranceShare = 0.10
)

// processesClose tells whether the top processes of a and b say the same
// thing, so that they travel only when they do not: the same processes
// (by pid) with the same names, users and units, and CPU shares and
// memory within tolerance. A process listed on one side only is compared
// with the other side's threshold of entry (the least of a full ranking,
// else none): two processes trading the last place are no change, a
// process that rose or fell past the others is.
func processesClose(a, b *gridcityv1.Processes) bool {
	return oneWayClose(a, b) && oneWayClose(b, a)
}

func oneWayClose(a, b *gridcityv1.Processes) bool {
	cpuEntry, rssEntry := 0.0, 0.0
	if r := b.ByCPU(); len(r) == gridcityv1.TopProcesses {
		cpuEntry = r[len(r)-1].GetCpuPercent()
	}
	if r := b.ByMemory(); len(r) == gridcityv1.TopProcesses {
		rssEntry = float64(r[len(r)-1].GetRssBytes())
	}
	for _, p := range a.GetItems() {
		cpu, rss := cpuEntry, rssEntry
		if i := slices.IndexFunc(b.GetItems(), func(o *gridcityv1.Process) bool { return o.GetPid() == p.GetPid() }); i >= 0 {
			o := b.GetItems()[i]
			if o.GetName() != p.GetName() || o.GetUser() != p.GetUser() || o.GetUnit() != p.GetUnit() {
				return false
			}
			cpu, rss = o.GetCpuPercent(), float64(o.GetRssBytes())
		} else {
			// Not listed in b: at most its threshold there.
			cpu, rss = min(cpu, p.GetCpuPercent()), min(rss, float64(p.GetRssBytes()))
		}
		if !near(p.GetCpuPercent(), cpu, cpuTolerance, cpuToleranceShare) || !near(float64(p.GetRssBytes()), rss, rssTolerance, rssToleranceShare) {
			return false
		}
	}
	return true
}

// near tells whether x and y differ by less than abs or share of the larger.
func near(x, y, abs, share float64) bool {
	return math.Abs(x-y) < max(abs, share*max(x, y))
}
