// Package simfleet is the state of a simulated fleet: servers in groups
// with databases, caches, queues and application servers that connect to
// them, as gridcity-bench's simulated agents report it and as the
// benchmarks of the tools that read a large fleet build it.
//
// It is harness, for benchmarks and tests only: no product binary may
// import it (deps_test.go in coordinator/cmd/gridcity checks).
package simfleet

import (
	"fmt"
	"math/rand/v2"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
)

// The simulated fleet comes in groups of Group servers, each group a
// district of its own. In each group the first server runs PostgreSQL, the
// second Redis, the third RabbitMQ; the others run an application behind
// nginx that holds connections to those three and to one other application
// server of its group, and to a few addresses outside the fleet (a package
// mirror, object storage, syslog …). So the coordinator discovers about four
// links per server, and a troubled database would explain its group.
// Group is how many servers a group (a district) has.
const Group = 100

// Role is what a server of the group runs.
type Role int

const (
	RoleDB Role = iota
	RoleCache
	RoleQueue
	RoleApp
)

// RoleOf is server i's role.
func RoleOf(i int) Role {
	if r := i % Group; r < int(RoleApp) {
		return Role(r)
	}
	return RoleApp
}

// Name is server i's name.
func Name(i int) string { return fmt.Sprintf("sim-%05d", i+1) }

// Addr is server i's private address, unique for up to 16 million.
func Addr(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", i/62500, (i/250)%250, i%250+1)
}

// GiB is a gibibyte.
const GiB = 1 << 30

// Disk is an ext4 file system of total bytes, used the given fraction.
func Disk(mount, dev string, total uint64, used float64) *gridcityv1.Disk {
	u := uint64(float64(total) * used)
	return &gridcityv1.Disk{Mount: mount, Device: dev, Filesystem: "ext4", TotalBytes: total, UsedBytes: u, AvailableBytes: total - u,
		UsedPercent: used * 100, InodesTotal: total / 16384, InodesUsed: u / 65536, InodesUsedPercent: 100 * float64(u/65536) / float64(total/16384)}
}

// Listeners are what a Debian server of the role listens on: about ten
// sockets, the role's on every address.
func Listeners(role Role) []*gridcityv1.Listener {
	l := func(proto, addr string, port uint32, process string) *gridcityv1.Listener {
		return &gridcityv1.Listener{Proto: proto, Address: addr, Port: port, Process: process, Pid: int32(300 + port%1000)}
	}
	out := []*gridcityv1.Listener{
		l("tcp", "0.0.0.0", 22, "sshd"), l("tcp6", "::", 22, "sshd"),
		l("tcp", "127.0.0.53", 53, "systemd-resolve"), l("udp", "127.0.0.53", 53, "systemd-resolve"),
		l("udp", "127.0.0.1", 323, "chronyd"), l("tcp", "0.0.0.0", 9100, "prometheus-node-exporter"),
	}
	switch role {
	case RoleDB:
		out = append(out, l("tcp", "0.0.0.0", 5432, "postgres"), l("tcp6", "::", 5432, "postgres"), l("tcp", "127.0.0.1", 9187, "postgres_exporter"))
	case RoleCache:
		out = append(out, l("tcp", "0.0.0.0", 6379, "redis-server"), l("tcp", "127.0.0.1", 9121, "redis_exporter"))
	case RoleQueue:
		out = append(out, l("tcp", "0.0.0.0", 5672, "beam.smp"), l("tcp", "0.0.0.0", 15672, "beam.smp"), l("tcp", "127.0.0.1", 4369, "epmd"))
	default:
		out = append(out, l("tcp", "0.0.0.0", 80, "nginx"), l("tcp", "0.0.0.0", 443, "nginx"), l("tcp", "0.0.0.0", 8080, "java"), l("tcp", "127.0.0.1", 8081, "java"))
	}
	return out
}

// Connections are server i's established outbound connections in a
// fleet of n: to its group's database, cache, queue and one other
// application server (the links the coordinator discovers), and to
// addresses outside the fleet (which it cannot place).
func Connections(i, n int) []*gridcityv1.Connection {
	c := func(addr string, port, count uint32) *gridcityv1.Connection {
		return &gridcityv1.Connection{RemoteAddress: addr, RemotePort: port, Count: count}
	}
	out := []*gridcityv1.Connection{
		c("151.101.2.132", 443, 1), c("203.0.113.10", 443, 2), c("198.51.100.20", 6514, 1),
		c("192.0.2.53", 853, 1), c("198.51.100.30", 9093, 1), c("203.0.113.40", 8200, 1),
	}
	if RoleOf(i) != RoleApp {
		return out
	}
	base := i - i%Group
	for _, s := range []struct {
		role  Role
		port  uint32
		count uint32
	}{{RoleDB, 5432, 8}, {RoleCache, 6379, 4}, {RoleQueue, 5672, 2}} {
		if j := base + int(s.role); j < n {
			out = append(out, c(Addr(j), s.port, s.count))
		}
	}
	// The next application server of the group, round the group.
	first, last := base+int(RoleApp), min(base+Group, n)-1
	if apps := last - first + 1; apps > 1 {
		peer := first + (i-first+1)%apps
		out = append(out, c(Addr(peer), 8080, 1))
	}
	return out
}

// District is server i's district: its group.
func District(i int) string { return fmt.Sprintf("district-%03d", i/Group) }

// Hello is what server i's agent says first.
func Hello(i int, version string) *gridcityv1.Hello {
	return &gridcityv1.Hello{
		Name: Name(i), AgentVersion: version, Capabilities: []string{"state", "commands", "probes"},
		RunAs: "root", CommandsEnabled: true, District: District(i),
	}
}

// State is the full state of server i of a fleet of n as at now, its
// random figures (uptime, disk use, CPU and memory) drawn from rng.
func State(i, n int, rng *rand.Rand, now time.Time) *gridcityv1.StateUpdate {
	role := RoleOf(i)
	boot := now.Add(-time.Duration(3+rng.IntN(200)) * 24 * time.Hour)
	cores, memTotal := uint32(4), uint64(8*GiB)
	switch role {
	case RoleDB:
		cores, memTotal = 8, 32*GiB
	case RoleCache, RoleQueue:
		cores, memTotal = 2, 4*GiB
	}
	busy, memPct := 5+40*rng.Float64(), 30+40*rng.Float64()
	load1 := busy / 100 * float64(cores)
	memUsed := uint64(float64(memTotal) * memPct / 100)
	st := &gridcityv1.StateUpdate{
		Full: true, CollectedUnixMs: now.UnixMilli(),
		Host: &gridcityv1.HostInfo{
			Hostname: Name(i), Os: "debian", OsVersion: "12.7", PlatformFamily: "debian", Kernel: "6.1.0-28-amd64", Arch: "x86_64",
			UptimeSeconds: uint64(now.Sub(boot).Seconds()), BootUnix: boot.Unix(), Virtualization: "kvm",
			Addresses: []string{Addr(i)},
		},
		Cpu:    &gridcityv1.CPU{Cores: cores, Model: "Intel Xeon Processor (Icelake)", BusyPercent: proto.Float64(busy), Load1: load1, Load5: load1, Load15: load1},
		Memory: &gridcityv1.Memory{TotalBytes: memTotal, UsedBytes: memUsed, AvailableBytes: memTotal - memUsed, UsedPercent: memPct},
		Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{
			Disk("/", "/dev/vda1", 40*GiB, 0.35+0.3*rng.Float64()),
			Disk("/boot/efi", "/dev/vda15", 124<<20, 0.1),
			Disk("/var", "/dev/vdb1", 100*GiB, 0.2+0.5*rng.Float64()),
		}},
		Listeners:   &gridcityv1.Listeners{Items: Listeners(role)},
		Connections: &gridcityv1.Connections{Items: Connections(i, n)},
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
	if role == RoleDB {
		st.Disks.Items = append(st.Disks.Items, Disk("/var/lib/postgresql", "/dev/vdc1", 500*GiB, 0.4+0.4*rng.Float64()))
	}
	return st
}

// Attacker is the address of the k-th of the sources that AddTrouble has
// attack the fleet: distinct for up to 65,000 sources, none in the fleet's
// own 10.0.0.0/8 nor in the blocked ones State reports.
func Attacker(k int) string { return fmt.Sprintf("185.%d.%d.%d", 100+k/62500, (k/250)%250, k%250+1) }

// AttackedEvery and FailedEvery set how often AddTrouble attacks a server
// and fails a unit: a fleet of 10,000 has 2,000 attack sources and 200
// failed units.
const (
	AttackedEvery = 5
	FailedEvery   = 50
)

// AddTrouble adds to server i's state the trouble a large fleet has on an
// ordinary day, for the tests and benchmarks that check an answer stays
// bounded however much there is: every AttackedEvery-th server is brute-
// forced over SSH by a source of its own (Attacker(i/AttackedEvery)), not
// blocked, with many user names tried; the attacks on even-numbered
// sources are open (seen a minute before now), the others ended hours
// ago. Every FailedEvery-th server has a failed unit. State alone, as
// gridcity-bench's agents send it, has none of this.
func AddTrouble(st *gridcityv1.StateUpdate, i int, now time.Time) {
	if i%AttackedEvery == 0 {
		k := i / AttackedEvery
		last := now.Add(-time.Minute)
		if k%2 == 1 {
			last = now.Add(-time.Duration(2+k%20) * time.Hour)
		}
		users := []string{"root", "admin", "ubuntu", "test", "oracle", "postgres", "git", "deploy", "user", "ftp", "pi", "guest", "support", "backup", "www", "mysql"}
		st.Logins.Sources = append(st.Logins.Sources, &gridcityv1.AuthSource{Address: Attacker(k), Failures: uint32(50 + k%900), InvalidUsers: uint32(40 + k%800),
			Users: users, UsersMore: uint32(k % 300), FirstSeenUnix: last.Add(-6 * time.Hour).Unix(), LastSeenUnix: last.Unix()})
	}
	if i%FailedEvery == 0 {
		st.FailedUnits.Items = append(st.FailedUnits.Items, &gridcityv1.Unit{Name: "app-worker@" + fmt.Sprint(i%7) + ".service",
			Description: "application worker", SinceUnix: now.Add(-time.Duration(1+i%90) * time.Minute).Unix(), ActiveState: "failed", SubState: "failed"})
	}
}
