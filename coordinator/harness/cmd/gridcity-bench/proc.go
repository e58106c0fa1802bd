package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memSample is one reading of a process's memory, in KiB.
type memSample struct {
	RSS, Pss, Private, Anon uint64
}

// readMem reads VmRSS and RssAnon from /proc/PID/status and Pss and
// Private_Clean+Private_Dirty from /proc/PID/smaps_rollup.
func readMem(pid int) (memSample, error) {
	var m memSample
	st, err := readKV(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	m.RSS, m.Anon = st["VmRSS:"], st["RssAnon:"]
	if m.RSS == 0 {
		return m, fmt.Errorf("/proc/%d/status has no VmRSS (a zombie?)", pid)
	}
	sr, err := readKV(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, err
	}
	m.Pss = sr["Pss:"]
	m.Private = sr["Private_Clean:"] + sr["Private_Dirty:"]
	return m, nil
}

// readKV reads "Key:   123 kB" lines into a map of the numbers.
func readKV(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

// statTimes is what /proc/PID/stat says about a process's CPU time, in
// clock ticks, and when it started (to notice a reused pid).
type statTimes struct {
	State                               string
	Utime, Stime, CUtime, CStime, Start uint64
}

func readStat(pid int) (statTimes, error) {
	var t statTimes
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return t, err
	}
	// comm is in parentheses and may hold anything; the fields follow the
	// last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return t, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14.
	if len(f) < 20 {
		return t, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	get := func(field int) uint64 {
		v, _ := strconv.ParseUint(f[field-3], 10, 64)
		return v
	}
	t.State = f[0]
	t.Utime, t.Stime, t.CUtime, t.CStime, t.Start = get(14), get(15), get(16), get(17), get(22)
	return t, nil
}

// threadRuntimes reads the first field of /proc/PID/task/TID/schedstat,
// each thread's time on a CPU in ns. /proc/PID/schedstat alone is the main
// thread's only.
func threadRuntimes(pid int) (map[int]uint64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int]uint64, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended between the listing and the read
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			out[tid] = v
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no readable schedstat", dir)
	}
	return out, nil
}

// cpuMeter adds up a process's CPU time in ns from its threads' schedstat,
// read every second: a thread that ends keeps what it had at its last
// reading (so at most a second of its time is lost, and the loss is
// counted), a thread that starts counts from zero.
type cpuMeter struct {
	pid    int
	base   map[int]uint64 // at the start of the window
	last   map[int]uint64 // latest reading of every thread seen
	ended  map[int]bool   // threads that ended inside the window
	start  statTimes
	startN uint64 // starttime, to notice a reused pid
}

func newCPUMeter(pid int) (*cpuMeter, error) {
	st, err := readStat(pid)
	if err != nil {
		return nil, err
	}
	rt, err := threadRuntimes(pid)
	if err != nil {
		return nil, err
	}
	last := make(map[int]uint64, len(rt))
	for k, v := range rt {
		last[k] = v
	}
	return &cpuMeter{pid: pid, base: rt, last: last, ended: map[int]bool{}, start: st, startN: st.Start}, nil
}

// update takes a reading; call it every second or so.
func (m *cpuMeter) update() error {
	rt, err := threadRuntimes(m.pid)
	if err != nil {
		return err
	}
	for tid := range m.last {
		if _, ok := rt[tid]; !ok {
			m.ended[tid] = true // its last reading stays in the sum
		}
	}
	for tid, v := range rt {
		m.last[tid] = v
	}
	return nil
}

// ns is the CPU time used since the start of the window.
func (m *cpuMeter) ns() uint64 {
	var sum uint64
	for tid, v := range m.last {
		if b := m.base[tid]; v > b {
			sum += v - b
		}
	}
	return sum
}

// ticks is the utime+stime (and that of waited-for children) used since
// the start of the window, in clock ticks: the coarse cross-check.
func (m *cpuMeter) ticks() (self, children uint64, err error) {
	st, err := readStat(m.pid)
	if err != nil {
		return 0, 0, err
	}
	if st.Start != m.startN {
		return 0, 0, fmt.Errorf("pid %d was reused", m.pid)
	}
	self = st.Utime + st.Stime - m.start.Utime - m.start.Stime
	children = st.CUtime + st.CStime - m.start.CUtime - m.start.CStime
	return self, children, nil
}

// exeResident is how much of the process's own executable is mapped and
// how much of that is resident, in KiB, from /proc/PID/smaps.
func exeResident(pid int) (mapped, resident uint64, err error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, 0, err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, err
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			// A mapping's header: range perms offset dev inode [path].
			in = len(f) >= 6 && strings.Join(f[5:], " ") == exe
			continue
		}
		if !in || len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "Size:":
			mapped += v
		case "Rss:":
			resident += v
		}
	}
	return mapped, resident, sc.Err()
}

// machineTicks reads the aggregate cpu line of /proc/stat: busy and total
// clock ticks of the whole machine since boot.
func machineTicks() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no aggregate cpu line")
	}
	var idle uint64
	for i, x := range f[1:min(len(f), 9)] { // user … steal
		v, _ := strconv.ParseUint(x, 10, 64)
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total - idle, total, nil
}

// machineNote says how busy the machine is beyond the measured processes:
// load average and TCP sockets (whose number drives the cost of reading
// the socket tables).
func machineNote() string {
	var parts []string
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			parts = append(parts, "load average "+strings.Join(f[:3], " "))
		}
	}
	if b, err := os.ReadFile("/proc/net/sockstat"); err == nil {
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "TCP: "); ok {
				f := strings.Fields(rest)
				kv := map[string]string{}
				for i := 0; i+1 < len(f); i += 2 {
					kv[f[i]] = f[i+1]
				}
				parts = append(parts, fmt.Sprintf("%s TCP sockets in use and %s in TIME-WAIT", kv["inuse"], kv["tw"]))
			}
		}
	}
	return strings.Join(parts, ", ")
}
