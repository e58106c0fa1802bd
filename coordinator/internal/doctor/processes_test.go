package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/lib/probe"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// hogs: a busy loop in a unit, PostgreSQL, a large process outside any
// unit whose name tries to pass for an instruction, and small fry.
func hogs() *gridcityv1.Processes {
	return &gridcityv1.Processes{Items: []*gridcityv1.Process{
		{Pid: 1500, Name: "sh", User: "root", Unit: "hog.service", CpuPercent: 99.5, RssBytes: 2 << 20},
		{Pid: 812, Name: "postgres", User: "postgres", Unit: "postgresql@15-main.service", CpuPercent: 40, RssBytes: 1 << 30},
		{Pid: 1600, Name: "memhog\"; rm -rf /", User: "deploy", CpuPercent: 0.5, RssBytes: 6 << 30},
		{Pid: 1, Name: "systemd", User: "root", CpuPercent: 0.1, RssBytes: 12 << 20},
	}}
}

// diagnoseHost diagnoses web-1 with its state changed by mutate, and a
// runbook that restarts PostgreSQL on it.
func diagnoseHost(t *testing.T, mutate func(st *gridcityv1.StateUpdate)) Report {
	t.Helper()
	cfg, err := config.Parse(strings.NewReader(baseConfig+`
runbooks:
  - {name: restart-postgres, description: Restart PostgreSQL, command: systemctl restart postgresql, match: {server: web-1}}
  - {name: restart-all, description: Restart everything, command: systemctl restart app, match: {server: web-1}}
`), "doctor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := server("web-1", "10.0.4.10")
	mutate(srv.State)
	srvs := servers{srv}
	g, err := topology.New(cfg, srvs, states{}).Graph()
	if err != nil {
		t.Fatal(err)
	}
	d := &Doctor{Prober: &fakeProber{}, AttemptTimeout: 100 * time.Millisecond}
	rep, err := d.Diagnose(context.Background(), Facts{Config: cfg, Graph: g, Servers: []fleet.Server(srvs), Resource: states{}.State, Now: now}, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func evidenceOf(t *testing.T, rep Report, summary string) string {
	t.Helper()
	d := findDiag(t, rep, summary)
	return strings.Join(d.Evidence, "\n")
}

func commands(fixes []Fix) string {
	var out []string
	for _, f := range fixes {
		out = append(out, f.Command+" ["+f.Runbook+"]")
	}
	return strings.Join(out, "\n")
}

// TestDiagnoseNamesTheCPUHogs: a host whose CPU is busy (its 5-minute
// load alone would not say so yet) is overloaded; the diagnosis names the
// processes using the CPU, and the fixes look at each and restart the
// unit that owns it, by a runbook that names it where there is one.
func TestDiagnoseNamesTheCPUHogs(t *testing.T) {
	rep := diagnoseHost(t, func(st *gridcityv1.StateUpdate) {
		st.Cpu.BusyPercent = proto.Float64(97)
		st.Processes = hogs()
	})
	if rep.Ladder[1].Status != Warn || !strings.Contains(rep.Ladder[1].Detail, `load 0.5 (5 min) on 4 cores, CPU 97% busy, busiest process "sh" (pid 1500, user "root", unit "hog.service") using 99% of a core (25% of the host's 4 cores); disks at most 60% full ("/var"); memory 38% used (5.0 GiB available of 8.0 GiB), swap 0% used, largest process "memhog\"; rm -rf /" (pid 1600, user "deploy") holding 6.0 GiB`) {
		t.Errorf("host rung %+v", rep.Ladder[1])
	}
	ev := evidenceOf(t, rep, "is overloaded")
	for _, want := range []string{`"sh" (pid 1500, user "root", unit "hog.service") uses 99% of a core`, `"postgres" (pid 812, user "postgres", unit "postgresql@15-main.service") uses 40% of a core`} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence %q; want %q", ev, want)
		}
	}
	if strings.Contains(ev, "systemd") || strings.Contains(ev, "memhog") {
		t.Errorf("evidence %q names processes that use next to no CPU", ev)
	}
	want := "ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p 1500; systemctl status hog.service --no-pager -n 20 []\n" +
		"systemctl restart hog.service []\n" +
		"ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p 812; systemctl status postgresql@15-main.service --no-pager -n 20 []\n" +
		"systemctl restart postgresql [restart-postgres]"
	if got := commands(rep.Fixes); got != want {
		t.Errorf("fixes\n%s\nwant\n%s", got, want)
	}
	for _, f := range rep.Fixes {
		if f.Server != "web-1" || f.Via != ViaRunCommand || f.Verified || (f.ReadOnly != strings.HasPrefix(f.Command, "ps ")) {
			t.Errorf("fix %+v", f)
		}
	}
}

// TestDiagnoseNamesTheMemoryHogs: out of memory, the diagnosis names the
// largest processes (a hostile name quoted, never in a command); the one
// outside any unit gets a look only.
func TestDiagnoseNamesTheMemoryHogs(t *testing.T) {
	rep := diagnoseHost(t, func(st *gridcityv1.StateUpdate) {
		st.Memory = &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 8<<30 - 100<<20, AvailableBytes: 100 << 20, UsedPercent: 98.8}
		st.Processes = hogs()
	})
	if rep.Ladder[1].Status != Fail || !strings.Contains(rep.Ladder[1].Detail, `largest process "memhog\"; rm -rf /" (pid 1600, user "deploy") holding 6.0 GiB`) {
		t.Errorf("host rung %+v", rep.Ladder[1])
	}
	ev := evidenceOf(t, rep, "out of memory")
	if !strings.Contains(ev, `"memhog\"; rm -rf /" (pid 1600, user "deploy") holds 6.0 GiB (75% of the memory)`) || !strings.Contains(ev, `"postgres" (pid 812`) || strings.Contains(ev, `"sh"`) {
		t.Errorf("evidence %q", ev)
	}
	want := "ps -eo pid,user,rss,comm --sort=-rss | head -n 15; journalctl -k -g 'out of memory' -n 10 --no-pager []\n" +
		"ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p 1600 []\n" +
		"ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p 812; systemctl status postgresql@15-main.service --no-pager -n 20 []\n" +
		"systemctl restart postgresql [restart-postgres]"
	if got := commands(rep.Fixes); got != want {
		t.Errorf("fixes\n%s\nwant\n%s", got, want)
	}
}

// TestDiagnoseShortOfMemoryWithoutProcesses: memory short and the agent
// could not say which processes: the gap is the evidence, and the look
// is the generic one.
func TestDiagnoseShortOfMemoryWithoutProcesses(t *testing.T) {
	rep := diagnoseHost(t, func(st *gridcityv1.StateUpdate) {
		st.Memory = &gridcityv1.Memory{TotalBytes: 8 << 30, UsedBytes: 7 << 30, AvailableBytes: 1 << 30, UsedPercent: 93, SwapTotalBytes: 1 << 30}
		st.Gaps = &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "processes", Reason: "open /proc: permission denied"}}}
	})
	ev := evidenceOf(t, rep, "short of memory")
	if rep.Ladder[1].Status != Warn || !strings.Contains(ev, `which processes are responsible is not known: processes: "open /proc: permission denied"`) {
		t.Errorf("host rung %+v, evidence %q", rep.Ladder[1], ev)
	}
	if f := only(t, rep.Fixes, "memory"); !f.ReadOnly || !strings.HasPrefix(f.Command, "ps -eo pid,user,rss") {
		t.Errorf("fix %+v", f)
	}
}

// TestDiagnoseCalmHostNamesItsTopProcesses: a calm host passes, and its
// host rung still names the busiest and the largest process.
func TestDiagnoseCalmHostNamesItsTopProcesses(t *testing.T) {
	rep := diagnoseHost(t, func(st *gridcityv1.StateUpdate) { st.Processes = hogs() })
	d := rep.Ladder[1].Detail
	if rep.Ladder[1].Status != Pass || !strings.Contains(d, `busiest process "sh" (pid 1500`) || !strings.Contains(d, `largest process "memhog\"; rm -rf /" (pid 1600`) {
		t.Errorf("host rung %+v", rep.Ladder[1])
	}
	if len(rep.Fixes) != 0 || len(rep.Diagnoses) != 0 {
		t.Errorf("a calm host got diagnoses %+v, fixes %+v", rep.Diagnoses, rep.Fixes)
	}
}

// TestDiagnoseResourceOnABusyHost: diagnosing a database whose host is
// overloaded by its own engine offers the runbook that matches the
// database (by engine) and names the process (a runbook that only
// matches the database is not taken as a look at the process); without the agent's
// processes, the gap is the evidence and a generic look the fix.
func TestDiagnoseResourceOnABusyHost(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader(baseConfig+restartRunbook), "doctor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const db = "10.0.4.20:5432"
	for _, withProcs := range []bool{true, false} {
		host := server("db-1", "10.0.4.20", "postgres@0.0.0.0:5432")
		host.State.Cpu.Load5 = 12
		if withProcs {
			host.State.Processes = hogs()
		}
		srvs := servers{host, server("web-1", "10.0.4.10")}
		g, err := topology.New(cfg, srvs, states{}).Graph()
		if err != nil {
			t.Fatal(err)
		}
		fp := &fakeProber{results: map[string]probe.Result{"web-1 tcp " + db: okResult, "web-1 postgres " + db: okResult, "db-1 tcp " + db: okResult}}
		d := &Doctor{Prober: fp, AttemptTimeout: 100 * time.Millisecond}
		rep, err := d.Diagnose(context.Background(), Facts{Config: cfg, Graph: g, Servers: []fleet.Server(srvs), Resource: states{}.State, Now: now}, "orders-db")
		if err != nil {
			t.Fatal(err)
		}
		ev := evidenceOf(t, rep, "db-1 is overloaded")
		got := commands(rep.Fixes)
		if withProcs {
			want := "ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p 1500; systemctl status hog.service --no-pager -n 20 []\n" +
				"systemctl restart hog.service []\n" +
				// pg-activity matches orders-db but does not name the process.
				"ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p 812; systemctl status postgresql@15-main.service --no-pager -n 20 []\n" +
				"systemctl restart postgresql [restart-postgres]"
			if got != want || !strings.Contains(ev, `"postgres" (pid 812`) {
				t.Errorf("with processes: evidence %q\nfixes\n%s\nwant\n%s", ev, got, want)
			}
			continue
		}
		if got != "ps -eo pid,user,pcpu,rss,etime,comm --sort=-pcpu | head -n 15 []" || !strings.Contains(ev, "which processes are responsible is not known: not reported by the agent") {
			t.Errorf("without processes: evidence %q, fixes\n%s", ev, got)
		}
	}
}
