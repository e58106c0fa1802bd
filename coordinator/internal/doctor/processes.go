package doctor

import (
	"fmt"
	"strconv"
	"strings"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
)

// What makes a process one of those responsible for a busy host: a share
// of a core, or of the memory, below which it is not worth a look.
const (
	culpritCPU    = 10.0 // percent of one core
	culpritMemory = 2.0  // percent of the host's memory
	maxCulprits   = 5
	// culpritFixes is how many of them get fixes of their own.
	culpritFixes = 2
)

// processText names a process with what the agent knows of it, for
// evidence: quoted, since a process names itself.
func processText(p *gridcityv1.Process) string {
	who := []string{"pid " + strconv.Itoa(int(p.GetPid()))}
	if p.GetUser() != "" {
		who = append(who, "user "+q(p.GetUser()))
	}
	if p.GetUnit() != "" {
		who = append(who, "unit "+q(p.GetUnit()))
	}
	return fmt.Sprintf("%s (%s)", q(p.GetName()), strings.Join(who, ", "))
}

// cpuText is a process's CPU as top shows it, and what that is of the host.
func cpuText(p *gridcityv1.Process, cores uint32) string {
	s := fmt.Sprintf("%s of a core", pct(p.GetCpuPercent()))
	if cores > 1 {
		s += fmt.Sprintf(" (%s of the host's %d cores)", pct(p.GetCpuPercent()/float64(cores)), cores)
	}
	return s
}

// busiestText and largestText end the host rung's load and memory lines:
// the one process most likely behind them, whatever their level.
func busiestText(ps *gridcityv1.Processes, cores uint32) string {
	if top := ps.ByCPU(); len(top) > 0 {
		return fmt.Sprintf(", busiest process %s using %s", processText(top[0]), cpuText(top[0], cores))
	}
	return ""
}

func largestText(ps *gridcityv1.Processes) string {
	if top := ps.ByMemory(); len(top) > 0 {
		return fmt.Sprintf(", largest process %s holding %s", processText(top[0]), size(top[0].GetRssBytes()))
	}
	return ""
}

// cpuCulprits and memoryCulprits are the processes behind a busy CPU or
// a short memory, the most first.
func cpuCulprits(ps *gridcityv1.Processes) []*gridcityv1.Process {
	var out []*gridcityv1.Process
	for _, p := range ps.ByCPU() {
		if p.GetCpuPercent() >= culpritCPU && len(out) < maxCulprits {
			out = append(out, p)
		}
	}
	return out
}

func memoryCulprits(ps *gridcityv1.Processes, total uint64) []*gridcityv1.Process {
	var out []*gridcityv1.Process
	for _, p := range ps.ByMemory() {
		if total > 0 && float64(p.GetRssBytes())*100/float64(total) >= culpritMemory && len(out) < maxCulprits {
			out = append(out, p)
		}
	}
	return out
}

// culpritEvidence is one evidence line per process, or why none can be
// named: the agent's gap, or that none stands out.
func culpritEvidence(srv fleet.Server, ps []*gridcityv1.Process, line func(*gridcityv1.Process) string) []string {
	if srv.State.GetProcesses() == nil {
		why := "not reported by the agent"
		if gaps := gapReasons(srv, "processes"); len(gaps) > 0 {
			why = strings.Join(gaps, "; ")
		}
		return []string{"which processes are responsible is not known: " + why}
	}
	if len(ps) == 0 {
		return []string{"no single process stands out: the load is spread over many"}
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = line(p)
	}
	return out
}

// processFixes look at what each of the first culprits does, and restart
// the unit that owns it; a matching runbook (read-only for the look)
// takes the place of either. A process the agent could not tie to a unit
// gets the look only: ending it is a person's call.
func (s *session) processFixes(srv fleet.Server, ps []*gridcityv1.Process, what string, subjs []Subject, seen map[int32]bool) []Fix {
	var fixes []Fix
	for i, p := range ps {
		if i == culpritFixes || seen[p.GetPid()] {
			continue
		}
		seen[p.GetPid()] = true
		ws := processWords(p)
		look := Fix{Summary: fmt.Sprintf("See what %s is doing (read-only)", processText(p)),
			Command: fmt.Sprintf("ps -o pid,ppid,user,etime,pcpu,pmem,rss,args -p %d", p.GetPid()), ReadOnly: true, Verification: readOnlyNote}
		if p.GetUnit() != "" {
			look.Command += "; systemctl status " + shellArg(p.GetUnit()) + " --no-pager -n 20"
		}
		if rb := s.runbookFor(look, subjs, true, ws); rb.Runbook != "" {
			look.Summary = fmt.Sprintf("See what %s is doing with the runbook %s (read-only)", processText(p), q(rb.Runbook))
			look.Runbook, look.Command = rb.Runbook, rb.Command
		}
		fixes = append(fixes, s.on(srv.Name, look))
		restart := Fix{Verification: fmt.Sprintf("not proven: no connection attempt can show that a restart brings its %s down; the read-only look shows what it is doing first", what)}
		if p.GetUnit() != "" {
			restart.Summary = fmt.Sprintf("Restart %s, the unit that owns %s", q(p.GetUnit()), processText(p))
			restart.Command = "systemctl restart " + shellArg(p.GetUnit())
		}
		if rb := s.runbookFor(restart, subjs, false, ws); rb.Runbook != "" {
			restart.Summary = fmt.Sprintf("Restart what owns %s with the runbook %s", processText(p), q(rb.Runbook))
			restart.Runbook, restart.Command = rb.Runbook, rb.Command
		}
		if restart.Command != "" {
			fixes = append(fixes, s.on(srv.Name, restart))
		}
	}
	return fixes
}

// runbookFor is withRunbook over the subjects in order; the runbook must
// name the process (words), not only match the target.
func (s *session) runbookFor(f Fix, subjs []Subject, readOnly bool, ws []string) Fix {
	for _, subj := range subjs {
		if rb := s.withRunbook(f, subj, readOnly, ws...); rb.Runbook != "" {
			return rb
		}
	}
	return Fix{}
}

// processWords are the names that tie a runbook to a process: its own and
// its unit's (without ".service" or an instance), when long enough to
// mean something.
func processWords(p *gridcityv1.Process) []string {
	var ws []string
	unit, _, _ := strings.Cut(strings.TrimSuffix(p.GetUnit(), ".service"), "@")
	for _, w := range []string{p.GetName(), unit} {
		if w = strings.ToLower(w); len(w) >= 4 {
			ws = append(ws, w)
		}
	}
	return ws
}
