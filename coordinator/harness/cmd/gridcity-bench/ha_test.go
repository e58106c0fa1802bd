package main

import (
	"strings"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// A simulated agent fails over as gridcity-agent does: to the next
// coordinator after the one that failed, in its own turn of the address it
// started with and then the replicas it was told of, round to the first.
func TestSimAgentFailsOverInTurn(t *testing.T) {
	f := &simFleet{addr: "a:1"}
	a := &simAgent{addr: "b:1", id: simIdentity{name: "sim-7"}}
	if got := f.after(a, "b:1"); got != "b:1" {
		t.Fatalf("told of no replica, after b:1 comes %s; want b:1 again", got)
	}
	f.setReplicas([]string{"a:1", "b:1", "c:1"})
	order := gridcityv1.ReplicaOrder("b:1", []string{"a:1", "c:1"}, "sim-7")
	if order[0] != "b:1" || len(order) != 3 {
		t.Fatalf("sim-7's turn %v; want b:1 first, then a:1 and c:1", order)
	}
	for _, c := range []struct{ failed, next string }{{order[0], order[1]}, {order[1], order[2]}, {order[2], order[0]}, {"gone:1", "b:1"}} {
		if got := f.after(a, c.failed); got != c.next {
			t.Errorf("after %s failed the agent tries %s; want %s", c.failed, got, c.next)
		}
	}
	if n := f.knownReplicas(); n != 3 {
		t.Errorf("knownReplicas = %d; want 3", n)
	}
}

func TestFailoverRows(t *testing.T) {
	r := haFailover{Agents: 1000, Replicas: 3, OnSurvivors: map[string]int{"127.0.0.1:2": 1000}}
	for i := range 100 {
		r.Seconds = append(r.Seconds, 0.5+float64(i)/100)
	}
	rows := failoverRows(r)
	if len(rows) != 3 {
		t.Fatalf("%d rows; want median, p95 and max", len(rows))
	}
	if rows[0].Value >= rows[1].Value || rows[1].Value >= rows[2].Value || rows[2].Value != 1.49 || rows[0].Unit != "s" {
		t.Errorf("rows %+v; want median < p95 < max = 1.49 s", rows)
	}
	if !strings.Contains(rows[0].Name, "1,000 agents") || !strings.Contains(rows[0].Notes, "127.0.0.1:2 1000") {
		t.Errorf("row %+v", rows[0])
	}
}

// Each replica's figures are per agent it holds, next to the single
// coordinator measured with as many agents in the same run.
func TestSpreadRowsNextToTheSingleCoordinator(t *testing.T) {
	mib := func(m uint64) procResult { return procResult{RSS: m * 1024} }
	cpu := func(p procResult, ms uint64) procResult { p.CPUNs = ms * 1e6; return p }
	r := haSpread{Agents: 300, Seconds: 10, BaselineSeconds: 5, ListedOnline: []int{300, 300, 300}}
	for range 3 {
		r.Replicas = append(r.Replicas, haReplica{Agents: 100, Baseline: cpu(mib(20), 50), Window: cpu(mib(30), 1100)})
	}
	single := agentsRun{Agents: 300, Seconds: 10, BaselineSeconds: 5, Baseline: cpu(mib(20), 50), Coordinator: cpu(mib(60), 3100)}
	rows, err := replicaRows("", "", nil)
	if err != nil || len(rows) != 0 {
		t.Fatalf("no files: %v, %v", rows, err)
	}
	rows = spreadRows(r, &single)
	if len(rows) != 6 {
		t.Fatalf("%d rows; want RSS and CPU of each of 3 replicas", len(rows))
	}
	// 10 MiB over 100 agents: 102.4 KiB each; the single: 40 MiB over 300.
	if rss := rows[0]; rss.Value != 102 || rss.PeerValue == nil || *rss.PeerValue != 137 || rss.Ratio == nil || *rss.Ratio != 0.75 ||
		!strings.Contains(rss.Peer, "SQLite, 300 agents") {
		t.Errorf("RSS row %+v", rss)
	}
	// (110 − 10 ms/s) ÷ 100 × 1000 = 1000; the single (310 − 10) ÷ 300 × 1000 = 1000.
	if c := rows[1]; c.Value != 1000 || *c.PeerValue != 1000 || *c.Ratio != 1 || c.Unit != "ms/s" {
		t.Errorf("CPU row %+v", c)
	}
	for _, row := range spreadRows(r, nil) {
		if row.Peer != "" || row.Ratio != nil || !strings.Contains(row.Notes, "No single coordinator") {
			t.Errorf("without a single coordinator: %+v", row)
		}
	}
}
