package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// The simulated fleet comes in groups of simGroup servers, each group a
// district of its own. In each group the first server runs PostgreSQL, the
// second Redis, the third RabbitMQ; the others run an application behind
// nginx that holds connections to those three and to one other application
// server of its group, and to a few addresses outside the fleet (a package
// mirror, object storage, syslog …). So the coordinator discovers about four
// links per server, and a troubled database would explain its group.
const simGroup = 100

type simRole int

const (
	roleDB simRole = iota
	roleCache
	roleQueue
	roleApp
)

func roleOf(i int) simRole {
	if r := i % simGroup; r < int(roleApp) {
		return simRole(r)
	}
	return roleApp
}

func simName(i int) string { return fmt.Sprintf("sim-%05d", i+1) }

// simAddr is server i's private address, unique for up to 16 million.
func simAddr(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", i/62500, (i/250)%250, i%250+1)
}

const gib = 1 << 30

// newSimAgent makes server i of a fleet of n: its hello and full state.
func newSimAgent(i, n int, id simIdentity) *simAgent {
	a := &simAgent{i: i, id: id, rng: rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))}
	role := roleOf(i)
	a.hello = &gridcityv1.Hello{
		Name: id.name, AgentVersion: simVersion, Capabilities: []string{"state", "commands", "probes"},
		RunAs: "root", CommandsEnabled: true, District: fmt.Sprintf("district-%03d", i/simGroup),
	}
	now := time.Now()
	boot := now.Add(-time.Duration(3+a.rng.IntN(200)) * 24 * time.Hour)
	cores, memTotal := uint32(4), uint64(8*gib)
	switch role {
	case roleDB:
		cores, memTotal = 8, 32*gib
	case roleCache, roleQueue:
		cores, memTotal = 2, 4*gib
	}
	st := &gridcityv1.StateUpdate{
		Host: &gridcityv1.HostInfo{
			Hostname: id.name, Os: "debian", OsVersion: "12.7", PlatformFamily: "debian", Kernel: "6.1.0-28-amd64", Arch: "x86_64",
			UptimeSeconds: uint64(now.Sub(boot).Seconds()), BootUnix: boot.Unix(), Virtualization: "kvm",
			Addresses: []string{simAddr(i)},
		},
		Cpu:    &gridcityv1.CPU{Cores: cores, Model: "Intel Xeon Processor (Icelake)"},
		Memory: &gridcityv1.Memory{TotalBytes: memTotal, SwapTotalBytes: 0},
		Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{
			simDisk("/", "/dev/vda1", 40*gib, 0.35+0.3*a.rng.Float64()),
			simDisk("/boot/efi", "/dev/vda15", 124<<20, 0.1),
			simDisk("/var", "/dev/vdb1", 100*gib, 0.2+0.5*a.rng.Float64()),
		}},
		Listeners:   &gridcityv1.Listeners{Items: simListeners(role)},
		Connections: &gridcityv1.Connections{Items: simConnections(i, n)},
		FailedUnits: &gridcityv1.Units{},
		Containers:  &gridcityv1.Containers{},
		Updates:     &gridcityv1.Updates{Pending: 4, Security: 1, Manager: "apt", SecurityPackages: []string{"libssl3"}, CheckedUnix: now.Unix()},
		Gaps:        &gridcityv1.Gaps{},
		Logins: &gridcityv1.Logins{LogSources: []string{"/var/log/auth.log"}, Sources: []*gridcityv1.AuthSource{
			{Address: "198.51.100.77", Failures: 212, InvalidUsers: 180, Users: []string{"admin", "ubuntu", "test"}, UsersMore: 41,
				FirstSeenUnix: now.Add(-20 * time.Hour).Unix(), LastSeenUnix: now.Add(-time.Minute).Unix()},
			{Address: "10.255.0.10", Successes: 3, LastSuccessUnix: now.Add(-3 * time.Hour).Unix(), LastSuccessUser: "deploy",
				FirstSeenUnix: now.Add(-23 * time.Hour).Unix(), LastSeenUnix: now.Add(-3 * time.Hour).Unix()},
		}},
		Defenses: &gridcityv1.Defenses{
			Firewall: &gridcityv1.Firewall{Tools: []string{"nftables", "fail2ban"}, Blocks: []*gridcityv1.Block{
				{Network: "198.51.100.77/32", By: "fail2ban jail sshd"},
				{Network: "203.0.113.0/24", By: "nftables inet filter input"},
			}},
			Sshd: &gridcityv1.SSHConfig{PasswordAuthentication: "no", PermitRootLogin: "prohibit-password", KbdInteractiveAuthentication: "no", UsePam: "yes",
				PasswordAuthenticationFrom: "/etc/ssh/sshd_config.d/50-cloud-init.conf:1", PermitRootLoginFrom: "default", KbdInteractiveAuthenticationFrom: "/etc/ssh/sshd_config:62",
				Files: []string{"/etc/ssh/sshd_config", "/etc/ssh/sshd_config.d/50-cloud-init.conf"}},
		},
	}
	if role == roleDB {
		st.Disks.Items = append(st.Disks.Items, simDisk("/var/lib/postgresql", "/dev/vdc1", 500*gib, 0.4+0.4*a.rng.Float64()))
	}
	a.full = st
	a.nextChange() // CPU and memory figures to start from
	return a
}

func simDisk(mount, dev string, total uint64, used float64) *gridcityv1.Disk {
	u := uint64(float64(total) * used)
	return &gridcityv1.Disk{Mount: mount, Device: dev, Filesystem: "ext4", TotalBytes: total, UsedBytes: u, AvailableBytes: total - u,
		UsedPercent: used * 100, InodesTotal: total / 16384, InodesUsed: u / 65536, InodesUsedPercent: 100 * float64(u/65536) / float64(total/16384)}
}

// simListeners are what a Debian server of the role listens on: about ten
// sockets, the role's on every address.
func simListeners(role simRole) []*gridcityv1.Listener {
	l := func(proto, addr string, port uint32, process string) *gridcityv1.Listener {
		return &gridcityv1.Listener{Proto: proto, Address: addr, Port: port, Process: process, Pid: int32(300 + port%1000)}
	}
	out := []*gridcityv1.Listener{
		l("tcp", "0.0.0.0", 22, "sshd"), l("tcp6", "::", 22, "sshd"),
		l("tcp", "127.0.0.53", 53, "systemd-resolve"), l("udp", "127.0.0.53", 53, "systemd-resolve"),
		l("udp", "127.0.0.1", 323, "chronyd"), l("tcp", "0.0.0.0", 9100, "prometheus-node-exporter"),
	}
	switch role {
	case roleDB:
		out = append(out, l("tcp", "0.0.0.0", 5432, "postgres"), l("tcp6", "::", 5432, "postgres"), l("tcp", "127.0.0.1", 9187, "postgres_exporter"))
	case roleCache:
		out = append(out, l("tcp", "0.0.0.0", 6379, "redis-server"), l("tcp", "127.0.0.1", 9121, "redis_exporter"))
	case roleQueue:
		out = append(out, l("tcp", "0.0.0.0", 5672, "beam.smp"), l("tcp", "0.0.0.0", 15672, "beam.smp"), l("tcp", "127.0.0.1", 4369, "epmd"))
	default:
		out = append(out, l("tcp", "0.0.0.0", 80, "nginx"), l("tcp", "0.0.0.0", 443, "nginx"), l("tcp", "0.0.0.0", 8080, "java"), l("tcp", "127.0.0.1", 8081, "java"))
	}
	return out
}

// simConnections are server i's established outbound connections in a
// fleet of n: to its group's database, cache, queue and one other
// application server (the links the coordinator discovers), and to
// addresses outside the fleet (which it cannot place).
func simConnections(i, n int) []*gridcityv1.Connection {
	c := func(addr string, port, count uint32) *gridcityv1.Connection {
		return &gridcityv1.Connection{RemoteAddress: addr, RemotePort: port, Count: count}
	}
	out := []*gridcityv1.Connection{
		c("151.101.2.132", 443, 1), c("203.0.113.10", 443, 2), c("198.51.100.20", 6514, 1),
		c("192.0.2.53", 853, 1), c("198.51.100.30", 9093, 1), c("203.0.113.40", 8200, 1),
	}
	if roleOf(i) != roleApp {
		return out
	}
	base := i - i%simGroup
	for _, s := range []struct {
		role  simRole
		port  uint32
		count uint32
	}{{roleDB, 5432, 8}, {roleCache, 6379, 4}, {roleQueue, 5672, 2}} {
		if j := base + int(s.role); j < n {
			out = append(out, c(simAddr(j), s.port, s.count))
		}
	}
	// The next application server of the group, round the group.
	first, last := base+int(roleApp), min(base+simGroup, n)-1
	if apps := last - first + 1; apps > 1 {
		peer := first + (i-first+1)%apps
		out = append(out, c(simAddr(peer), 8080, 1))
	}
	return out
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
	if old.GetBusyPercent() == 0 {
		busy = 5 + 40*a.rng.Float64()
	}
	cores := float64(old.GetCores())
	load1 := busy / 100 * cores * (0.8 + 0.4*a.rng.Float64())
	cpu := &gridcityv1.CPU{Cores: old.GetCores(), Model: old.GetModel(), BusyPercent: round2(busy), Load1: round2(load1),
		Load5: round2((old.GetLoad5()*4 + load1) / 5), Load15: round2((old.GetLoad15()*14 + load1) / 15)}
	total := a.full.Memory.GetTotalBytes()
	usedPct := min(max(a.full.Memory.GetUsedPercent()+a.rng.NormFloat64(), 10), 95)
	if a.full.Memory.GetUsedPercent() == 0 {
		usedPct = 30 + 40*a.rng.Float64()
	}
	used := uint64(float64(total) * usedPct / 100)
	mem := &gridcityv1.Memory{TotalBytes: total, UsedBytes: used, AvailableBytes: total - used, UsedPercent: round2(usedPct)}
	a.full.Cpu, a.full.Memory = cpu, mem
	return &gridcityv1.StateUpdate{CollectedUnixMs: time.Now().UnixMilli(), Cpu: cpu, Memory: mem}
}

func round2(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 2, 64), 64)
	return f
}
