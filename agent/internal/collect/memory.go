package collect

import (
	"bytes"
	"errors"
	"iter"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("memory", TierFast, newMemoryCollector) }

// maxMeminfoLines bounds /proc/meminfo, about 55 lines on current kernels.
const maxMeminfoLines = 1024

// meminfo holds the /proc/meminfo values we use, in bytes.
type meminfo struct {
	total, free, available, buffers, cached, reclaimable uint64
	swapTotal, swapFree                                  uint64
	hasAvailable                                         bool
}

// parseMeminfo reads "MemTotal:       16318448 kB" lines.
func parseMeminfo(lines iter.Seq[[]byte]) (meminfo, error) {
	var (
		m        meminfo
		hasTotal bool
		buf      [4][]byte
	)
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) < 2 {
			continue
		}
		v, ok := parseUint(f[1])
		if !ok {
			continue
		}
		if len(f) > 2 && bytes.Equal(f[2], []byte("kB")) {
			v = satMul(v, 1024)
		}
		switch string(f[0]) {
		case "MemTotal:":
			m.total, hasTotal = v, true
		case "MemFree:":
			m.free = v
		case "MemAvailable:":
			m.available, m.hasAvailable = v, true
		case "Buffers:":
			m.buffers = v
		case "Cached:":
			m.cached = v
		case "SReclaimable:":
			m.reclaimable = v
		case "SwapTotal:":
			m.swapTotal = v
		case "SwapFree:":
			m.swapFree = v
		}
	}
	if !hasTotal {
		return meminfo{}, errors.New("no MemTotal")
	}
	return m, nil
}

// memorySection counts as used what cannot be had without swapping: total
// minus MemAvailable, as free(1) does. Kernels before 3.14 lack
// MemAvailable; there free, buffers and reclaimable caches stand in for it.
func memorySection(m meminfo) *gridcityv1.Memory {
	avail := m.available
	if !m.hasAvailable {
		avail = satAdd(satAdd(m.free, m.buffers), satAdd(m.cached, m.reclaimable))
	}
	avail = min(avail, m.total)
	used := m.total - avail
	return &gridcityv1.Memory{
		TotalBytes:     m.total,
		UsedBytes:      used,
		AvailableBytes: avail,
		UsedPercent:    percent(float64(used), float64(m.total)),
		SwapTotalBytes: m.swapTotal,
		SwapUsedBytes:  m.swapTotal - min(m.swapFree, m.swapTotal),
	}
}
