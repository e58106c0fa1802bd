package main

import (
	"math/rand/v2"
	"strconv"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// newSimAgent makes server i of a fleet of n (see simfleet): its hello and
// full state.
func newSimAgent(i, n int, id simIdentity) *simAgent {
	a := &simAgent{i: i, id: id, rng: rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))}
	a.hello = simfleet.Hello(i, simVersion)
	a.hello.Name = id.name
	a.full = simfleet.State(i, n, a.rng, time.Now())
	a.full.Host.Hostname = id.name
	return a
}

// fullState is the state to open a stream with. Sections are never changed
// once made, so the message may share them.
func (a *simAgent) fullState() *gridcityv1.StateUpdate {
	f := a.full
	return &gridcityv1.StateUpdate{
		Full: true, CollectedUnixMs: time.Now().UnixMilli(),
		Host: f.Host, Cpu: f.Cpu, Memory: f.Memory, Disks: f.Disks, Listeners: f.Listeners, Connections: f.Connections,
		FailedUnits: f.FailedUnits, Containers: f.Containers, Updates: f.Updates, Gaps: f.Gaps, Logins: f.Logins, Defenses: f.Defenses,
	}
}

// nextChange moves CPU and memory a little, as the fast tier sees them
// every few seconds, and returns the change.
func (a *simAgent) nextChange() *gridcityv1.StateUpdate {
	old := a.full.Cpu
	busy := min(max(old.GetBusyPercent()+a.rng.NormFloat64()*4, 1), 99)
	cores := float64(old.GetCores())
	load1 := busy / 100 * cores * (0.8 + 0.4*a.rng.Float64())
	cpu := &gridcityv1.CPU{Cores: old.GetCores(), Model: old.GetModel(), BusyPercent: proto.Float64(round2(busy)), Load1: round2(load1),
		Load5: round2((old.GetLoad5()*4 + load1) / 5), Load15: round2((old.GetLoad15()*14 + load1) / 15)}
	total := a.full.Memory.GetTotalBytes()
	usedPct := min(max(a.full.Memory.GetUsedPercent()+a.rng.NormFloat64(), 10), 95)
	used := uint64(float64(total) * usedPct / 100)
	mem := &gridcityv1.Memory{TotalBytes: total, UsedBytes: used, AvailableBytes: total - used, UsedPercent: round2(usedPct)}
	a.full.Cpu, a.full.Memory = cpu, mem
	return &gridcityv1.StateUpdate{CollectedUnixMs: time.Now().UnixMilli(), Cpu: cpu, Memory: mem}
}

func round2(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 2, 64), 64)
	return f
}
