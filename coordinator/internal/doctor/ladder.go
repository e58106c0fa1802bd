package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
)

// diagnoseResource: the ladder of a database, bucket, probe or load
// balancer. The first four rungs are about the server it runs on, and are
// skipped when none is known.
func (s *session) diagnoseResource(ctx context.Context, rc config.Resource, rep *Report) {
	svc := s.locate(ctx, rc, true)
	s.vantages(&svc)
	rep.Engine, rep.Endpoint, rep.HostedOn = rc.Engine, svc.endpoint, svc.server
	host, hasHost := s.server(svc.server)

	var hostUp []Attempt
	var wg sync.WaitGroup
	if hasHost && !host.Online {
		wg.Go(func() { hostUp = s.runAll(ctx, hostUpSpecs(host)) })
	}
	s.try(ctx, &svc)
	wg.Wait()

	subj := Subject{ID: rc.ID, Kind: rc.Kind, Engine: rc.Engine, Server: svc.server}
	v := map[string]judged{}
	if hasHost {
		v[RungAgent] = s.judgeAgent(host, hostUp)
		v[RungAgent] = withPrefix(v[RungAgent], "runs on "+svc.server+" ("+svc.how+"); ")
		v[RungHost] = s.judgeHost(host, subj, Subject{ID: host.Name, Kind: "server", Server: host.Name})
		v[RungService] = s.judgeService(&svc, host)
		v[RungPort] = s.judgePort(&svc, host)
	} else {
		v[RungAgent] = verdict(Skip, svc.noHost)
		v[RungHost] = verdict(Skip, "no server is known to run "+rc.ID+" (see the agent rung), so there are no disks, memory or load to look at")
		v[RungService] = verdict(Skip, "no server is known to run "+rc.ID+", so there are no units or containers to look at")
		v[RungPort] = verdict(Skip, "no agent reports the listeners where "+rc.ID+" runs; the reachable rung tries the port")
	}
	v[RungReachable] = s.judgeReachable(&svc)
	v[RungHandshake] = s.judgeHandshake(&svc)
	v[RungDependencies] = s.judgeDeps(rc.ID, svc.server)
	assemble(v, rep)

	switch rep.StoppedAt {
	case RungAgent, RungHost:
		// The attempts ran anyway: say what the users see now.
		rep.Diagnoses = append(rep.Diagnoses, s.liveView(&svc))
	case RungHandshake:
		// A health check failing its handshake is often its dependency's doing.
		rep.Diagnoses = append(rep.Diagnoses, v[RungDependencies].diagnoses...)
	}
	if slices.Contains([]string{RungService, RungPort, RungReachable, RungHandshake}, rep.StoppedAt) && !svc.answers() {
		d, f := s.alternatives(ctx, &svc)
		rep.Diagnoses, rep.Fixes = append(rep.Diagnoses, d...), append(rep.Fixes, f...)
	}
	if rep.StoppedAt == "" {
		if ev := s.checksEvidence(rc.ID); len(ev) > 0 {
			rep.Diagnoses = append(rep.Diagnoses, Diagnosis{Rung: RungHandshake,
				Summary:  rc.ID + " answered every attempt just now, but its regular checks have been failing: it may just have recovered, or it fails now and then",
				Evidence: ev})
		}
	}
	rep.Runbooks = s.matchingRunbooks(subj)
	summarize(rep)
}

// liveView says whether a resource answers where it is used, from the
// attempts made while the ladder stopped on its server.
func (s *session) liveView(svc *service) Diagnosis {
	var ev []string
	for _, a := range svc.atts {
		if a.Purpose == purposeHandshake || (svc.res.Engine == "tcp" && a.Purpose == purposeReach) {
			ev = append(ev, describe(a))
		}
	}
	d := Diagnosis{Rung: RungReachable, Evidence: ev}
	if svc.answers() {
		d.Summary = fmt.Sprintf("%s itself still answers where it is used: the trouble is on %s, and has not stopped %s yet", svc.res.ID, svc.server, svc.res.ID)
	} else {
		d.Summary = fmt.Sprintf("%s does not answer where it is used either", svc.res.ID)
	}
	return d
}

// diagnoseServer: the ladder of a server. Its service rung looks at every
// failed unit and stopped container; its port, reachable and handshake
// rungs at the configured resources that run on it.
func (s *session) diagnoseServer(ctx context.Context, t graph.Target, rep *Report) {
	srv, _ := s.server(t.ID)
	var hosted []*service
	for _, rc := range s.f.Config.Resources {
		if svc := s.locate(ctx, rc, false); svc.server == srv.Name && len(hosted) < maxHosted {
			s.vantages(&svc)
			hosted = append(hosted, &svc)
		}
	}
	var hostUp []Attempt
	var wg sync.WaitGroup
	if !srv.Online {
		wg.Go(func() { hostUp = s.runAll(ctx, hostUpSpecs(srv)) })
	}
	for _, svc := range hosted {
		wg.Go(func() { s.try(ctx, svc) })
	}
	wg.Wait()

	v := map[string]judged{
		RungAgent:        s.judgeAgent(srv, hostUp),
		RungHost:         s.judgeHost(srv, Subject{ID: srv.Name, Kind: "server", Server: srv.Name}),
		RungService:      s.judgeUnits(srv, hosted),
		RungDependencies: s.judgeDeps(srv.Name, ""),
	}
	if len(hosted) == 0 {
		none := fmt.Sprintf("no configured resource runs on %s (none names one of its addresses), so there is no port to check", srv.Name)
		v[RungPort], v[RungReachable], v[RungHandshake] = verdict(Skip, none), verdict(Skip, none), verdict(Skip, none)
	} else {
		var port, reach, shake []judged
		var ids []string
		for _, svc := range hosted {
			ids = append(ids, svc.res.ID)
			port = append(port, s.judgePort(svc, srv))
			reach = append(reach, s.judgeReachable(svc))
			shake = append(shake, s.judgeHandshake(svc))
		}
		v[RungPort], v[RungReachable], v[RungHandshake] = combine(ids, port), combine(ids, reach), combine(ids, shake)
	}
	assemble(v, rep)
	rep.Runbooks = s.matchingRunbooks(Subject{ID: srv.Name, Kind: "server", Server: srv.Name})
	summarize(rep)
}

// judgeUnits: every failed unit and stopped container on a server.
func (s *session) judgeUnits(srv fleet.Server, hosted []*service) judged {
	ds := downOn(srv, nil)
	if len(ds) == 0 {
		// Say only what was seen: a part that could not be collected is
		// unknown, never "none failed".
		unitGaps, containerGaps := gapReasons(srv, "failed_units"), gapReasons(srv, "containers")
		// Units the agent never sent are unknown too. (Containers it did
		// not send are not mentioned: nothing is claimed about them.)
		if srv.State.GetFailedUnits() == nil && len(unitGaps) == 0 {
			unitGaps = []string{"failed_units: not reported by the agent"}
		}
		var parts []string
		if len(unitGaps) > 0 {
			parts = append(parts, "failed units unknown ("+strings.Join(unitGaps, "; ")+")")
		} else {
			parts = append(parts, "no failed units")
		}
		switch cs := srv.State.GetContainers().GetItems(); {
		case len(containerGaps) > 0:
			parts = append(parts, "containers unknown ("+strings.Join(containerGaps, "; ")+")")
		case len(cs) > 0:
			running := 0
			for _, c := range cs {
				if strings.EqualFold(c.GetState(), "running") {
					running++
				}
			}
			parts = append(parts, fmt.Sprintf("no stopped containers (%d of %d running)", running, len(cs)))
		}
		j := verdict(Pass, strings.Join(parts, ", "))
		if len(unitGaps)+len(containerGaps) > 0 {
			j.Status = Warn
		}
		return j
	}
	j := verdict(Fail, list(s.downList(ds)))
	j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungService, Summary: fmt.Sprintf("%d units or containers have stopped on %s", len(ds), srv.Name), Evidence: s.downList(ds)})
	for i, d := range ds {
		if i == 3 {
			break // the first few; the diagnosis lists them all
		}
		name := d.container.GetName()
		if d.unit != nil {
			name = d.unit.GetName()
		}
		var tied *service
		for _, svc := range hosted {
			if matches(name, words(svc.res.Engine, svc.res.ID, svc.res.Name)) {
				tied = svc
				break
			}
		}
		j.fixes = append(j.fixes, s.restartFixes(tied, srv, d)...)
	}
	return j
}

// judgeDeps: the target's own uses, but for the server it runs on (the
// agent rung's business).
func (s *session) judgeDeps(id, except string) judged {
	var bad, shaky, fine []string
	var j judged
	for _, dep := range s.f.Graph.Uses(id) {
		t, ok := s.f.Graph.Target(dep)
		if !ok || dep == except {
			continue
		}
		line := fmt.Sprintf("%s (%s", dep, t.Status)
		if t.Reason != "" {
			line += ": " + qr(t.Reason)
		}
		line += ")"
		switch {
		case t.Troubled:
			bad = append(bad, line)
			ev := fmt.Sprintf("%s is %s", dep, t.Status)
			if !t.Since.IsZero() {
				ev += fmt.Sprintf(" since %s (%s)", stamp(t.Since), ago(s.f.Now, t.Since))
			}
			if t.Reason != "" {
				ev += ": " + qr(t.Reason)
			}
			j.diagnoses = append(j.diagnoses, Diagnosis{Rung: RungDependencies, About: dep,
				Summary:  fmt.Sprintf("%s uses %s, which is troubled: that is the likelier cause; diagnose %s next", id, dep, dep),
				Evidence: []string{ev}})
		case t.Status == "failed" || t.Status == "degraded" || t.Status == "offline":
			shaky = append(shaky, line)
		default:
			fine = append(fine, dep)
		}
	}
	switch {
	case len(bad) > 0:
		j.Status, j.Detail = Fail, "troubled: "+list(bad)
	case len(shaky) > 0:
		j.Status, j.Detail = Warn, "failing lately, not troubled yet: "+list(shaky)
	case len(fine) == 0:
		j.Status, j.Detail = Pass, "uses nothing gridcity knows of (no declared or discovered uses links)"
	default:
		j.Status, j.Detail = Pass, fmt.Sprintf("all %d healthy: %s", len(fine), list(fine))
	}
	return j
}

// assemble reports the ladder, and the findings of the rungs up to the one
// where it stopped.
func assemble(v map[string]judged, rep *Report) {
	verdicts := map[string]Rung{}
	for id, j := range v {
		verdicts[id] = j.Rung
	}
	ladder(verdicts, rep)
	rep.Diagnoses, rep.Fixes = []Diagnosis{}, []Fix{}
	for _, id := range Rungs {
		rep.Diagnoses = append(rep.Diagnoses, v[id].diagnoses...)
		rep.Fixes = append(rep.Fixes, v[id].fixes...)
		if id == rep.StoppedAt {
			break
		}
	}
}

// combine is one rung over several resources: its worst verdict, with
// each resource's detail.
func combine(ids []string, js []judged) judged {
	rank := map[string]int{Skip: 0, Pass: 1, Warn: 2, Fail: 3}
	var out judged
	out.Status = Skip
	var details []string
	for i, j := range js {
		if rank[j.Status] > rank[out.Status] {
			out.Status = j.Status
		}
		details = append(details, ids[i]+": "+j.Detail)
		out.diagnoses = append(out.diagnoses, j.diagnoses...)
		out.fixes = append(out.fixes, j.fixes...)
	}
	out.Detail = strings.Join(details, "; ")
	return out
}

func withPrefix(j judged, prefix string) judged {
	j.Detail = prefix + j.Detail
	return j
}
