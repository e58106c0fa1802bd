package collect

import (
	"bytes"
	"errors"
	"iter"
	"math"
	"slices"
	"sort"
	"strconv"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func init() { register("processes", TierFast, newProcessesCollector) }

// Bounds on the process walk. A /proc/PID/stat line is about 300 bytes;
// status about 60 lines; cgroup one line per hierarchy.
const (
	// maxProcWalk bounds the processes one walk reads: a host with more
	// has its first maxProcWalk looked at, and a gap says so.
	maxProcWalk    = 1 << 16
	maxProcStat    = 4096
	maxStatusLines = 256
	maxCgroupLines = 256
	maxPasswdLines = 1 << 16
	// maxProcName bounds a process name; the kernel's are 15 bytes, a
	// fixture's or a hostile procfs's may be anything.
	maxProcName = 64
)

// procStat is what the walk needs of one /proc/PID/stat.
type procStat struct {
	pid   int32
	comm  string
	ticks uint64 // utime + stime, in clock ticks
	start uint64 // starttime, in clock ticks since boot: tells a reused pid
	rss   uint64 // resident pages
}

var errProcStat = errors.New("not a /proc/PID/stat line")

// parseProcStat reads "pid (comm) state ppid … utime stime … starttime vsize
// rss …". The name may hold blanks, parentheses and newlines (a process
// names itself), so it runs from the first "(" to the last ")".
func parseProcStat(b []byte) (procStat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return procStat{}, errProcStat
	}
	pid, ok := parseUint(bytes.TrimSpace(b[:open]))
	if !ok || pid == 0 || pid > math.MaxInt32 {
		return procStat{}, errProcStat
	}
	// After the name: state is field 3 of proc(5); utime 14, stime 15,
	// starttime 22, rss 24.
	var buf [23][]byte
	f := fields(b[end+1:], buf[:])
	if len(f) < 22 {
		return procStat{}, errProcStat
	}
	var v [4]uint64
	for i, at := range []int{11, 12, 19, 21} {
		if v[i], ok = parseUint(f[at]); !ok {
			return procStat{}, errProcStat
		}
	}
	return procStat{pid: int32(pid), comm: cleanBytes(b[open+1:end], maxProcName),
		ticks: satAdd(v[0], v[1]), start: v[2], rss: v[3]}, nil
}

// parseProcStatus returns the effective uid of "Uid:\treal\teffective\t…".
func parseProcStatus(lines iter.Seq[[]byte]) (uint32, bool) {
	var buf [4][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) < 3 || !bytes.Equal(f[0], []byte("Uid:")) {
			continue
		}
		uid, ok := parseUint(f[2])
		if !ok || uid > math.MaxUint32 {
			return 0, false
		}
		return uint32(uid), true
	}
	return 0, false
}

// parseCgroupUnit returns the systemd system unit whose cgroup holds a
// process, from /proc/PID/cgroup: the unified hierarchy's line ("0::/…")
// or else the named systemd one ("1:name=systemd:/…"). It is the innermost
// ".service" of the path, and "" for a process under a user's manager
// (user@1000.service: not a unit systemctl restarts) or outside services.
func parseCgroupUnit(lines iter.Seq[[]byte]) string {
	var unified, named []byte
	for line := range lines {
		id, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		ctl, path, ok := bytes.Cut(rest, []byte(":"))
		switch {
		case !ok:
		case bytes.Equal(id, []byte("0")) && len(ctl) == 0:
			unified = slices.Clone(path)
		case bytes.Equal(ctl, []byte("name=systemd")):
			named = slices.Clone(path)
		}
	}
	path := unified
	if len(path) <= 1 {
		path = named
	}
	unit := ""
	for part := range bytes.SplitSeq(path, []byte("/")) {
		if bytes.HasPrefix(part, []byte("user@")) {
			return ""
		}
		if bytes.HasSuffix(part, []byte(".service")) && unitName(part) {
			unit = string(part)
		}
	}
	return unit
}

// unitName reports whether b is a plausible systemd unit name: its
// characters are the ones systemd allows (others are \x-escaped).
func unitName(b []byte) bool {
	if len(b) > maxName {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == ':' || c == '_' || c == '.' || c == '-' || c == '@' || c == '\\':
		default:
			return false
		}
	}
	return true
}

// parsePasswd maps uids to user names from /etc/passwd
// ("name:x:uid:gid:…"); the first name of a uid wins.
func parsePasswd(lines iter.Seq[[]byte]) map[uint32]string {
	users := map[uint32]string{}
	for line := range lines {
		parts := bytes.SplitN(line, []byte(":"), 4)
		if len(parts) < 4 || len(parts[0]) == 0 {
			continue
		}
		uid, ok := parseUint(parts[2])
		if !ok || uid > math.MaxUint32 {
			continue
		}
		if _, dup := users[uint32(uid)]; !dup {
			users[uint32(uid)] = cleanBytes(parts[0], maxName)
		}
	}
	return users
}

// procPrev is a process as the previous walk saw it.
type procPrev struct{ start, ticks uint64 }

// procPrevOf keeps what the next walk compares with: a map of the
// processes just read, so that it is bounded by the walk.
func procPrevOf(cur []procStat) map[int32]procPrev {
	m := make(map[int32]procPrev, len(cur))
	for _, p := range cur {
		m[p.pid] = procPrev{start: p.start, ticks: p.ticks}
	}
	return m
}

// topProcesses gives each process its CPU share since the previous walk
// and returns the union of the busiest and the largest, each ranking at
// most gridcityv1.TopProcesses: the busiest first, then the largest not
// already listed. elapsed is the clock ticks each cpu ran between the two
// walks; a process the previous (whole) walk did not see started since, so
// all its time is in the interval; one missed by a walk cut short counts
// as idle, since its share is not known. A share is capped at every core
// busy, and rounded to a tenth of a percent.
func topProcesses(cur []procStat, prev map[int32]procPrev, prevWhole bool, elapsed float64, cores uint32, pageSize uint64) []*gridcityv1.Process {
	type scored struct {
		i   int
		cpu float64
		rss uint64
	}
	all := make([]scored, len(cur))
	ceiling := 100 * float64(max(cores, 1))
	for i, p := range cur {
		var used uint64
		switch before, seen := prev[p.pid]; {
		case seen && before.start == p.start:
			if p.ticks > before.ticks {
				used = p.ticks - before.ticks
			}
		case prevWhole:
			used = p.ticks
		}
		cpu := 0.0
		if elapsed > 0 {
			cpu = min(float64(used)/elapsed*100, ceiling)
			cpu = math.Round(cpu*10) / 10
		}
		all[i] = scored{i: i, cpu: cpu, rss: satMul(p.rss, pageSize)}
	}
	var picked []scored
	pick := func(cmpf func(a, b scored) int, has func(scored) bool) {
		// sort.Slice, not slices.SortFunc: a SortFunc over a struct type
		// compiles a sorter of its own, about 10 KiB of the binary; pids
		// are unique, so the order is the same.
		sort.Slice(all, func(i, j int) bool { return cmpf(all[i], all[j]) < 0 })
		n := 0
		for _, s := range all {
			if n == gridcityv1.TopProcesses || !has(s) {
				break
			}
			n++
			if !slices.ContainsFunc(picked, func(o scored) bool { return o.i == s.i }) {
				picked = append(picked, s)
			}
		}
	}
	byPid := func(a, b scored) int { return int(cur[a.i].pid) - int(cur[b.i].pid) }
	pick(func(a, b scored) int {
		if a.cpu != b.cpu {
			return cmpDesc(a.cpu, b.cpu)
		}
		return byPid(a, b)
	}, func(s scored) bool { return s.cpu > 0 })
	pick(func(a, b scored) int {
		if a.rss != b.rss {
			return cmpDesc(float64(a.rss), float64(b.rss))
		}
		return byPid(a, b)
	}, func(s scored) bool { return s.rss > 0 })
	out := make([]*gridcityv1.Process, len(picked))
	for k, s := range picked {
		p := cur[s.i]
		out[k] = &gridcityv1.Process{Pid: p.pid, Name: p.comm, CpuPercent: s.cpu, RssBytes: s.rss}
	}
	return out
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
}

// Thresholds at which the host counts as busy and its processes are
// walked every fast tick instead of every processWalkEvery: the levels at
// which the coordinator's doctor starts to look at them.
const (
	busyCPUPercent    = 90.0
	busyLoadPerCore   = 1.0
	busyMemoryPercent = 90.0
)

// hostBusy tells whether the host is busy: CPU busy share between two
// /proc/stat readings, the 1-minute load per core, or memory in use.
func hostBusy(prev, cur cpuTimes, load1 float64, mem *meminfo) bool {
	if prev.total > 0 && cur.total > prev.total && cur.busy >= prev.busy &&
		percent(float64(cur.busy-prev.busy), float64(cur.total-prev.total)) >= busyCPUPercent {
		return true
	}
	if load1 >= busyLoadPerCore*float64(max(cur.cores, 1)) {
		return true
	}
	return mem != nil && memorySection(*mem).GetUsedPercent() >= busyMemoryPercent
}

// userName names a uid, by its number when the host's passwd has no name.
func userName(users map[uint32]string, uid uint32) string {
	if name, ok := users[uid]; ok && name != "" {
		return name
	}
	return strconv.FormatUint(uint64(uid), 10)
}
