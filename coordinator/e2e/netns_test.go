package e2e

// Test hosts on one machine, made by coordinator/harness/netlab: network namespaces joined
// by veth pairs to a bridge of the test's own in the root namespace, on a private /24 that no
// interface of the machine uses. Traffic stays on that bridge and loopback. Everything is
// removed when the test ends, also when it fails; a test binary killed before its cleanups ran
// leaves a state file that the next run's first newTestNet sweeps.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
)

// testNet is a netlab net owned by a test; the root namespace (where the coordinator runs)
// has its .1.
type testNet struct {
	t *testing.T
	*netlab.Net
}

// netHost is a test host: a network namespace with one address on the test net.
type netHost struct {
	name, ns, addr string
	*netlab.Host
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

// needPrograms skips a test whose services are not installed, except in CI, which must install
// them.
func needPrograms(t *testing.T, needs ...netlab.Need) {
	t.Helper()
	if missing := netlab.Missing(needs...); len(missing) > 0 {
		err := &netlab.MissingError{Needs: missing}
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must install them: %v", err)
		}
		t.Skip(err)
	}
}

var sweepOnce sync.Once

// newTestNet creates the bridge; it and every host and process on it go when the test ends.
func newTestNet(t *testing.T) *testNet {
	t.Helper()
	needRoot(t)
	ctx := context.Background()
	sweepOnce.Do(func() {
		if swept, err := netlab.Sweep(ctx, os.TempDir(), nil); err != nil {
			t.Logf("sweeping test nets left by earlier runs: %v", err)
		} else if len(swept) > 0 {
			t.Logf("removed test nets left by earlier runs: %v", swept)
		}
	})
	n, err := netlab.New(ctx, netlab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(context.Background()); err != nil {
			t.Errorf("remove the test net: %v", err)
		}
	})
	return &testNet{t: t, Net: n}
}

// gateway is the root namespace's address on the test net.
func (n *testNet) gateway() string { return n.Gateway.String() }

// freePort is a free TCP address on the gateway, for the coordinator's gRPC listener.
func (n *testNet) freePort() string {
	a, err := n.FreePort()
	if err != nil {
		n.t.Fatal(err)
	}
	return a
}

// host adds a namespace with the next address.
func (n *testNet) host(name string) *netHost {
	n.t.Helper()
	h, err := n.AddHost(context.Background(), name)
	if err != nil {
		n.t.Fatal(err)
	}
	return &netHost{name: h.Name, ns: h.Netns, addr: h.Addr.String(), Host: h}
}

// run runs a command inside the host and returns its combined output.
func (h *netHost) run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	return h.Run(context.Background(), name, args...)
}

// startAgent runs gridcity-agent (built with -race) inside the host, enrolled with join when
// given.
func (h *netHost) startAgent(t *testing.T, state, config, join string) *netlab.Proc {
	t.Helper()
	p, err := h.StartAgent(context.Background(), netlab.AgentOptions{
		Bin: filepath.Join(bin, "gridcity-agent"), State: state, ConfigFile: config, Join: join,
		Args: []string{"--log-level", "debug"}, Env: []string{"GORACE=halt_on_error=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	watchProc(t, p)
	return p
}

// watchProc reports a netlab process's output when the test fails, and fails the test when
// the process reported a data race. Cleanups run last-in first-out: this one runs before the
// net (and the log with it) is removed.
func watchProc(t *testing.T, p *netlab.Proc) {
	t.Helper()
	t.Cleanup(func() {
		out := p.Tail(400)
		if t.Failed() {
			t.Logf("---- output of %s (the end of %s) ----\n%s", p, p.Log(), out)
		}
		if strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race:\n%s", p, out)
		}
	})
}

// startCmd starts cmd like start starts a binary: output kept for failure reports, stopped at
// the end of the test.
func startCmd(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = append(append(os.Environ(), "GORACE=halt_on_error=1"), cmd.Env...) // cmd.Env: what the caller adds
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
