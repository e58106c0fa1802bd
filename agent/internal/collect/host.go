package collect

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"os"
	"slices"
	"time"

	"github.com/shirou/gopsutil/v4/common"
	"github.com/shirou/gopsutil/v4/host"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("host", TierSlow, newHostCollector) }

// hostCollector asks gopsutil, which knows the many ways distributions
// name themselves. gopsutil reads its roots from the context, so the
// collector's roots reach it without touching the process environment.
type hostCollector struct {
	env      common.EnvMap
	procRoot string
	// addrs lists the host's interface addresses (net.InterfaceAddrs).
	addrs func() ([]net.Addr, error)
}

func newHostCollector(cfg Config, _ *slog.Logger) collector {
	return &hostCollector{
		env: common.EnvMap{
			common.HostProcEnvKey: cfg.ProcRoot,
			common.HostSysEnvKey:  cfg.SysRoot,
			common.HostEtcEnvKey:  cfg.EtcRoot,
			common.HostRootEnvKey: cfg.RootFS,
		},
		procRoot: cfg.ProcRoot,
		addrs:    net.InterfaceAddrs,
	}
}

func (c *hostCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	ctx = context.WithValue(ctx, common.EnvKey, c.env)
	var h gridcityv1.HostInfo
	var err error
	if h.Hostname, err = os.Hostname(); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if h.Os, h.PlatformFamily, h.OsVersion, err = host.PlatformInformationWithContext(ctx); err != nil {
		return fmt.Errorf("platform: %w", err)
	}
	if h.Kernel, err = host.KernelVersionWithContext(ctx); err != nil {
		return fmt.Errorf("kernel version: %w", err)
	}
	if h.Arch, err = host.KernelArch(); err != nil {
		return fmt.Errorf("kernel architecture: %w", err)
	}
	boot, err := c.bootTime(ctx)
	if err != nil {
		return fmt.Errorf("boot time: %w", err)
	}
	system, role, err := host.VirtualizationWithContext(ctx)
	if err != nil {
		return fmt.Errorf("virtualization: %w", err)
	}
	out.Host = hostSection(&h, boot, time.Now(), system, role)
	if addrs, err := c.addrs(); err != nil {
		// The rest of the section stands; only discovery by address suffers.
		n.add("addresses", "interface addresses: "+err.Error())
	} else {
		out.Host.Addresses = hostAddresses(addrs)
	}
	return nil
}

// maxAddresses bounds the addresses a host reports (a router with
// hundreds of VLANs does not need them all to be found).
const maxAddresses = 64

// hostAddresses keeps the unicast addresses others could connect to —
// not loopback, link-local, multicast or unspecified — sorted, at most
// maxAddresses.
func hostAddresses(addrs []net.Addr) []string {
	var out []string
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
			continue
		}
		out = append(out, ip.String())
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out[:min(len(out), maxAddresses)]
}

// hostSection finishes the section: uptime follows from the boot time, so
// that both come from the same (possibly fixture) source, and every string
// is cleaned.
func hostSection(h *gridcityv1.HostInfo, boot uint64, now time.Time, virtSystem, virtRole string) *gridcityv1.HostInfo {
	h.Hostname = clean(h.Hostname, maxName)
	h.Os = clean(h.Os, maxName)
	h.OsVersion = clean(h.OsVersion, maxName)
	h.PlatformFamily = clean(h.PlatformFamily, maxName)
	h.Kernel = clean(h.Kernel, maxName)
	h.Arch = clean(h.Arch, maxName)
	h.BootUnix = int64(min(boot, uint64(1<<62)))
	if up := now.Unix() - h.BootUnix; up > 0 && h.BootUnix > 0 {
		h.UptimeSeconds = uint64(up)
	}
	// gopsutil says kvm/host on a hypervisor and kvm/guest inside one; a
	// bare "kvm" must mean the guest.
	h.Virtualization = clean(virtSystem, maxName)
	if virtSystem != "" && virtRole == "host" {
		h.Virtualization += " host"
	}
	return h
}

// parseBtime returns the boot time from the "btime" line of /proc/stat.
func parseBtime(lines iter.Seq[[]byte]) (uint64, error) {
	var buf [3][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) == 2 && string(f[0]) == "btime" {
			if t, ok := parseUint(f[1]); ok {
				return t, nil
			}
			return 0, errors.New("btime is not a number")
		}
	}
	return 0, errors.New("no btime line")
}
