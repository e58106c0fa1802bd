// Package topology assembles the fleet's graph: servers from their agents,
// resources and districts from the config, links declared there and links
// discovered from the agents' established connections.
package topology

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
)

// Servers lists the fleet's servers.
type Servers interface {
	Servers() []fleet.Server
}

// Resources gives the probed state of resources.
type Resources interface {
	State(id string) (resources.State, bool)
}

// Source builds graphs from the config and the live fleet.
type Source struct {
	cfg       *config.Config
	servers   Servers
	resources Resources

	// The last graph, reused while neither the fleet's shape nor the
	// resources' states have changed (when both tell their versions).
	mu        sync.Mutex
	cached    built
	cachedKey [2]uint64

	// reuse keeps what a build learned of each server for the next one.
	reuse reuse
}

// built is one graph with what was learned building it.
type built struct {
	g *graph.Graph
	// hosts maps each resource to the server it runs on: the one listening
	// on the address its target names. A resource uses that server, and so
	// depends on it, but it is not what the resource serves: a load
	// balancer's host is not one of its backends.
	hosts map[string]string
}

// viewer is a Servers that keeps its servers' copies between calls
// (fleet.View): a graph built after one server changed copies that server
// alone, not the ten thousand others.
type viewer interface{ View() *fleet.View }

// servers are the fleet's servers, from its view when it has one.
func (s *Source) fleetServers() []fleet.Server {
	v, ok := s.servers.(viewer)
	if !ok {
		return s.servers.Servers()
	}
	view := v.View()
	out := make([]fleet.Server, len(view.Servers()))
	for i, srv := range view.Servers() {
		out[i] = *srv
	}
	return out
}

// shapeVersioner is a Servers that tells when its topology changes.
type shapeVersioner interface{ ShapeVersion() uint64 }

// versioner is a Resources that tells when a resource's state changes.
type versioner interface{ Version() uint64 }

// New returns a source; res may be nil (resources then count as healthy).
func New(cfg *config.Config, servers Servers, res Resources) *Source {
	if cfg == nil {
		cfg = config.Default()
	}
	return &Source{cfg: cfg, servers: servers, resources: res}
}

// Config is the coordinator config in use.
func (s *Source) Config() *config.Config { return s.cfg }

// Graph returns the graph as it is now: the last one built while nothing
// it depends on has changed since, else a new one. Graphs are immutable,
// so callers may share one.
func (s *Source) Graph() (*graph.Graph, error) {
	b, err := s.current()
	return b.g, err
}

// HostedOn maps each resource to the server it runs on (see built.hosts),
// as of the current graph.
func (s *Source) HostedOn() (map[string]string, error) {
	b, err := s.current()
	return b.hosts, err
}

func (s *Source) current() (built, error) {
	sv, ok1 := s.servers.(shapeVersioner)
	rv, ok2 := s.resources.(versioner)
	if !ok1 || !ok2 {
		return s.build()
	}
	// Read the versions before building: a change during the build makes
	// the next call build again, never keeps a stale graph.
	key := [2]uint64{sv.ShapeVersion(), rv.Version()}
	s.mu.Lock()
	if s.cached.g != nil && s.cachedKey == key {
		b := s.cached
		s.mu.Unlock()
		return b, nil
	}
	s.mu.Unlock()
	b, err := s.build()
	if err != nil {
		return built{}, err
	}
	s.mu.Lock()
	s.cached, s.cachedKey = b, key
	s.mu.Unlock()
	return b, nil
}

func (s *Source) build() (built, error) {
	servers := s.fleetServers()
	var targets []graph.Target
	known := map[string]bool{}
	for _, srv := range servers {
		t := graph.Target{ID: srv.Name, Name: srv.Name, Kind: "server", Status: srv.Status(), Since: srv.ConnectedAt}
		switch {
		case srv.Online:
		case !srv.RevokedAt.IsZero():
			// Retired by a person: gone on purpose, not a trouble.
			t.Since = srv.RevokedAt
			t.Reason = "its agent's certificate was revoked at " + srv.RevokedAt.UTC().Format(time.RFC3339) +
				": the server is retired and no longer watched (enroll it again to watch it)"
		case srv.Reconnecting:
			// The coordinator restarted; the agent is most likely in its
			// backoff. Not troubled, so no incident opens for a restart;
			// once the grace ends the fleet's shape changes and the server
			// is offline (troubled) since it was last heard from.
			t.Since = srv.LastSeen
			t.Reason = reconnectingReason(srv)
		default:
			t.Since = srv.LastSeen // offline since it was last heard from
			t.Troubled, t.Reason = true, "agent offline"
		}
		targets = append(targets, t)
		known[srv.Name] = true
	}
	endpoints := resourceEndpoints(s.cfg)
	for _, r := range s.cfg.Resources {
		name := r.Name
		if name == "" {
			name = r.ID
		}
		t := graph.Target{ID: r.ID, Name: name, Kind: r.Kind, Status: "unknown"}
		if s.resources != nil {
			if st, ok := s.resources.State(r.ID); ok {
				t.Troubled, t.Status, t.Reason, t.Since = st.Troubled, st.Status, st.Reason, st.Since
			}
		}
		targets = append(targets, t)
		known[r.ID] = true
	}

	links, hosts := s.links(servers, known, endpoints)

	// Districts from the config, plus the district each agent declares.
	byID := map[string]*graph.District{}
	var order []string
	for _, d := range s.cfg.Districts {
		name := d.Name
		if name == "" {
			name = d.ID
		}
		dd := &graph.District{ID: d.ID, Name: name}
		for _, m := range d.Members {
			if known[m] {
				dd.Members = append(dd.Members, m)
			}
		}
		byID[d.ID], order = dd, append(order, d.ID)
	}
	for _, srv := range servers {
		id := srv.Hello.GetDistrict()
		if id == "" {
			continue
		}
		dd := byID[id]
		if dd == nil {
			dd = &graph.District{ID: id, Name: id}
			byID[id], order = dd, append(order, id)
		}
		if !slices.Contains(dd.Members, srv.Name) {
			dd.Members = append(dd.Members, srv.Name)
		}
	}
	sort.Strings(order)
	districts := make([]graph.District, 0, len(order))
	for _, id := range order {
		sort.Strings(byID[id].Members)
		districts = append(districts, *byID[id])
	}
	g, err := graph.New(targets, links, districts)
	return built{g: g, hosts: hosts}, err
}

// reconnectingReason says why a server that is not connected is not
// troubled yet. It names times rather than "N s ago": the graph it goes
// into is reused until the fleet's shape changes.
func reconnectingReason(srv fleet.Server) string {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	return fmt.Sprintf("the coordinator restarted at %s and this server's agent has not reconnected yet (last heard from at %s); "+
		"agents retry at least once a minute, so it counts as offline only if it is not back by %s",
		stamp(srv.Restarted), stamp(srv.LastSeen), stamp(srv.GraceEnds))
}

// resourceEndpoints maps the host:port each resource's target names to
// the resource.
func resourceEndpoints(cfg *config.Config) map[string]string {
	endpoints := map[string]string{}
	for _, r := range cfg.Resources {
		if ep := Endpoint(r.Engine, r.Target); ep != "" {
			endpoints[ep] = r.ID
		}
	}
	return endpoints
}

// links are the declared links whose ends exist (a server named in the
// config may not have enrolled yet), then what the agents show:
//   - server → resource: an established connection to a resource's endpoint;
//   - server → server: an established connection to an address another
//     server has and a port it listens on there;
//   - resource → server: the server listening on the resource's endpoint
//     (the resource runs there, so it depends on that server).
//
// A discovered link that was also declared is kept once, as declared (by
// graph.New, which folds duplicates).
func (s *Source) links(servers []fleet.Server, known map[string]bool, endpoints map[string]string) (links []graph.Link, hosts map[string]string) {
	links = make([]graph.Link, 0, len(s.cfg.Links))
	add := func(from, to, source string) {
		if from != to {
			links = append(links, graph.Link{From: from, To: to, Source: source})
		}
	}
	for _, l := range s.cfg.Links {
		if known[l.From] && known[l.To] {
			add(l.From, l.To, graph.SourceDeclared)
		}
	}
	// What each server's connections show, kept from the build before
	// for the servers whose connections and the listening index are the
	// same (see reuse).
	s.reuse.mu.Lock()
	defer s.reuse.mu.Unlock()
	listening := s.reuse.listeningIndex(servers)
	for _, srv := range servers {
		links = append(links, s.reuse.discovered(srv, endpoints, listening)...)
	}
	hosts = map[string]string{}
	for ep, id := range endpoints {
		if on, ok := listening[ep]; ok {
			hosts[id] = on
		}
	}
	for _, id := range slices.Sorted(maps.Keys(hosts)) {
		add(id, hosts[id], graph.SourceDiscovered)
	}
	return links, hosts
}

// ListeningIndex maps "address:port" to the server listening there, for
// every TCP port a server listens on outside loopback: a wildcard listener
// counts on each of the server's own addresses. An endpoint two servers
// claim (the same private address in two networks) names neither.
func ListeningIndex(servers []fleet.Server) map[string]string {
	idx := map[string]string{}
	ambiguous := map[string]bool{}
	claim := func(addr string, port uint32, server string) {
		ep := net.JoinHostPort(addr, strconv.Itoa(int(port)))
		if prev, ok := idx[ep]; ok && prev != server {
			ambiguous[ep] = true
		}
		idx[ep] = server
	}
	for _, srv := range servers {
		addrs := srv.State.GetHost().GetAddresses()
		for _, l := range srv.State.GetListeners().GetItems() {
			if !strings.HasPrefix(l.GetProto(), "tcp") {
				continue
			}
			ip := net.ParseIP(strings.Trim(l.GetAddress(), "[]"))
			switch {
			case ip == nil || ip.IsLoopback():
			case ip.IsUnspecified():
				// 0.0.0.0 takes IPv4 only; :: takes both on Linux's default dual stack.
				for _, a := range addrs {
					if aip := net.ParseIP(a); aip != nil && (aip.To4() != nil || l.GetProto() == "tcp6") {
						claim(a, l.GetPort(), srv.Name)
					}
				}
			default:
				claim(ip.String(), l.GetPort(), srv.Name)
			}
		}
	}
	for ep := range ambiguous {
		delete(idx, ep)
	}
	return idx
}

// Vantages says, for each resource, which servers' agents should probe it:
// the servers in its probeFrom, else the servers that use it (by a declared
// or a discovered link); of those, only the ones online whose agents run
// probes. A resource with none is left out: the coordinator probes it.
func (s *Source) Vantages() map[string][]string {
	servers := s.fleetServers()
	known := map[string]bool{}
	able := map[string]bool{}
	for _, srv := range servers {
		known[srv.Name] = true
		able[srv.Name] = srv.Online && slices.Contains(srv.Hello.GetCapabilities(), "probes")
	}
	for _, r := range s.cfg.Resources {
		known[r.ID] = true
	}
	users := map[string][]string{}
	links, _ := s.links(servers, known, resourceEndpoints(s.cfg))
	for _, l := range links {
		if able[l.From] {
			users[l.To] = append(users[l.To], l.From)
		}
	}
	out := map[string][]string{}
	for _, r := range s.cfg.Resources {
		var from []string
		if len(r.ProbeFrom) > 0 {
			for _, srv := range r.ProbeFrom {
				if able[srv] {
					from = append(from, srv)
				}
			}
		} else {
			from = users[r.ID]
		}
		if len(from) > 0 {
			slices.Sort(from)
			out[r.ID] = slices.Compact(from)
		}
	}
	return out
}

// Endpoint is the host:port a resource's target names, for matching the
// agents' connections; "" when it names none (a DNS name to resolve, say).
func Endpoint(engine, target string) string {
	switch engine {
	case "http", "https", "s3":
		u, err := url.Parse(target)
		if err != nil || u.Hostname() == "" {
			return ""
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if port == "" {
			return ""
		}
		return net.JoinHostPort(u.Hostname(), port)
	case "dns":
		return ""
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}
