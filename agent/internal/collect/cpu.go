package collect

import (
	"bytes"
	"errors"
	"iter"
	"math"
	"strconv"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("cpu", TierFast, newCPUCollector) }

// Bounds on the cpu files. /proc/stat has a line per cpu before anything we
// skip; cpuinfo is read once, and its model line is near the top on x86 but
// at the very end on some ARM boards.
const (
	maxStatLines    = 1 << 17
	maxCPUInfoLines = 1 << 18
	maxCores        = 1 << 16
)

// cpuTimes is the aggregate line of /proc/stat, in clock ticks since boot.
type cpuTimes struct {
	busy, total uint64
	cores       uint32
}

// parseStat reads the cpu lines of /proc/stat: "cpu  user nice system idle
// iowait irq softirq steal guest guest_nice", then one "cpuN" line per
// online cpu. guest and guest_nice are already counted in user and nice, so
// the total stops at steal; busy is everything but idle and iowait.
func parseStat(lines iter.Seq[[]byte]) (cpuTimes, error) {
	var (
		t    cpuTimes
		seen bool
		buf  [12][]byte
	)
	for line := range lines {
		if !bytes.HasPrefix(line, []byte("cpu")) {
			if seen {
				break // the cpu lines come first and together
			}
			continue
		}
		f := fields(line, buf[:0])
		if len(f) == 0 {
			continue
		}
		if !bytes.Equal(f[0], []byte("cpu")) {
			if _, ok := parseUint(f[0][3:]); ok && t.cores < maxCores {
				t.cores++
			}
			continue
		}
		if seen {
			continue
		}
		if len(f) < 5 {
			return cpuTimes{}, errors.New("aggregate cpu line has fewer than 4 counters")
		}
		var v [8]uint64
		for i := 0; i < len(v) && i+1 < len(f); i++ {
			n, ok := parseUint(f[i+1])
			if !ok {
				return cpuTimes{}, errors.New("aggregate cpu line has a counter that is not a number")
			}
			v[i] = n
		}
		for _, n := range v {
			t.total = satAdd(t.total, n)
		}
		idle := satAdd(v[3], v[4])
		if idle < t.total {
			t.busy = t.total - idle
		}
		seen = true
	}
	if !seen {
		return cpuTimes{}, errors.New("no aggregate cpu line")
	}
	return t, nil
}

// busyPercent is the share of ticks spent busy between two samples, nil
// with the reason when there is no such share yet. The first sample (prev
// zero) has nothing to compare with: the counters alone give the average
// since boot, which says nothing about now, so the share is unknown until
// the second. Counters that went back (a cpu taken offline takes its ticks
// with it) make it unknown again for one sample; no new ticks keep the
// last figure rather than invent one.
func busyPercent(prev, cur cpuTimes, last *float64) (*float64, string) {
	switch {
	case prev.total == 0:
		return nil, "not collected yet: the busy share is measured between two samples, and the second is taken at the next fast tick (every 5 s by default)"
	case cur.total < prev.total || cur.busy < prev.busy:
		return nil, "the cpu counters went back (a cpu went offline?); the busy share is measured again from the next sample"
	case cur.total == prev.total && last == nil:
		return nil, "not collected yet: no cpu time passed between the first samples"
	case cur.total == prev.total:
		return last, ""
	}
	p := percent(float64(cur.busy-prev.busy), float64(cur.total-prev.total))
	return &p, ""
}

// parseLoadavg reads "0.52 0.58 0.59 1/1234 5678".
func parseLoadavg(lines iter.Seq[[]byte]) (l1, l5, l15 float64, err error) {
	var buf [4][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) < 3 {
			return 0, 0, 0, errors.New("fewer than 3 load averages")
		}
		var v [3]float64
		for i := range v {
			x, err := strconv.ParseFloat(string(f[i]), 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return 0, 0, 0, errors.New("a load average is not a number")
			}
			v[i] = x
		}
		return v[0], v[1], v[2], nil
	}
	return 0, 0, 0, errors.New("empty")
}

// cpuModelKeys are the cpuinfo keys that name the processor, best first:
// x86, then ARM boards, MIPS, POWER, RISC-V and old ARM.
var cpuModelKeys = [][]byte{
	[]byte("model name"), []byte("Model"), []byte("cpu model"),
	[]byte("cpu"), []byte("uarch"), []byte("Processor"), []byte("Hardware"),
}

// parseCPUModel returns the processor's name from /proc/cpuinfo, "" when
// the file names none (most arm64 kernels give only part numbers).
func parseCPUModel(lines iter.Seq[[]byte]) string {
	best, model := len(cpuModelKeys), ""
	for line := range lines {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		k, v = bytes.TrimSpace(k), bytes.TrimSpace(v)
		for i, key := range cpuModelKeys[:best] {
			if bytes.Equal(k, key) && len(v) > 0 {
				best, model = i, cleanBytes(v, maxName)
				break
			}
		}
		if best == 0 {
			break
		}
	}
	return model
}

// cpuSection builds the section from one sample.
func cpuSection(t cpuTimes, busy *float64, l1, l5, l15 float64, model string) *gridcityv1.CPU {
	return &gridcityv1.CPU{
		Cores:       t.cores,
		BusyPercent: busy,
		Load1:       l1,
		Load5:       l5,
		Load15:      l15,
		Model:       model,
	}
}
