package netlab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// Host is a network namespace on the net: loopback and one address on the
// bridge (its end of a veth pair is eth0), no default route.
type Host struct {
	Name  string
	Netns string // ip netns name: Prefix+tag+"-"+Name
	// Veth is the pair's end in the root namespace, on the bridge: setting
	// it down cuts the host off (CutLink).
	Veth string
	Addr netip.Addr
	Dir  string // the host's files: configs, keys, the agent's state
	n    *Net
}

var hostRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// AddHost adds a host with the next free address of the /24 (.2 onwards).
func (n *Net) AddHost(ctx context.Context, name string) (*Host, error) {
	if !hostRE.MatchString(name) {
		return nil, fmt.Errorf("host name %q: use lower-case letters, digits and '-', at most 32", name)
	}
	var h *Host
	err := n.update(func(st *state) error {
		used := map[string]bool{}
		for _, r := range st.Hosts {
			if r.Name == name {
				return fmt.Errorf("the net already has a host %q", name)
			}
			used[r.Addr] = true
		}
		addr := n.Gateway.Next()
		for used[addr.String()] {
			addr = addr.Next()
		}
		if !n.Subnet.Contains(addr) || addr.As4()[3] == 255 {
			return fmt.Errorf("the net's /24 %s is full", n.Subnet)
		}
		h = &Host{Name: name, Netns: n.Bridge + "-" + name, Veth: n.Bridge + "h" + strconv.Itoa(int(addr.As4()[3])), Addr: addr,
			Dir: filepath.Join(n.Dir, "hosts", name), n: n}
		// Names taken already are someone else's: not recorded, so that
		// Down leaves them alone.
		if netnsList(ctx)[h.Netns] || linkExists(h.Veth) {
			return fmt.Errorf("add host %s: the namespace %s or the link %s exists already (another net with the tag %q?)", name, h.Netns, h.Veth, n.Tag)
		}
		// Recorded before it is made, so that a crash half way leaves
		// nothing Down does not know of.
		st.Hosts = append(st.Hosts, hostRec{Name: h.Name, Netns: h.Netns, Veth: h.Veth, Addr: h.Addr.String()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.Dir, 0o711); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"netns", "add", h.Netns},
		// The peer is made inside the namespace under its final name: no
		// moment with an eth0 in the root namespace.
		{"link", "add", h.Veth, "type", "veth", "peer", "name", "eth0", "netns", h.Netns},
		{"link", "set", h.Veth, "master", n.Bridge},
		{"link", "set", h.Veth, "up"},
		{"-n", h.Netns, "link", "set", "lo", "up"},
		{"-n", h.Netns, "addr", "add", h.Addr.String() + "/24", "dev", "eth0"},
		{"-n", h.Netns, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := ipCmd(ctx, s...); err != nil {
			return nil, fmt.Errorf("add host %s: %w", name, err)
		}
	}
	n.mu.Lock()
	n.hosts[name] = h
	n.mu.Unlock()
	return h, nil
}

// Command is name with args to run inside the host.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Netns, name}, args...)...)
}

// Run runs a command inside the host and returns its combined output.
func (h *Host) Run(ctx context.Context, name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := h.Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// CutLink sets the host's veth down on the bridge's side: the host stays
// up, with its processes and address, but nothing reaches it and it
// reaches nothing — a pulled cable.
func (h *Host) CutLink(ctx context.Context) error {
	return ipCmd(ctx, "link", "set", h.Veth, "down")
}

// RestoreLink undoes CutLink.
func (h *Host) RestoreLink(ctx context.Context) error {
	return ipCmd(ctx, "link", "set", h.Veth, "up")
}

// String is the host's name and address.
func (h *Host) String() string { return h.Name + " (" + h.Addr.String() + ")" }
