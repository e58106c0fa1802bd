package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// replicaRows reads what failover and spread wrote (either path may be
// empty) and makes their rows, the spread's next to the single coordinator
// of fleets with as many agents.
func replicaRows(failoverPath, spreadPath string, fleets []agentsRun) ([]Row, error) {
	var rows []Row
	if failoverPath != "" {
		var r haFailover
		if err := readJSON(failoverPath, &r); err != nil {
			return nil, err
		}
		rows = append(rows, failoverRows(r)...)
	}
	if spreadPath != "" {
		var r haSpread
		if err := readJSON(spreadPath, &r); err != nil {
			return nil, err
		}
		var single *agentsRun
		for i := range fleets {
			if fleets[i].Agents == r.Agents {
				single = &fleets[i]
			}
		}
		rows = append(rows, spreadRows(r, single)...)
	}
	return rows, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// rssPerAgent is the KiB of resident memory a process holds per agent:
// the window's median RSS less the same process's with no agents, ÷ n.
func rssPerAgent(win, base procResult, n int) float64 {
	return (float64(win.RSS) - float64(base.RSS)) / float64(max(n, 1))
}

// cpuPer1000 is the CPU time per second (ms/s) a process spends per 1,000
// agents: over the window less with no agents, ÷ n × 1,000.
func cpuPer1000(win, base procResult, winSeconds, baseSeconds, n int) float64 {
	return (cpuMsPerS(win, winSeconds) - cpuMsPerS(base, baseSeconds)) / float64(max(n, 1)) * 1000
}

func cpuMsPerS(p procResult, seconds int) float64 {
	return float64(p.CPUNs) / 1e6 / float64(max(seconds, 1))
}

// failoverRows are the seconds from killing the replica that held every
// agent's stream to each agent's stream up again on a survivor.
func failoverRows(r haFailover) []Row {
	size := fmtCount(r.Agents) + " agents"
	var on []string
	for addr, n := range r.OnSurvivors {
		on = append(on, fmt.Sprintf("%s %d", addr, n))
	}
	notes := fmt.Sprintf("%d replicas of `gridcity serve` on one PostgreSQL (Debian's, on loopback, default durability); %s simulated agents enrolled through the first "+
		"(%.1f s) and streaming to it, each told of every replica by its stream as gridcity-agent is. The first replica was killed with SIGKILL; each agent then "+
		"reconnects as gridcity-agent does: after the reconnect backoff (1 s doubling, equal jitter, so 0.5–1 s for the first try) to the next coordinator it knows. "+
		"Measured per agent from the kill to its settings arriving on a survivor; %d streams ended or failed in all after the kill; the survivors then held %s. "+
		"Range %.2f–%.2f s. The machine after: %s. No peer: the single coordinator has no survivor to move to.",
		r.Replicas, fmtCount(r.Agents), r.EnrollSeconds, r.Reconnects, strings.Join(on, ", "),
		minF(r.Seconds), maxF(r.Seconds), orUnknown(r.MachineNote))
	row := func(label string, v float64) Row {
		return Row{Name: fmt.Sprintf("failover of %s, replica killed, %s", size, label), Unit: "s", Value: round3(v), Notes: notes}
	}
	return []Row{
		row("median", pct(r.Seconds, 50)),
		row("p95", pct(r.Seconds, 95)),
		row("all back (max)", maxF(r.Seconds)),
	}
}

// spreadRows are each replica's memory and CPU per agent with the fleet
// spread over the replicas, next to the single coordinator on SQLite with
// the same number of agents in the same run, when there is one.
func spreadRows(r haSpread, single *agentsRun) []Row {
	size := fmt.Sprintf("%s agents over %d replicas", fmtCount(r.Agents), len(r.Replicas))
	var rows []Row
	var rssSingle, cpuSingle float64
	peer := ""
	if single != nil {
		peer = fmt.Sprintf("one coordinator on SQLite, %s agents (this run)", fmtCount(single.Agents))
		rssSingle = rssPerAgent(single.Coordinator, single.Baseline, single.Agents)
		cpuSingle = cpuPer1000(single.Coordinator, single.Baseline, single.Seconds, single.BaselineSeconds, single.Agents)
	}
	listed := fmt.Sprint(r.ListedOnline)
	common := fmt.Sprintf("%s simulated agents (as in the rows of one coordinator: the same state, a heartbeat every %.0f s and a change every %.0f s) enrolled round the %d replicas "+
		"of `gridcity serve` on one PostgreSQL (Debian's, on loopback) and streaming to the one they enrolled through, %d started a second; after %d s settled, "+
		"each replica's VmRSS sampled every second and its CPU summed over the same %d s window, each less the same process's over %d s before any agent enrolled. "+
		"Every replica then listed every agent online with list_servers (online counts %s): the store carries the fleet view. "+
		"In the window the machine's CPUs were %.0f%% busy and the driver (every agent) used %.1f%% of one; the machine: %s.",
		fmtCount(r.Agents), r.HeartbeatSeconds, r.ChangeSeconds, len(r.Replicas), r.RampRate, r.SettleSeconds, r.Seconds, r.BaselineSeconds, listed,
		r.MachineBusy, float64(r.Driver.CPUNs)/1e7/float64(max(r.Seconds, 1)), orUnknown(r.MachineNote))
	for k, rep := range r.Replicas {
		name := fmt.Sprintf("replica %d of %d", k+1, len(r.Replicas))
		if k == 1 {
			common = "Measured as in replica 1's row, over the same window."
		}
		rss := rssPerAgent(rep.Window, rep.Baseline, rep.Agents)
		cpu := cpuPer1000(rep.Window, rep.Baseline, r.Seconds, r.BaselineSeconds, rep.Agents)
		rssNotes := fmt.Sprintf("%s: %d agents; median VmRSS %.1f MiB (%.1f MiB with none), ÷ its agents; %d open files. %s",
			name, rep.Agents, float64(rep.Window.RSS)/1024, float64(rep.Baseline.RSS)/1024, rep.FDs, common)
		cpuNotes := fmt.Sprintf("%s: %d agents; %.1f%% of one CPU in all. %s", name, rep.Agents, cpuMsPerS(rep.Window, r.Seconds)/10, common)
		if single == nil {
			rows = append(rows,
				Row{Name: fmt.Sprintf("%s RSS per agent, %s", name, size), Unit: "KiB", Value: round3(rss), Notes: rssNotes + " No single coordinator was measured with as many agents in this run."},
				Row{Name: fmt.Sprintf("%s CPU per 1,000 agents, %s", name, size), Unit: "ms/s", Value: round3(cpu), Notes: cpuNotes + " No single coordinator was measured with as many agents in this run."})
			continue
		}
		rows = append(rows,
			compare(fmt.Sprintf("%s RSS per agent, %s", name, size), "KiB", rss, rssSingle, peer, 0, rssNotes),
			compare(fmt.Sprintf("%s CPU per 1,000 agents, %s", name, size), "ms/s", cpu, cpuSingle, peer, 0, cpuNotes))
	}
	return rows
}
