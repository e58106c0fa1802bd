package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// noPeer is said of every row of the simulated fleet: no peer in this run
// holds agent streams or answers these tools.
const noPeer = "No peer: none of the programs measured here keeps a stream per server or answers these questions, so this is gridcity's figure alone."

// agentsRows are one fleet size's figures: the coordinator's memory and CPU
// per connected agent over the same process with none, the latency of
// list_servers and incident_report, and how fast the agents enrolled.
func agentsRows(r agentsRun) []Row {
	n := float64(max(r.Agents, 1))
	size := fmtCount(r.Agents) + " agents"
	c, b := r.Coordinator, r.Baseline
	mib := func(kib uint64) float64 { return float64(kib) / 1024 }
	perAgent := rssPerAgent(c, b, r.Agents)
	anonPerAgent := (float64(c.Anon) - float64(b.Anon)) / n
	secs := float64(max(r.Seconds, 1))
	winMsPerS, baseMsPerS := cpuMsPerS(c, r.Seconds), cpuMsPerS(b, r.BaselineSeconds)
	msgs := float64(r.Heartbeats + r.Changes)
	var perMsg float64
	if msgs > 0 {
		perMsg = (winMsPerS - baseMsPerS) * secs * 1000 / msgs
	}
	statMs := float64(c.StatTicks) * 1000 / float64(max(r.ClkTck, 1))

	lat := func(tool string, t toolLatency, p float64) Row {
		label := pctLabel(p)
		v := pct(t.Ms, p)
		var what string
		order := "one after another, after the calls of list_servers and incident_report"
		if tool == "list_servers" || tool == "incident_report" {
			order = "alternating with the other tool"
		}
		if tool == "list_servers" {
			what = fmt.Sprintf("Called without arguments, as an AI starts: the answer is the fleet at a glance (counts of all %s by status and district, "+
				"then compact rows, those needing attention first, within 16,000 characters). ", fmtCount(r.Agents))
		}
		notes := fmt.Sprintf("%s%s of %d calls at the MCP client (go-sdk, one session, Streamable HTTP), from the request to the decoded result, "+
			"made after the window, %s; range %.1f–%.1f ms; each response %s. The machine after the calls: %s. %s",
			what, label, len(t.Ms), order, minF(t.Ms), maxF(t.Ms), fmtBytes(t.Bytes), orUnknown(r.CallsMachineNote), noPeer)
		row := Row{Name: fmt.Sprintf("%s, %s, %s", tool, size, label), Unit: "ms", Value: round3(v), Notes: notes}
		if r.Agents >= aimFleet {
			limit := aimToolMedianMs
			if p == 95 {
				limit = aimToolP95Ms
			}
			row = withBefore(row, before[row.Name])
			row = within(row, limit, "ms")
		}
		return row
	}
	rows := []Row{
		{Name: "coordinator CPU per agent message, " + size, Unit: "µs", Value: round3(perMsg), Notes: fmt.Sprintf(
			"The coordinator's CPU time in the %d s window less its CPU with no agents, divided by the %d heartbeats and %d CPU/memory changes the agents sent (%.0f messages/s); "+
				"it includes answering each heartbeat, the writes to the store and the minute's metric history. %s",
			r.Seconds, r.Heartbeats, r.Changes, msgs/secs, noPeer)},
		{Name: "coordinator RSS per agent, " + size, Unit: "KiB", Value: round3(perAgent), Notes: fmt.Sprintf(
			"(median VmRSS over the %d s window with %s connected, %.1f MiB, − median VmRSS of the same process before any agent enrolled, %.1f MiB over %d s) ÷ %d; "+
				"largest sample %.1f MiB. Of it, anonymous memory (RssAnon: heap, stacks) %.1f KiB per agent. The coordinator then held %d open files and %d threads. "+
				"The driver holding all %d simulated agents used %.1f MiB itself. %s%s",
			r.Seconds, size, mib(c.RSS), mib(b.RSS), r.BaselineSeconds, r.Agents, mib(c.RSSMax), anonPerAgent, r.CoordinatorFDs, c.Threads, r.Agents, mib(r.Driver.RSS), windowEnds(r), noPeer)},
		{Name: "coordinator CPU per 1,000 agents, " + size, Unit: "ms/s", Value: round3(cpuPer1000(c, b, r.Seconds, r.BaselineSeconds, r.Agents)), Notes: fmt.Sprintf(
			"CPU time (all threads' schedstat) per second of the %d s window, less the %.2f ms/s of the same process with no agents, per 1,000 agents. "+
				"In all %.1f%% of one CPU for %s, which sent %d heartbeats and %d CPU/memory changes in the window (%.0f messages/s, %.0f µs of coordinator CPU each). "+
				"Cross-check with utime+stime: %.0f ms. The driver used %.1f%% of one CPU on the same machine; the machine's CPUs were %.0f%% busy. %s",
			r.Seconds, baseMsPerS, winMsPerS/10, size, r.Heartbeats, r.Changes, msgs/secs, perMsg, statMs,
			float64(r.Driver.CPUNs)/1e7/secs, r.MachineBusy, noPeer)},
		lat("list_servers", r.ListServers, 50),
		lat("list_servers", r.ListServers, 95),
		lat("incident_report", r.IncidentReport, 50),
		lat("incident_report", r.IncidentReport, 95),
		{Name: "enrollment, " + size, Unit: "agents/s", Value: round3(n / max(r.EnrollSeconds, 1e-3)), Notes: fmt.Sprintf(
			"%d agents enrolled in %.1f s with one reusable join line, %d at a time, each as gridcity-agent does it (the CA fetched by a handshake that fails on purpose and checked against the pin, "+
				"a new P-256 key and CSR, Enroll over TLS pinned to that CA); %d refusals of a busy coordinator were retried. %s",
			r.Agents, r.EnrollSeconds, r.EnrollParallel, r.EnrollRetries, noPeer)},
	}
	for _, t := range readTools {
		if l, ok := r.Tools[t.label]; ok && len(l.Ms) > 0 {
			rows = append(rows, lat(t.label, l, 50), lat(t.label, l, 95))
		}
	}
	if r.Agents >= aimFleet {
		rows[0] = within(withBefore(rows[0], before[rows[0].Name]), aimCPUPerMessageUs, "µs")
		rows[1] = within(withBefore(rows[1], before[rows[1].Name]), aimKiBPerAgent, "KiB")
	}
	return rows
}

// The aims of issue 19 for a fleet of aimFleet agents or more.
const (
	aimFleet           = 10000
	aimKiBPerAgent     = 64
	aimCPUPerMessageUs = 40
	aimToolMedianMs    = 20.0
	aimToolP95Ms       = 100.0
)

// before are the figures of make bench at e02c0f7 (bench/report.md of that
// commit), before the work on the coordinator's weight: recorded, not
// measured again.
var before = map[string]float64{
	"coordinator CPU per agent message, 10,000 agents": 165,
	"coordinator RSS per agent, 10,000 agents":         149,
	"list_servers, 10,000 agents, median":              339,
	"list_servers, 10,000 agents, p95":                 1440,
	"incident_report, 10,000 agents, median":           9.46,
	"incident_report, 10,000 agents, p95":              178,
}

// withBefore puts the recorded figure from before the work as r's peer.
func withBefore(r Row, v float64) Row {
	if v <= 0 {
		return r
	}
	r.Peer, r.PeerValue, r.Ratio = "before issue 19 (e02c0f7, recorded)", ptr(v), ptr(round3(r.Value/v))
	return r
}

// within sets an aim on r that its value be at most limit.
func within(r Row, limit float64, unit string) Row {
	verdict := "met"
	if r.Value > limit {
		verdict = "missed"
	}
	r.aim = fmt.Sprintf("aim %s (≤ %s %s)", verdict, fmtNum(limit), unit)
	r.Notes = r.aim + ". " + r.Notes
	return r
}

// windowEnds says how many streams ended during the window, if any did.
func windowEnds(r agentsRun) string {
	if r.ReconnectsInWindow == 0 {
		return ""
	}
	return fmt.Sprintf("%d of the %d streams ended during the window and reconnected (%s). ", r.ReconnectsInWindow, r.Agents, strings.Join(r.WindowEnds, "; "))
}

// agentsMethod says how the simulated fleets were run.
func agentsMethod(runs []agentsRun) string {
	var sizes []string
	for _, r := range runs {
		sizes = append(sizes, fmtCount(r.Agents))
	}
	r := runs[0]
	return fmt.Sprintf("Simulated fleets of %s agents: for each size a fresh `gridcity serve` on loopback with its own data directory, measured first with no agents for %d s, "+
		"then %s agents enrolled with one `gridcity join --reusable` line and connected from one driver process, one mTLS connection and one Connect stream each, "+
		"%d started a second so that their timers spread out as a fleet's would. Each agent sends its hello and a full state "+
		"(host with a private address, CPU, memory, 3–4 disks, about ten listeners, ten connections, updates, SSH logins and defences, about 2 KiB), "+
		"then a heartbeat every %.0f s and a CPU and memory change every %.0f s ±10 %%, and answers nothing. The servers come in districts of %d: "+
		"a PostgreSQL, a Redis and a RabbitMQ server and application servers that connect to them and to one another, so the coordinator discovers about four links per server. "+
		"Once every stream is up (the coordinator's /healthz counts them) and %d s have passed, the coordinator's memory is sampled every second and its CPU summed over a %d s window; "+
		"then list_servers (without arguments: the fleet at a glance) and incident_report are called %d times each; every list_servers answer is checked to count every agent online, "+
		"and afterwards every page of list_servers' rows is read once, untimed, to check that every agent is listed online with its state. "+
		"The driver runs on the same machine and its CPU competes with the coordinator's.",
		strings.Join(sizes, " and "), r.BaselineSeconds, strings.Join(sizes, " or "), r.RampRate, r.HeartbeatSeconds, r.ChangeSeconds, simfleet.Group,
		r.SettleSeconds, r.Seconds, len(r.ListServers.Ms))
}

// fmtCount writes 10000 as 10,000.
func fmtCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
