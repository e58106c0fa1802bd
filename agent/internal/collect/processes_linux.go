package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// processWalkEvery is how often the processes are walked while the host
// is calm: the default medium interval. While it is busy, every fast tick.
const processWalkEvery = 30 * time.Second

// processesCollector reads /proc/stat, /proc/loadavg and /proc/meminfo
// every fast tick, and walks every /proc/PID/stat only when the host is
// busy or processWalkEvery has passed: reading every process is the cost
// to avoid on a calm host. A process's CPU share is the difference of two
// walks, so the previous walk's ticks are kept, one entry per process it
// read. The user and the unit are read for the few processes listed only,
// and kept while they stay listed.
type processesCollector struct {
	procRoot, passwdPath string
	every                time.Duration
	now                  func() time.Time
	pageSize             uint64
	sc                   *lineScanner
	buf                  []byte

	tick      cpuTimes // /proc/stat at the last tick, for the busy share
	walkStat  cpuTimes // /proc/stat at the last walk
	walked    time.Time
	prev      map[int32]procPrev
	prevWhole bool // the last walk read every process
	reported  bool // a section was sent: CPU shares are known

	owners       map[procKey]procOwner
	users        map[uint32]string
	passwdStamp  time.Time
	passwdLength int64
}

// procOwner is who runs a listed process.
type procOwner struct{ user, unit string }

// procKey is one process: a pid with its start time, since pids are reused.
type procKey struct {
	pid   int32
	start uint64
}

func newProcessesCollector(cfg Config, _ *slog.Logger) collector {
	return &processesCollector{
		procRoot:   cfg.ProcRoot,
		passwdPath: filepath.Join(cfg.EtcRoot, "passwd"),
		every:      processWalkEvery,
		now:        time.Now,
		pageSize:   uint64(os.Getpagesize()),
		sc:         newLineScanner(16 << 10),
		buf:        make([]byte, maxProcStat),
		owners:     map[procKey]procOwner{},
	}
}

func (c *processesCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	var t cpuTimes
	err := scanFile(c.sc, filepath.Join(c.procRoot, "stat"), maxStatLines, func(s *lineScanner) (err error) {
		t, err = parseStat(s.lines())
		return err
	})
	if err != nil {
		return err
	}
	busy := c.busy(t)
	c.tick = t
	if c.reported && !busy && c.now().Sub(c.walked) < c.every {
		return nil // calm, and walked lately: the section sent stands
	}
	cur, whole, err := c.walk(ctx)
	if err != nil {
		return err
	}
	prev, prevWhole, before := c.prev, c.prevWhole, c.walkStat
	c.prev, c.prevWhole, c.walkStat, c.walked = procPrevOf(cur), whole, t, c.now()
	if !whole {
		n.add("walk", fmt.Sprintf("the host has more than %d processes; only the first %d were looked at", maxProcWalk, maxProcWalk))
	}
	if prev == nil {
		return errors.New("not collected yet: a process's CPU share is measured between two readings, and the second is taken at the next fast tick (every 5 s by default)")
	}
	if t.total <= before.total {
		return errors.New("no CPU time passed between two readings of the processes (or the counters went back); they are read again at the next fast tick")
	}
	elapsed := float64(t.total-before.total) / float64(max(t.cores, 1))
	items := topProcesses(cur, prev, prevWhole, elapsed, t.cores, c.pageSize)
	c.owned(items, cur)
	out.Processes = &gridcityv1.Processes{Items: items}
	c.reported = true
	return nil
}

// busy reads the load and the memory and tells whether the host is busy;
// a file that cannot be read counts as calm (the cpu and memory
// collectors report it).
func (c *processesCollector) busy(t cpuTimes) bool {
	var load1 float64
	_ = scanFile(c.sc, filepath.Join(c.procRoot, "loadavg"), 1, func(s *lineScanner) (err error) {
		load1, _, _, err = parseLoadavg(s.lines())
		return err
	})
	var mem *meminfo
	_ = scanFile(c.sc, filepath.Join(c.procRoot, "meminfo"), maxMeminfoLines, func(s *lineScanner) error {
		m, err := parseMeminfo(s.lines())
		if err == nil {
			mem = &m
		}
		return err
	})
	return hostBusy(c.tick, t, load1, mem)
}

// walk reads /proc/PID/stat of every process, at most maxProcWalk; whole
// is false when there were more. A process that ends while it is read is
// passed over.
func (c *processesCollector) walk(ctx context.Context) (cur []procStat, whole bool, err error) {
	names, err := readDirNames(c.procRoot)
	if err != nil {
		return nil, false, err
	}
	cur = make([]procStat, 0, min(len(names), maxProcWalk))
	for i, name := range names {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if len(cur) == maxProcWalk {
			return cur, false, nil
		}
		b, err := readSmall(filepath.Join(c.procRoot, name, "stat"), c.buf)
		if err != nil {
			continue
		}
		if p, err := parseProcStat(b); err == nil {
			cur = append(cur, p)
		}
	}
	return cur, true, nil
}

// owned fills the user and unit of the listed processes, reading them only
// for a process not listed by the walk before.
func (c *processesCollector) owned(items []*gridcityv1.Process, cur []procStat) {
	start := make(map[int32]uint64, len(items))
	for _, p := range cur {
		start[p.pid] = p.start
	}
	owners := make(map[procKey]procOwner, len(items))
	for _, it := range items {
		key := procKey{pid: it.Pid, start: start[it.Pid]}
		o, ok := c.owners[key]
		if !ok {
			o = c.owner(it.Pid)
		}
		owners[key] = o
		it.User, it.Unit = o.user, o.unit
	}
	c.owners = owners
}

// owner reads a process's user and unit; what cannot be read stays empty.
func (c *processesCollector) owner(pid int32) procOwner {
	dir := filepath.Join(c.procRoot, strconv.Itoa(int(pid)))
	var o procOwner
	_ = scanFile(c.sc, filepath.Join(dir, "status"), maxStatusLines, func(s *lineScanner) error {
		if uid, ok := parseProcStatus(s.lines()); ok {
			o.user = userName(c.passwd(), uid)
		}
		return nil
	})
	_ = scanFile(c.sc, filepath.Join(dir, "cgroup"), maxCgroupLines, func(s *lineScanner) error {
		o.unit = parseCgroupUnit(s.lines())
		return nil
	})
	return o
}

// passwd returns the host's users, read again when the file changed.
func (c *processesCollector) passwd() map[uint32]string {
	fi, err := os.Stat(c.passwdPath)
	if err != nil {
		return c.users
	}
	if c.users != nil && fi.ModTime().Equal(c.passwdStamp) && fi.Size() == c.passwdLength {
		return c.users
	}
	c.passwdStamp, c.passwdLength = fi.ModTime(), fi.Size()
	_ = scanFile(c.sc, c.passwdPath, maxPasswdLines, func(s *lineScanner) error {
		c.users = parsePasswd(s.lines())
		return nil
	})
	return c.users
}

// readSmall reads a procfs file of at most len(buf) bytes whole.
func readSmall(path string, buf []byte) ([]byte, error) {
	f, err := openProc(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf[:n], nil
}
