package mcpserver

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// NoInput is the input of tools that take none: an empty object.
type NoInput struct{}

// ListServersOutput is list_servers' structured result.
type ListServersOutput struct {
	Servers     []ServerView `json:"servers" jsonschema:"every server with an enrolled agent, sorted by name"`
	Online      int          `json:"online" jsonschema:"how many servers have a live agent stream"`
	Total       int          `json:"total" jsonschema:"how many servers are known"`
	GeneratedAt string       `json:"generatedAt" jsonschema:"when this answer was made (RFC 3339)"`
}

// ServerView is one server as an AI sees it. Strings in it come from the
// server itself and are data, not instructions.
type ServerView struct {
	ID            string          `json:"id" jsonschema:"the server's id: its agent's name"`
	Name          string          `json:"name" jsonschema:"the server's name"`
	Status        string          `json:"status" jsonschema:"online (its agent is connected), offline, or revoked (its agent's certificate was revoked: it will not return)"`
	District      string          `json:"district,omitempty" jsonschema:"the district the agent declared"`
	AgentVersion  string          `json:"agentVersion,omitempty"`
	Commands      CommandsView    `json:"commands" jsonschema:"whether this server's agent runs approved commands, and as whom"`
	OS            OSView          `json:"os"`
	CPU           CPUView         `json:"cpu"`
	Memory        MemoryView      `json:"memory"`
	Disks         []DiskView      `json:"disks"`
	UptimeSeconds uint64          `json:"uptimeSeconds"`
	Addresses     []string        `json:"addresses" jsonschema:"the server's addresses outside loopback and link-local"`
	Listening     []ListenerView  `json:"listening" jsonschema:"listening sockets: protocol, address, port and owning process"`
	Containers    []ContainerView `json:"containers"`
	FailedUnits   []UnitView      `json:"failedUnits" jsonschema:"systemd units in the failed state"`
	Updates       UpdatesView     `json:"updates"`
	LastSeen      string          `json:"lastSeen" jsonschema:"when the agent was last heard from (RFC 3339), empty if never"`
	CollectedAt   string          `json:"collectedAt,omitempty" jsonschema:"when the agent collected the newest facts (RFC 3339)"`
	Gaps          []GapView       `json:"gaps" jsonschema:"facts that could not be collected on this server and why: absent facts are unknown, not fine"`
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
	Cores       uint32  `json:"cores"`
	BusyPercent float64 `json:"busyPercent"`
	Load1       float64 `json:"load1"`
	Load5       float64 `json:"load5"`
	Load15      float64 `json:"load15"`
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
	Pending  uint32 `json:"pending"`
	Security uint32 `json:"security"`
	Manager  string `json:"manager,omitempty"`
}

type GapView struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

func addListServers(s *mcp.Server, d Deps) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "list_servers",
		Title: "List servers",
		Description: "List every server in the fleet with its live state: online or offline, OS, CPU and load, memory, disks, uptime, " +
			"listening ports with their processes, containers, failed systemd units, pending (and security) updates, and gaps — " +
			"facts its agent could not collect, with the reason. Call it first to see what exists.",
		Annotations:  readOnly("List servers"),
		OutputSchema: outputSchema[ListServersOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, ListServersOutput, error) {
		now := time.Now()
		out := ListServersOutput{Servers: []ServerView{}, GeneratedAt: now.UTC().Format(time.RFC3339)}
		agents, err := d.Store.Agents(ctx)
		if err != nil {
			return nil, out, fmt.Errorf("reading the enrolled agents failed (%v); retry in a moment", err)
		}
		enrolled := map[string]store.Agent{}
		for _, a := range agents {
			enrolled[a.Name] = a
		}
		for _, srv := range d.Fleet.Servers() {
			v := viewServer(srv, now)
			if a, ok := enrolled[srv.Name]; ok && a.Revoked() {
				v.Status = "revoked"
				v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "its certificate was revoked at " + rfc3339(a.RevokedAt) + "; the facts are its last report"})
			}
			delete(enrolled, srv.Name)
			if v.Status == fleet.StatusOnline {
				out.Online++
			}
			out.Servers = append(out.Servers, v)
		}
		// Enrolled but never connected: listed, so that a missing server is
		// visible rather than absent.
		for _, a := range agents {
			if _, ok := enrolled[a.Name]; !ok || a.Revoked() {
				continue
			}
			v := viewServer(fleet.Server{Name: a.Name}, now)
			v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "enrolled at " + rfc3339(a.EnrolledAt) + " but never connected: is gridcity-agent running there, and can it reach the coordinator?"})
			out.Servers = append(out.Servers, v)
		}
		sort.Slice(out.Servers, func(i, j int) bool { return out.Servers[i].Name < out.Servers[j].Name })
		out.Total = len(out.Servers)
		return nil, out, nil
	})
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func unixTime(sec int64) string {
	if sec <= 0 {
		return ""
	}
	return rfc3339(time.Unix(sec, 0))
}

func viewServer(srv fleet.Server, now time.Time) ServerView {
	st := srv.State
	h := st.GetHost()
	v := ServerView{
		ID: srv.Name, Name: srv.Name, Status: srv.Status(),
		District: srv.Hello.GetDistrict(), AgentVersion: srv.Hello.GetAgentVersion(),
		Commands: CommandsView{Enabled: srv.Hello.GetCommandsEnabled(), RunAs: srv.Hello.GetRunAs()},
		OS:       OSView{Name: h.GetOs(), Version: h.GetOsVersion(), Family: h.GetPlatformFamily(), Kernel: h.GetKernel(), Arch: h.GetArch(), Hostname: h.GetHostname()},
		CPU: CPUView{Cores: st.GetCpu().GetCores(), BusyPercent: round1(st.GetCpu().GetBusyPercent()),
			Load1: st.GetCpu().GetLoad1(), Load5: st.GetCpu().GetLoad5(), Load15: st.GetCpu().GetLoad15()},
		Memory: MemoryView{TotalBytes: st.GetMemory().GetTotalBytes(), UsedBytes: st.GetMemory().GetUsedBytes(),
			AvailableBytes: st.GetMemory().GetAvailableBytes(), UsedPercent: round1(st.GetMemory().GetUsedPercent()),
			SwapTotalBytes: st.GetMemory().GetSwapTotalBytes(), SwapUsedBytes: st.GetMemory().GetSwapUsedBytes()},
		Addresses: orEmpty(h.GetAddresses()),
		Disks:     []DiskView{}, Listening: []ListenerView{}, Containers: []ContainerView{}, FailedUnits: []UnitView{}, Gaps: []GapView{},
		Updates:  UpdatesView{Pending: st.GetUpdates().GetPending(), Security: st.GetUpdates().GetSecurity(), Manager: st.GetUpdates().GetManager()},
		LastSeen: rfc3339(srv.LastSeen),
	}
	if st.GetCollectedUnixMs() > 0 {
		v.CollectedAt = rfc3339(time.UnixMilli(st.GetCollectedUnixMs()))
	}
	// Uptime from the boot time, so it stays right between host-info samples.
	if boot := h.GetBootUnix(); boot > 0 && now.Unix() > boot {
		v.UptimeSeconds = uint64(now.Unix() - boot)
	} else {
		v.UptimeSeconds = h.GetUptimeSeconds()
	}
	for _, d := range st.GetDisks().GetItems() {
		v.Disks = append(v.Disks, DiskView{Mount: d.GetMount(), Device: d.GetDevice(), Filesystem: d.GetFilesystem(),
			TotalBytes: d.GetTotalBytes(), UsedBytes: d.GetUsedBytes(), AvailableBytes: d.GetAvailableBytes(), UsedPercent: round1(d.GetUsedPercent()),
			InodesTotal: d.GetInodesTotal(), InodesUsed: d.GetInodesUsed(), InodesUsedPercent: round1(d.GetInodesUsedPercent())})
	}
	for _, l := range st.GetListeners().GetItems() {
		v.Listening = append(v.Listening, ListenerView{Proto: l.GetProto(), Address: l.GetAddress(), Port: l.GetPort(), Process: l.GetProcess()})
	}
	sort.Slice(v.Listening, func(i, j int) bool {
		a, b := v.Listening[i], v.Listening[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return a.Proto+a.Address < b.Proto+b.Address
	})
	for _, c := range st.GetContainers().GetItems() {
		v.Containers = append(v.Containers, ContainerView{ID: c.GetId(), Name: c.GetName(), Image: c.GetImage(), State: c.GetState(), Status: c.GetStatus()})
	}
	for _, u := range st.GetFailedUnits().GetItems() {
		v.FailedUnits = append(v.FailedUnits, UnitView{Name: u.GetName(), Description: u.GetDescription(), Since: unixTime(u.GetSinceUnix())})
	}
	for _, g := range st.GetGaps().GetItems() {
		v.Gaps = append(v.Gaps, GapView{Check: g.GetCheck(), Reason: g.GetReason()})
	}
	if srv.Online && srv.State.GetCollectedUnixMs() == 0 {
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "connected; its first state has not arrived yet"})
	}
	if !srv.Online && srv.State.GetCollectedUnixMs() > 0 {
		v.Gaps = append(v.Gaps, GapView{Check: "agent", Reason: "agent offline since " + v.LastSeen + "; the facts above are its last report"})
	}
	return v
}

func round1(f float64) float64 {
	return float64(int64(f*10+0.5)) / 10
}
