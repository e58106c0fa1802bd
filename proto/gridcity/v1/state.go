package gridcityv1

import (
	"cmp"
	"slices"
)

// MergeState applies the update src onto the state dst: each section set
// in src replaces dst's whole (shared, not copied), the rest of dst stays.
// dst.Full is left as it is; collected_unix_ms follows src when src has one.
// The sections are named one by one (a reflective walk cost a fleet of
// 10,000 a third of list_servers' time); TestMergeStateEverySection fails
// when a section added to the proto is not named here.
func MergeState(dst, src *StateUpdate) {
	if dst == nil || src == nil {
		return
	}
	if src.Host != nil {
		dst.Host = src.Host
	}
	if src.Cpu != nil {
		dst.Cpu = src.Cpu
	}
	if src.Memory != nil {
		dst.Memory = src.Memory
	}
	if src.Disks != nil {
		dst.Disks = src.Disks
	}
	if src.Listeners != nil {
		dst.Listeners = src.Listeners
	}
	if src.Connections != nil {
		dst.Connections = src.Connections
	}
	if src.FailedUnits != nil {
		dst.FailedUnits = src.FailedUnits
	}
	if src.Containers != nil {
		dst.Containers = src.Containers
	}
	if src.Updates != nil {
		dst.Updates = src.Updates
	}
	if src.Gaps != nil {
		dst.Gaps = src.Gaps
	}
	if src.Logins != nil {
		dst.Logins = src.Logins
	}
	if src.Defenses != nil {
		dst.Defenses = src.Defenses
	}
	if src.Processes != nil {
		dst.Processes = src.Processes
	}
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
