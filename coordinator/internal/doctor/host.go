package doctor

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
)

// Thresholds of the host rung. Load only ever warns: a busy host is slow,
// not down, and what is slow shows in the handshake's latency.
const (
	diskFull       = 98.0 // percent used (as df counts it), or nothing left
	diskWarn       = 90.0
	memoryWarn     = 90.0
	memoryFreeFail = 3.0 // percent of memory available, with swap full or absent
	swapFull       = 90.0
	loadPerCore    = 2.0  // 5-minute load per core
	busyFull       = 90.0 // percent of the CPU busy over the agent's last sample
	silentAfter    = 2 * time.Minute
)

// judged is one rung's verdict with what it found.
type judged struct {
	Rung
	diagnoses []Diagnosis
	fixes     []Fix
}

func verdict(status, detail string) judged { return judged{Rung: Rung{Status: status, Detail: detail}} }

// judgeAgent: is the server's agent connected, and heard from lately?
func (s *session) judgeAgent(srv fleet.Server, hostUp []Attempt) judged {
	now := s.f.Now
	if !srv.Online {
		var detail string
		switch {
		case !srv.RevokedAt.IsZero():
			detail = fmt.Sprintf("the agent on %s was revoked %s (last heard from %s): the server is retired; enroll it again with a new join line to watch it",
				srv.Name, ago(now, srv.RevokedAt), ago(now, srv.LastSeen))
		case srv.Reconnecting:
			// The coordinator restarted a moment ago: the agent is most
			// likely waiting out its reconnect backoff.
			detail = fmt.Sprintf("the agent on %s has not reconnected since the coordinator restarted %s (last heard from %s); it is expected back by %s",
				srv.Name, ago(now, srv.Restarted), ago(now, srv.LastSeen), stamp(srv.GraceEnds))
		default:
			detail = fmt.Sprintf("the agent on %s is offline; last heard from %s", srv.Name, ago(now, srv.LastSeen))
		}
		j := verdict(Fail, detail)
		ev := []string{fmt.Sprintf("%s's agent stream is closed; it was last heard from at %s (%s)", srv.Name, stamp(srv.LastSeen), ago(now, srv.LastSeen))}
		for _, a := range hostUp {
			ev = append(ev, "host up? "+describe(a))
		}
		j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungAgent, Summary: fmt.Sprintf("%s's agent is not connected: its facts are old and no command or probe can run there", srv.Name), Evidence: ev})
		j.fixes = append(j.fixes, s.agentFix(srv, hostUp))
		return j
	}
	if silent := now.Sub(srv.LastSeen); silent > silentAfter {
		return verdict(Warn, fmt.Sprintf("the agent on %s is connected but has been silent for %s: its facts may be stale", srv.Name, dur(silent)))
	}
	detail := fmt.Sprintf("the agent on %s is connected, last heard from %s", srv.Name, ago(now, srv.LastSeen))
	if !srv.ConnectedAt.IsZero() {
		detail = fmt.Sprintf("the agent on %s has been connected for %s, last heard from %s", srv.Name, dur(now.Sub(srv.ConnectedAt)), ago(now, srv.LastSeen))
	}
	if !slices.Contains(srv.Hello.GetCapabilities(), "probes") {
		detail += "; it does not run probes, so it cannot be asked to try connections"
	}
	return verdict(Pass, detail)
}

// judgeHost: disks, memory and load of a server.
// Its fixes prefer a runbook matching one of subjs, in order.
func (s *session) judgeHost(srv fleet.Server, subjs ...Subject) judged {
	st := srv.State
	gaps := gapReasons(srv, "disks", "memory", "cpu")
	if st.GetDisks() == nil && st.GetMemory() == nil && st.GetCpu() == nil {
		if len(gaps) > 0 {
			return verdict(Skip, fmt.Sprintf("%s's agent could not collect its disks, memory or load: %s", srv.Name, joinSome(gaps, "; ")))
		}
		return verdict(Skip, fmt.Sprintf("%s's agent has sent no disks, memory or load yet", srv.Name))
	}
	var fails, warns, ok []string
	var j judged
	procs := st.GetProcesses()
	fixed := map[int32]bool{} // processes with fixes already
	// Disks.
	var fullest *gridcityv1.Disk
	for _, d := range st.GetDisks().GetItems() {
		if fullest == nil || d.GetUsedPercent() > fullest.GetUsedPercent() {
			fullest = d
		}
		mount := q(d.GetMount())
		switch {
		case d.GetUsedPercent() >= diskFull || (d.GetTotalBytes() > 0 && d.GetUsedBytes() > 0 && d.GetAvailableBytes() == 0):
			line := fmt.Sprintf("%s is %s full (%s free of %s)", mount, pct(d.GetUsedPercent()), size(d.GetAvailableBytes()), size(d.GetTotalBytes()))
			fails = append(fails, line)
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHost, Summary: fmt.Sprintf("%s on %s is full: writes there fail (databases stop, logs are lost, services fail to start)", mount, srv.Name),
				Evidence: []string{line + fmt.Sprintf(", device %s", q(d.GetDevice()))}})
			j.fixes = append(j.fixes, s.diskFixes(srv, d, subjs)...)
		case d.GetInodesTotal() > 0 && d.GetInodesUsedPercent() >= diskFull:
			line := fmt.Sprintf("%s has no inodes left (%s of %d used)", mount, pct(d.GetInodesUsedPercent()), d.GetInodesTotal())
			fails = append(fails, line)
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHost, Summary: fmt.Sprintf("%s on %s has no inodes left: no file can be created there", mount, srv.Name), Evidence: []string{line}})
			j.fixes = append(j.fixes, s.inodeFix(srv, d))
		case d.GetUsedPercent() >= diskWarn:
			line := fmt.Sprintf("%s is %s full (%s free of %s)", mount, pct(d.GetUsedPercent()), size(d.GetAvailableBytes()), size(d.GetTotalBytes()))
			warns = append(warns, line)
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHost, Summary: fmt.Sprintf("%s on %s is filling up", mount, srv.Name), Evidence: []string{line}})
			j.fixes = append(j.fixes, s.diskFixes(srv, d, subjs)[0])
		case d.GetInodesTotal() > 0 && d.GetInodesUsedPercent() >= diskWarn:
			warns = append(warns, fmt.Sprintf("%s has %s of its inodes used", mount, pct(d.GetInodesUsedPercent())))
		}
	}
	if fullest != nil && len(fails) == 0 && len(warns) == 0 {
		ok = append(ok, fmt.Sprintf("disks at most %s full (%s)", pct(fullest.GetUsedPercent()), q(fullest.GetMount())))
	}
	// Memory.
	if m := st.GetMemory(); m.GetTotalBytes() > 0 {
		free := float64(m.GetAvailableBytes()) * 100 / float64(m.GetTotalBytes())
		swap := 0.0
		if m.GetSwapTotalBytes() > 0 {
			swap = float64(m.GetSwapUsedBytes()) * 100 / float64(m.GetSwapTotalBytes())
		}
		line := fmt.Sprintf("memory %s used (%s available of %s)", pct(m.GetUsedPercent()), size(m.GetAvailableBytes()), size(m.GetTotalBytes()))
		if m.GetSwapTotalBytes() > 0 {
			line += fmt.Sprintf(", swap %s used", pct(swap))
		} else {
			line += ", no swap"
		}
		line += largestText(procs)
		culprits := memoryCulprits(procs, m.GetTotalBytes())
		ev := append([]string{line}, culpritEvidence(srv, culprits, func(p *gridcityv1.Process) string {
			return fmt.Sprintf("%s holds %s (%s of the memory)", processText(p), size(p.GetRssBytes()), pct(float64(p.GetRssBytes())*100/float64(m.GetTotalBytes())))
		})...)
		switch {
		case free < memoryFreeFail && (m.GetSwapTotalBytes() == 0 || swap >= swapFull):
			fails = append(fails, "memory exhausted: "+line)
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHost, Summary: fmt.Sprintf("%s is out of memory: the kernel's OOM killer ends processes, and new ones fail to start", srv.Name), Evidence: ev})
			j.fixes = append(j.fixes, s.memoryFix(srv))
			j.fixes = append(j.fixes, s.processFixes(srv, culprits, "memory", subjs, fixed)...)
		case m.GetUsedPercent() >= memoryWarn:
			warns = append(warns, line)
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHost, Summary: fmt.Sprintf("%s is short of memory: little is left before it swaps or the OOM killer ends processes", srv.Name), Evidence: ev})
			if procs == nil {
				j.fixes = append(j.fixes, s.memoryFix(srv))
			}
			j.fixes = append(j.fixes, s.processFixes(srv, culprits, "memory", subjs, fixed)...)
		default:
			ok = append(ok, line)
		}
	}
	// Load.
	if c := st.GetCpu(); c.GetCores() > 0 {
		line := fmt.Sprintf("load %.1f (5 min) on %d cores", c.GetLoad5(), c.GetCores())
		// The busy share is unknown until the agent's second sample.
		busy := c.BusyPercent != nil && c.GetBusyPercent() >= busyFull
		if busy {
			line += fmt.Sprintf(", CPU %s busy", pct(c.GetBusyPercent()))
		}
		line += busiestText(procs, c.GetCores())
		if c.GetLoad5()/float64(c.GetCores()) >= loadPerCore || busy {
			warns = append(warns, line)
			ev := []string{line}
			if c.BusyPercent != nil && !busy {
				ev = append(ev, fmt.Sprintf("CPU %s busy", pct(c.GetBusyPercent())))
			}
			culprits := cpuCulprits(procs)
			ev = append(ev, culpritEvidence(srv, culprits, func(p *gridcityv1.Process) string {
				return fmt.Sprintf("%s uses %s", processText(p), cpuText(p, c.GetCores()))
			})...)
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHost, Summary: fmt.Sprintf("%s is overloaded: work waits for the CPU or for I/O", srv.Name),
				Evidence: ev})
			if procs == nil {
				j.fixes = append(j.fixes, s.on(srv.Name, Fix{Summary: fmt.Sprintf("See which processes use the CPU on %s (read-only)", srv.Name),
					Command: "ps -eo pid,user,pcpu,rss,etime,comm --sort=-pcpu | head -n 15", ReadOnly: true, Verification: readOnlyNote}))
			}
			j.fixes = append(j.fixes, s.processFixes(srv, culprits, "CPU use", subjs, fixed)...)
		} else {
			ok = append(ok, line)
		}
	}
	switch {
	case len(fails) > 0:
		j.Status, j.Detail = Fail, joinSome(fails, "; ")
	case len(warns) > 0:
		// What passed follows: the largest process, say, while the CPU warns.
		j.Status, j.Detail = Warn, joinSome(append(warns, ok...), "; ")
	default:
		j.Status, j.Detail = Pass, joinSome(ok, ", ")
	}
	if len(gaps) > 0 {
		j.Detail += "; not collected: " + joinSome(gaps, "; ")
	}
	return j
}

// gapReasons are the server's gaps among the named checks.
func gapReasons(srv fleet.Server, checks ...string) []string {
	var out []string
	for _, g := range srv.State.GetGaps().GetItems() {
		if slices.Contains(checks, g.GetCheck()) {
			out = append(out, g.GetCheck()+": "+qr(g.GetReason()))
		}
	}
	return out
}

// serviceWords are what the units, containers and processes serving an
// engine are called.
var serviceWords = map[string][]string{
	"postgres": {"postgres"},
	"mysql":    {"mysql", "mariadb"},
	"redis":    {"redis", "valkey"},
	"http":     {"nginx", "apache", "httpd", "caddy", "haproxy", "traefik", "envoy", "lighttpd"},
	"https":    {"nginx", "apache", "httpd", "caddy", "haproxy", "traefik", "envoy", "lighttpd"},
}

// engineUnit is the unit that starts an engine on a Debian-like host, for
// a service that is stopped but did not fail (the agent reports failed
// units only, so a cleanly stopped one leaves no name to go by).
var engineUnit = map[string]string{"postgres": "postgresql", "mysql": "mysql", "redis": "redis-server"}

// words are the lowercase names that tie a unit, container or process to
// a resource: its engine's and, when long enough to mean something, its
// own id and name.
func words(engine, id, name string) []string {
	w := slices.Clone(serviceWords[engine])
	for _, n := range []string{id, name} {
		if len(n) >= 4 && !slices.Contains(w, strings.ToLower(n)) {
			w = append(w, strings.ToLower(n))
		}
	}
	return w
}

func matches(s string, words []string) bool {
	s = strings.ToLower(s)
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s, w) })
}

// down is a unit or container that should be serving but is not.
type down struct {
	unit      *gridcityv1.Unit
	container *gridcityv1.Container
}

func (d down) String(now time.Time) string {
	if d.unit != nil {
		if d.unit.GetSinceUnix() <= 0 {
			return fmt.Sprintf("unit %s failed (when is not known)", q(d.unit.GetName()))
		}
		return fmt.Sprintf("unit %s failed %s", q(d.unit.GetName()), ago(now, time.Unix(d.unit.GetSinceUnix(), 0)))
	}
	return fmt.Sprintf("container %s (image %s) is %s: %s", q(d.container.GetName()), q(d.container.GetImage()), q(d.container.GetState()), q(d.container.GetStatus()))
}

var exitCode = regexp.MustCompile(`^Exited \((\d+)\)`)

// containerDown: a container that stopped serving. One that exited 0 did
// its job; one that exited otherwise, died or keeps restarting did not.
func containerDown(c *gridcityv1.Container) bool {
	switch strings.ToLower(c.GetState()) {
	case "dead", "restarting":
		return true
	case "exited":
		m := exitCode.FindStringSubmatch(c.GetStatus())
		return m == nil || m[1] != "0"
	}
	return false
}

// downOn lists the failed units and stopped containers on srv whose names
// match words (all of them when words is nil), units first.
func downOn(srv fleet.Server, words []string) []down {
	var out []down
	for _, u := range srv.State.GetFailedUnits().GetItems() {
		if words == nil || matches(u.GetName(), words) {
			out = append(out, down{unit: u})
		}
	}
	for _, c := range srv.State.GetContainers().GetItems() {
		if containerDown(c) && (words == nil || matches(c.GetName(), words) || matches(c.GetImage(), words)) {
			out = append(out, down{container: c})
		}
	}
	return out
}

func (s *session) downList(ds []down) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String(s.f.Now)
	}
	return out
}

// listenersOn are srv's TCP listeners on port.
func listenersOn(srv fleet.Server, port string) []*gridcityv1.Listener {
	var out []*gridcityv1.Listener
	for _, l := range srv.State.GetListeners().GetItems() {
		if strings.HasPrefix(l.GetProto(), "tcp") && strconv.Itoa(int(l.GetPort())) == port {
			out = append(out, l)
		}
	}
	return out
}

func listenerText(l *gridcityv1.Listener) string {
	who := "a process"
	if l.GetProcess() != "" {
		who = q(l.GetProcess())
	}
	if l.GetPid() > 0 {
		who += fmt.Sprintf(" (pid %d)", l.GetPid())
	}
	addr := strings.Trim(l.GetAddress(), "[]")
	if strings.Contains(addr, ":") {
		addr = "[" + addr + "]"
	}
	return fmt.Sprintf("%s listens on %s:%d", who, clip(addr, maxName), l.GetPort())
}

func listenerTexts(ls []*gridcityv1.Listener) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = listenerText(l)
	}
	return out
}
