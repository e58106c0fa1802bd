package statecheck

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// validNow is the coordinator's clock in these tests.
var validNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// goodState is a full state as a real agent sends it, every section set.
func goodState() *gridcityv1.StateUpdate {
	now := validNow.Unix()
	return &gridcityv1.StateUpdate{
		Full: true, CollectedUnixMs: validNow.UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: "web-1", Os: "debian", Kernel: "6.1", UptimeSeconds: 3600, BootUnix: now - 3600, Addresses: []string{"10.0.0.1"}},
		Cpu:  &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(12.5), Load1: 0.5, Load5: 0.4, Load15: 0.3, Model: "x"},
		Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 2 << 30, AvailableBytes: 6 << 30, UsedPercent: 25,
			SwapTotalBytes: 1 << 30, SwapUsedBytes: 0},
		Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{
			{Mount: "/", TotalBytes: 100 << 30, UsedBytes: 40 << 30, AvailableBytes: 55 << 30, UsedPercent: 42.1, InodesTotal: 1000, InodesUsed: 10, InodesUsedPercent: 1},
			{Mount: "/boot", TotalBytes: 1 << 30, UsedBytes: 1 << 30, UsedPercent: 100},
			{Mount: "/srv", TotalBytes: 10 << 30, UsedBytes: 1 << 30, AvailableBytes: 9 << 30, UsedPercent: 10},
		}},
		Listeners:   &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Proto: "tcp", Address: "0.0.0.0", Port: 22, Process: "sshd", Pid: 1}, {Proto: "udp", Port: 65535}}},
		Connections: &gridcityv1.Connections{Items: []*gridcityv1.Connection{{RemoteAddress: "10.0.0.2", RemotePort: 5432, Count: 3}}},
		FailedUnits: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "x.service", SinceUnix: now - 60}, {Name: "y.service"}}},
		Containers:  &gridcityv1.Containers{Items: []*gridcityv1.Container{{Id: "abc", Name: "app", CreatedUnix: now - 86400}}},
		Updates:     &gridcityv1.Updates{Pending: 129, Security: 3, Manager: "apt", CheckedUnix: now + 9*60}, // a clock 9 minutes fast is tolerated
		Gaps:        &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "docker", Reason: "no socket"}}},
		Logins: &gridcityv1.Logins{LogSources: []string{"journal"}, Sources: []*gridcityv1.AuthSource{
			{Address: "203.0.113.7", Failures: math.MaxUint32, InvalidUsers: 5, Users: []string{"root"}, FirstSeenUnix: now - 600, LastSeenUnix: now},
		}},
		Defenses: &gridcityv1.Defenses{Firewall: &gridcityv1.Firewall{Tools: []string{"nftables"}, Blocks: []*gridcityv1.Block{{Network: "203.0.113.7/32", By: "nftables"}}},
			Sshd: &gridcityv1.SSHConfig{PasswordAuthentication: "no"}},
		Processes: &gridcityv1.Processes{Items: []*gridcityv1.Process{
			{Pid: 1500, Name: "sh", User: "root", CpuPercent: 399.5, RssBytes: 2 << 20, Unit: "hog.service"},
			{Pid: 812, Name: "postgres", User: "postgres", RssBytes: 300 << 20},
		}},
	}
}

func TestValidStatePasses(t *testing.T) {
	for name, u := range map[string]*gridcityv1.StateUpdate{
		"full":  goodState(),
		"empty": {},
		"zeros are unknown, not wrong": {Cpu: &gridcityv1.CPU{}, Memory: &gridcityv1.Memory{}, Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{}}},
			FailedUnits: &gridcityv1.Units{Items: []*gridcityv1.Unit{{}}}, Updates: &gridcityv1.Updates{}, Host: &gridcityv1.HostInfo{}},
	} {
		if err := State(u, validNow); err != nil {
			t.Errorf("%s: State = %v; want nil", name, err)
		}
	}
}

// TestStateRefuses has a case for every class of value in every
// section: non-finite, out of its range, out of order with another field,
// in the future or absurdly old, too long, too many.
func TestStateRefuses(t *testing.T) {
	minus5 := uint64(math.MaxUint64 - 4) // -5 sent as an unsigned varint
	now := validNow.Unix()
	cases := []struct {
		name   string
		mutate func(u *gridcityv1.StateUpdate)
		want   string
	}{
		{"NaN busy", func(u *gridcityv1.StateUpdate) { u.Cpu.BusyPercent = proto.Float64(math.NaN()) }, "state.cpu.busyPercent = NaN: not a number"},
		{"+Inf load", func(u *gridcityv1.StateUpdate) { u.Cpu.Load1 = math.Inf(1) }, "state.cpu.load1 = +Inf: not a number"},
		{"-Inf load", func(u *gridcityv1.StateUpdate) { u.Cpu.Load15 = math.Inf(-1) }, "state.cpu.load15 = -Inf: not a number"},
		{"negative load", func(u *gridcityv1.StateUpdate) { u.Cpu.Load5 = -0.1 }, "state.cpu.load5 = -0.1: a load average cannot be negative"},
		{"insane load", func(u *gridcityv1.StateUpdate) { u.Cpu.Load5 = 1e300 }, "state.cpu.load5 = 1e+300: a load average above"},
		{"percent over 100", func(u *gridcityv1.StateUpdate) { u.Cpu.BusyPercent = proto.Float64(100.5) }, "state.cpu.busyPercent = 100.5: a percentage is between 0 and 100"},
		{"negative percent", func(u *gridcityv1.StateUpdate) { u.Memory.UsedPercent = -1 }, "state.memory.usedPercent = -1: a percentage"},
		{"cores", func(u *gridcityv1.StateUpdate) { u.Cpu.Cores = math.MaxUint32 }, "state.cpu.cores = 4294967295: a core count is at most"},
		{"negative size", func(u *gridcityv1.StateUpdate) { u.Disks.Items[2].UsedBytes = minus5 },
			"state.disks[2].usedBytes = 18446744073709551611 (-5 as a signed number): a size cannot be negative"},
		{"huge size", func(u *gridcityv1.StateUpdate) { u.Memory.SwapTotalBytes = 1<<60 + 1 }, "state.memory.swapTotalBytes = 1152921504606846977: larger than 1 EiB"},
		{"memory used over total", func(u *gridcityv1.StateUpdate) { u.Memory.UsedBytes = 9 << 30 }, "state.memory.usedBytes = 9663676416: more than totalBytes (8589934592)"},
		{"memory available over total", func(u *gridcityv1.StateUpdate) { u.Memory.AvailableBytes = 9 << 30 }, "state.memory.availableBytes"},
		{"swap used over total", func(u *gridcityv1.StateUpdate) { u.Memory.SwapUsedBytes = 2 << 30 }, "state.memory.swapUsedBytes = 2147483648: more than swapTotalBytes"},
		{"disk used over total", func(u *gridcityv1.StateUpdate) { u.Disks.Items[0].UsedBytes = 101 << 30 }, "state.disks[0].usedBytes"},
		{"disk available over total", func(u *gridcityv1.StateUpdate) { u.Disks.Items[1].AvailableBytes = 2 << 30 }, "state.disks[1].availableBytes"},
		{"inodes used over total", func(u *gridcityv1.StateUpdate) { u.Disks.Items[0].InodesUsed = 1001 }, "state.disks[0].inodesUsed = 1001: more than inodesTotal (1000)"},
		{"disk NaN percent", func(u *gridcityv1.StateUpdate) { u.Disks.Items[0].InodesUsedPercent = math.NaN() }, "state.disks[0].inodesUsedPercent = NaN"},
		{"port 0", func(u *gridcityv1.StateUpdate) { u.Listeners.Items[1].Port = 0 }, "state.listeners[1].port = 0: a port is between 1 and 65535"},
		{"port 70000", func(u *gridcityv1.StateUpdate) { u.Connections.Items[0].RemotePort = 70000 }, "state.connections[0].remotePort = 70000: a port"},
		{"negative pid", func(u *gridcityv1.StateUpdate) { u.Listeners.Items[0].Pid = -1 }, "state.listeners[0].pid = -1: a process id cannot be negative"},
		{"empty connection group", func(u *gridcityv1.StateUpdate) { u.Connections.Items[0].Count = 0 }, "state.connections[0].count = 0"},
		{"uptime", func(u *gridcityv1.StateUpdate) { u.Host.UptimeSeconds = minus5 }, "state.host.uptimeSeconds = 18446744073709551611 (-5 as a signed number)"},
		{"collected in the future", func(u *gridcityv1.StateUpdate) { u.CollectedUnixMs = validNow.Add(11 * time.Minute).UnixMilli() },
			"state.collectedUnixMs = " + itoa(validNow.Add(11*time.Minute).UnixMilli()) + ": more than 10m0s ahead of the coordinator's clock (2026-12-03T12:00:00Z)"},
		{"collected before 2000", func(u *gridcityv1.StateUpdate) { u.CollectedUnixMs = 1000 }, "state.collectedUnixMs = 1000: before 2000"},
		{"boot in the future", func(u *gridcityv1.StateUpdate) { u.Host.BootUnix = now + 3600 }, "state.host.bootUnix"},
		{"negative boot", func(u *gridcityv1.StateUpdate) { u.Host.BootUnix = -1 }, "state.host.bootUnix = -1: before 2000"},
		{"unit since far ahead", func(u *gridcityv1.StateUpdate) { u.FailedUnits.Items[1].SinceUnix = math.MaxInt64 }, "state.failedUnits[1].sinceUnix = 9223372036854775807: more than"},
		{"container created", func(u *gridcityv1.StateUpdate) { u.Containers.Items[0].CreatedUnix = math.MinInt64 }, "state.containers[0].createdUnix"},
		{"updates checked", func(u *gridcityv1.StateUpdate) { u.Updates.CheckedUnix = now + 11*60 }, "state.updates.checkedUnix"},
		{"login first seen", func(u *gridcityv1.StateUpdate) { u.Logins.Sources[0].FirstSeenUnix = math.MaxInt64 }, "state.logins.sources[0].firstSeenUnix"},
		{"login last success", func(u *gridcityv1.StateUpdate) { u.Logins.Sources[0].LastSuccessUnix = 5 }, "state.logins.sources[0].lastSuccessUnix = 5"},
		{"address", func(u *gridcityv1.StateUpdate) { u.Host.Addresses = append(u.Host.Addresses, "web") }, `state.host.addresses[1] = "web": not an IP address`},
		{"long string", func(u *gridcityv1.StateUpdate) { u.Disks.Items[1].Mount = strings.Repeat("m", maxString+1) }, "state.disks[1].mount = (1025 bytes): longer than 1024 bytes"},
		{"long list item", func(u *gridcityv1.StateUpdate) { u.Defenses.Sshd.Files = []string{strings.Repeat("f", maxString+1)} }, "state.defenses.sshd.files[0] = (1025 bytes)"},
		{"too many", func(u *gridcityv1.StateUpdate) {
			u.Gaps.Items = make([]*gridcityv1.Gap, MaxItems+1)
		}, "state.gaps has 4097 items; at most 4096"},
		{"process pid", func(u *gridcityv1.StateUpdate) { u.Processes.Items[1].Pid = -812 }, "state.processes[1].pid = -812: a process id cannot be negative"},
		{"process cpu NaN", func(u *gridcityv1.StateUpdate) { u.Processes.Items[0].CpuPercent = math.NaN() }, "state.processes[0].cpuPercent = NaN: not a number"},
		{"process cpu negative", func(u *gridcityv1.StateUpdate) { u.Processes.Items[0].CpuPercent = -1 }, "state.processes[0].cpuPercent = -1: a process's CPU share is between 0 and"},
		{"process rss negative", func(u *gridcityv1.StateUpdate) { u.Processes.Items[0].RssBytes = minus5 }, "state.processes[0].rssBytes = 18446744073709551611 (-5 as a signed number): a size cannot be negative"},
		{"process name too long", func(u *gridcityv1.StateUpdate) { u.Processes.Items[0].Name = strings.Repeat("n", maxString+1) }, "state.processes[0].name = (1025 bytes)"},
		{"too many processes", func(u *gridcityv1.StateUpdate) {
			u.Processes.Items = make([]*gridcityv1.Process, maxProcesses+1)
		}, "state.processes has 65 items; at most 64"},
		{"too many users", func(u *gridcityv1.StateUpdate) { u.Logins.Sources[0].Users = make([]string, maxUsers+1) }, "state.logins.sources[0].users has 65 items"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := goodState()
			c.mutate(u)
			err := State(u, validNow)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("State = %v; want an error containing %q", err, c.want)
			}
		})
	}
}

func itoa(n int64) string { return number{kind: 'i', i: n}.String() }

func TestProbeResult(t *testing.T) {
	good := func() *gridcityv1.ProbeResult {
		return &gridcityv1.ProbeResult{ProbeId: "db", ResourceId: "db", Status: "ok", LatencyUs: 1500, CheckedUnixMs: validNow.UnixMilli(),
			Metrics: map[string]float64{"status_code": 200, "days_left": -3}, TlsNotAfterUnix: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).Unix()}
	}
	if err := ProbeResult(good(), validNow); err != nil {
		t.Fatalf("good result refused: %v", err)
	}
	for _, c := range []struct {
		name   string
		mutate func(r *gridcityv1.ProbeResult)
		want   string
	}{
		{"NaN metric", func(r *gridcityv1.ProbeResult) { r.Metrics["days_left"] = math.NaN() }, `probeResult.metrics["days_left"] = NaN`},
		{"Inf metric", func(r *gridcityv1.ProbeResult) { r.Metrics["x"] = math.Inf(-1) }, `probeResult.metrics["x"] = -Inf`},
		{"negative latency", func(r *gridcityv1.ProbeResult) { r.LatencyUs = -1 }, "probeResult.latencyUs = -1: a latency in microseconds cannot be negative"},
		{"checked ahead", func(r *gridcityv1.ProbeResult) { r.CheckedUnixMs = validNow.Add(time.Hour).UnixMilli() }, "probeResult.checkedUnixMs"},
		{"certificate", func(r *gridcityv1.ProbeResult) { r.TlsNotAfterUnix = math.MaxInt64 }, "probeResult.tlsNotAfterUnix"},
	} {
		r := good()
		c.mutate(r)
		if err := ProbeResult(r, validNow); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ProbeResult = %v; want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestEveryNumericFieldHasARule walks the proto: a numeric field added to a
// state section (or a probe result) without a rule in its table fails here.
func TestEveryNumericFieldHasARule(t *testing.T) {
	tables := map[protoreflect.FullName][]string{
		"gridcity.v1.StateUpdate": stateTable.names(),
		"gridcity.v1.HostInfo":    hostTable.names(),
		"gridcity.v1.CPU":         cpuTable.names(),
		"gridcity.v1.Memory":      memoryTable.names(),
		"gridcity.v1.Disk":        diskTable.names(),
		"gridcity.v1.Listener":    listenerTable.names(),
		"gridcity.v1.Connection":  connectionTable.names(),
		"gridcity.v1.Unit":        unitTable.names(),
		"gridcity.v1.Container":   containerTable.names(),
		"gridcity.v1.Updates":     updatesTable.names(),
		"gridcity.v1.AuthSource":  authSourceTable.names(),
		"gridcity.v1.ProbeResult": probeResultTable.names(),
		"gridcity.v1.Process":     processTable.names(),
	}
	// Checked outside the tables, by ProbeResult.
	elsewhere := map[protoreflect.FullName]bool{"gridcity.v1.ProbeResult.metrics": true}
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			switch fd.Kind() {
			case protoreflect.MessageKind, protoreflect.GroupKind:
				if !fd.IsMap() {
					walk(fd.Message())
					continue
				}
				if elsewhere[fd.FullName()] {
					continue
				}
				t.Errorf("%s is a map; give its values a rule", fd.FullName())
			case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.StringKind, protoreflect.BytesKind:
			default:
				if !slices.Contains(tables[md.FullName()], fd.JSONName()) {
					t.Errorf("numeric field %s has no rule: add it to the table of %s in validate.go", fd.FullName(), md.Name())
				}
			}
		}
	}
	walk((&gridcityv1.StateUpdate{}).ProtoReflect().Descriptor())
	walk((&gridcityv1.ProbeResult{}).ProtoReflect().Descriptor())
	if len(seen) < 20 {
		t.Errorf("walked %d messages; the state has more", len(seen))
	}
}

// FuzzState: whatever bytes arrive, the validator does not panic,
// and what it accepts can be encoded as JSON (what every answer about the
// fleet does with it).
func FuzzState(f *testing.F) {
	for _, u := range []*gridcityv1.StateUpdate{goodState(), {Cpu: &gridcityv1.CPU{BusyPercent: proto.Float64(math.NaN())}}, {Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{{UsedPercent: math.Inf(1)}}}}} {
		b, err := proto.Marshal(u)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var u gridcityv1.StateUpdate
		if proto.Unmarshal(b, &u) != nil {
			return
		}
		if State(&u, validNow) != nil {
			return
		}
		if _, err := json.Marshal(&u); err != nil {
			t.Fatalf("accepted a state JSON cannot carry: %v", err)
		}
	})
}

func FuzzProbeResult(f *testing.F) {
	for _, r := range []*gridcityv1.ProbeResult{{Metrics: map[string]float64{"a": 1}}, {Metrics: map[string]float64{"a": math.NaN()}}} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r gridcityv1.ProbeResult
		if proto.Unmarshal(b, &r) != nil || ProbeResult(&r, validNow) != nil {
			return
		}
		if _, err := json.Marshal(&r); err != nil {
			t.Fatalf("accepted a probe result JSON cannot carry: %v", err)
		}
	})
}

// TestEverySectionIsChecked: a section added to StateUpdate without a
// validator in sections fails here.
func TestEverySectionIsChecked(t *testing.T) {
	fields := (&gridcityv1.StateUpdate{}).ProtoReflect().Descriptor().Fields()
	var names []string
	for _, s := range sections {
		if fields.ByJSONName(s.name) == nil {
			t.Errorf("section %q is not a field of StateUpdate", s.name)
		}
		names = append(names, s.name)
	}
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Kind() == protoreflect.MessageKind && !slices.Contains(names, fd.JSONName()) {
			t.Errorf("section %s has no validator: add it to sections in statecheck.go", fd.JSONName())
		}
	}
}

func TestRepairClearsOnlyTheBadSections(t *testing.T) {
	u := goodState()
	u.Cpu.Load1 = math.NaN()
	u.Disks.Items[1].UsedPercent = math.Inf(1)
	u.CollectedUnixMs = validNow.Add(time.Hour).UnixMilli()
	found := Repair(u, validNow)
	if len(found) != 3 {
		t.Fatalf("Repair found %v; want the collection time, cpu and disks", found)
	}
	for i, want := range []string{"state.collectedUnixMs", "state.cpu.load1 = NaN", "state.disks[1].usedPercent = +Inf"} {
		if !strings.Contains(found[i].Error(), want) {
			t.Errorf("found[%d] = %v; want it to name %q", i, found[i], want)
		}
	}
	if u.Cpu != nil || u.Disks != nil || u.CollectedUnixMs != 0 {
		t.Errorf("after Repair cpu = %v, disks = %v, collected = %d; want them cleared", u.Cpu, u.Disks, u.CollectedUnixMs)
	}
	if u.Memory.GetTotalBytes() != 8<<30 || u.Host.GetHostname() != "web-1" {
		t.Errorf("Repair cleared good sections: memory %v host %v", u.Memory, u.Host)
	}
	if err := State(u, validNow); err != nil {
		t.Errorf("repaired state still refused: %v", err)
	}
	if found := Repair(goodState(), validNow); found != nil {
		t.Errorf("Repair of a good state found %v", found)
	}
}

// TestSimulatedFleetPasses: the simulated agents of gridcity-bench and the
// tools' benchmarks send states the coordinator accepts.
func TestSimulatedFleetPasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		if err := State(simfleet.State(i, 300, rng, validNow), validNow); err != nil {
			t.Fatalf("simulated server %d refused: %v", i, err)
		}
	}
}
