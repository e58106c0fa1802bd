package fleetview

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// NoInput is the input of tools that take none: an empty object.
type NoInput struct{}

// ListServersInput is list_servers' optional input. Without any, the answer
// is the fleet at a glance; a name that is exactly a server's answers that
// server in full; the other arguments filter and page compact rows (or, with
// full, whole views).
type ListServersInput struct {
	Name      string `json:"name,omitempty" jsonschema:"a server's exact name: that server in full; other text: servers whose name contains it, ignoring case"`
	District  string `json:"district,omitempty" jsonschema:"only servers in this district: declared by their agent or listed in the coordinator's config (get_topology lists the districts)"`
	Status    string `json:"status,omitempty" jsonschema:"only servers with this status: online, reconnecting, offline or revoked"`
	Attention bool   `json:"attention,omitempty" jsonschema:"only servers with a reason in why"`
	Full      bool   `json:"full,omitempty" jsonschema:"whole server views instead of rows, as many as fit"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many servers (maximum 1000); fewer when the answer's size bound comes first"`
	After     string `json:"after,omitempty" jsonschema:"a server name: list the servers that sort after it; pass the previous answer's nextAfter to read the next page"`
}

// Bounds on a list_servers answer, in characters of JSON (the structured
// content; the text content is shorter): a model reads every answer in a
// bounded context, so the fleet at a glance fits glanceBudget whatever the
// fleet's size, and any other answer pageBudget. Counts say what is left
// out and the arguments that reach it.
const (
	glanceBudget    = 16000
	pageBudget      = 48000
	MaxServersLimit = 1000
	// budgetSlack is kept free of rows for the fields set after them.
	budgetSlack = 600
)

// statusRevoked is a server whose agent's certificate was revoked.
const statusRevoked = fleet.StatusRevoked

// ServerStatuses are the statuses list_servers filters on.
var ServerStatuses = []string{fleet.StatusOnline, fleet.StatusReconnecting, fleet.StatusOffline, statusRevoked}

// ListServersOutput is list_servers' structured result, in every mode: the
// fleet at a glance (counts, rows needing attention first, healthy names),
// a filtered page (rows or, with full, servers), or one server in full
// (servers holds it).
type ListServersOutput struct {
	Total     int            `json:"total" jsonschema:"how many servers are known in the whole fleet, whatever the filters"`
	Online    int            `json:"online" jsonschema:"how many servers of the whole fleet have a live agent stream, whatever the filters"`
	ByStatus  map[string]int `json:"byStatus" jsonschema:"the whole fleet by status"`
	Districts []DistrictRow  `json:"districts,omitempty" jsonschema:"servers per district, most troubled first (no-argument answer only)"`
	// DistrictsOmitted counts the districts left out of Districts.
	DistrictsOmitted int            `json:"districtsOmitted,omitempty" jsonschema:"districts left out for size"`
	Attention        map[string]int `json:"attention,omitempty" jsonschema:"matching servers needing attention by reason, each counted whether or not it has a row"`
	Matched          int            `json:"matched" jsonschema:"how many servers match name, district, status and attention, over all pages"`
	Rows             []ServerRow    `json:"rows,omitempty" jsonschema:"one row per server: without arguments the most serious first, else by name"`
	Others           []string       `json:"others,omitempty" jsonschema:"the other servers, by name, when their rows do not fit: online, nothing serious (security updates at most, counted in attention)"`
	Servers          []ServerView   `json:"servers,omitempty" jsonschema:"whole views: the server named exactly, or a page with full"`
	Truncated        bool           `json:"truncated" jsonschema:"matching servers are left out: omitted counts them, nextAfter or more gets them"`
	Omitted          map[string]int `json:"omitted,omitempty" jsonschema:"matching servers not named here, by status"`
	NextAfter        string         `json:"nextAfter,omitempty" jsonschema:"pass as after, with the same arguments, for the next page"`
	More             string         `json:"more,omitempty" jsonschema:"calls that list what was left out"`
	// Gaps say what the whole answer could not check.
	Gaps        []GapView `json:"gaps,omitempty" jsonschema:"what this answer could not check, and why: e.g. the store is unreachable, so servers other coordinators hold are as of a time"`
	GeneratedAt string    `json:"generatedAt" jsonschema:"when this answer was made (RFC 3339)"`
}

// DistrictRow counts one district's servers.
type DistrictRow struct {
	District  string `json:"district" jsonschema:"empty for none"`
	Servers   int    `json:"servers"`
	Offline   int    `json:"offline,omitempty" jsonschema:"servers not online"`
	Attention int    `json:"attention,omitempty" jsonschema:"servers needing attention"`
}

// ServerView is one server as an AI sees it. Strings in it come from the
// server itself and are data, not instructions.
type ServerView struct {
	ID           string       `json:"id" jsonschema:"the server's id: its agent's name"`
	Name         string       `json:"name" jsonschema:"the server's name"`
	Status       string       `json:"status" jsonschema:"online (its agent is connected), reconnecting (the coordinator restarted a moment ago and this agent, connected before, has not dialled again yet), offline, or revoked (its agent's certificate was revoked: it will not return)"`
	District     string       `json:"district,omitempty" jsonschema:"the district the agent declared"`
	AgentVersion string       `json:"agentVersion,omitempty"`
	Commands     CommandsView `json:"commands" jsonschema:"whether this server's agent runs approved commands, and as whom"`
	// A fact the agent has not reported (not collected yet, or not
	// collectable) is absent, with a gap saying why: never a zero or an
	// empty list, which would read as "fine".
	OS            *OSView         `json:"os,omitempty" jsonschema:"absent when unknown (see gaps)"`
	CPU           *CPUView        `json:"cpu,omitempty" jsonschema:"absent when unknown (see gaps)"`
	Memory        *MemoryView     `json:"memory,omitempty" jsonschema:"absent when unknown (see gaps)"`
	Disks         []DiskView      `json:"disks,omitzero" jsonschema:"absent when unknown (see gaps)"`
	UptimeSeconds *uint64         `json:"uptimeSeconds,omitempty" jsonschema:"absent when unknown (see gaps)"`
	Addresses     []string        `json:"addresses,omitzero" jsonschema:"the server's addresses outside loopback and link-local; absent when unknown (see gaps)"`
	Listening     []ListenerView  `json:"listening,omitzero" jsonschema:"listening sockets: protocol, address, port and owning process; absent when unknown (see gaps)"`
	Containers    []ContainerView `json:"containers,omitzero" jsonschema:"absent when unknown (see gaps): an empty list means none"`
	FailedUnits   []UnitView      `json:"failedUnits,omitzero" jsonschema:"systemd units in the failed state; absent when unknown (see gaps): an empty list means none failed"`
	Updates       *UpdatesView    `json:"updates,omitempty" jsonschema:"pending package updates; absent when unknown (see gaps), for instance before the agent's first package-manager run"`
	LastSeen      string          `json:"lastSeen" jsonschema:"when the agent was last heard from (RFC 3339), empty if never"`
	CollectedAt   string          `json:"collectedAt,omitempty" jsonschema:"when the agent collected the newest facts (RFC 3339)"`
	Gaps          []GapView       `json:"gaps" jsonschema:"facts that could not be collected on this server and why: absent facts are unknown, not fine"`

	// Only in the one-server view (a name given): see withTopProcesses.
	TopProcesses *TopProcessesView `json:"topProcesses,omitempty" jsonschema:"with name only: the server's busiest and largest processes; absent when unknown (see gaps)"`
}

type CommandsView struct {
	Enabled bool   `json:"enabled"`
	RunAs   string `json:"runAs,omitempty"`
}

type OSView struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Family   string `json:"family,omitempty"`
	Kernel   string `json:"kernel"`
	Arch     string `json:"arch"`
	Hostname string `json:"hostname"`
}

type CPUView struct {
	Cores       uint32   `json:"cores"`
	BusyPercent *float64 `json:"busyPercent,omitempty" jsonschema:"share of time busy over the agent's last sample interval; absent until the agent has two samples"`
	Load1       float64  `json:"load1"`
	Load5       float64  `json:"load5"`
	Load15      float64  `json:"load15"`
}

type MemoryView struct {
	TotalBytes     uint64  `json:"totalBytes"`
	UsedBytes      uint64  `json:"usedBytes"`
	AvailableBytes uint64  `json:"availableBytes"`
	UsedPercent    float64 `json:"usedPercent"`
	SwapTotalBytes uint64  `json:"swapTotalBytes"`
	SwapUsedBytes  uint64  `json:"swapUsedBytes"`
}

type DiskView struct {
	Mount             string  `json:"mount"`
	Device            string  `json:"device"`
	Filesystem        string  `json:"filesystem"`
	TotalBytes        uint64  `json:"totalBytes"`
	UsedBytes         uint64  `json:"usedBytes"`
	AvailableBytes    uint64  `json:"availableBytes" jsonschema:"bytes free for unprivileged users (the root reserve excluded)"`
	UsedPercent       float64 `json:"usedPercent" jsonschema:"as df shows it: used / (used + available); 100 means full for everyone but root"`
	InodesTotal       uint64  `json:"inodesTotal"`
	InodesUsed        uint64  `json:"inodesUsed"`
	InodesUsedPercent float64 `json:"inodesUsedPercent"`
}

type ListenerView struct {
	Proto   string `json:"proto" jsonschema:"tcp, tcp6, udp or udp6"`
	Address string `json:"address"`
	Port    uint32 `json:"port"`
	Process string `json:"process" jsonschema:"the owning process's name, empty when not known"`
}

type ContainerView struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Image  string `json:"image"`
	State  string `json:"state"`
	Status string `json:"status"`
}

type UnitView struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Since       string `json:"since,omitempty" jsonschema:"when the unit failed (RFC 3339)"`
}

type UpdatesView struct {
	Pending   uint32 `json:"pending"`
	Security  uint32 `json:"security"`
	Manager   string `json:"manager,omitempty"`
	CheckedAt string `json:"checkedAt,omitempty" jsonschema:"when the package manager was last asked (RFC 3339); the agent asks every 30 min by default"`
}

type GapView struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

// listed is one server of the fleet before its page is chosen: enough to
// filter and sort it, none of its state.
type listed struct {
	name, status, district string
	// agent is its enrolment when it was revoked or never connected.
	agent *store.Agent
	// connected: the fleet knows it (it connected at least once); srv is
	// then its copy in the fleet's view, the idx-th of the view's servers.
	connected bool
	srv       *fleet.Server
	idx       int
	// configDistrict is the config's district for a server that declares none.
	configDistrict string
}

// listServers answers in one of three modes: one server in full (name is
// exactly a server's), the fleet at a glance (no arguments), or a page of
// matching servers sorted by name. Filtering and paging look at names,
// statuses and districts alone; a server's state is copied only for its
// row or view.
func listServers(ctx context.Context, d Deps, in ListServersInput, now time.Time) (ListServersOutput, error) {
	out := ListServersOutput{ByStatus: map[string]int{}, GeneratedAt: now.UTC().Format(time.RFC3339)}
	status := strings.ToLower(strings.TrimSpace(in.Status))
	if status != "" && !slices.Contains(ServerStatuses, status) {
		return out, fmt.Errorf("unknown status %q; status is one of %s (or leave it out for every server)", in.Status, strings.Join(ServerStatuses, ", "))
	}
	all, view, err := listFleet(ctx, d)
	if err != nil && !errors.Is(err, store.ErrUnavailable) {
		return out, err
	}
	// Set before the rows, which are fitted to what is left.
	out.Gaps = storeGaps(d, err, now)
	for _, l := range all {
		out.ByStatus[l.status]++
	}
	out.Total, out.Online = len(all), out.ByStatus[fleet.StatusOnline]

	if i := exactName(all, in.Name); i >= 0 {
		out.Matched = 1
		out.Servers = []ServerView{fitView(fullView(d, all[i], now, true), pageBudget-budgetSlack-jsonLen(out.Gaps))}
		return out, nil
	}
	inDistrict, err := districtFilter(d, in.District, all)
	if err != nil {
		return out, err
	}
	name := strings.ToLower(in.Name)
	var matched []listed
	if status == "" && name == "" && inDistrict == nil {
		matched = make([]listed, 0, len(all)) // every server
	}
	for _, l := range all {
		if (status == "" || l.status == status) && (name == "" || strings.Contains(strings.ToLower(l.name), name)) && (inDistrict == nil || inDistrict(l)) {
			matched = append(matched, l)
		}
	}
	var states []*judged[rowState] // nil: a page judges only its own servers
	if in == (ListServersInput{}) || in.Attention {
		// Ranking and the attention filter read every matching server's
		// state; a page of the others reads only its own servers'.
		states = rowStatesOf(d, view, now)
		rows := make([]ServerRow, 0, len(matched))
		for _, l := range matched {
			var state *rowState
			if l.connected {
				state = &states[l.idx].val
			}
			if r := rowOf(l, now, state); !in.Attention || len(r.Why) > 0 {
				rows = append(rows, r)
			}
		}
		out.Matched = len(rows)
		out.Attention = attentionCounts(rows)
		if !in.Attention {
			glance(&out, rows)
			return out, nil
		}
		matched = matched[:0]
		for _, r := range rows {
			matched = append(matched, r.l)
		}
	}
	out.Matched = len(matched)
	page(d, &out, in, matched, now, states)
	return out, nil
}

// listFleet is every server the fleet knows or the store has enrolled,
// sorted by name, with the status the store decides. When the store is
// unreachable it is the servers the fleet knows, as it knows them, with
// the store's error (store.ErrUnavailable).
func listFleet(ctx context.Context, d Deps) ([]listed, *fleet.View, error) {
	agents, agentsErr := d.Agents.read(ctx, d.Store)
	if agentsErr != nil && !errors.Is(agentsErr, store.ErrUnavailable) {
		return nil, nil, fmt.Errorf("reading the enrolled agents failed (%v); retry in a moment", agentsErr)
	}
	enrolled := make(map[string]*store.Agent, len(agents))
	for i := range agents {
		enrolled[agents[i].Name] = &agents[i]
	}
	view := d.Fleet.View()
	all := make([]listed, 0, len(view.Servers()))
	for i, srv := range view.Servers() {
		h := fleet.Heading{Name: srv.Name, Online: srv.Online, Reconnecting: srv.Reconnecting, District: srv.Hello.GetDistrict()}
		// The store, read just now, says who is revoked (see Heading.Status).
		l := listed{name: h.Name, status: h.Status(), district: h.District, connected: true, srv: srv, idx: i}
		if a := enrolled[h.Name]; a != nil && a.Revoked() {
			l.status, l.agent = statusRevoked, a
		}
		delete(enrolled, h.Name)
		all = append(all, l)
	}
	// Enrolled but never connected: listed, as offline, so that a missing
	// server is visible rather than absent.
	for _, a := range enrolled {
		if !a.Revoked() {
			all = append(all, listed{name: a.Name, status: fleet.StatusOffline, agent: a})
		}
	}
	if len(all) > len(view.Servers()) {
		slices.SortFunc(all, func(a, b listed) int { return strings.Compare(a.name, b.name) })
	}
	if d.Topology != nil {
		// A server without a district of its own is in the config's.
		member := map[string]string{}
		for _, dd := range d.Topology.Config().Districts {
			for _, m := range dd.Members {
				if member[m] == "" {
					member[m] = dd.ID
				}
			}
		}
		for i := range all {
			if all[i].district == "" {
				all[i].configDistrict = member[all[i].name]
			}
		}
	}
	return all, view, agentsErr
}

// storeGaps says, while the store is unreachable (as the fleet found, or
// agentsErr), what the answer holds: the servers this replica streams
// are live, those other replicas hold are as of the fleet's last read,
// and what only the store knows is left out. None while it answers.
func storeGaps(d Deps, agentsErr error, now time.Time) []GapView {
	down, asOf, ok := storeOutage(d, agentsErr, now)
	if !ok {
		return nil
	}
	return []GapView{{Check: "store", Reason: down + ": servers whose agents other coordinators hold are shown " + asOf +
		" (stale); servers whose agents stream to this coordinator are live; revocations and agents that never connected are not shown until it is back"}}
}

// storeOutage says, while the store is unreachable (as the fleet found,
// or err from a read just now), what is wrong and since when ("the store
// (PostgreSQL at HOST:PORT) is unreachable since T"), and how old the
// servers other replicas hold are here ("as of T, …"); ok is false while
// it answers.
func storeOutage(d Deps, err error, now time.Time) (down, asOf string, ok bool) {
	o, found := d.Fleet.StoreOutage()
	if !found && !errors.Is(err, store.ErrUnavailable) {
		return "", "", false
	}
	if !found {
		o = fleet.StoreOutage{Since: now, Err: err}
	}
	down = "the store is unreachable"
	var u *store.UnavailableError
	if errors.As(o.Err, &u) {
		down = u.Summary()
	}
	asOf = "as this coordinator last read them, before the outage"
	if !o.AsOf.IsZero() {
		asOf = "as of " + RFC3339(o.AsOf) + ", this coordinator's last read of them"
	}
	return down + " since " + RFC3339(o.Since), asOf, true
}

// exactName is the index of the server named name exactly (or, when no
// name is, ignoring case), or -1.
func exactName(all []listed, name string) int {
	if name == "" {
		return -1
	}
	i, found := slices.BinarySearchFunc(all, name, func(l listed, n string) int { return strings.Compare(l.name, n) })
	if found {
		return i
	}
	return slices.IndexFunc(all, func(l listed) bool { return strings.EqualFold(l.name, name) })
}

// fullView is one server in full, with the gaps that say what its status
// leaves unknown.
func fullView(d Deps, l listed, now time.Time, processes bool) ServerView {
	if !l.connected {
		v := viewServer(fleet.Server{Name: l.name}, now)
		// It has no facts at all; this one gap says why.
		v.Gaps = []GapView{{Check: "agent", Reason: "enrolled at " + RFC3339(l.agent.EnrolledAt) + " but never connected: is gridcity-agent running there, and can it reach the coordinator?"}}
		return v
	}
	// Servers are never removed from the fleet; the copy may be a moment
	// newer than the heading it was chosen by.
	srv, _ := d.Fleet.Server(l.name)
	srv.RevokedAt = time.Time{} // the store decides, as for the listing
	v := viewServer(srv, now)
	if processes {
		v.TopProcesses, v.Gaps = withTopProcesses(srv.State, v.Gaps)
	}
	if bad := notEncodable(v); bad != "" {
		v = unencodableServer(srv, now, bad)
	}
	if l.status == statusRevoked && l.agent != nil {
		v.Status = statusRevoked
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "its certificate was revoked at " + RFC3339(l.agent.RevokedAt) + "; the facts are its last report"})
	}
	return v
}

// districtFilter tells which servers are in the district named: those whose
// agent declares it and the members the config gives it, as get_topology
// has them. Nil without a district; an error naming the districts there are
// when no server declares it and the config does not have it.
func districtFilter(d Deps, district string, all []listed) (func(listed) bool, error) {
	if district == "" {
		return nil, nil
	}
	members := map[string]bool{}
	known := false
	var cfgIDs []string
	if d.Topology != nil {
		for _, dd := range d.Topology.Config().Districts {
			cfgIDs = append(cfgIDs, dd.ID)
			if strings.EqualFold(dd.ID, district) || strings.EqualFold(dd.Name, district) {
				known = true
				for _, m := range dd.Members {
					members[m] = true
				}
			}
		}
	}
	declares := func(l listed) bool { return l.district != "" && strings.EqualFold(l.district, district) }
	if !known && !slices.ContainsFunc(all, declares) {
		ids := map[string]bool{}
		for _, id := range cfgIDs {
			ids[id] = true
		}
		for _, l := range all {
			if l.district != "" {
				ids[l.district] = true
			}
		}
		return nil, fmt.Errorf("unknown district %q; districts: %s", district, CloseMatches(district, slices.Sorted(maps.Keys(ids))))
	}
	return func(l listed) bool { return members[l.name] || declares(l) }, nil
}

// RFC3339 is t as the answers write times: UTC, to the second, and ""
// for no time.
func RFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func unixTime(sec int64) string {
	if sec <= 0 {
		return ""
	}
	return RFC3339(time.Unix(sec, 0))
}

func viewServer(srv fleet.Server, now time.Time) ServerView {
	st := srv.State
	v := ServerView{
		ID: srv.Name, Name: srv.Name, Status: srv.Status(),
		District: srv.Hello.GetDistrict(), AgentVersion: srv.Hello.GetAgentVersion(),
		Commands: CommandsView{Enabled: srv.Hello.GetCommandsEnabled(), RunAs: srv.Hello.GetRunAs()},
		Gaps:     []GapView{},
		LastSeen: RFC3339(srv.LastSeen),
	}
	if st.GetCollectedUnixMs() > 0 {
		v.CollectedAt = RFC3339(time.UnixMilli(st.GetCollectedUnixMs()))
	}
	if h := st.GetHost(); h != nil {
		v.OS = &OSView{Name: h.GetOs(), Version: h.GetOsVersion(), Family: h.GetPlatformFamily(), Kernel: h.GetKernel(), Arch: h.GetArch(), Hostname: h.GetHostname()}
		v.Addresses = orEmpty(h.GetAddresses())
		// Uptime from the boot time, so it stays right between host-info samples.
		up := h.GetUptimeSeconds()
		if boot := h.GetBootUnix(); boot > 0 && now.Unix() > boot {
			up = uint64(now.Unix() - boot)
		}
		if up > 0 {
			v.UptimeSeconds = &up
		}
	}
	if c := st.GetCpu(); c != nil {
		v.CPU = &CPUView{Cores: c.GetCores(), Load1: c.GetLoad1(), Load5: c.GetLoad5(), Load15: c.GetLoad15()}
		if c.BusyPercent != nil {
			busy := round1(c.GetBusyPercent())
			v.CPU.BusyPercent = &busy
		}
	}
	if m := st.GetMemory(); m != nil {
		v.Memory = &MemoryView{TotalBytes: m.GetTotalBytes(), UsedBytes: m.GetUsedBytes(),
			AvailableBytes: m.GetAvailableBytes(), UsedPercent: round1(m.GetUsedPercent()),
			SwapTotalBytes: m.GetSwapTotalBytes(), SwapUsedBytes: m.GetSwapUsedBytes()}
	}
	if u := st.GetUpdates(); u != nil {
		v.Updates = &UpdatesView{Pending: u.GetPending(), Security: u.GetSecurity(), Manager: u.GetManager(), CheckedAt: unixTime(u.GetCheckedUnix())}
	}
	if d := st.GetDisks(); d != nil {
		v.Disks = []DiskView{}
		for _, d := range d.GetItems() {
			v.Disks = append(v.Disks, DiskView{Mount: d.GetMount(), Device: d.GetDevice(), Filesystem: d.GetFilesystem(),
				TotalBytes: d.GetTotalBytes(), UsedBytes: d.GetUsedBytes(), AvailableBytes: d.GetAvailableBytes(), UsedPercent: round1(d.GetUsedPercent()),
				InodesTotal: d.GetInodesTotal(), InodesUsed: d.GetInodesUsed(), InodesUsedPercent: round1(d.GetInodesUsedPercent())})
		}
	}
	if ls := st.GetListeners(); ls != nil {
		v.Listening = []ListenerView{}
		for _, l := range ls.GetItems() {
			v.Listening = append(v.Listening, ListenerView{Proto: l.GetProto(), Address: l.GetAddress(), Port: l.GetPort(), Process: l.GetProcess()})
		}
		sort.Slice(v.Listening, func(i, j int) bool {
			a, b := v.Listening[i], v.Listening[j]
			if a.Port != b.Port {
				return a.Port < b.Port
			}
			return a.Proto+a.Address < b.Proto+b.Address
		})
	}
	if cs := st.GetContainers(); cs != nil {
		v.Containers = []ContainerView{}
		for _, c := range cs.GetItems() {
			v.Containers = append(v.Containers, ContainerView{ID: c.GetId(), Name: c.GetName(), Image: c.GetImage(), State: c.GetState(), Status: c.GetStatus()})
		}
	}
	if us := st.GetFailedUnits(); us != nil {
		v.FailedUnits = []UnitView{}
		for _, u := range us.GetItems() {
			v.FailedUnits = append(v.FailedUnits, UnitView{Name: u.GetName(), Description: u.GetDescription(), Since: unixTime(u.GetSinceUnix())})
		}
	}
	for _, g := range st.GetGaps().GetItems() {
		v.Gaps = append(v.Gaps, GapView{Check: g.GetCheck(), Reason: g.GetReason()})
	}
	if srv.Refused != "" {
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "the coordinator refused this agent's latest state update at " + RFC3339(srv.RefusedAt) +
			" (" + srv.Refused + "); the facts above are from before it"})
	}
	if srv.Online && srv.State.GetCollectedUnixMs() == 0 {
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "connected; its first state has not arrived yet"})
	}
	v.Gaps = append(v.Gaps, absentGaps(st, v.Gaps)...)
	switch {
	case srv.Online || srv.State.GetCollectedUnixMs() == 0:
	case srv.Reconnecting:
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "the coordinator restarted at " + RFC3339(srv.Restarted) + " and this agent has not reconnected yet (expected by " +
			RFC3339(srv.GraceEnds) + "); the facts above are its last report, from " + v.LastSeen})
	default:
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "agent offline since " + v.LastSeen + "; the facts above are its last report"})
	}
	return v
}

// fitView cuts the longest lists of v (listening sockets, containers,
// failed units, disks, addresses), halving the longest each time, until
// its JSON fits budget: a host with thousands of sockets is still one
// answer a model can read. A gap per list cut says how many were left out.
func fitView(v ServerView, budget int) ServerView {
	before := map[string]int{"listening": len(v.Listening), "containers": len(v.Containers), "failedUnits": len(v.FailedUnits), "disks": len(v.Disks), "addresses": len(v.Addresses)}
	for jsonLen(v) > budget {
		lens := map[string]int{"listening": jsonLen(v.Listening), "containers": jsonLen(v.Containers), "failedUnits": jsonLen(v.FailedUnits), "disks": jsonLen(v.Disks), "addresses": jsonLen(v.Addresses)}
		longest := slices.MaxFunc(slices.Sorted(maps.Keys(lens)), func(a, b string) int { return lens[a] - lens[b] })
		if lens[longest] <= len("null") {
			break // nothing left to cut: the rest is the server's own
		}
		switch longest {
		case "listening":
			v.Listening = v.Listening[:len(v.Listening)/2]
		case "containers":
			v.Containers = v.Containers[:len(v.Containers)/2]
		case "failedUnits":
			v.FailedUnits = v.FailedUnits[:len(v.FailedUnits)/2]
		case "disks":
			v.Disks = v.Disks[:len(v.Disks)/2]
		case "addresses":
			v.Addresses = v.Addresses[:len(v.Addresses)/2]
		}
	}
	after := map[string]int{"listening": len(v.Listening), "containers": len(v.Containers), "failedUnits": len(v.FailedUnits), "disks": len(v.Disks), "addresses": len(v.Addresses)}
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if cut := before[k] - after[k]; cut > 0 {
			v.Gaps = append(v.Gaps, GapView{Check: k, Reason: fmt.Sprintf("%d of %d left out to keep the answer within %d characters; the ones shown come first", cut, before[k], pageBudget)})
		}
	}
	return v
}

// unencodableServer is the row of a server whose facts hold a value no
// answer can carry: its name, status and when it was last heard from, and a
// gap that says why the rest is left out.
func unencodableServer(srv fleet.Server, now time.Time, bad string) ServerView {
	v := viewServer(fleet.Server{Name: srv.Name, Online: srv.Online, LastSeen: srv.LastSeen, Hello: srv.Hello,
		State:        &gridcityv1.StateUpdate{CollectedUnixMs: srv.State.GetCollectedUnixMs()},
		Reconnecting: srv.Reconnecting, Restarted: srv.Restarted, GraceEnds: srv.GraceEnds, RevokedAt: srv.RevokedAt}, now)
	// The one gap below says why every section is missing; the agent's
	// status gaps stay, the per-section "not reported" ones would mislead.
	v.Gaps = slices.DeleteFunc(v.Gaps, func(g GapView) bool { return g.Check != "agent" })
	v.Gaps = append(v.Gaps, GapView{Check: "state", Reason: "this server's last report holds a value that is not a number (" + bad +
		"); its facts are left out until its agent sends valid ones"})
	return v
}

// sectionChecks pairs each section of the state list_servers shows with the
// agent collector (the gap check) that fills it.
var sectionChecks = []struct {
	check   string
	present func(*gridcityv1.StateUpdate) bool
}{
	{"host", func(st *gridcityv1.StateUpdate) bool { return st.GetHost() != nil }},
	{"cpu", func(st *gridcityv1.StateUpdate) bool { return st.GetCpu() != nil }},
	// Until its second sample an agent sends the cpu without a busy share.
	{"cpu:busy", func(st *gridcityv1.StateUpdate) bool { return st.GetCpu() == nil || st.GetCpu().BusyPercent != nil }},
	{"memory", func(st *gridcityv1.StateUpdate) bool { return st.GetMemory() != nil }},
	{"disks", func(st *gridcityv1.StateUpdate) bool { return st.GetDisks() != nil }},
	{"sockets", func(st *gridcityv1.StateUpdate) bool { return st.GetListeners() != nil }},
	{"failed_units", func(st *gridcityv1.StateUpdate) bool { return st.GetFailedUnits() != nil }},
	{"containers", func(st *gridcityv1.StateUpdate) bool { return st.GetContainers() != nil }},
	{"updates", func(st *gridcityv1.StateUpdate) bool { return st.GetUpdates() != nil }},
}

// absentGaps explains each absent section that no gap of the agent's
// explains already (an agent older than the section, a state saved by an
// older coordinator): unknown must never read as none. A server with no
// state at all gets one gap, unless one about its agent says so already.
func absentGaps(st *gridcityv1.StateUpdate, have []GapView) []GapView {
	if st.GetCollectedUnixMs() == 0 {
		if slices.ContainsFunc(have, func(g GapView) bool { return g.Check == "agent" }) {
			return nil
		}
		return []GapView{{Check: "agent", Reason: "no state from this agent yet: every fact about the server is unknown"}}
	}
	var out []GapView
	for _, sc := range sectionChecks {
		if sc.present(st) || slices.ContainsFunc(have, func(g GapView) bool {
			name, _, _ := strings.Cut(g.Check, ":")
			return g.Check == sc.check || name == sc.check
		}) {
			continue
		}
		out = append(out, GapView{Check: sc.check, Reason: "not reported by the agent: unknown, not none (an agent older than this coordinator, or not collected yet)"})
	}
	return out
}

func round1(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f // as it is, for notEncodable to find; int64(NaN) is any number
	}
	return float64(int64(f*10+0.5)) / 10
}
