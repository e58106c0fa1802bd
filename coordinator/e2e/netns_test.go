package e2e

// Test hosts on one machine: network namespaces the test creates, each joined by a veth pair to
// a bridge of the test's own in the root namespace, on a private /24 that no interface of the
// machine uses. Traffic stays on that bridge and loopback. Everything is removed when the test
// ends, also when it fails.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testNet is a bridge with a private /24; the root namespace (where the coordinator runs) has
// its .1.
type testNet struct {
	t      *testing.T
	bridge string
	prefix string // "10.213.7." — hosts get .2, .3, …
	mu     sync.Mutex
	next   int
}

// netHost is a test host: a network namespace with one address on the test net.
type netHost struct {
	name, ns, addr string
}

var netSeq struct {
	sync.Mutex
	n int
}

// needRoot skips a test that needs root and ip(8), except in CI, which runs as root and must
// run it.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; this test needs root for network namespaces")
		}
		t.Skip("needs root to create network namespaces (make e2e as root runs it)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must install iproute2: ip not found")
		}
		t.Skip("ip not found: apt-get install iproute2")
	}
}

// ip runs ip(8) and fails the test with its output when it fails.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newTestNet creates the bridge; it and every host on it go when the test ends.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	needRoot(t)
	netSeq.Lock()
	netSeq.n++
	seq := netSeq.n
	netSeq.Unlock()
	tag := fmt.Sprintf("%d%d", os.Getpid()%100000, seq)
	n := &testNet{t: t, bridge: "gcb" + tag, next: 2}
	// A third octet no address of the machine is in.
	used := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				used[ipn.IP.Mask(net.CIDRMask(24, 32)).String()] = true
			}
		}
	}
	for o := (os.Getpid() + seq*37) % 250; ; o = (o + 1) % 250 {
		if !used[fmt.Sprintf("10.213.%d.0", o)] {
			n.prefix = fmt.Sprintf("10.213.%d.", o)
			break
		}
	}
	ip(t, "link", "add", n.bridge, "type", "bridge")
	t.Cleanup(func() { exec.Command("ip", "link", "del", n.bridge).Run() })
	ip(t, "addr", "add", n.prefix+"1/24", "dev", n.bridge)
	ip(t, "link", "set", n.bridge, "up")
	return n
}

// gateway is the root namespace's address on the test net.
func (n *testNet) gateway() string { return n.prefix + "1" }

// freePort is a free TCP address on the gateway, for the coordinator's gRPC listener.
func (n *testNet) freePort() string {
	l, err := net.Listen("tcp", n.gateway()+":0")
	if err != nil {
		n.t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// host adds a namespace with the next address.
func (n *testNet) host(name string) *netHost {
	t := n.t
	t.Helper()
	n.mu.Lock()
	idx := n.next
	n.next++
	n.mu.Unlock()
	h := &netHost{name: name, ns: n.bridge + "-" + name, addr: fmt.Sprintf("%s%d", n.prefix, idx)}
	outer, inner := fmt.Sprintf("%sh%d", n.bridge, idx), fmt.Sprintf("%sn%d", n.bridge, idx)
	ip(t, "netns", "add", h.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", h.ns).Run() })
	ip(t, "link", "add", outer, "type", "veth", "peer", "name", inner)
	t.Cleanup(func() { exec.Command("ip", "link", "del", outer).Run() })
	ip(t, "link", "set", inner, "netns", h.ns)
	ip(t, "link", "set", outer, "master", n.bridge)
	ip(t, "link", "set", outer, "up")
	ip(t, "-n", h.ns, "link", "set", "lo", "up")
	ip(t, "-n", h.ns, "addr", "add", h.addr+"/24", "dev", inner)
	ip(t, "-n", h.ns, "link", "set", inner, "up")
	return h
}

// run runs a command inside the host and returns its combined output.
func (h *netHost) run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// startAgent runs gridcity-agent inside the host (ip netns exec execs it: the pid is the
// agent's), enrolled with join when given.
func (h *netHost) startAgent(t *testing.T, state, config, join string) *proc {
	t.Helper()
	args := []string{"run", "--state", state, "--name", h.name, "--log-level", "debug"}
	if config != "" {
		args = append(args, "--config", config)
	}
	if join != "" {
		args = append(args, "--join", join)
	}
	return startCmd(t, "agent "+h.name, exec.Command("ip", append([]string{"netns", "exec", h.ns, filepath.Join(bin, "gridcity-agent")}, args...)...))
}

// startCmd starts cmd like start starts a binary: output kept for failure reports, stopped at
// the end of the test.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1")
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("---- output of %s ----\n%s", p.name, p.out.String())
		}
		if strings.Contains(p.out.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", p.name, p.out.String())
		}
	})
	return p
}

// startCoordinatorOn starts a coordinator whose gRPC listener is on the test net's gateway, so
// that agents in the hosts reach it; MCP and the app stay on loopback.
func startCoordinatorOn(t *testing.T, n *testNet, configFile string) *coordinator {
	t.Helper()
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: n.freePort()}
	args := []string{"gridcity", "serve", "--data", c.data, "--http", c.http, "--grpc", c.grpc, "--advertise", c.grpc, "--log-level", "debug"}
	if configFile != "" {
		args = append(args, "--config", configFile)
	}
	c.p = start(t, "coordinator", args...)
	c.waitHealthy()
	return c
}

// TestNetHostsReachTheCoordinator: an agent in a namespace enrolls over the test net and
// reports the host's address there; the namespace has no other way out.
func TestNetHostsReachTheCoordinator(t *testing.T) {
	t.Parallel()
	n := newTestNet(t)
	h := n.host("ns-1")
	c := startCoordinatorOn(t, n, "")
	tok := c.token()
	h.startAgent(t, t.TempDir(), "", c.joinLine())
	c.waitStatus(tok, "ns-1", "online", 20*time.Second)
	if out, err := h.run(t, "ip", "route", "show", "default"); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("the test host has a default route (%q, %v); it must reach only the test net", out, err)
	}
	eventually(t, 20*time.Second, "the host's address reported", func() error {
		servers, err := c.servers(tok)
		if err != nil {
			return err
		}
		if got := servers["ns-1"].Addresses; len(got) != 1 || got[0] != h.addr {
			return fmt.Errorf("ns-1 addresses %v; want [%s]", got, h.addr)
		}
		return nil
	})
}
