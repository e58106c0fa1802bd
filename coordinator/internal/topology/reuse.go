package topology

import (
	"net"
	"strconv"
	"sync"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
)

// reuse keeps what building a graph learned of each server for the next
// build: the graph is built again at every change of the fleet's shape,
// which on a fleet of thousands is most often one server's connections,
// while finding every server's listening sockets and the links of every
// connection takes most of a build (some 50 ms at 10,000 servers). A
// server's sections are replaced whole when they change, never changed in
// place, so the same section is the same pointer and what was made of it
// still holds.
type reuse struct {
	mu sync.Mutex
	// listening is ListeningIndex of the servers named in names, whose
	// hosts and listeners were listen; gen counts the indexes made.
	names     []string
	listen    []listenKey
	listening map[string]string
	gen       uint64
	// conns are each server's discovered links: made of its connections
	// with the gen-th index.
	conns map[string]connLinks
}

type listenKey struct {
	host      *gridcityv1.HostInfo
	listeners *gridcityv1.Listeners
}

type connLinks struct {
	conns *gridcityv1.Connections
	gen   uint64
	links []graph.Link
}

// listeningIndex is ListeningIndex(servers), made again only when a
// server's host or listeners changed, or the servers did. The index is
// shared: the caller must not change it. The caller holds r.mu.
func (r *reuse) listeningIndex(servers []fleet.Server) map[string]string {
	same := r.listening != nil && len(servers) == len(r.names)
	for i := 0; same && i < len(servers); i++ {
		st := servers[i].State
		same = servers[i].Name == r.names[i] && r.listen[i] == listenKey{st.GetHost(), st.GetListeners()}
	}
	if same {
		return r.listening
	}
	r.names, r.listen = make([]string, len(servers)), make([]listenKey, len(servers))
	for i, srv := range servers {
		r.names[i], r.listen[i] = srv.Name, listenKey{srv.State.GetHost(), srv.State.GetListeners()}
	}
	r.listening, r.gen = ListeningIndex(servers), r.gen+1
	return r.listening
}

// discovered are the links srv's connections show: to the resource whose
// endpoint they reach, else to the server listening there (listening is
// the gen-th index), kept while its connections and the index are the
// same. Shared: the caller must not change them. The caller holds r.mu.
func (r *reuse) discovered(srv fleet.Server, endpoints, listening map[string]string) []graph.Link {
	conns := srv.State.GetConnections()
	if r.conns == nil {
		r.conns = map[string]connLinks{}
	}
	if c, ok := r.conns[srv.Name]; ok && c.conns == conns && c.gen == r.gen {
		return c.links
	}
	var links []graph.Link
	add := func(to string) {
		if srv.Name != to {
			links = append(links, graph.Link{From: srv.Name, To: to, Source: graph.SourceDiscovered})
		}
	}
	for _, c := range conns.GetItems() {
		ep := net.JoinHostPort(c.GetRemoteAddress(), strconv.Itoa(int(c.GetRemotePort())))
		if to, ok := endpoints[ep]; ok {
			add(to)
		} else if to, ok := listening[ep]; ok {
			add(to)
		}
	}
	r.conns[srv.Name] = connLinks{conns: conns, gen: r.gen, links: links}
	return links
}
