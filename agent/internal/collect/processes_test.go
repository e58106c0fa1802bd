package collect

import (
	"strings"
	"testing"
	"unicode/utf8"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

const statLine = "812 (postgres) S 1 812 812 0 -1 4194560 100 0 0 0 1100 200 0 0 20 0 1 0 500 1000000 25600 18446744073709551615 1 1 0"

func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     procStat
		bad      bool
	}{
		{name: "plain", in: statLine, want: procStat{pid: 812, comm: "postgres", ticks: 1300, start: 500, rss: 25600}},
		{name: "a name with blanks, parentheses and a newline", in: "9 (a) b (\nc) R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 99 0 3",
			want: procStat{pid: 9, comm: "a) b (?c", ticks: 15, start: 99, rss: 3}},
		{name: "a long name is cut", in: "9 (" + strings.Repeat("x", 300) + ") R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 99 0 3",
			want: procStat{pid: 9, comm: strings.Repeat("x", maxProcName), ticks: 15, start: 99, rss: 3}},
		{name: "too few fields", in: "9 (x) R 1 1 1 0 -1 0 0 0 0 0 7 8", bad: true},
		{name: "no name", in: "9 x R", bad: true},
		{name: "pid 0", in: "0 (x) R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 99 0 3", bad: true},
		{name: "pid not a number", in: "x9 (x) R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 99 0 3", bad: true},
		{name: "negative rss", in: "9 (x) R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 99 0 -3", bad: true},
	} {
		got, err := parseProcStat([]byte(c.in))
		if c.bad {
			if err == nil {
				t.Errorf("%s: parseProcStat = %+v; want an error", c.name, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: parseProcStat = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestParseProcStatusAndCgroup(t *testing.T) {
	if uid, ok := parseProcStatus(linesOf([]byte("Name:\tsh\nUid:\t1000\t0\t0\t0\n"), 10)); !ok || uid != 0 {
		t.Errorf("status uid = %d, %v; want the effective uid 0", uid, ok)
	}
	if _, ok := parseProcStatus(linesOf([]byte("Name:\tsh\nUid:\tx\ty\n"), 10)); ok {
		t.Error("a Uid line without numbers gave a uid")
	}
	for in, want := range map[string]string{
		"0::/system.slice/nginx.service\n":                                       "nginx.service",
		"12:pids:/x\n1:name=systemd:/system.slice/cron.service\n0::/\n":          "cron.service",
		"0::/system.slice/docker-0123.scope\n":                                   "",
		"0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.service\n": "",
		"0::/system.slice/a.service/payload\n":                                   "a.service",
		"0::/system.slice/bad name;rm.service\n":                                 "",
		"garbage\n::\n":                                                          "",
	} {
		if got := parseCgroupUnit(linesOf([]byte(in), maxCgroupLines)); got != want {
			t.Errorf("parseCgroupUnit(%q) = %q; want %q", in, got, want)
		}
	}
	users := parsePasswd(linesOf([]byte("root:x:0:0::/:/bin/sh\nbad\nx:x:y:0::/:/\ntoor:x:0:0::/:/bin/sh\n"), 10))
	if userName(users, 0) != "root" || userName(users, 42) != "42" || len(users) != 1 {
		t.Errorf("users %v", users)
	}
}

// TestTopProcesses: shares over the interval between walks, capped at
// every core; a process missed by a walk cut short is not credited with
// its whole life.
func TestTopProcesses(t *testing.T) {
	cur := []procStat{{pid: 1, ticks: 1000, start: 1, rss: 1}, {pid: 2, ticks: 5000, start: 2, rss: 2}, {pid: 3, ticks: 40, start: 3}}
	prev := map[int32]procPrev{1: {start: 1, ticks: 900}, 2: {start: 2, ticks: 0}}
	got := topProcesses(cur, prev, false, 100, 2, 4096)
	if len(got) != 2 || got[0].GetPid() != 2 || got[0].GetCpuPercent() != 200 || got[1].GetPid() != 1 || got[1].GetCpuPercent() != 100 {
		t.Errorf("topProcesses = %v; want pid 2 capped at 200%% (two cores), pid 1 at 100%%, pid 3 unknown and so left out", got)
	}
	if got := topProcesses(cur, prev, true, 100, 2, 4096); len(got) != 3 || got[2].GetPid() != 3 || got[2].GetCpuPercent() != 40 {
		t.Errorf("after a whole walk, a new process's ticks are all in the interval: %v", got)
	}
}

func TestHostBusy(t *testing.T) {
	calm := cpuTimes{busy: 100, total: 1000, cores: 4}
	for name, c := range map[string]struct {
		prev, cur cpuTimes
		load1     float64
		mem       *meminfo
		want      bool
	}{
		"calm":         {calm, cpuTimes{busy: 150, total: 2000, cores: 4}, 1, &meminfo{total: 100, available: 50, hasAvailable: true}, false},
		"cpu busy":     {calm, cpuTimes{busy: 1050, total: 2000, cores: 4}, 1, nil, true},
		"loaded":       {calm, calm, 4, nil, true},
		"memory short": {calm, calm, 0, &meminfo{total: 100, available: 5, hasAvailable: true}, true},
		"first tick":   {cpuTimes{}, cpuTimes{busy: 1000, total: 1000, cores: 4}, 0, nil, false},
	} {
		if got := hostBusy(c.prev, c.cur, c.load1, c.mem); got != c.want {
			t.Errorf("%s: hostBusy = %v; want %v", name, got, c.want)
		}
	}
}

func TestProcessesClose(t *testing.T) {
	p := func(pid int32, cpu float64, rss uint64) *gridcityv1.Process {
		return &gridcityv1.Process{Pid: pid, Name: "p", CpuPercent: cpu, RssBytes: rss << 20}
	}
	full := func(extra ...*gridcityv1.Process) *gridcityv1.Processes {
		return &gridcityv1.Processes{Items: append([]*gridcityv1.Process{p(1, 90, 500), p(2, 50, 400), p(3, 30, 300), p(4, 20, 200), p(5, 10, 100)}, extra...)}
	}
	renamed := full()
	renamed.Items[2].Name = "q"
	for name, c := range map[string]struct {
		a, b *gridcityv1.Processes
		want bool
	}{
		"same":                        {full(), full(), true},
		"jitter":                      {full(), &gridcityv1.Processes{Items: []*gridcityv1.Process{p(1, 93, 510), p(2, 48, 400), p(3, 30, 300), p(4, 20, 200), p(5, 10, 100)}}, true},
		"a busy process calms down":   {full(), &gridcityv1.Processes{Items: []*gridcityv1.Process{p(1, 20, 500), p(2, 50, 400), p(3, 30, 300), p(4, 20, 200), p(5, 10, 100)}}, false},
		"memory grows":                {full(), &gridcityv1.Processes{Items: []*gridcityv1.Process{p(1, 90, 800), p(2, 50, 400), p(3, 30, 300), p(4, 20, 200), p(5, 10, 100)}}, false},
		"last places trade":           {full(), &gridcityv1.Processes{Items: []*gridcityv1.Process{p(1, 90, 500), p(2, 50, 400), p(3, 30, 300), p(4, 20, 200), p(6, 9, 99)}}, true},
		"a new hog":                   {full(), full(p(7, 100, 1)), false},
		"another name":                {full(), renamed, false},
		"small processes come and go": {&gridcityv1.Processes{Items: []*gridcityv1.Process{p(1, 1, 2)}}, &gridcityv1.Processes{Items: []*gridcityv1.Process{p(2, 2, 3)}}, true},
		"a large process ends":        {&gridcityv1.Processes{Items: []*gridcityv1.Process{p(1, 1, 300), p(2, 1, 3)}}, &gridcityv1.Processes{Items: []*gridcityv1.Process{p(2, 2, 3)}}, false},
	} {
		if got := processesClose(c.a, c.b); got != c.want {
			t.Errorf("%s: processesClose = %v; want %v", name, got, c.want)
		}
	}
}

// FuzzParseProcStat: whatever a procfs holds, the parser does not panic
// and a name it returns is bounded, valid UTF-8 without control characters.
func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte(statLine))
	f.Add([]byte("9 (a) b (\nc) R 1 1 1 0 -1 0 0 0 0 0 7 8 0 0 20 0 1 0 99 0 3"))
	f.Add([]byte("9 (\xff\x00) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseProcStat(b)
		if err != nil {
			return
		}
		if len(p.comm) > maxProcName || !utf8.ValidString(p.comm) || strings.ContainsFunc(p.comm, func(r rune) bool { return r < 0x20 || r == 0x7f }) || p.pid <= 0 {
			t.Fatalf("parseProcStat(%q) = %+v", b, p)
		}
	})
}

// FuzzParseProcStatus covers status, cgroup and passwd: no panic, and a
// unit is only ever a plausible unit name.
func FuzzParseProcStatus(f *testing.F) {
	f.Add([]byte("Name:\tsh\nUid:\t1000\t0\t0\t0\n"))
	f.Add([]byte("0::/system.slice/nginx.service\n1:name=systemd:/x.service\n"))
	f.Add([]byte("root:x:0:0::/:/bin/sh\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseProcStatus(linesOf(b, maxStatusLines))
		if u := parseCgroupUnit(linesOf(b, maxCgroupLines)); u != "" && (!strings.HasSuffix(u, ".service") || !unitName([]byte(u))) {
			t.Fatalf("parseCgroupUnit(%q) = %q", b, u)
		}
		for _, name := range parsePasswd(linesOf(b, maxPasswdLines)) {
			if len(name) > maxName || !utf8.ValidString(name) {
				t.Fatalf("parsePasswd(%q) gave %q", b, name)
			}
		}
	})
}

// TestChangesSendsProcessesOnlyWhenMeaningful: Changes uses
// processesClose, so a jittery CPU share does not travel and a new hog does.
func TestChangesSendsProcessesOnlyWhenMeaningful(t *testing.T) {
	state := func(cpu float64, extra ...*gridcityv1.Process) *gridcityv1.StateUpdate {
		items := append([]*gridcityv1.Process{{Pid: 1, Name: "a", CpuPercent: cpu, RssBytes: 100 << 20}}, extra...)
		return &gridcityv1.StateUpdate{Processes: &gridcityv1.Processes{Items: items}}
	}
	if d := Changes(state(50), state(52)); d != nil {
		t.Errorf("jitter travelled: %v", d)
	}
	if d := Changes(state(50), state(52, &gridcityv1.Process{Pid: 2, Name: "hog", CpuPercent: 100})); d.GetProcesses() == nil {
		t.Errorf("a new hog did not travel: %v", d)
	}
}
