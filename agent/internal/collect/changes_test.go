package collect

import (
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestChanges(t *testing.T) {
	host := &gridcityv1.HostInfo{Hostname: "db1", Os: "debian", UptimeSeconds: 100, BootUnix: 1733140800}
	hostLater := &gridcityv1.HostInfo{Hostname: "db1", Os: "debian", UptimeSeconds: 400, BootUnix: 1733140800}
	hostRenamed := &gridcityv1.HostInfo{Hostname: "db2", Os: "debian", UptimeSeconds: 400, BootUnix: 1733140800}
	cpu := &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(10)}
	cpuBusy := &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(90)}
	mem := &gridcityv1.Memory{TotalBytes: 100}
	gaps := &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "containers", Reason: "docker socket /var/run/docker.sock: connect: no such file or directory"}}}
	noGaps := &gridcityv1.Gaps{}

	tests := []struct {
		name       string
		prev, next *gridcityv1.StateUpdate
		want       *gridcityv1.StateUpdate
	}{
		{
			name: "nothing changed",
			prev: &gridcityv1.StateUpdate{Full: true, Cpu: cpu, Memory: mem, Gaps: gaps},
			next: &gridcityv1.StateUpdate{CollectedUnixMs: 2, Cpu: proto.CloneOf(cpu), Gaps: proto.CloneOf(gaps)},
			want: nil,
		},
		{
			name: "uptime alone is no change",
			prev: &gridcityv1.StateUpdate{Host: host, Gaps: noGaps},
			next: &gridcityv1.StateUpdate{Host: hostLater, Gaps: noGaps},
			want: nil,
		},
		{
			name: "a changed section travels with the whole gap list",
			prev: &gridcityv1.StateUpdate{Full: true, Cpu: cpu, Memory: mem, Gaps: gaps},
			next: &gridcityv1.StateUpdate{CollectedUnixMs: 2, Cpu: cpuBusy, Memory: mem, Gaps: gaps},
			want: &gridcityv1.StateUpdate{CollectedUnixMs: 2, Cpu: cpuBusy, Gaps: gaps},
		},
		{
			name: "host change carries its new uptime",
			prev: &gridcityv1.StateUpdate{Host: host, Gaps: noGaps},
			next: &gridcityv1.StateUpdate{Host: hostRenamed, Gaps: noGaps},
			want: &gridcityv1.StateUpdate{Host: hostRenamed, Gaps: noGaps},
		},
		{
			name: "a cleared gap is a change",
			prev: &gridcityv1.StateUpdate{Cpu: cpu, Gaps: gaps},
			next: &gridcityv1.StateUpdate{Cpu: cpu, Gaps: noGaps},
			want: &gridcityv1.StateUpdate{Gaps: noGaps},
		},
		{
			name: "a section new to prev is a change",
			prev: &gridcityv1.StateUpdate{Gaps: noGaps},
			next: &gridcityv1.StateUpdate{Memory: mem, Gaps: noGaps},
			want: &gridcityv1.StateUpdate{Memory: mem, Gaps: noGaps},
		},
		{
			name: "no prev: everything",
			prev: nil,
			next: &gridcityv1.StateUpdate{Full: true, Cpu: cpu, Gaps: noGaps},
			want: &gridcityv1.StateUpdate{Cpu: cpu, Gaps: noGaps},
		},
		{name: "no next", prev: &gridcityv1.StateUpdate{Cpu: cpu}, next: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Changes(tt.prev, tt.next)
			if !proto.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("got\n%s\nwant\n%s", prototext.Format(got), prototext.Format(tt.want))
			}
		})
	}
	if host.GetUptimeSeconds() != 100 || hostLater.GetUptimeSeconds() != 400 {
		t.Error("Changes modified its inputs")
	}
}

func TestMerge(t *testing.T) {
	cpu := &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(10)}
	cpuBusy := &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(90)}
	disks := &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/"}, {Mount: "/srv"}}}
	fewerDisks := &gridcityv1.Disks{Items: []*gridcityv1.Disk{{Mount: "/"}}}
	gaps := &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "updates", Reason: "x"}}}

	state := &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 1, Cpu: cpu, Disks: disks, Gaps: gaps}
	Merge(state, &gridcityv1.StateUpdate{CollectedUnixMs: 2, Cpu: cpuBusy, Disks: fewerDisks, Gaps: &gridcityv1.Gaps{}})
	want := &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 2, Cpu: cpuBusy, Disks: fewerDisks, Gaps: &gridcityv1.Gaps{}}
	if !proto.Equal(state, want) {
		t.Errorf("got\n%s\nwant\n%s", prototext.Format(state), prototext.Format(want))
	}

	// An update without a time or sections leaves the state alone.
	Merge(state, &gridcityv1.StateUpdate{})
	if !proto.Equal(state, want) {
		t.Errorf("empty update changed the state to\n%s", prototext.Format(state))
	}
	Merge(nil, want)
	Merge(state, nil)
}

// TestChangesMergeRoundTrip checks the use the agent makes of the pair:
// the changes between two states, merged onto the first, give the second.
func TestChangesMergeRoundTrip(t *testing.T) {
	prev := &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 1,
		Cpu:  &gridcityv1.CPU{Cores: 2},
		Host: &gridcityv1.HostInfo{Hostname: "a", UptimeSeconds: 5},
		Gaps: &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "updates", Reason: "x"}}}}
	next := &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 2,
		Cpu:     &gridcityv1.CPU{Cores: 2, Load1: 1},
		Host:    &gridcityv1.HostInfo{Hostname: "a", UptimeSeconds: 9},
		Updates: &gridcityv1.Updates{Pending: 3},
		Gaps:    &gridcityv1.Gaps{}}
	state := proto.CloneOf(prev)
	Merge(state, Changes(prev, next))
	// Uptime alone does not travel, so the merged state keeps the old one.
	want := proto.CloneOf(next)
	want.Host.UptimeSeconds = 5
	if !proto.Equal(state, want) {
		t.Errorf("got\n%s\nwant\n%s", prototext.Format(state), prototext.Format(want))
	}
}
