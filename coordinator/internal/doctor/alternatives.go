package doctor

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// maxAlternatives bounds the other places tried for a resource that does
// not answer.
const maxAlternatives = 3

// alternative is another place that may speak the resource's protocol.
type alternative struct {
	sibling string // a configured resource of the same engine ("" for a listener)
	server  string // the server it runs on, when known
	engine  string
	target  string
	seen    string // what the agent showed, for a listener
}

// alternatives looks, for a resource that does not answer, for another
// place that speaks its protocol, and tries each with the handshake from
// where the resource was tried:
//   - a sibling: a configured resource of the same engine whose id extends
//     the resource's or that the resource's id extends (orders-db-replica);
//   - a listener: a server listening on the resource's port, outside
//     loopback, with a process of the resource's engine, at an address the
//     resource's target does not name (the config or the name may point at
//     the wrong place).
//
// Only those that answer become fixes, verified by that answer; what the
// answer cannot prove (the same data, writes) is said.
func (s *session) alternatives(ctx context.Context, svc *service) ([]Diagnosis, []Fix) {
	alts := s.findAlternatives(ctx, svc)
	if len(alts) == 0 {
		return nil, nil
	}
	from := Coordinator
	for _, a := range svc.atts {
		if a.Answered && a.From != Coordinator && a.Purpose != purposeSelf {
			from = a.From
			break
		}
	}
	specs := make([]spec, len(alts))
	for i, alt := range alts {
		label := alt.sibling
		if label == "" {
			label = "on " + alt.server
		}
		specs[i] = spec{from: from, purpose: "alternative " + label, engine: alt.engine, target: alt.target}
	}
	atts := s.runAll(ctx, specs)
	var diags []Diagnosis
	var fixes []Fix
	eng := engineName(svc.res.Engine)
	for i, a := range atts {
		if !a.OK {
			continue
		}
		alt := alts[i]
		if alt.sibling != "" {
			diags = append(diags, Diagnosis{Rung: RungHandshake, About: alt.sibling,
				Summary:  fmt.Sprintf("%s, a %s resource named like %s, answers: it could take over", alt.sibling, eng, svc.res.ID),
				Evidence: []string{describe(a)}})
			f := Fix{Summary: fmt.Sprintf("Fail over to %s (%s) until %s is back: promote it if it is a replica and point the clients at it; that is a decision for a person", alt.sibling, alt.target, svc.res.ID)}
			f = s.withRunbook(f, Subject{ID: alt.sibling, Kind: svc.res.Kind, Engine: alt.engine, Server: alt.server}, false, "failover", "fail-over", "promote", "switchover")
			if f.Runbook != "" {
				f = s.on(alt.server, f)
			} else {
				f.Server, f.Via = alt.server, ViaByHand
			}
			f.Verified = true
			f.Verification = fmt.Sprintf("%s answered the %s handshake from %s just now; not proven: that it holds the same data, or that it takes writes", alt.target, eng, from)
			fixes = append(fixes, f)
			continue
		}
		ev := []string{fmt.Sprintf("%s's agent: %s", alt.server, alt.seen), describe(a)}
		if net.ParseIP(svc.host) == nil && len(svc.addrs) > 0 {
			ev = append([]string{fmt.Sprintf("%s resolves to %s from the coordinator", q(svc.host), list(svc.addrs))}, ev...)
		}
		diags = append(diags, Diagnosis{Rung: RungHandshake, About: alt.server,
			Summary:  fmt.Sprintf("%s answers on %s at %s, not where %s points (%s)", eng, alt.server, alt.target, svc.res.ID, svc.res.Target),
			Evidence: ev})
		point := "its target in the coordinator's config and its clients"
		if net.ParseIP(svc.host) == nil {
			point = fmt.Sprintf("the name %s (or the config and the clients)", q(svc.host))
		}
		fixes = append(fixes, Fix{Summary: fmt.Sprintf("If the %s on %s is %s, point %s at %s", eng, alt.server, svc.res.ID, point, alt.target),
			Server: alt.server, Via: ViaByHand, Verified: true,
			Verification: fmt.Sprintf("%s answered the %s handshake from %s just now, while %s did not; not proven: that it is the same %s", alt.target, eng, from, svc.res.Target, svc.res.Kind)})
	}
	return diags, fixes
}

func (s *session) findAlternatives(ctx context.Context, svc *service) []alternative {
	var alts []alternative
	for _, r := range s.f.Config.Resources {
		if len(alts) == maxAlternatives {
			return alts
		}
		if r.ID == svc.res.ID || r.Engine != svc.res.Engine || r.Target == svc.res.Target ||
			!(strings.HasPrefix(r.ID, svc.res.ID+"-") || strings.HasPrefix(svc.res.ID, r.ID+"-")) {
			continue
		}
		alts = append(alts, alternative{sibling: r.ID, server: s.locate(ctx, r, false).server, engine: r.Engine, target: r.Target})
	}
	// Listeners: only engines whose target is a plain host:port, and whose
	// processes have known names.
	w := serviceWords[svc.res.Engine]
	if len(w) == 0 || topology.Endpoint(svc.res.Engine, svc.res.Target) != svc.res.Target {
		return alts
	}
	// An endpoint another resource names is that resource, not this one.
	named := map[string]bool{}
	for _, r := range s.f.Config.Resources {
		named[topology.Endpoint(r.Engine, r.Target)] = true
	}
	eps := make([]string, 0, len(s.listening))
	for ep := range s.listening {
		if !named[ep] {
			eps = append(eps, ep)
		}
	}
	slices.Sort(eps)
	tried := map[string]bool{} // one address per server is enough
	for _, ep := range eps {
		if len(alts) == maxAlternatives {
			break
		}
		addr, port, _ := net.SplitHostPort(ep)
		if port != svc.port || slices.Contains(svc.addrs, addr) || ep == svc.endpoint || tried[s.listening[ep]] {
			continue
		}
		srv, _ := s.server(s.listening[ep])
		for _, l := range listenersOn(srv, port) {
			if matches(l.GetProcess(), w) {
				alts = append(alts, alternative{server: srv.Name, engine: svc.res.Engine, target: ep, seen: listenerText(l)})
				tried[srv.Name] = true
				break
			}
		}
	}
	return alts
}
