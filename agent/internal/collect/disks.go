package collect

import (
	"bytes"
	"iter"
	"sort"
	"strings"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("disks", TierMedium, newDisksCollector) }

// Bounds on the mount table: a Kubernetes node can have thousands of
// mounts, nearly all of them skipped below.
const (
	maxMountLines = 1 << 16
	maxDisks      = 256
)

// pseudoFS are filesystems that hold no disk space worth watching: kernel
// interfaces, memory, container layers and read-only images (always 100%).
var pseudoFS = map[string]bool{
	"autofs": true, "binfmt_misc": true, "bpf": true, "cgroup": true, "cgroup2": true,
	"configfs": true, "debugfs": true, "devpts": true, "devtmpfs": true, "efivarfs": true,
	"erofs": true, "fuse.gvfsd-fuse": true, "fuse.lxcfs": true, "fuse.portal": true,
	"fuse.snapfuse": true, "fusectl": true, "hugetlbfs": true, "iso9660": true,
	"mqueue": true, "nfsd": true, "nsfs": true, "overlay": true, "proc": true,
	"pstore": true, "ramfs": true, "rpc_pipefs": true, "securityfs": true,
	"selinuxfs": true, "squashfs": true, "sysfs": true, "tmpfs": true, "tracefs": true,
	"aufs": true, "shiftfs": true, "zram": true,
}

// skippedMountDirs are trees of mounts that belong to the kernel or to a
// container runtime, which mounts each container's filesystems there.
var skippedMountDirs = []string{
	"/proc", "/sys", "/dev",
	"/var/lib/docker", "/var/lib/containers", "/var/lib/kubelet/pods",
	"/run/containerd", "/run/docker", "/run/netns", "/snap",
}

type mount struct {
	device, point, fstype string
}

// parseMounts reads /proc/[pid]/mounts ("device mountpoint fstype options
// 0 0", spaces in names escaped as \040) and returns the mounts of real
// filesystems, one per device (a bind mount or a btrfs subvolume repeats a
// device and its space), sorted by mount point.
func parseMounts(lines iter.Seq[[]byte]) []mount {
	byKey := map[string]mount{}
	var buf [4][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) < 3 || pseudoFS[string(f[2])] {
			continue
		}
		m := mount{
			device: cleanBytes(unescapeMount(f[0]), maxName),
			point:  cleanBytes(unescapeMount(f[1]), maxName),
			fstype: cleanBytes(f[2], maxName),
		}
		if !strings.HasPrefix(m.point, "/") || skippedMount(m.point) {
			continue
		}
		key := m.device
		if key == "none" || key == "" {
			key = "\x00" + m.point
		}
		if old, ok := byKey[key]; ok && len(old.point) <= len(m.point) {
			continue
		}
		if _, ok := byKey[key]; !ok && len(byKey) >= maxDisks {
			continue
		}
		byKey[key] = m
	}
	out := make([]mount, 0, len(byKey))
	for _, m := range byKey {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].point != out[j].point {
			return out[i].point < out[j].point
		}
		return out[i].device < out[j].device
	})
	return out
}

func skippedMount(point string) bool {
	for _, dir := range skippedMountDirs {
		if point == dir || strings.HasPrefix(point, dir+"/") {
			return true
		}
	}
	return false
}

// unescapeMount undoes the kernel's octal escapes (\040 space, \011 tab,
// \012 newline, \134 backslash) in a mounts field.
func unescapeMount(b []byte) []byte {
	if bytes.IndexByte(b, '\\') < 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && isOctal(b[i+1]) && isOctal(b[i+2]) && isOctal(b[i+3]) {
			out = append(out, (b[i+1]-'0')<<6|(b[i+2]-'0')<<3|(b[i+3]-'0'))
			i += 3
			continue
		}
		out = append(out, b[i])
	}
	return out
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// fsStats is what statfs(2) says about a filesystem, sizes in bytes.
type fsStats struct {
	total, free, avail uint64
	files, filesFree   uint64
}

// diskSection builds one disk. Used percent is df's: used over what users
// can have (used + available), so the blocks reserved for root show as a
// full disk the way admins know it.
func diskSection(m mount, st fsStats) *gridcityv1.Disk {
	used := st.total - min(st.free, st.total)
	inodesUsed := st.files - min(st.filesFree, st.files)
	return &gridcityv1.Disk{
		Mount:             m.point,
		Device:            m.device,
		Filesystem:        m.fstype,
		TotalBytes:        st.total,
		UsedBytes:         used,
		AvailableBytes:    min(st.avail, st.total),
		UsedPercent:       percent(float64(used), float64(used)+float64(st.avail)),
		InodesTotal:       st.files,
		InodesUsed:        inodesUsed,
		InodesUsedPercent: percent(float64(inodesUsed), float64(st.files)),
	}
}
