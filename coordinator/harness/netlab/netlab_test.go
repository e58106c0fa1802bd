package netlab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/lib/probe"
)

// needRoot skips a test that makes namespaces, except in CI, which runs as
// root and must run it.
func needRoot(t *testing.T, needs ...Need) {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	if os.Geteuid() != 0 {
		if ci {
			t.Fatal("CI runs as root; this test needs root for network namespaces")
		}
		t.Skip("needs root to create network namespaces (run the tests as root)")
	}
	if missing := Missing(append([]Need{IP}, needs...)...); len(missing) > 0 {
		err := &MissingError{Needs: missing}
		if ci {
			t.Fatalf("CI must install them: %v", err)
		}
		t.Skip(err)
	}
}

func newNet(t *testing.T) *Net {
	t.Helper()
	ctx := context.Background()
	n, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range n.Procs() {
				t.Logf("---- the end of %s's log ----\n%s", p, p.Tail(30))
			}
		}
		if err := n.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := os.Stat(n.Dir); !os.IsNotExist(err) {
			t.Errorf("the net's directory %s is still there (%v)", n.Dir, err)
		}
		if linkExists(n.Bridge) {
			t.Errorf("bridge %s is still there", n.Bridge)
		}
		for ns := range netnsList(ctx) {
			if strings.HasPrefix(ns, n.Bridge+"-") {
				t.Errorf("namespace %s is still there", ns)
			}
		}
	})
	return n
}

func addHost(t *testing.T, n *Net, name string) *Host {
	t.Helper()
	h, err := n.AddHost(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// reach tries a TCP connection from inside h (bash's /dev/tcp: no extra
// tool needed).
func reach(h *Host, addr string) error {
	host, port, _ := strings.Cut(addr, ":")
	out, err := h.Run(context.Background(), "timeout", "2", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port))
	if err != nil {
		return fmt.Errorf("%s → %s: %v %s", h.Name, addr, err, strings.TrimSpace(out))
	}
	return nil
}

// Two hosts on the net: each has its address and loopback only, no default
// route, and they reach each other and the gateway.
func TestHostsOnTheNet(t *testing.T) {
	t.Parallel()
	needRoot(t, Redis)
	ctx := context.Background()
	n := newNet(t)
	a, b := addHost(t, n, "a"), addHost(t, n, "b")
	if a.Addr != n.Gateway.Next() || b.Addr != a.Addr.Next() || !n.Subnet.Contains(b.Addr) || n.Subnet.Bits() != 24 {
		t.Fatalf("addresses gateway %s, a %s, b %s in %s; want .1, .2, .3 of one /24", n.Gateway, a.Addr, b.Addr, n.Subnet)
	}
	if !strings.HasPrefix(a.Netns, Prefix) || !strings.HasPrefix(a.Veth, Prefix) || !strings.HasPrefix(n.Bridge, Prefix) || len(a.Veth) > 15 {
		t.Errorf("names %s %s %s; want the prefix %s and at most 15 bytes for links", n.Bridge, a.Netns, a.Veth, Prefix)
	}
	out, err := a.Run(ctx, "ip", "-4", "-o", "addr", "show")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "inet 127.0.0.1/8") || !strings.Contains(out, "inet "+a.Addr.String()+"/24") || strings.Count(out, "inet ") != 2 {
		t.Errorf("a's addresses:\n%s\nwant loopback and %s only", out, a.Addr)
	}
	if out, err := a.Run(ctx, "ip", "route", "show", "default"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("a has a default route (%q, %v)", out, err)
	}
	redis, err := b.StartRedis(ctx, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := reach(a, redis.Addr()); err != nil {
		t.Error(err)
	}
	// Cut b off: a no longer reaches it; restore it: it does again.
	if err := b.CutLink(ctx); err != nil {
		t.Fatal(err)
	}
	if err := reach(a, redis.Addr()); err == nil {
		t.Error("a reaches b's Redis through a cut link")
	}
	if err := b.RestoreLink(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for err = reach(a, redis.Addr()); err != nil && time.Now().Before(deadline); err = reach(a, redis.Addr()) {
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("after the link came back: %v", err)
	}
}

// Each service runs inside its host, on the host's address, and answers
// its own protocol from another host; PostgreSQL stops and starts again.
func TestServices(t *testing.T) {
	t.Parallel()
	needRoot(t, Setpriv, Postgres, Redis, Nginx, SSHD, SSHKeygen)
	ctx := context.Background()
	n := newNet(t)
	db, web, lb, client := addHost(t, n, "db"), addHost(t, n, "web"), addHost(t, n, "lb"), addHost(t, n, "client")

	pg, err := db.StartPostgres(ctx, PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	redis, err := db.StartRedis(ctx, RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sshd, err := db.StartSSHD(ctx, SSHDOptions{PasswordAuthentication: true})
	if err != nil {
		t.Fatal(err)
	}
	site, err := web.StartNginx(ctx, NginxOptions{Pages: map[string]string{"index.html": "hello from web\n"}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := lb.StartNginx(ctx, NginxOptions{Routes: []Route{{Path: "/", Backends: []string{web.Addr.String() + ":80"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p      *Proc
		engine string
		want   string
	}{
		{pg, "postgres", db.Addr.String() + ":5432"},
		{redis, "redis", db.Addr.String() + ":6379"},
		{sshd, "tcp", db.Addr.String() + ":22"},
		{site, "http", "http://" + web.Addr.String() + ":80/"},
		{front, "http", "http://" + lb.Addr.String() + ":80/"},
	} {
		if c.p.Addr() != c.want {
			t.Errorf("%s serves %s; want %s", c.p, c.p.Addr(), c.want)
		}
		if r := probe.Run(ctx, probe.Spec{Engine: c.engine, Target: c.p.Addr(), Timeout: 2 * time.Second}); !r.OK {
			t.Errorf("%s from the root namespace: %s", c.p, r.Reason)
		}
		target := strings.TrimSuffix(strings.TrimPrefix(c.p.Addr(), "http://"), "/")
		if err := reach(client, target); err != nil {
			t.Errorf("%s from another host: %v", c.p, err)
		}
	}
	// PostgreSQL runs as postgres, in db's namespace.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pg.PID())); err != nil || !bytes.Contains(b, []byte("Name:\tpostgres")) {
		t.Errorf("pid %d: %v\n%s", pg.PID(), err, b)
	}
	if self, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pg.PID())); self == "" || func() bool { root, _ := os.Readlink("/proc/self/ns/net"); return root == self }() {
		t.Errorf("PostgreSQL runs in the root namespace (%q)", self)
	}
	// The load balancer passes the page on.
	out, err := client.Run(ctx, "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/80; printf 'GET / HTTP/1.0\\r\\nHost: shop\\r\\n\\r\\n' >&3; cat <&3", lb.Addr))
	if err != nil || !strings.Contains(out, "hello from web") {
		t.Errorf("the page through the load balancer: %v\n%s", err, out)
	}
	// sshd said what it was told.
	if b, _ := os.ReadFile(filepath.Join(db.Dir, "sshd", "sshd_config")); !bytes.Contains(b, []byte("PasswordAuthentication yes")) || !bytes.Contains(b, []byte("ListenAddress "+db.Addr.String())) {
		t.Errorf("sshd_config:\n%s", b)
	}

	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if pg.Running() || !pg.Stopped() {
		t.Fatalf("PostgreSQL still runs (pid %d) after Stop", pg.PID())
	}
	if r := probe.Run(ctx, probe.Spec{Engine: "postgres", Target: pg.Addr(), Timeout: time.Second}); r.OK || !strings.Contains(r.Reason, "refused") {
		t.Errorf("a stopped PostgreSQL: %+v; want connection refused", r)
	}
	// Another process (gridcity-fleet fix) starts it from the state alone.
	other, err := Open(n.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Proc("db", "postgres").Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !pg.Running() || pg.Stopped() {
		t.Error("PostgreSQL does not run after Start")
	}
}

// A run that crashes leaves its net; Sweep (or Down) removes everything it
// lists — processes included — and nothing else.
func TestDownAfterACrash(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ctx := context.Background()
	root := t.TempDir()
	// The crashing run: this test binary again, which makes a net with a
	// host and a process in it, and exits without cleaning up.
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashingRun$")
	cmd.Env = append(os.Environ(), "TESTFLEET_CRASH_DIR="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the crashing run: %v\n%s", err, out)
	}
	dir := filepath.Join(root, Prefix+"crash")
	n, err := Open(dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	h := n.Host("victim")
	sleeper := n.Proc("victim", "sleep")
	if h == nil || sleeper == nil || !sleeper.Running() {
		t.Fatalf("the crashed run left no host or process: %+v %+v\n%s", h, sleeper, out)
	}
	pid := sleeper.PID()
	if _, ok := IsRunning(dir); ok {
		t.Fatal("the crashed run's owner counts as running")
	}
	// An unrelated process of the same name is never touched.
	bystander := exec.Command("sleep", "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer bystander.Process.Kill()

	swept, err := Sweep(ctx, root, nil)
	if err != nil || len(swept) != 1 || swept[0] != dir {
		t.Fatalf("Sweep: %v, %v; want %s", swept, err, dir)
	}
	if startTimeErr := func() error { _, err := startTime(pid); return err }(); startTimeErr == nil {
		t.Errorf("the crashed run's process %d still runs", pid)
	}
	if linkExists(h.Veth) || linkExists(n.Bridge) || netnsList(ctx)[h.Netns] {
		t.Errorf("left behind: veth %s %v, bridge %s %v, namespace %s %v", h.Veth, linkExists(h.Veth), n.Bridge, linkExists(n.Bridge), h.Netns, netnsList(ctx)[h.Netns])
	}
	if Exists(dir) {
		t.Error("the state is still there")
	}
	if _, err := startTime(bystander.Process.Pid); err != nil {
		t.Errorf("Sweep killed a process it did not start: %v", err)
	}
}

// TestCrashingRun is TestDownAfterACrash's crashing run; alone it does
// nothing.
func TestCrashingRun(t *testing.T) {
	root := os.Getenv("TESTFLEET_CRASH_DIR")
	if root == "" {
		t.Skip("run by TestDownAfterACrash")
	}
	ctx := context.Background()
	n, err := New(ctx, Options{Tag: "crash", Dir: filepath.Join(root, Prefix+"crash")})
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.AddHost(ctx, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.StartProcess(ctx, ProcessOptions{Name: "sleep", Argv: []string{"sleep", "300"}}); err != nil {
		t.Fatal(err)
	}
	os.Exit(0) // crash: no Close, no cleanup
}

// The demo city's config is one the coordinator accepts.
func TestCityConfigIsValid(t *testing.T) {
	n := &Net{Subnet: netip.MustParsePrefix("10.213.9.0/24")}
	h := func(i byte) *Host { return &Host{Addr: netip.AddrFrom4([4]byte{10, 213, 9, i})} }
	c := &City{Net: n, LB: h(2), Web1: h(3), Web2: h(4), API: h(5), DB: h(6), Scraper: h(7)}
	yaml := c.Config(ConfigOptions{ProbeInterval: time.Second, ProbeTimeout: 500 * time.Millisecond, FailuresBeforeTroubled: 2,
		CollectFast: time.Second, CollectMedium: 2 * time.Second, FixCommand: "/opt/bin/gridcity-fleet fix --dir /x/.demo"})
	cfg, err := config.Parse(strings.NewReader(yaml), "city.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	if err := cfg.Validate(CityHosts); err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	var ids []string
	for _, r := range cfg.Resources {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != strings.Join(CityResources, ",") {
		t.Errorf("resources %v; want %v", ids, CityResources)
	}
	if cfg.Probes.Interval != time.Second || cfg.Collect.Medium != 2*time.Second || len(cfg.Runbooks) != 1 || len(cfg.Links) != 6 || len(cfg.Districts) != 2 {
		t.Errorf("config %+v", cfg)
	}
	if db := cfg.Resources[0]; db.Target != "10.213.9.6:5432" || db.Engine != "postgres" {
		t.Errorf("orders-db %+v", db)
	}
}

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line string
		want uint64
		ok   bool
	}{
		{"1234 (postgres) S 1 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10", 98765, true},
		{"77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 1 1", 5, true},
		{"77 (gone) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 1 1", 0, false},
		{"garbage", 0, false},
	} {
		got, err := parseStat(c.line)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseStat(%q) = %d, %v; want %d, ok %v", c.line, got, err, c.want, c.ok)
		}
	}
}

func TestParseRoutes(t *testing.T) {
	out := `default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
10.213.4.0/24 dev gcft1 proto kernel scope link src 10.213.4.1
unreachable 10.213.0.0/20
local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1
broadcast 10.213.4.255 dev gcft1 table local proto kernel scope link src 10.213.4.1
`
	var got []string
	for _, p := range parseRoutes(out) {
		got = append(got, p.String())
	}
	want := "192.0.2.0/24 10.213.4.0/24 10.213.0.0/20 127.0.0.1/32 10.213.4.255/32"
	if strings.Join(got, " ") != want {
		t.Errorf("parseRoutes = %v; want %s", got, want)
	}
}

func TestMissingErrorSaysWhatToInstall(t *testing.T) {
	err := &MissingError{Needs: []Need{Nginx, Postgres, Nginx}}
	if got := err.Error(); !strings.Contains(got, "nginx (Debian package nginx)") || !strings.HasSuffix(got, "apt-get install -y nginx postgresql") {
		t.Errorf("%q", got)
	}
}

// A second net with a tag in use fails, and undoing it leaves the first net alone.
func TestTagInUse(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ctx := context.Background()
	tag := "u" + strconv.FormatInt(int64(os.Getpid()), 36)
	first, err := New(ctx, Options{Tag: tag, Dir: filepath.Join(t.TempDir(), "first")})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close(ctx)
	h := addHost(t, first, "a")
	if _, err := New(ctx, Options{Tag: tag, Dir: filepath.Join(t.TempDir(), "second")}); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a second net with the tag %q: %v; want it refused", tag, err)
	}
	if !linkExists(first.Bridge) || !linkExists(h.Veth) || !netnsList(ctx)[h.Netns] {
		t.Error("refusing the second net removed the first one's bridge, link or namespace")
	}
}
