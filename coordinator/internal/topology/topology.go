// Package topology assembles the fleet's graph: servers from their agents,
// resources and districts from the config, links declared there and links
// discovered from the agents' established connections.
package topology

import (
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

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
}

// New returns a source; res may be nil (resources then count as healthy).
func New(cfg *config.Config, servers Servers, res Resources) *Source {
	if cfg == nil {
		cfg = config.Default()
	}
	return &Source{cfg: cfg, servers: servers, resources: res}
}

// Config is the coordinator config in use.
func (s *Source) Config() *config.Config { return s.cfg }

// Graph builds the graph as it is now.
func (s *Source) Graph() (*graph.Graph, error) {
	servers := s.servers.Servers()
	var targets []graph.Target
	known := map[string]bool{}
	for _, srv := range servers {
		t := graph.Target{ID: srv.Name, Name: srv.Name, Kind: "server", Status: srv.Status(), Since: srv.LastSeen}
		if !srv.Online {
			t.Troubled, t.Reason = true, "agent offline"
		}
		targets = append(targets, t)
		known[srv.Name] = true
	}
	endpoints := map[string]string{} // "host:port" → resource id
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
		if ep := Endpoint(r.Engine, r.Target); ep != "" {
			endpoints[ep] = r.ID
		}
	}

	// Declared links whose ends exist (a server named in the config may not
	// have enrolled yet), then what the agents' connections show.
	var links []graph.Link
	declared := map[[2]string]bool{}
	for _, l := range s.cfg.Links {
		if known[l.From] && known[l.To] {
			links = append(links, graph.Link{From: l.From, To: l.To, Source: graph.SourceDeclared})
			declared[[2]string{l.From, l.To}] = true
		}
	}
	for _, srv := range servers {
		for _, c := range srv.State.GetConnections().GetItems() {
			ep := net.JoinHostPort(c.GetRemoteAddress(), strconv.Itoa(int(c.GetRemotePort())))
			to, ok := endpoints[ep]
			if !ok || to == srv.Name || declared[[2]string{srv.Name, to}] {
				continue
			}
			declared[[2]string{srv.Name, to}] = true
			links = append(links, graph.Link{From: srv.Name, To: to, Source: graph.SourceDiscovered})
		}
	}

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
	return graph.New(targets, links, districts)
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
