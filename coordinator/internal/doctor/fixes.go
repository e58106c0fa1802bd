package doctor

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
)

// readOnlyNote is the verification of a command that only looks.
const readOnlyNote = "nothing to prove: the command only reads"

// on says where a fix runs and how it gets there: through run_command (and
// a person's approval) when the server's agent can run it, else by hand.
func (s *session) on(server string, f Fix) Fix {
	f.Server = server
	srv, ok := s.server(server)
	switch {
	case server == "":
		f.Via = ViaByHand
		f.Summary += "; no agent is known where this must run, so a person does it there (or installs an agent first, after which run_command can)"
	case !ok:
		f.Via = ViaByHand
		f.Summary += fmt.Sprintf("; %s has no agent, so a person does it there", server)
	case !srv.Online:
		f.Via = ViaByHand
		f.Summary += fmt.Sprintf("; %s's agent is offline, so run_command cannot reach it: a person does it there", server)
	case !srv.Hello.GetCommandsEnabled():
		f.Via = ViaByHand
		f.Summary += fmt.Sprintf("; the agent on %s does not run commands (commands: false), so a person does it there", server)
	default:
		f.Via = ViaRunCommand
		f.Summary += fmt.Sprintf(" — with run_command on %s, which a person approves in the app before it runs", server)
	}
	return f
}

// withRunbook puts a matching runbook in place of a fix's own command.
func (s *session) withRunbook(f Fix, subj Subject, readOnly bool, words ...string) Fix {
	for _, rb := range s.f.Config.Runbooks {
		if rb.ReadOnly != readOnly || !RunbookMatches(rb, subj) {
			continue
		}
		text := strings.ToLower(rb.Name + " " + rb.Description + " " + rb.Command)
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(text, w) }) {
			f.Runbook, f.Command = rb.Name, rb.Command
			return f
		}
	}
	return f
}

// agentFix restarts an offline agent, verified when the host accepted a
// connection from the coordinator (so the host is up, and the agent is
// what is down).
func (s *session) agentFix(srv fleet.Server, hostUp []Attempt) Fix {
	f := Fix{Summary: fmt.Sprintf("Restart the agent on %s; run_command needs that very agent, so a person does it on the host", srv.Name),
		Command: "systemctl restart gridcity-agent", Server: srv.Name, Via: ViaByHand}
	for _, a := range hostUp {
		if a.OK {
			f.Verified = true
			f.Verification = fmt.Sprintf("%s accepted a TCP connection from the coordinator just now: the host is up, so it is the agent (or its way to the coordinator) that is down", a.Target)
			return f
		}
	}
	switch {
	case len(hostUp) == 0:
		f.Verification = fmt.Sprintf("not proven: no address of %s is known to try", srv.Name)
	default:
		var seen []string
		for _, a := range hostUp {
			seen = append(seen, describe(a))
		}
		f.Verification = "not proven: the host did not accept a connection from the coordinator (" + strings.Join(seen, "; ") +
			"); it may be down, or only unreachable from here: look at its console first"
	}
	return f
}

// hostUpSpecs try a server's own addresses from the coordinator, on a port
// it was last seen listening on (SSH when it did).
func hostUpSpecs(srv fleet.Server) []spec {
	port := ""
	for _, l := range srv.State.GetListeners().GetItems() {
		ip := net.ParseIP(strings.Trim(l.GetAddress(), "[]"))
		if !strings.HasPrefix(l.GetProto(), "tcp") || ip == nil || ip.IsLoopback() {
			continue
		}
		if l.GetPort() == 22 || port == "" {
			port = strconv.Itoa(int(l.GetPort()))
		}
	}
	if port == "" {
		port = "22"
	}
	var specs []spec
	for _, a := range srv.State.GetHost().GetAddresses() {
		if ip := net.ParseIP(a); ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		specs = append(specs, spec{from: Coordinator, purpose: purposeHostUp, engine: "tcp", target: net.JoinHostPort(a, port)})
		if len(specs) == 2 {
			break
		}
	}
	return specs
}

// diskFixes: see what fills the disk, then free space where the journal
// lives (or with a matching runbook).
func (s *session) diskFixes(srv fleet.Server, d *gridcityv1.Disk, subjs []Subject) []Fix {
	mount := d.GetMount()
	fixes := []Fix{s.on(srv.Name, Fix{Summary: fmt.Sprintf("See what fills %s on %s (read-only)", q(mount), srv.Name),
		Command: "du -xh --max-depth=2 " + shellArg(mount) + " 2>/dev/null | sort -h | tail -n 20", ReadOnly: true, Verification: readOnlyNote})}
	var free Fix
	for _, subj := range subjs {
		if free = s.withRunbook(Fix{}, subj, false, "disk", "space", "clean", "vacuum", "journal", "log"); free.Runbook != "" {
			break
		}
	}
	if free.Runbook == "" && !slices.Contains([]string{"/", "/var", "/var/log"}, mount) {
		return fixes
	}
	if free.Runbook == "" {
		free.Command = "journalctl --vacuum-size=500M"
		free.Summary = fmt.Sprintf("Free space on %s by shrinking the systemd journal to 500 MB", q(mount))
	} else {
		free.Summary = fmt.Sprintf("Free space on %s with the runbook %s", q(mount), q(free.Runbook))
	}
	free.Verification = "not proven: no connection attempt can show how much space this frees; the read-only du shows whether it is logs that fill " + q(mount)
	return append(fixes, s.on(srv.Name, free))
}

func (s *session) inodeFix(srv fleet.Server, d *gridcityv1.Disk) Fix {
	return s.on(srv.Name, Fix{Summary: fmt.Sprintf("Find the directories holding the most files on %s (read-only; directories over 256 KiB hold many entries)", q(d.GetMount())),
		Command: "find " + shellArg(d.GetMount()) + " -xdev -type d -size +256k 2>/dev/null | head -n 20", ReadOnly: true, Verification: readOnlyNote})
}

func (s *session) memoryFix(srv fleet.Server) Fix {
	return s.on(srv.Name, Fix{Summary: fmt.Sprintf("See which processes hold the memory on %s, and what the OOM killer ended (read-only)", srv.Name),
		Command: "ps -eo pid,user,rss,comm --sort=-rss | head -n 15; journalctl -k -g 'out of memory' -n 10 --no-pager", ReadOnly: true, Verification: readOnlyNote})
}

// restartFixes read why a unit or container stopped, then restart it;
// the restart is verified when nothing holds its port.
func (s *session) restartFixes(svc *service, srv fleet.Server, d down) []Fix {
	var logs, restart Fix
	if d.unit != nil {
		name := d.unit.GetName()
		logs = Fix{Summary: fmt.Sprintf("Read why %s failed (read-only), before restarting it", q(name)),
			Command: "journalctl -u " + shellArg(name) + " -n 50 --no-pager", ReadOnly: true, Verification: readOnlyNote}
		restart = Fix{Summary: fmt.Sprintf("Restart %s", q(name)), Command: "systemctl restart " + shellArg(name)}
	} else {
		name := d.container.GetName()
		logs = Fix{Summary: fmt.Sprintf("Read why the container %s stopped (read-only), before starting it", q(name)),
			Command: "docker logs --tail 50 " + shellArg(name), ReadOnly: true, Verification: readOnlyNote}
		restart = Fix{Summary: fmt.Sprintf("Start the container %s", q(name)), Command: "docker start " + shellArg(name)}
	}
	subj := Subject{ID: srv.Name, Kind: "server", Server: srv.Name}
	if svc != nil {
		subj = Subject{ID: svc.res.ID, Kind: svc.res.Kind, Engine: svc.res.Engine, Server: srv.Name}
		restart.Verified, restart.Verification = s.portFree(svc, &srv)
	} else {
		restart.Verification = "not proven: no port is known for it, so no connection attempt can show that it will come up"
	}
	if rb := s.withRunbook(restart, subj, false, "restart", "start"); rb.Runbook != "" {
		rb.Summary = fmt.Sprintf("Restart it with the runbook %s (instead of %s)", q(rb.Runbook), q(restart.Command))
		restart = rb
	}
	return []Fix{s.on(srv.Name, logs), s.on(srv.Name, restart)}
}

// startFix starts a service that is not running and did not fail (or
// whose server is not known), by a matching runbook or the engine's usual
// unit; verified when nothing holds its port.
func (s *session) startFix(svc *service, server string) Fix {
	f := Fix{}
	unit := engineUnit[svc.res.Engine]
	if unit != "" {
		f.Command = "systemctl start " + unit
	}
	f = s.withRunbook(f, Subject{ID: svc.res.ID, Kind: svc.res.Kind, Engine: svc.res.Engine, Server: server}, false, "restart", "start")
	where := "on " + server
	if server == "" {
		where = "where it runs (" + svc.endpoint + ")"
	}
	switch {
	case f.Runbook != "":
		f.Summary = fmt.Sprintf("Start %s %s with the runbook %s", svc.res.ID, where, q(f.Runbook))
	case unit != "":
		f.Summary = fmt.Sprintf("Start %s %s (%s is the usual unit; the agent reports failed units only, so a unit stopped on purpose leaves no name)", engineName(svc.res.Engine), where, unit)
	default:
		f.Summary = fmt.Sprintf("Start whatever serves %s %s: nothing is listening on port %s", svc.res.ID, where, svc.port)
	}
	var srv *fleet.Server
	if x, ok := s.server(server); ok {
		srv = &x
	}
	f.Verified, f.Verification = s.portFree(svc, srv)
	if f.Verified && f.Runbook == "" && unit != "" {
		f.Verification += "; not proven: that the unit is called " + unit + " there"
	}
	return s.on(server, f)
}

// listenAddressFix is a configuration change: done by hand.
func (s *session) listenAddressFix(svc *service, srv fleet.Server) Fix {
	how := "its listen address"
	switch svc.res.Engine {
	case "postgres":
		how = "listen_addresses in postgresql.conf"
	case "mysql":
		how = "bind-address in the MySQL configuration"
	case "redis":
		how = "bind in redis.conf"
	}
	f := s.on(srv.Name, Fix{Summary: fmt.Sprintf("Make %s listen on %s as well (%s), then restart it", svc.res.ID, list(svc.addrs), how)})
	f.Via = ViaByHand
	f.Verification = "not proven: no attempt can show that the service answers once it listens there; the agent's listeners show it runs, on another address"
	return f
}

// firewallFix looks at the firewall of a server that accepts connections
// from itself but not from its users: verified by those two attempts.
func (s *session) firewallFix(svc *service, failed Attempt) Fix {
	f := s.on(svc.server, Fix{Summary: fmt.Sprintf("Look at the firewall on %s for port %s (read-only); then on the path from %s", svc.server, svc.port, failed.From),
		Command: "nft list ruleset 2>/dev/null || iptables -S", ReadOnly: true})
	f.Verified = true
	f.Verification = fmt.Sprintf("%s accepted a TCP connection from %s itself just now, while %s: the service is up, the way to it is not", svc.endpoint, svc.server, describe(failed))
	return f
}

// logsFix reads the host's recent log lines about the engine.
func (s *session) logsFix(svc *service, srv fleet.Server) Fix {
	cmd := "journalctl --since=-15min -p warning -n 100 --no-pager"
	if w := serviceWords[svc.res.Engine]; len(w) > 0 {
		cmd = "journalctl --since=-15min -n 100 --no-pager -g " + shellArg(strings.Join(w, "|"))
	}
	return s.on(srv.Name, Fix{Summary: fmt.Sprintf("Read what %s logged lately about %s (read-only)", srv.Name, engineName(svc.res.Engine)),
		Command: cmd, ReadOnly: true, Verification: readOnlyNote})
}

// portFree says whether the attempts proved that nothing accepts
// connections at the endpoint, so that a (re)started service can bind it.
func (s *session) portFree(svc *service, srv *fleet.Server) (bool, string) {
	if svc.endpoint == "" {
		return false, "not proven: the target names no port to try"
	}
	if srv != nil {
		if ls := listenersOn(*srv, svc.port); len(ls) > 0 {
			var held []string
			for _, l := range ls {
				held = append(held, listenerText(l))
			}
			return false, fmt.Sprintf("not proven: %s's agent shows port %s taken (%s), so a restarted service may fail to bind it; find out what holds it first", srv.Name, svc.port, list(held))
		}
	}
	var ok, ref, other []string
	for _, a := range svc.atts {
		if a.Engine != "tcp" || a.Target != svc.endpoint || !a.Answered {
			continue
		}
		switch {
		case a.OK:
			ok = append(ok, a.From)
		case refused(a):
			ref = append(ref, a.From)
		default:
			other = append(other, describe(a))
		}
	}
	switch {
	case len(ok) > 0:
		return false, fmt.Sprintf("disproven: a TCP connection to %s from %s succeeded just now, so something already accepts connections there and a restarted service may fail to bind the port; find out what holds it first", svc.endpoint, list(ok))
	case len(ref) > 0:
		v := fmt.Sprintf("nothing accepts connections at %s: a TCP connection from %s was refused just now", svc.endpoint, ref[0])
		if len(ref) > 1 {
			v = fmt.Sprintf("nothing accepts connections at %s: TCP connections from %s were refused just now", svc.endpoint, list(ref))
		}
		if srv != nil && srv.State.GetListeners() != nil {
			v += fmt.Sprintf(", and %s's agent lists no listener on port %s", srv.Name, svc.port)
		}
		return true, v + ", so a started service can bind the port"
	case len(other) > 0:
		return false, "not proven: the connection attempts did not show the port free (" + strings.Join(other, "; ") + "); a host that is down and a firewall that drops packets look the same"
	}
	return false, "not proven: no connection attempt to " + svc.endpoint + " was answered"
}

var plainArg = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellArg quotes a name from a host for a shell command line.
func shellArg(s string) string {
	if plainArg.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
