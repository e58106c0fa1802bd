// Package netlab builds a fleet of real hosts on one machine: network
// namespaces joined by veth pairs to a bridge of its own, on a private /24
// that no interface of the machine uses, each host with its own address and
// name, no default route, and real services inside (PostgreSQL, Redis,
// nginx, sshd, gridcity-agent). The end-to-end tests and `make demo` (the
// gridcity-fleet command) both use it.
//
// It is harness, under coordinator/harness with the other test, benchmark
// and demo code: no product binary may import it (deps_test.go in
// coordinator/cmd/gridcity checks).
//
// Everything it makes carries the prefix "gcf" and the net's tag in its
// name, and is written to a state file in the net's directory before it is
// made (processes: right after, with their start time). Down reads that
// file and removes what it lists — namespaces, links, the processes it
// started and no others — so a run that crashed is cleaned up by the next
// one, or by hand with `gridcity-fleet down`.
//
// Every operation needs root (ip netns, veth, setpriv).
package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Prefix starts the name of every bridge, link and namespace a net makes.
const Prefix = "gcf"

// DefaultPool is the /16 the nets' /24s are chosen from.
var DefaultPool = netip.MustParsePrefix("10.213.0.0/16")

// Options configure New.
type Options struct {
	// Tag names the net: its bridge is Prefix+Tag, its namespaces
	// Prefix+Tag+"-"+host. 1–8 of [a-z0-9]; default: one unique to this
	// process and call.
	Tag string
	// Dir holds the state file, the hosts' files and the logs. Default: a
	// new directory under os.TempDir(), removed by Down.
	Dir string
	// Subnet is the /24 to use when it is free (a demo keeps its addresses
	// from run to run); otherwise one is chosen from DefaultPool.
	Subnet netip.Prefix
	Logger *slog.Logger
}

// Net is a bridge, its /24 and the hosts on it. The root namespace has the
// gateway address (.1): a coordinator listening there is reachable from
// every host, and nothing else is.
type Net struct {
	Tag     string
	Bridge  string
	Subnet  netip.Prefix
	Gateway netip.Addr
	Dir     string

	logger *slog.Logger

	mu       sync.Mutex
	hosts    map[string]*Host
	children map[string]*child // processes this process started and reaps
}

var tagRE = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

var tagSeq struct {
	sync.Mutex
	n int
}

// subnetMu keeps this process's nets from choosing the same /24; a lock
// file does the same across processes.
var subnetMu sync.Mutex

// New creates the bridge and records it. Call Close (or Down on Dir) to
// remove everything the net made.
func New(ctx context.Context, o Options) (*Net, error) {
	if err := NeedRoot(); err != nil {
		return nil, err
	}
	if missing := Missing(IP); len(missing) > 0 {
		return nil, &MissingError{Needs: missing}
	}
	if o.Tag == "" {
		tagSeq.Lock()
		tagSeq.n++
		seq := tagSeq.n
		tagSeq.Unlock()
		o.Tag = "t" + strconv.FormatInt(int64(os.Getpid()), 36) + strconv.FormatInt(int64(seq%1296), 36)
	}
	if !tagRE.MatchString(o.Tag) {
		return nil, fmt.Errorf("netlab tag %q: use 1–8 lower-case letters and digits (interface names are at most 15 bytes)", o.Tag)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	own := false
	if o.Dir == "" {
		d, err := os.MkdirTemp("", Prefix+o.Tag+"-")
		if err != nil {
			return nil, err
		}
		o.Dir, own = d, true
	} else if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("netlab dir: %w", err)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	// The hosts' services (PostgreSQL as postgres) read files below it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	n := &Net{Tag: o.Tag, Bridge: Prefix + o.Tag, Dir: dir, logger: o.Logger, hosts: map[string]*Host{}, children: map[string]*child{}}

	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if err := n.create(ctx, o, own); err != nil {
		unlock()
		var owned *ownedError
		if errors.As(err, &owned) {
			return nil, owned.error
		}
		// Undo what was made: the state lists it.
		if _, derr := Down(ctx, dir, o.Logger); derr != nil {
			err = errors.Join(err, derr)
		}
		return nil, err
	}
	unlock()
	return n, nil
}

// create records the net and makes its bridge; called with the state
// locked.
func (n *Net) create(ctx context.Context, o Options, own bool) error {
	dir := n.Dir
	if old, err := readState(dir); err == nil {
		if old.Owner.alive() {
			return &ownedError{fmt.Errorf("%s holds a test net that process %d still runs: stop it first (gridcity-fleet down --dir %s)", dir, old.Owner.PID, dir)}
		}
		return &ownedError{fmt.Errorf("%s holds the leftovers of an earlier run (bridge %s): remove them first with Down (gridcity-fleet down --dir %s)", dir, old.Bridge, dir)}
	} else if !errors.Is(err, errNoState) {
		return err
	}
	st := &state{Tag: n.Tag, Owner: self(), OwnDir: own}
	if err := writeState(dir, st); err != nil {
		return err
	}
	return n.makeBridge(ctx, st, o.Subnet)
}

// ownedError: the directory holds another net; New must not remove it.
type ownedError struct{ error }

// makeBridge chooses the /24, records it and creates the bridge with the
// gateway address; called with the state locked.
func (n *Net) makeBridge(ctx context.Context, st *state, prefer netip.Prefix) error {
	subnetMu.Lock()
	defer subnetMu.Unlock()
	// Across processes: two nets made at once must not take one /24.
	unlockAll, err := lockPath(filepath.Join(os.TempDir(), "gridcity-netlab-subnets.lock"))
	if err != nil {
		return err
	}
	defer unlockAll()
	subnet, err := chooseSubnet(ctx, prefer)
	if err != nil {
		return err
	}
	n.Subnet, n.Gateway = subnet, subnet.Addr().Next()
	// A bridge of that name is another net's (the same tag, given twice):
	// it is not recorded, so that undoing this one leaves it alone.
	if linkExists(n.Bridge) {
		return fmt.Errorf("a link named %s exists already: another test net uses the tag %q (gridcity-fleet down, or ip link del %s if it is a leftover)", n.Bridge, n.Tag, n.Bridge)
	}
	st.Bridge, st.Subnet = n.Bridge, subnet.String()
	if err := writeState(n.Dir, st); err != nil {
		return err
	}
	if err := ipCmd(ctx, "link", "add", n.Bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := ipCmd(ctx, "addr", "add", n.Gateway.String()+"/24", "dev", n.Bridge); err != nil {
		return err
	}
	if err := ipCmd(ctx, "link", "set", n.Bridge, "up"); err != nil {
		return err
	}
	// With br_netfilter loaded, bridged frames pass iptables' FORWARD
	// chain; a DROP policy there (Docker sets one) would cut the hosts off
	// from each other.
	if rule := n.firewallRule(ctx); rule != nil {
		st.Firewall = rule
		if err := writeState(n.Dir, st); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, "iptables", append([]string{"-I"}, rule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables -I %s: %v: %s", strings.Join(rule, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// firewallRule is the FORWARD rule the bridge needs, or nil when bridged
// traffic does not meet iptables or its FORWARD policy accepts it.
func (n *Net) firewallRule(ctx context.Context) []string {
	b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "iptables", "-S", "FORWARD").Output()
	if err != nil || strings.Contains(string(out), "-P FORWARD ACCEPT") {
		return nil
	}
	return []string{"FORWARD", "-i", n.Bridge, "-o", n.Bridge, "-j", "ACCEPT", "-m", "comment", "--comment", n.Bridge}
}

// chooseSubnet picks a /24 of DefaultPool that no address or route of the
// root namespace overlaps: prefer when it is free, else one at random.
func chooseSubnet(ctx context.Context, prefer netip.Prefix) (netip.Prefix, error) {
	var used []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			used = append(used, p.Masked())
		}
	}
	out, err := exec.CommandContext(ctx, "ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("ip route show: %w", err)
	}
	used = append(used, parseRoutes(string(out))...)
	free := func(p netip.Prefix) bool {
		for _, u := range used {
			if u.Overlaps(p) {
				return false
			}
		}
		return true
	}
	if prefer.IsValid() && prefer.Bits() == 24 && prefer.Addr().Is4() && free(prefer.Masked()) {
		return prefer.Masked(), nil
	}
	base := DefaultPool.Addr().As4()
	start := rand.IntN(256)
	for i := range 256 {
		a := base
		a[2] = byte((start + i) % 256)
		p := netip.PrefixFrom(netip.AddrFrom4(a), 24)
		if free(p) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("no free /24 in %s: every one overlaps an address or a route of this machine", DefaultPool)
}

// parseRoutes reads the destinations of `ip -4 route show table all`
// (default routes excluded: they overlap everything).
func parseRoutes(out string) []netip.Prefix {
	var ps []netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		switch dst {
		case "default", "unreachable", "blackhole", "prohibit", "throw", "broadcast", "local", "unicast", "multicast", "anycast", "nat":
			if dst == "default" || len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if dst == "default" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil && p.Bits() > 0 {
			ps = append(ps, p.Masked())
		}
	}
	return ps
}

// Open attaches to a net another process made (gridcity-fleet break, fix,
// status): it reads the state, and its processes can be stopped and
// started again.
func Open(dir string) (*Net, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	n := &Net{Tag: st.Tag, Bridge: st.Bridge, Dir: dir, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		hosts: map[string]*Host{}, children: map[string]*child{}}
	if n.Subnet, err = netip.ParsePrefix(st.Subnet); err != nil {
		return nil, fmt.Errorf("netlab state in %s: subnet %q: %w", dir, st.Subnet, err)
	}
	n.Gateway = n.Subnet.Addr().Next()
	for _, h := range st.Hosts {
		addr, err := netip.ParseAddr(h.Addr)
		if err != nil {
			return nil, fmt.Errorf("netlab state in %s: host %s: %w", dir, h.Name, err)
		}
		n.hosts[h.Name] = &Host{Name: h.Name, Netns: h.Netns, Veth: h.Veth, Addr: addr, Dir: filepath.Join(dir, "hosts", h.Name), n: n}
	}
	return n, nil
}

// IsRunning reports whether dir holds a net whose owner still runs, and
// that owner's pid.
func IsRunning(dir string) (int, bool) {
	st, err := readState(dir)
	if err != nil || !st.Owner.alive() {
		return 0, false
	}
	return st.Owner.PID, true
}

// Exists reports whether dir holds a net's state (running or left over).
func Exists(dir string) bool {
	_, err := readState(dir)
	return err == nil
}

// Owner is the pid of the process that made the net.
func (n *Net) Owner() int {
	st, err := readState(n.Dir)
	if err != nil {
		return 0
	}
	return st.Owner.PID
}

// Host returns the host of that name, or nil.
func (n *Net) Host(name string) *Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hosts[name]
}

// Hosts lists the hosts in the order they were added.
func (n *Net) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	hs := make([]*Host, 0, len(n.hosts))
	for _, h := range n.hosts {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *Host) int { return a.Addr.Compare(b.Addr) })
	return hs
}

// FreePort returns a free TCP address on the gateway (for a coordinator's
// gRPC listener).
func (n *Net) FreePort() (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(n.Gateway.String(), "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// update applies f to the state under the directory's lock and writes it.
func (n *Net) update(f func(*state) error) error {
	unlock, err := lockDir(n.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := readState(n.Dir)
	if err != nil {
		return err
	}
	if err := f(st); err != nil {
		return err
	}
	return writeState(n.Dir, st)
}

// Close stops the net's processes and removes everything it made.
func (n *Net) Close(ctx context.Context) error {
	_, err := Down(ctx, n.Dir, n.logger)
	n.mu.Lock()
	children := n.children
	n.children = map[string]*child{}
	n.mu.Unlock()
	for _, c := range children {
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
	}
	return err
}

// Removed counts what Down removed.
type Removed struct {
	Processes, Namespaces int
	Links                 int // veth pairs and the bridge
}

// Down removes everything the state in dir lists: it stops the processes
// the net started (and only those: each is checked against its recorded
// start time), deletes the namespaces, links, bridge, firewall rule and
// directories, and then the state. A dir without state is nothing to do.
// It goes on after a failure and reports all of them.
func Down(ctx context.Context, dir string, logger *slog.Logger) (Removed, error) {
	var rm Removed
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return rm, err
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); errors.Is(err, os.ErrNotExist) {
		return rm, nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return rm, err
	}
	defer unlock()
	st, err := readState(dir)
	if errors.Is(err, errNoState) {
		return rm, nil
	}
	if err != nil {
		return rm, err
	}
	var errs []error
	// Every process at once, each with its own grace: a dozen processes
	// that each take a second or two to stop would otherwise add up.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := len(st.Procs) - 1; i >= 0; i-- {
		p := st.Procs[i]
		if !p.alive() {
			continue
		}
		wg.Go(func() {
			if err := stopProc(p.procID, syscall.Signal(p.StopSignal), nil, 10*time.Second); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop %s (pid %d): %w", p.key(), p.PID, err))
				mu.Unlock()
				return
			}
			mu.Lock()
			rm.Processes++
			mu.Unlock()
			logger.Debug("stopped", "process", p.key(), "pid", p.PID)
		})
	}
	wg.Wait()
	if st.Firewall != nil {
		if out, err := exec.CommandContext(ctx, "iptables", append([]string{"-D"}, st.Firewall...)...).CombinedOutput(); err != nil && !strings.Contains(string(out), "does a matching rule exist") && !strings.Contains(string(out), "No chain/target/match") {
			errs = append(errs, fmt.Errorf("iptables -D %s: %v: %s", strings.Join(st.Firewall, " "), err, bytes.TrimSpace(out)))
		}
	}
	nsList := netnsList(ctx)
	for _, h := range st.Hosts {
		if linkExists(h.Veth) {
			rm.Links++
		}
		if nsList[h.Netns] {
			if err := ipCmd(ctx, "netns", "del", h.Netns); err != nil {
				errs = append(errs, err)
			} else {
				rm.Namespaces++
			}
		}
		// Deleting the namespace takes its end of the pair, and with it
		// this one; a pair made before its namespace was needs this.
		if linkExists(h.Veth) {
			if err := ipCmd(ctx, "link", "del", h.Veth); err != nil && linkExists(h.Veth) {
				errs = append(errs, err)
			}
		}
	}
	if st.Bridge != "" && linkExists(st.Bridge) {
		if err := ipCmd(ctx, "link", "del", st.Bridge); err != nil {
			errs = append(errs, err)
		} else {
			rm.Links++
		}
	}
	for _, d := range st.Dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Keep the state, so that another Down can finish the job.
		return rm, fmt.Errorf("netlab down in %s: %w", dir, errors.Join(errs...))
	}
	if st.OwnDir {
		if err := os.RemoveAll(dir); err != nil {
			return rm, err
		}
	} else if err := os.Remove(filepath.Join(dir, stateFile)); err != nil {
		return rm, err
	}
	return rm, nil
}

// Sweep removes the nets left in root's Prefix* directories (New's
// default Dir is one) by processes that have exited without removing
// them: a test binary killed by its timeout, say. Nets whose owner runs
// are left alone.
func Sweep(ctx context.Context, root string, logger *slog.Logger) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(root, Prefix+"*"))
	if err != nil {
		return nil, err
	}
	var swept []string
	var errs []error
	for _, d := range dirs {
		st, err := readState(d)
		if err != nil || st.Owner.alive() {
			continue
		}
		if _, err := Down(ctx, d, logger); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, d)
	}
	return swept, errors.Join(errs...)
}

// NeedRoot fails unless this process is root.
func NeedRoot() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	return nil
}

// ErrNotRoot: network namespaces, veth pairs and bridges need root.
var ErrNotRoot = errors.New("netlab needs root: network namespaces, veth pairs and bridges are root's to make")

// ipCmd runs ip(8); the error carries its output.
func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

func netnsList(ctx context.Context) map[string]bool {
	m := map[string]bool{}
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			m[f[0]] = true
		}
	}
	return m
}
