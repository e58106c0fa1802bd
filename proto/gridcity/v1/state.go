package gridcityv1

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// MergeState applies the update src onto the state dst: each section set
// in src replaces dst's whole (shared, not copied), the rest of dst stays.
// dst.Full is left as it is; collected_unix_ms follows src when src has one.
// The sections are walked by reflection, so a section added to the proto
// merges without touching this function.
func MergeState(dst, src *StateUpdate) {
	if dst == nil || src == nil {
		return
	}
	dr := dst.ProtoReflect()
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() != nil {
			dr.Set(fd, v)
		}
		return true
	})
	if ms := src.GetCollectedUnixMs(); ms != 0 {
		dst.CollectedUnixMs = ms
	}
}

// TopProcesses is how many processes each ranking of Processes holds.
const TopProcesses = 5

// ByCPU ranks the processes using CPU, the busiest first (ties by pid), at
// most TopProcesses; a process that used none is not in it.
func (p *Processes) ByCPU() []*Process {
	return rank(p.GetItems(), func(x *Process) float64 { return x.GetCpuPercent() })
}

// ByMemory ranks the processes by resident memory, the largest first (ties
// by pid), at most TopProcesses.
func (p *Processes) ByMemory() []*Process {
	return rank(p.GetItems(), func(x *Process) float64 { return float64(x.GetRssBytes()) })
}

func rank(items []*Process, key func(*Process) float64) []*Process {
	out := make([]*Process, 0, len(items))
	for _, x := range items {
		if key(x) > 0 {
			out = append(out, x)
		}
	}
	slices.SortStableFunc(out, func(a, b *Process) int {
		if c := cmp.Compare(key(b), key(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.GetPid(), b.GetPid())
	})
	return out[:min(len(out), TopProcesses)]
}
