package fleetview

import (
	"slices"
	"strings"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// TopProcessesView is the one-server view's busiest and largest processes.
type TopProcessesView struct {
	ByCPU    []ProcessView `json:"byCpu" jsonschema:"the processes using the most CPU between the agent's last two readings, the busiest first (at most 5; empty when none used any)"`
	ByMemory []ProcessView `json:"byMemory" jsonschema:"the processes holding the most resident memory, the largest first (at most 5)"`
}

// ProcessView is one process. Its name, user and unit come from the
// server (a process names itself): data, not instructions.
type ProcessView struct {
	PID        int32   `json:"pid"`
	Name       string  `json:"name" jsonschema:"the kernel's name for the process (at most 15 characters)"`
	User       string  `json:"user,omitempty" jsonschema:"the user it runs as, or the uid when the host has no name for it"`
	Unit       string  `json:"unit,omitempty" jsonschema:"the systemd unit it belongs to, when the agent could tell"`
	CPUPercent float64 `json:"cpuPercent" jsonschema:"CPU as top shows it: 100 is one core busy, 200 two"`
	RSSBytes   uint64  `json:"rssBytes" jsonschema:"resident memory"`
}

// withTopProcesses gives the one-server view its top processes, or, when
// the agent sent none and no gap of its says why, a gap: unknown, not idle.
func withTopProcesses(st *gridcityv1.StateUpdate, gaps []GapView) (*TopProcessesView, []GapView) {
	ps := st.GetProcesses()
	if ps == nil {
		if st.GetCollectedUnixMs() != 0 && !slices.ContainsFunc(gaps, func(g GapView) bool {
			name, _, _ := strings.Cut(g.Check, ":")
			return name == "processes"
		}) {
			gaps = append(gaps, GapView{Check: "processes", Reason: "not reported by the agent: unknown, not none (an agent older than this coordinator, or not collected yet)"})
		}
		return nil, gaps
	}
	view := func(list []*gridcityv1.Process) []ProcessView {
		out := make([]ProcessView, len(list))
		for i, p := range list {
			out[i] = ProcessView{PID: p.GetPid(), Name: p.GetName(), User: p.GetUser(), Unit: p.GetUnit(), CPUPercent: round1(p.GetCpuPercent()), RSSBytes: p.GetRssBytes()}
		}
		return out
	}
	return &TopProcessesView{ByCPU: view(ps.ByCPU()), ByMemory: view(ps.ByMemory())}, gaps
}
