package doctor

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// maxVantages bounds the servers asked to try a connection in one
// diagnosis, and maxHosted the resources checked for one server.
const (
	maxVantages = 4
	maxHosted   = 4
)

// service is a resource with where it runs and where it is used from.
type service struct {
	res config.Resource
	// endpoint is the host:port its target names ("" for a DNS name);
	// host and port are its parts, addrs the addresses host stands for
	// (itself, or what the name resolved to from the coordinator).
	endpoint, host, port string
	addrs                []string
	// server is the server it runs on ("" when none is known), how tells
	// how that was found, noHost why none was.
	server, how, noHost string
	// from are the servers asked to try it (users with agents that
	// probe); note says why there are none, or who was left out.
	from []string
	note string
	// atts are the attempts made for it.
	atts []Attempt
}

// locate works out a resource's endpoint and the server it runs on: the
// server listening on the endpoint, else the one server that has the
// endpoint's address. A name is resolved from the coordinator first.
func (s *session) locate(ctx context.Context, res config.Resource, resolve bool) service {
	svc := service{res: res, endpoint: topology.Endpoint(res.Engine, res.Target)}
	if svc.endpoint == "" {
		svc.noHost = fmt.Sprintf("a %s check of %s names no host and port, so there is no one server to look at", res.Engine, q(res.Target))
		return svc
	}
	svc.host, svc.port, _ = net.SplitHostPort(svc.endpoint)
	if ip := net.ParseIP(svc.host); ip != nil {
		svc.addrs = []string{ip.String()}
	} else if !resolve {
		svc.noHost = fmt.Sprintf("%s is a name, not resolved here", q(svc.host))
		return svc
	} else {
		addrs, a := s.lookup(ctx, svc.host)
		if !a.OK {
			svc.noHost = fmt.Sprintf("%s does not resolve from the coordinator (%s), so the server it runs on is not known", q(svc.host), qr(a.Reason))
			return svc
		}
		svc.addrs = addrs
	}
	var loop, shared []string
	for _, addr := range svc.addrs {
		ip := net.ParseIP(addr)
		if ip.IsLoopback() {
			loop = append(loop, addr)
			continue
		}
		if srv, ok := s.listening[net.JoinHostPort(addr, svc.port)]; ok {
			svc.server, svc.how = srv, fmt.Sprintf("%s listens on %s", srv, net.JoinHostPort(addr, svc.port))
			break
		}
		owners := s.owners()[addr]
		if len(owners) == 1 {
			svc.server, svc.how = owners[0], fmt.Sprintf("%s has the address %s", owners[0], addr)
			break
		}
		if len(owners) > 1 {
			shared = append(shared, fmt.Sprintf("%s (%s)", addr, list(owners)))
		}
	}
	if svc.server != "" {
		if svc.host != svc.addrs[0] {
			svc.how = fmt.Sprintf("%s resolves to %s; %s", q(svc.host), list(svc.addrs), svc.how)
		}
		return svc
	}
	switch {
	case len(shared) > 0:
		svc.noHost = fmt.Sprintf("the address %s belongs to more than one server, so which one runs %s is not known", strings.Join(shared, ", "), res.ID)
	case len(loop) > 0 && len(loop) == len(svc.addrs):
		svc.noHost = fmt.Sprintf("%s is a loopback address: it names whichever machine connects to it, so no one server is known to run %s", strings.Join(loop, ", "), res.ID)
	case net.ParseIP(svc.host) == nil:
		svc.noHost = fmt.Sprintf("%s resolves to %s from the coordinator, and no agent runs there: install one to see its units, disks and listeners", q(svc.host), list(svc.addrs))
	default:
		svc.noHost = fmt.Sprintf("no agent runs on %s: install one there to see its units, disks and listeners", list(svc.addrs))
	}
	return svc
}

// vantages are the servers to ask: those that use the resource (declared
// or discovered) and those in its probeFrom, whose agents are online and
// run probes.
func (s *session) vantages(svc *service) {
	var cands []string
	for _, id := range s.f.Graph.UsedBy(svc.res.ID) {
		if t, ok := s.f.Graph.Target(id); ok && t.Kind == "server" {
			cands = append(cands, id)
		}
	}
	cands = append(cands, svc.res.ProbeFrom...)
	slices.Sort(cands)
	cands = slices.Compact(cands)
	var left []string
	for _, name := range cands {
		srv, ok := s.server(name)
		switch {
		case !ok:
			left = append(left, name+" (no agent)")
		case !srv.Online:
			left = append(left, name+" (agent offline)")
		case !slices.Contains(srv.Hello.GetCapabilities(), "probes"):
			left = append(left, name+" (its agent does not run probes)")
		case len(svc.from) == maxVantages:
			left = append(left, name+" (enough vantage points already)")
		default:
			svc.from = append(svc.from, name)
		}
	}
	switch {
	case len(cands) == 0:
		svc.note = "no server is known to use " + svc.res.ID + ", so the coordinator tried it"
	case len(svc.from) == 0:
		svc.note = "none of the servers that use " + svc.res.ID + " could be asked (" + list(left) + "), so the coordinator tried it"
	case len(left) > 0:
		svc.note = "not asked: " + list(left)
	}
}

// try makes the attempts for a service, in parallel: a TCP connect and the
// protocol handshake from each vantage point (the coordinator when there
// is none, or when none answered), and a connect from the server it runs
// on, which tells a service that is down from a path that is blocked.
func (s *session) try(ctx context.Context, svc *service) {
	from := svc.from
	if len(from) == 0 {
		from = []string{Coordinator}
	}
	specs := s.specsFrom(svc, from)
	if host, ok := s.server(svc.server); ok && host.Online && slices.Contains(host.Hello.GetCapabilities(), "probes") &&
		!slices.Contains(from, svc.server) && svc.endpoint != "" {
		specs = append(specs, spec{from: svc.server, purpose: purposeSelf, engine: "tcp", target: svc.endpoint})
	}
	svc.atts = s.runAll(ctx, specs)
	if from[0] != Coordinator && !slices.ContainsFunc(svc.atts, func(a Attempt) bool { return a.Answered && a.Purpose != purposeSelf }) && ctx.Err() == nil {
		svc.note = strings.TrimPrefix(svc.note+"; ", "; ") + "no agent asked answered in time, so the coordinator tried it too"
		svc.atts = append(svc.atts, s.runAll(ctx, s.specsFrom(svc, []string{Coordinator}))...)
	}
}

func (s *session) specsFrom(svc *service, from []string) []spec {
	var specs []spec
	for _, v := range from {
		if svc.endpoint != "" {
			specs = append(specs, spec{from: v, purpose: purposeReach, engine: "tcp", target: svc.endpoint})
		}
		if svc.res.Engine != "tcp" || svc.endpoint == "" {
			specs = append(specs, spec{from: v, purpose: purposeHandshake, engine: svc.res.Engine, target: svc.res.Target})
		}
	}
	return specs
}

// answered are the attempts of one purpose that were answered.
func (svc *service) answered(purpose string) []Attempt {
	var out []Attempt
	for _, a := range svc.atts {
		if a.Purpose == purpose && a.Answered {
			out = append(out, a)
		}
	}
	return out
}

// connected reports whether the TCP connect from a vantage point worked.
func (svc *service) connected(from string) bool {
	return slices.ContainsFunc(svc.atts, func(a Attempt) bool { return a.Purpose == purposeReach && a.From == from && a.OK })
}

// answers reports whether the resource answered its handshake from anywhere.
func (svc *service) answers() bool {
	return slices.ContainsFunc(svc.atts, func(a Attempt) bool {
		return a.OK && (a.Purpose == purposeHandshake || (svc.res.Engine == "tcp" && a.Purpose == purposeReach))
	})
}

// judgeService: the unit, container or process that serves the resource.
func (s *session) judgeService(svc *service, srv fleet.Server) judged {
	w := words(svc.res.Engine, svc.res.ID, svc.res.Name)
	ds := downOn(srv, w)
	gaps := gapReasons(srv, "failed_units", "containers")
	if len(ds) > 0 && svc.port != "" && len(listenersOn(srv, svc.port)) > 0 && svc.answers() {
		// A failed unit named like it (an old cluster, a sidecar) while
		// it listens and answers: worth a look, not a stop.
		j := verdict(Warn, list(s.downList(ds))+"; yet "+list(listenerTexts(listenersOn(srv, svc.port)))+", and it answers")
		j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungService,
			Summary:  fmt.Sprintf("a unit or container named like %s has stopped on %s, though %s answers", svc.res.ID, srv.Name, svc.res.ID),
			Evidence: s.downList(ds)})
		for _, d := range ds[:min(len(ds), 2)] {
			j.fixes = append(j.fixes, s.restartFixes(svc, srv, d)[0]) // read its logs; restarting is not called for
		}
		return j
	}
	if len(ds) > 0 {
		j := verdict(Fail, list(s.downList(ds)))
		ev := s.downList(ds)
		ev = append(ev, s.portEvidence(svc, srv)...)
		j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungService,
			Summary:  fmt.Sprintf("what serves %s on %s has stopped", svc.res.ID, srv.Name),
			Evidence: ev})
		for _, d := range ds[:min(len(ds), 2)] {
			j.fixes = append(j.fixes, s.restartFixes(svc, srv, d)...)
		}
		return j
	}
	var parts []string
	if svc.port != "" {
		ls := listenersOn(srv, svc.port)
		parts = append(parts, listenerTexts(ls)...)
		if len(ls) == 0 && srv.State.GetListeners() != nil {
			j := verdict(Warn, fmt.Sprintf("no failed unit or stopped container on %s is named like %s, and nothing listens on port %s: a unit stopped on purpose does not show here (the agent reports failed units only)",
				srv.Name, strings.Join(w, " or "), svc.port))
			if len(gaps) > 0 {
				j.Detail += "; not collected: " + strings.Join(gaps, "; ")
			}
			return j
		}
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("no failed unit or stopped container on %s is named like %s", srv.Name, strings.Join(w, " or ")))
	}
	if other := downOn(srv, nil); len(other) > 0 {
		parts = append(parts, "other failed units or containers there: "+list(s.downList(other)))
	}
	j := verdict(Pass, strings.Join(parts, "; "))
	if len(gaps) > 0 {
		j.Status = Warn
		j.Detail += "; not collected: " + strings.Join(gaps, "; ")
	}
	return j
}

// judgePort: does the server it runs on listen on the endpoint?
func (s *session) judgePort(svc *service, srv fleet.Server) judged {
	if svc.port == "" {
		return verdict(Skip, svc.noHost)
	}
	if g := gapReasons(srv, "sockets"); len(g) > 0 && srv.State.GetListeners() == nil {
		return verdict(Skip, fmt.Sprintf("%s's listeners are not known: %s", srv.Name, strings.Join(g, "; ")))
	}
	if srv.State.GetListeners() == nil {
		return verdict(Skip, fmt.Sprintf("%s's agent has sent no listeners yet", srv.Name))
	}
	ls := listenersOn(srv, svc.port)
	var serving, elsewhere []string
	for _, l := range ls {
		ip := net.ParseIP(strings.Trim(l.GetAddress(), "[]"))
		if ip != nil && (ip.IsUnspecified() || slices.Contains(svc.addrs, ip.String())) {
			serving = append(serving, listenerText(l))
		} else {
			elsewhere = append(elsewhere, listenerText(l))
		}
	}
	if len(serving) > 0 {
		return verdict(Pass, list(serving))
	}
	if len(elsewhere) > 0 {
		j := verdict(Fail, fmt.Sprintf("port %s is listened on, but not at %s: %s", svc.port, list(svc.addrs), list(elsewhere)))
		ev := append([]string{fmt.Sprintf("%s's agent: %s", srv.Name, list(elsewhere))}, s.tcpEvidence(svc)...)
		j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungPort,
			Summary:  fmt.Sprintf("%s runs on %s but listens on another address than the one %s names (%s)", svc.res.Engine, srv.Name, svc.res.ID, svc.endpoint),
			Evidence: ev})
		j.fixes = append(j.fixes, s.listenAddressFix(svc, srv))
		return j
	}
	j := verdict(Fail, fmt.Sprintf("nothing listens on port %s on %s", svc.port, srv.Name))
	j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungPort,
		Summary:  fmt.Sprintf("%s is not running on %s: nothing listens on port %s, and no failed unit says why", svc.res.ID, srv.Name, svc.port),
		Evidence: s.portEvidence(svc, srv)})
	j.fixes = append(j.fixes, s.startFix(svc, srv.Name))
	return j
}

// portEvidence is what shows whether the port is free: the agent's
// listeners and the connection attempts.
func (s *session) portEvidence(svc *service, srv fleet.Server) []string {
	var ev []string
	if svc.port != "" && srv.State.GetListeners() != nil {
		if ls := listenersOn(srv, svc.port); len(ls) == 0 {
			ev = append(ev, fmt.Sprintf("%s's agent lists no listener on port %s (it lists %s)", srv.Name, svc.port, plural(len(srv.State.GetListeners().GetItems()), "listening socket")))
		} else {
			for _, l := range ls {
				ev = append(ev, fmt.Sprintf("%s's agent: %s", srv.Name, listenerText(l)))
			}
		}
	}
	return append(ev, s.tcpEvidence(svc)...)
}

// tcpEvidence describes the TCP connects made to the endpoint.
func (s *session) tcpEvidence(svc *service) []string {
	var ev []string
	for _, a := range svc.atts {
		if a.Engine == "tcp" && a.Target == svc.endpoint {
			ev = append(ev, describe(a))
		}
	}
	return ev
}

// judgeReachable: can the servers that use it connect?
func (s *session) judgeReachable(svc *service) judged {
	if svc.endpoint == "" {
		return verdict(Skip, fmt.Sprintf("a %s check has no port to connect to; the handshake rung covers it", svc.res.Engine))
	}
	atts := svc.answered(purposeReach)
	if len(atts) == 0 {
		return verdict(Skip, "no attempt to connect was answered: "+list(s.unanswered(svc)))
	}
	j := s.judgeAttempts(atts, svc.note)
	if j.Status == Pass {
		return j
	}
	var failed []Attempt
	for _, a := range atts {
		if !a.OK {
			failed = append(failed, a)
		}
	}
	ev := s.tcpEvidence(svc)
	ev = append(ev, s.checksEvidence(svc.res.ID)...)
	d := Diagnosis{Rung: RungReachable, Evidence: ev}
	self := slices.IndexFunc(svc.atts, func(a Attempt) bool { return a.Purpose == purposeSelf && a.Answered })
	switch {
	case j.Status == Warn:
		d.Summary = fmt.Sprintf("%s accepts connections from some places and not from others: look at the path from %s", svc.endpoint, failed[0].From)
	case self >= 0 && svc.atts[self].OK:
		d.Summary = fmt.Sprintf("%s accepts connections from %s itself but not from %s: a firewall or the network is in the way", svc.endpoint, svc.server, failed[0].From)
		j.fixes = append(j.fixes, s.firewallFix(svc, failed[0]))
	case allOf(failed, refused):
		d.Summary = fmt.Sprintf("nothing accepts connections at %s: %s is not running there, or a firewall rejects the connections", svc.endpoint, svc.res.ID)
		if svc.server == "" {
			d.Evidence = append(d.Evidence, "the server it runs on is not known ("+svc.noHost+")")
			j.fixes = append(j.fixes, s.startFix(svc, ""))
		}
	case allOf(failed, timedOut):
		d.Summary = fmt.Sprintf("connections to %s get no answer: the host is down or unreachable, or a firewall drops them", svc.endpoint)
		if svc.server == "" {
			d.Evidence = append(d.Evidence, "the server it runs on is not known ("+svc.noHost+")")
		}
	case allOf(failed, unresolved):
		d.Summary = fmt.Sprintf("%s does not resolve where %s is used", q(svc.host), svc.res.ID)
	default:
		d.Summary = fmt.Sprintf("connections to %s fail", svc.endpoint)
	}
	j.diagnoses = append(j.diagnoses, d)
	return j
}

// judgeHandshake: does it speak its protocol where it is used?
func (s *session) judgeHandshake(svc *service) judged {
	if svc.res.Engine == "tcp" {
		if len(svc.answered(purposeReach)) == 0 {
			return verdict(Skip, "no attempt to connect was answered")
		}
		return verdict(Pass, "a tcp check's handshake is the connect itself (see reachable)")
	}
	var atts []Attempt
	for _, a := range svc.answered(purposeHandshake) {
		if svc.endpoint == "" || svc.connected(a.From) {
			atts = append(atts, a)
		}
	}
	if len(atts) == 0 {
		return verdict(Skip, "no vantage point connected, so no handshake could be tried")
	}
	j := s.judgeAttempts(atts, "")
	if j.Status == Pass {
		return j
	}
	var ev []string
	for _, a := range atts {
		ev = append(ev, describe(a))
	}
	ev = append(ev, s.checksEvidence(svc.res.ID)...)
	summary := fmt.Sprintf("%s accepts connections at %s, but the %s handshake fails", svc.res.ID, svc.endpoint, engineName(svc.res.Engine))
	if svc.endpoint == "" {
		summary = fmt.Sprintf("the %s check of %s fails", engineName(svc.res.Engine), q(svc.res.Target))
	}
	j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungHandshake, Summary: summary, Evidence: ev})
	if srv, ok := s.server(svc.server); ok {
		j.fixes = append(j.fixes, s.logsFix(svc, srv))
	}
	return j
}

// judgeAttempts: pass when all worked, fail when none did, warn between.
func (s *session) judgeAttempts(atts []Attempt, note string) judged {
	var lines []string
	ok := 0
	for _, a := range atts {
		lines = append(lines, describe(a))
		if a.OK {
			ok++
		}
	}
	detail := strings.Join(lines, "; ")
	if note != "" {
		detail += " (" + note + ")"
	}
	switch ok {
	case len(atts):
		return verdict(Pass, detail)
	case 0:
		return verdict(Fail, detail)
	}
	return verdict(Warn, detail)
}

func (s *session) unanswered(svc *service) []string {
	var out []string
	for _, a := range svc.atts {
		if !a.Answered {
			out = append(out, a.From+": "+qr(a.Reason))
		}
	}
	return out
}

// checksEvidence is what the regular probes have seen lately.
func (s *session) checksEvidence(id string) []string {
	st, ok := s.resourceState(id)
	if !ok || (st.Status != "failed" && st.Status != "degraded") {
		return nil
	}
	var ev []string
	for _, c := range st.Checks {
		if c.Status != "failed" || !c.Fresh {
			continue
		}
		ev = append(ev, fmt.Sprintf("the regular check from %s has failed %d times in a row, last at %s: %s", c.From, c.Failures, stamp(c.CheckedAt), qr(c.Reason)))
		if len(ev) == maxItems {
			break
		}
	}
	if st.Troubled && !st.Since.IsZero() {
		ev = append(ev, fmt.Sprintf("troubled since %s (%s)", stamp(st.Since), ago(s.f.Now, st.Since)))
	}
	return ev
}

func allOf(atts []Attempt, f func(Attempt) bool) bool {
	return len(atts) > 0 && !slices.ContainsFunc(atts, func(a Attempt) bool { return !f(a) })
}

func engineName(engine string) string {
	if n, ok := map[string]string{"postgres": "PostgreSQL", "mysql": "MySQL", "redis": "Redis", "http": "HTTP", "https": "HTTPS",
		"dns": "DNS", "s3": "S3", "tcp": "TCP"}[engine]; ok {
		return n
	}
	return engine
}
