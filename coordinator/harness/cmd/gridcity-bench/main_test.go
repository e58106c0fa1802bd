package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTicksIn(t *testing.T) {
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The window the driver picks: half a fast tick after a medium tick.
	start := origin.Add(30*time.Second + 2500*time.Millisecond)
	end := start.Add(90 * time.Second)
	for _, c := range []struct{ every, want int }{{5, 18}, {30, 3}, {300, 0}, {0, 0}} {
		if got := ticksIn(origin, start, end, c.every); got != c.want {
			t.Errorf("every %d s: %d ticks, want %d", c.every, got, c.want)
		}
	}
	// A tick on the opening edge counts, one on the closing edge does not.
	if got := ticksIn(origin, origin.Add(5*time.Second), origin.Add(10*time.Second), 5); got != 1 {
		t.Errorf("edges: %d ticks, want 1", got)
	}
}

func TestMedian(t *testing.T) {
	if got := medianU([]uint64{5, 1, 3}); got != 3 {
		t.Errorf("odd: %d", got)
	}
	if got := medianU([]uint64{4, 1, 3, 2}); got != 2 {
		t.Errorf("even: %d", got)
	}
	if got := medianF(nil); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkCollectFast-2     	   12345	     69900 ns/op	    1776 B/op	      30 allocs/op
BenchmarkCollectFast-2     	   12000	     71000 ns/op	    1776 B/op	      30 allocs/op
BenchmarkCollectMedium     	     463	   8020202 ns/op	    9247 B/op	     150 allocs/op
PASS
`
	m, order := parseBench(strings.NewReader(out))
	if strings.Join(order, ",") != "CollectFast,CollectMedium" {
		t.Fatalf("order %v", order)
	}
	if got := m["CollectFast"]["ns/op"]; len(got) != 2 || got[1] != 71000 {
		t.Errorf("fast ns/op %v", got)
	}
	if got := m["CollectMedium"]["allocs/op"]; len(got) != 1 || got[0] != 150 {
		t.Errorf("medium allocs/op %v", got)
	}
}

// An answer-size benchmark's forms become rows beside the size before the
// budgets, where one was recorded, with the budget they are held to.
func TestSizeRows(t *testing.T) {
	out := `BenchmarkToolAnswerSizes/incident_report-2   3   29668605 ns/op   15745 structured-chars   15745 text-chars   16000 budget-chars
BenchmarkToolAnswerSizes/get_topology_target-2   3   7432020 ns/op   49000 structured-chars   47717 text-chars   48000 budget-chars
`
	m, order := parseBench(strings.NewReader(out))
	var rows []Row
	for _, name := range order {
		rows = append(rows, sizeRows(name, m[name], "go test")...)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Name != "answer size ToolAnswerSizes/incident_report (text)" || r.Value != 15745 || r.PeerValue == nil || *r.PeerValue != 920572 ||
		r.aim != "within 16000" || !strings.Contains(r.Notes, "recorded") {
		t.Errorf("incident_report text: %+v", r)
	}
	if r := rows[3]; r.Name != "answer size ToolAnswerSizes/get_topology_target (structured)" || r.PeerValue != nil || r.aim != "over the budget of 48000" {
		t.Errorf("get_topology target structured: %+v", r)
	}
}

// The /proc readers work on this very process.
func TestProcSelf(t *testing.T) {
	pid := os.Getpid()
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skip("no /proc/self/smaps_rollup here")
	}
	m, err := readMem(pid)
	if err != nil || m.RSS == 0 || m.Pss == 0 {
		t.Fatalf("readMem: %+v, %v", m, err)
	}
	st, err := readStat(pid)
	if err != nil || st.State == "" || st.Start == 0 {
		t.Fatalf("readStat: %+v, %v", st, err)
	}
	if err := alive(pid); err != nil {
		t.Fatal(err)
	}
	cm, err := newCPUMeter(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged this process 60 ms of CPU, however
	// long a loaded machine takes to give it that: wall time says nothing
	// about how much CPU a process got.
	spent := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for start := spent(); spent()-start < 60*time.Millisecond; {
	}
	if err := cm.update(); err != nil {
		t.Fatal(err)
	}
	// /proc counts in clock ticks (10 ms), so allow for the rounding.
	if ns := cm.ns(); ns < uint64(30*time.Millisecond) {
		t.Errorf("60 ms of CPU spent spinning counted as %d ns", ns)
	}
	if busy, total, err := machineTicks(); err != nil || total == 0 || busy > total {
		t.Errorf("machineTicks: %d of %d, %v", busy, total, err)
	}
	if n := machineNote(); !strings.Contains(n, "load average") {
		t.Errorf("machineNote: %q", n)
	}
	mapped, resident, err := exeResident(pid)
	if err != nil || mapped == 0 || resident == 0 || resident > mapped {
		t.Errorf("exeResident: %d of %d KiB, %v", resident, mapped, err)
	}
}

func TestAimVerdict(t *testing.T) {
	if r := compare("x", "MiB", 12, 20, "peer", 0.6, "n"); r.aim != "aim met (≤ 0.6×)" || !strings.HasPrefix(r.Notes, "aim met (≤ 0.6×). ") {
		t.Errorf("met: %q, %q", r.aim, r.Notes)
	}
	if r := compare("x", "MiB", 13, 20, "peer", 0.6, ""); r.aim != "aim missed (≤ 0.6×)" {
		t.Errorf("missed: %q", r.aim)
	}
	if r := compare("x", "MiB", 13, 20, "peer", 0, "n"); r.aim != "" || r.Notes != "n" || r.Ratio == nil || *r.Ratio != 0.65 {
		t.Errorf("no aim: %+v", r)
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
	for _, c := range []struct{ p, want float64 }{{90, 9}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := percentile(v, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := pct(v, 50); got != 5.5 {
		t.Errorf("median %v", got)
	}
	if percentile(nil, 90) != 0 {
		t.Error("empty")
	}
}

func TestLatencyRows(t *testing.T) {
	lat := latencyRun{N: 3, Warmup: 1, SSHVersion: "OpenSSH_9.2p1 Debian-2+deb12u10", RunAs: "root", Shell: "/bin/bash",
		Commands: []commandLatencies{{Command: "true", Gridcity: []float64{10, 12, 30}, SSHFresh: []float64{200, 250, 300}, SSHMux: []float64{10, 11, 12},
			Approve: []float64{2, 2, 2}, AgentRunMs: []float64{1, 1, 1}, Stages: map[string][]float64{stageNames[0]: {0.5, 0.5, 0.5}}}}}
	rows := latencyRows(lat)
	if len(rows) != 4 {
		t.Fatalf("%d rows; want median and p90 against each ssh", len(rows))
	}
	r := rows[0]
	if r.Name != "`true` approval → result, median" || r.Value != 12 || *r.PeerValue != 250 || *r.Ratio != 0.048 || r.Peer != "ssh localhost, new connection (OpenSSH 9.2p1)" {
		t.Errorf("headline row %+v", r)
	}
	if !strings.Contains(r.Notes, "approve POST → approved row 0.5 ms") || !strings.Contains(r.Notes, "a person's time to decide") {
		t.Errorf("notes %q", r.Notes)
	}
	if rows[1].Value != 30 || *rows[1].PeerValue != 300 {
		t.Errorf("p90 row %+v", rows[1])
	}
	if rows[2].Peer != "ssh localhost, multiplexed (OpenSSH 9.2p1)" || *rows[2].PeerValue != 11 {
		t.Errorf("multiplexed row %+v", rows[2])
	}
	lat.N = 100
	if n := len(latencyRows(lat)); n != 6 {
		t.Errorf("%d rows with 100 samples; want p99 rows too", n)
	}
}
