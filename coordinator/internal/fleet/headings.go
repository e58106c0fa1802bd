package fleet

import (
	"slices"
	"strings"
)

// Heading is a server without its state: what a listing filters and sorts
// servers by.
type Heading struct {
	Name         string
	Online       bool
	Reconnecting bool // as Server.Reconnecting
	// District is the district its agent declared (empty if none).
	District string
}

// Status is the server's, but for revocation: "online", "reconnecting" or
// "offline". A listing takes who is revoked from the store, which the
// fleet's own mark (see SyncRevoked) may lag.
func (h Heading) Status() string { return status(h.Online, false, h.Reconnecting) }

// Headings returns every server's heading, sorted by name. Unlike Servers
// it copies no state (a copy costs microseconds: tens of milliseconds on a
// fleet of ten thousand), so that a listing can pick its page first and
// then copy only that page's servers with Server.
func (f *Fleet) Headings() []Heading {
	f.endGraceIfDue()
	f.mu.RLock()
	out := make([]Heading, 0, len(f.servers))
	for _, s := range f.servers {
		out = append(out, Heading{Name: s.Name, Online: s.Online, Reconnecting: s.awaited, District: s.Hello.GetDistrict()})
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b Heading) int { return strings.Compare(a.Name, b.Name) })
	return out
}
