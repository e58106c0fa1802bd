package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// enrolledStore answers Agents from memory: enrolling ten thousand agents
// in SQLite, one fsync each, would make the fixture slower than the call.
type enrolledStore struct {
	store.Store
	agents []store.Agent
}

func (s enrolledStore) Agents(context.Context) ([]store.Agent, error) { return s.agents, nil }

// benchFleet is n servers with the state gridcity-bench's simulated agents
// send (host, CPU, memory, 3–4 disks, about ten listeners, connections,
// updates, SSH logins and defences), in districts of 100. One in a hundred
// is offline, and one in 500 was revoked and another never connected, as
// in a fleet in use.
func benchFleet(tb testing.TB, n int) Deps {
	tb.Helper()
	return fleetOf(tb, n, benchState)
}

// fleetOf is benchFleet's fleet with the state state makes for server i.
func fleetOf(tb testing.TB, n int, state func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate) Deps {
	tb.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	f, err := fleet.New(ctx, st, logger)
	if err != nil {
		tb.Fatal(err)
	}
	es := enrolledStore{Store: st}
	now := time.Now()
	r := rand.New(rand.NewPCG(uint64(n), 1))
	for i := range n {
		name := fmt.Sprintf("sim-%05d", i+1)
		a := store.Agent{Name: name, Serial: "01", EnrolledAt: now.Add(-48 * time.Hour)}
		if i%500 == 100 {
			a.RevokedAt = now.Add(-time.Hour)
		}
		es.agents = append(es.agents, a)
		if i%500 == 250 {
			continue // enrolled, never connected
		}
		id := f.Connect(&gridcityv1.Hello{Name: name, AgentVersion: "0.9.0", Capabilities: []string{"state", "commands", "probes"},
			RunAs: "root", CommandsEnabled: true, District: fmt.Sprintf("district-%03d", i/100)})
		f.Apply(name, id, state(r, i, now))
		if i%100 == 42 || a.Revoked() {
			f.Disconnect(name, id)
		}
	}
	return Deps{Fleet: f, Store: es, Logger: logger}
}

func benchState(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate {
	boot := now.Add(-time.Duration(3+r.IntN(200)) * 24 * time.Hour)
	disk := func(mount, dev string, total uint64, used float64) *gridcityv1.Disk {
		u := uint64(float64(total) * used)
		return &gridcityv1.Disk{Mount: mount, Device: dev, Filesystem: "ext4", TotalBytes: total, UsedBytes: u, AvailableBytes: total - u,
			UsedPercent: used * 100, InodesTotal: total / 16384, InodesUsed: u / 65536, InodesUsedPercent: 100 * float64(u/65536) / float64(total/16384)}
	}
	l := func(proto, addr string, port uint32, process string) *gridcityv1.Listener {
		return &gridcityv1.Listener{Proto: proto, Address: addr, Port: port, Process: process, Pid: int32(300 + port%1000)}
	}
	c := func(addr string, port, count uint32) *gridcityv1.Connection {
		return &gridcityv1.Connection{RemoteAddress: addr, RemotePort: port, Count: count}
	}
	addr := fmt.Sprintf("10.%d.%d.%d", i/62500, (i/250)%250, i%250+1)
	busy, mem := 5+40*r.Float64(), 30+40*r.Float64()
	return &gridcityv1.StateUpdate{
		Full: true, CollectedUnixMs: now.UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: fmt.Sprintf("sim-%05d", i+1), Os: "debian", OsVersion: "12.7", PlatformFamily: "debian",
			Kernel: "6.1.0-28-amd64", Arch: "x86_64", UptimeSeconds: uint64(now.Sub(boot).Seconds()), BootUnix: boot.Unix(), Virtualization: "kvm",
			Addresses: []string{addr}},
		Cpu:    &gridcityv1.CPU{Cores: 4, Model: "Intel Xeon Processor (Icelake)", BusyPercent: busy, Load1: busy / 25, Load5: busy / 30, Load15: busy / 35},
		Memory: &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: uint64(mem / 100 * (8 << 30)), AvailableBytes: uint64((100 - mem) / 100 * (8 << 30)), UsedPercent: mem},
		Disks: &gridcityv1.Disks{Items: []*gridcityv1.Disk{
			disk("/", "/dev/vda1", 40<<30, 0.35+0.3*r.Float64()), disk("/boot/efi", "/dev/vda15", 124<<20, 0.1), disk("/var", "/dev/vdb1", 100<<30, 0.2+0.5*r.Float64()),
		}},
		Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{
			l("tcp", "0.0.0.0", 22, "sshd"), l("tcp6", "::", 22, "sshd"), l("tcp", "127.0.0.53", 53, "systemd-resolve"), l("udp", "127.0.0.53", 53, "systemd-resolve"),
			l("udp", "127.0.0.1", 323, "chronyd"), l("tcp", "0.0.0.0", 9100, "prometheus-node-exporter"),
			l("tcp", "0.0.0.0", 80, "nginx"), l("tcp", "0.0.0.0", 443, "nginx"), l("tcp", "0.0.0.0", 8080, "java"), l("tcp", "127.0.0.1", 8081, "java"),
		}},
		Connections: &gridcityv1.Connections{Items: []*gridcityv1.Connection{
			c("151.101.2.132", 443, 1), c("203.0.113.10", 443, 2), c("198.51.100.20", 6514, 1), c("192.0.2.53", 853, 1), c("10.0.0.1", 5432, 8), c("10.0.0.2", 6379, 4),
		}},
		FailedUnits: &gridcityv1.Units{},
		Containers:  &gridcityv1.Containers{},
		Updates:     &gridcityv1.Updates{Pending: 4, Security: 1, Manager: "apt", SecurityPackages: []string{"libssl3"}, CheckedUnix: now.Unix()},
		Gaps:        &gridcityv1.Gaps{},
		Logins: &gridcityv1.Logins{LogSources: []string{"/var/log/auth.log"}, Sources: []*gridcityv1.AuthSource{
			{Address: "198.51.100.77", Failures: 212, InvalidUsers: 180, Users: []string{"admin", "ubuntu", "test"}, UsersMore: 41,
				FirstSeenUnix: now.Add(-20 * time.Hour).Unix(), LastSeenUnix: now.Add(-time.Minute).Unix()},
		}},
		Defenses: &gridcityv1.Defenses{Firewall: &gridcityv1.Firewall{Tools: []string{"nftables", "fail2ban"}, Blocks: []*gridcityv1.Block{
			{Network: "198.51.100.77/32", By: "fail2ban jail sshd"},
		}}},
	}
}

// memSession connects an MCP client to a read-scope server in memory, as
// BenchmarkTools does, but without the SDK's 16 MiB bound on a frame, so
// that a whole fleet's answer can be measured too.
func memSession(tb testing.TB, d Deps) *mcp.ClientSession {
	tb.Helper()
	ctx := context.Background()
	c1, c2 := net.Pipe()
	ct, st := &mcp.IOTransport{Reader: c1, Writer: c1, MaxLineLength: -1}, &mcp.IOTransport{Reader: c2, Writer: c2, MaxLineLength: -1}
	if _, err := NewServer(d, store.ScopeRead).Connect(ctx, st, nil); err != nil {
		tb.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return cs
}

// BenchmarkListServers is list_servers' whole path on 10,000 servers: the
// fleet's copies, the views, and the SDK's marshalling, output-schema
// validation and text content, over an in-memory MCP session.
func BenchmarkListServers(b *testing.B) {
	cs := memSession(b, benchFleet(b, 10000))
	ctx := context.Background()
	for _, tc := range []struct {
		label string
		args  map[string]any
	}{
		{"no_arguments", map[string]any{}},
		{"district", map[string]any{"district": "district-042"}},
		{"status_offline", map[string]any{"status": "offline"}},
		{"name", map[string]any{"name": "SIM-0004"}},
		{"last_page", map[string]any{"after": "sim-09800"}},
		{"limit_1000", map[string]any{"limit": 1000}},
	} {
		b.Run(tc.label, func(b *testing.B) {
			b.ReportAllocs()
			var res *mcp.CallToolResult
			for b.Loop() {
				var err error
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_servers", Arguments: tc.args})
				if err != nil || res.IsError {
					b.Fatalf("list_servers(%v): %v %+v", tc.args, err, res)
				}
			}
			// The answer's JSON, as the text content carries it (the
			// structured content is the same again).
			b.ReportMetric(float64(len(res.Content[0].(*mcp.TextContent).Text)), "json-B")
		})
	}
}
