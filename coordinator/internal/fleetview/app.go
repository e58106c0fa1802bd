package fleetview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
)

// The approval app's read-only pages answer from the same model the tools
// read, so that the person who approves sees what the AI saw. Their
// answers are bounded and paged like the tools', with bounds for a screen
// rather than a model's context: a page of the map holds up to
// AppTargetsPage targets.

// ErrNotFound is a server the fleet does not know; ErrBadRequest an
// argument the app's API refuses. The app answers them with 404 and 400.
var (
	ErrNotFound   = errors.New("not found")
	ErrBadRequest = errors.New("bad request")
)

// Bounds of the app's answers.
const (
	AppTargetsPage  = 2000 // targets (servers and resources) on one page of the map
	appMaxLinks     = 20000
	appMaxListed    = 200 // each incident's explains and at-risk lists
	appMaxCommands  = 50  // commands on a server's page
	appCommandsScan = 2000
)

// Version changes whenever what the map draws may have changed: a server
// connected or went offline, its addresses or connections changed, a
// resource's status changed. The app's event stream tells pages of it.
func (a *Model) Version() string {
	v := fmt.Sprintf("%d", a.d.Fleet.ShapeVersion())
	if a.d.Resources != nil {
		v += fmt.Sprintf(".%d", a.d.Resources.Version())
	}
	return v
}

// AppFleet is GET /api/fleet: the city map's page of targets, with the
// districts, the links between the page's targets and the open incidents.
type AppFleet struct {
	GeneratedAt string         `json:"generatedAt"`
	Total       int            `json:"total"`
	ByStatus    map[string]int `json:"byStatus"`
	Districts   []AppDistrict  `json:"districts"`
	Targets     []AppTarget    `json:"targets"`
	// TargetsTotal counts every target; NextAfter pages on (?after=).
	TargetsTotal int            `json:"targetsTotal"`
	NextAfter    string         `json:"nextAfter,omitempty"`
	Links        []LinkView     `json:"links"`
	LinksTotal   int            `json:"linksTotal"`
	Incidents    []AppIncident  `json:"incidents"`
	Gaps         []GapView      `json:"gaps,omitempty"`
	Healthy      int            `json:"healthy"`
	Attention    map[string]int `json:"attention,omitempty"`
}

// AppDistrict is one district: its members' count and how many are troubled.
type AppDistrict struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Members  int    `json:"members"`
	Troubled int    `json:"troubled"`
}

// AppTarget is one tile of the map: a server or a resource.
type AppTarget struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Kind      string   `json:"kind" jsonschema:"server, or the resource's kind"`
	District  string   `json:"district,omitempty"`
	Status    string   `json:"status"`
	Troubled  bool     `json:"troubled"`
	Reason    string   `json:"reason,omitempty"`
	Since     string   `json:"since,omitempty"`
	Why       []string `json:"why,omitempty"`
	CPU       *float64 `json:"cpu,omitempty"`
	Mem       *float64 `json:"mem,omitempty"`
	Disk      *float64 `json:"disk,omitempty" jsonschema:"the fullest disk's used %"`
	RootCause bool     `json:"rootCause,omitempty"`
	// ExplainedBy is the root cause of a troubled target that is not one.
	ExplainedBy string `json:"explainedBy,omitempty"`
	// AtRiskFrom names a root cause this healthy target depends on.
	AtRiskFrom string `json:"atRiskFrom,omitempty"`
}

// AppIncident is an open incident as the map draws it.
type AppIncident struct {
	Target        string   `json:"target"`
	Name          string   `json:"name"`
	Kind          string   `json:"kind"`
	Status        string   `json:"status"`
	Reason        string   `json:"reason"`
	Since         string   `json:"since,omitempty"`
	Explains      []string `json:"explains"`
	ExplainsCount int      `json:"explainsCount"`
	AtRisk        []string `json:"atRisk"`
	AtRiskCount   int      `json:"atRiskCount"`
}

// Fleet answers GET /api/fleet?after=ID: targets by id, a page at a time.
func (a *Model) Fleet(ctx context.Context, after string) (AppFleet, error) {
	now := time.Now()
	g, err := a.d.Topology.Graph()
	if err != nil {
		return AppFleet{}, fmt.Errorf("the topology cannot be built: %v", err)
	}
	rep := incidentsOf(a.d, g, graph.IncidentOptions{MaxAtRisk: appMaxListed})
	out := AppFleet{GeneratedAt: RFC3339(now), ByStatus: map[string]int{}, Districts: []AppDistrict{}, Targets: []AppTarget{},
		Links: []LinkView{}, Incidents: []AppIncident{}, Healthy: rep.Healthy, Attention: map[string]int{}}
	gv := appGraphOf(a.d, g, rep)
	explainedBy, atRisk, member, targets := gv.explainedBy, gv.atRisk, gv.member, gv.targets
	for _, rc := range rep.RootCauses {
		since := rc.Since
		if a.d.Incidents != nil {
			if s, ok := a.d.Incidents.Since(rc.ID); ok {
				since = s
			}
		}
		out.Incidents = append(out.Incidents, AppIncident{Target: rc.ID, Name: rc.Name, Kind: rc.Kind, Status: rc.Status, Reason: rc.Reason, Since: RFC3339(since),
			Explains: orEmpty(rc.Explains[:min(len(rc.Explains), appMaxListed)]), ExplainsCount: len(rc.Explains),
			AtRisk: orEmpty(rc.AtRisk[:min(len(rc.AtRisk), appMaxListed)]), AtRiskCount: rc.AtRiskCount})
	}
	slices.SortStableFunc(out.Incidents, func(x, y AppIncident) int {
		return cmp.Or(cmp.Compare(y.ExplainsCount, x.ExplainsCount), cmp.Compare(x.Target, y.Target))
	})
	out.TargetsTotal, out.Total = len(targets), gv.servers
	maps.Copy(out.ByStatus, gv.byStatus)
	out.Districts = append(out.Districts, gv.districts...)
	// Targets sort by id: a page starts after the id given, whether or not
	// that target is still there.
	from, _ := slices.BinarySearchFunc(targets, after, func(t graph.Target, id string) int {
		if t.ID <= id {
			return -1
		}
		return 1
	})
	page := targets[from:min(len(targets), from+AppTargetsPage)]
	if from+len(page) < len(targets) && len(page) > 0 {
		out.NextAfter = page[len(page)-1].ID
	}
	view := a.d.Fleet.View()
	states := rowStatesOf(a.d, view, now)
	onPage := make(map[string]bool, len(page))
	out.Targets = make([]AppTarget, 0, len(page))
	for _, t := range page {
		onPage[t.ID] = true
		v := AppTarget{ID: t.ID, Name: t.Name, Kind: t.Kind, District: member[t.ID], Status: t.Status, Troubled: t.Troubled,
			Reason: t.Reason, Since: RFC3339(t.Since), ExplainedBy: explainedBy[t.ID], AtRiskFrom: atRisk[t.ID]}
		if v.ExplainedBy == t.ID {
			v.RootCause, v.ExplainedBy = true, ""
		}
		if t.Kind == "server" {
			a.serverFigures(&v, now, out.Attention, view, states)
		}
		out.Targets = append(out.Targets, v)
	}
	for _, l := range gv.links {
		if !onPage[l.From] && !onPage[l.To] {
			continue
		}
		out.LinksTotal++
		if len(out.Links) < appMaxLinks {
			out.Links = append(out.Links, LinkView{From: l.From, To: l.To, Source: l.Source})
		}
	}
	if o, down := a.d.Fleet.StoreOutage(); down {
		out.Gaps = append(out.Gaps, GapView{Check: "store", Reason: fmt.Sprintf("unreachable since %s: the servers other coordinators hold are as of then", RFC3339(o.Since))})
	}
	return out, nil
}

// appGraphMemo keys the kept appGraph of the latest graph (see appGraphOf).
type appGraphMemo struct{}

// appGraph is what the app's fleet page takes from one graph and its
// incident report alone: kept with the graph, which never changes. Shared:
// never changed.
type appGraph struct {
	g *graph.Graph
	// explainedBy is each troubled target's root cause, atRisk the first
	// root cause each healthy target is at risk from, member each target's
	// first district.
	explainedBy, atRisk, member map[string]string
	targets                     []graph.Target
	links                       []graph.Link
	servers                     int
	byStatus                    map[string]int
	districts                   []AppDistrict
}

// keptAppGraph holds the latest appGraph.
type keptAppGraph struct {
	mu   sync.Mutex
	last *appGraph
}

// appGraphOf is the appGraph of g, whose incident report (at appMaxListed)
// is rep, made once per graph.
func appGraphOf(d Deps, g *graph.Graph, rep graph.Report) *appGraph {
	k := d.Fleet.Memo(appGraphMemo{}, func() any { return &keptAppGraph{} }).(*keptAppGraph)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.last != nil && k.last.g == g {
		return k.last
	}
	gv := &appGraph{g: g, explainedBy: map[string]string{}, atRisk: map[string]string{}, member: map[string]string{},
		targets: g.Targets(), links: g.Links(), byStatus: map[string]int{}, districts: []AppDistrict{}}
	for _, t := range rep.Troubled {
		gv.explainedBy[t.ID] = t.RootCause
	}
	for _, rc := range rep.RootCauses {
		for _, id := range rc.AtRisk {
			if gv.atRisk[id] == "" {
				gv.atRisk[id] = rc.ID
			}
		}
	}
	districts := g.Districts()
	for _, dd := range districts {
		for _, m := range dd.Members {
			if gv.member[m] == "" {
				gv.member[m] = dd.ID
			}
		}
	}
	troubledIn := map[string]int{}
	for _, t := range gv.targets {
		if t.Kind == "server" {
			gv.servers++
			gv.byStatus[t.Status]++
		}
		if t.Troubled {
			troubledIn[gv.member[t.ID]]++
		}
	}
	for _, dd := range districts {
		gv.districts = append(gv.districts, AppDistrict{ID: dd.ID, Name: dd.Name, Members: len(dd.Members), Troubled: troubledIn[dd.ID]})
	}
	k.last = gv
	return gv
}

// serverFigures adds a server's reasons for attention and its busy
// figures (only while online: an offline server's are stale), from its
// copy in view and its kept rowState (rowStatesOf view).
func (a *Model) serverFigures(v *AppTarget, now time.Time, attention map[string]int, view *fleet.View, states []*judged[rowState]) {
	i, ok := slices.BinarySearchFunc(view.Servers(), v.ID, func(s *fleet.Server, id string) int { return strings.Compare(s.Name, id) })
	if !ok {
		return
	}
	srv := *view.Servers()[i]
	// Its row's reasons and kinds, ranked as list_servers ranks them.
	r := rowOf(listed{name: srv.Name, status: v.Status, connected: true, srv: view.Servers()[i]}, now, &states[i].val)
	v.Why = r.Why
	for _, k := range r.kinds {
		attention[k]++
	}
	if v.Status != fleet.StatusOnline {
		return
	}
	if c := srv.State.GetCpu(); c != nil && c.BusyPercent != nil {
		v.CPU = finite(round1(c.GetBusyPercent()))
	}
	if m := srv.State.GetMemory(); m != nil {
		v.Mem = finite(round1(m.GetUsedPercent()))
	}
	var fullest *float64
	for _, d := range srv.State.GetDisks().GetItems() {
		if p := finite(round1(d.GetUsedPercent())); p != nil && (fullest == nil || *p > *fullest) {
			fullest = p
		}
	}
	v.Disk = fullest
}

// AppServer is GET /api/servers/{name}: the server in full, where it sits
// in the topology, its incident and attacks, and the commands run on it.
type AppServer struct {
	Server           ServerView     `json:"server"`
	Uses             []string       `json:"uses"`
	UsedBy           []string       `json:"usedBy"`
	BlastRadiusCount int            `json:"blastRadiusCount"`
	Incident         *AppIncident   `json:"incident,omitempty" jsonschema:"the open incident it is the root cause of"`
	ExplainedBy      string         `json:"explainedBy,omitempty" jsonschema:"the root cause of its trouble, when it is another target"`
	AtRiskFrom       []string       `json:"atRiskFrom,omitempty" jsonschema:"root causes it depends on while healthy"`
	Security         SecurityOutput `json:"security"`
	Commands         []AppCommand   `json:"commands"`
	CommandsNote     string         `json:"commandsNote,omitempty"`
	Recent           []IncidentView `json:"recentIncidents"`
}

// AppCommand is one command request run (or asked) on a server.
type AppCommand struct {
	ID        string `json:"id"`
	Command   string `json:"command"`
	Reason    string `json:"reason"`
	Status    string `json:"status"`
	Client    string `json:"client"`
	DecidedBy string `json:"decidedBy,omitempty"`
	CreatedAt string `json:"createdAt"`
	ExitCode  *int   `json:"exitCode,omitempty"`
}

// Server answers GET /api/servers/{name}.
func (a *Model) Server(ctx context.Context, name string) (AppServer, error) {
	now := time.Now()
	all, _, _ := listFleet(ctx, a.d)
	i := exactName(all, name)
	if i < 0 {
		return AppServer{}, fmt.Errorf("%w: no server is named %q", ErrNotFound, name)
	}
	out := AppServer{Server: fullView(a.d, all[i], now, true), Uses: []string{}, UsedBy: []string{}, Commands: []AppCommand{}, Recent: []IncidentView{}}
	if out.Server.District == "" {
		out.Server.District = all[i].configDistrict
	}
	if g, err := a.d.Topology.Graph(); err == nil {
		if _, ok := g.Target(name); ok {
			out.Uses, out.UsedBy, out.BlastRadiusCount = orEmpty(g.Uses(name)), orEmpty(g.UsedBy(name)), len(g.BlastRadius(name))
		}
		rep := incidentsOf(a.d, g, graph.IncidentOptions{MaxAtRisk: appMaxListed})
		for _, t := range rep.Troubled {
			if t.ID == name && t.RootCause != name {
				out.ExplainedBy = t.RootCause
			}
		}
		for _, rc := range rep.RootCauses {
			if rc.ID == name {
				inc := AppIncident{Target: rc.ID, Name: rc.Name, Kind: rc.Kind, Status: rc.Status, Reason: rc.Reason, Since: RFC3339(rc.Since),
					Explains: orEmpty(rc.Explains[:min(len(rc.Explains), appMaxListed)]), ExplainsCount: len(rc.Explains),
					AtRisk: orEmpty(rc.AtRisk[:min(len(rc.AtRisk), appMaxListed)]), AtRiskCount: rc.AtRiskCount}
				if a.d.Incidents != nil {
					if s, ok := a.d.Incidents.Since(rc.ID); ok {
						inc.Since = RFC3339(s)
					}
				}
				out.Incident = &inc
			}
			if slices.Contains(rc.AtRisk, name) {
				out.AtRiskFrom = append(out.AtRiskFrom, rc.ID)
			}
		}
	}
	if sec, err := securityFindings(ctx, a.d, SecurityInput{Server: name}); err == nil {
		out.Security = sec
	} else {
		out.Security = SecurityOutput{Attacks: []AttackView{}, Sources: []SourceView{}, Exposures: []ExposureView{}, Gaps: []SecurityGapView{{Server: name, Check: "security", Reason: err.Error()}}}
	}
	if a.d.Incidents != nil {
		if hist, err := a.d.Incidents.History(ctx, 200); err == nil {
			for _, in := range hist {
				if in.Target == name || slices.Contains(in.Explains, name) {
					out.Recent = append(out.Recent, IncidentView{Target: in.Target, Kind: in.Kind, Reason: in.Reason, StartedAt: RFC3339(in.StartedAt),
						EndedAt: RFC3339(in.EndedAt), Explains: orEmpty(in.Explains[:min(MaxListed, len(in.Explains))]), ExplainsCount: len(in.Explains)})
				}
			}
		}
	}
	if a.d.Commands != nil {
		hist, err := a.d.Commands.History(ctx, appCommandsScan)
		if err != nil {
			out.CommandsNote = "the commands could not be read: " + err.Error()
		}
		for _, r := range hist {
			if r.Server != name {
				continue
			}
			if len(out.Commands) == appMaxCommands {
				out.CommandsNote = fmt.Sprintf("the latest %d commands; the audit page has them all", appMaxCommands)
				break
			}
			out.Commands = append(out.Commands, appCommand(r))
		}
	}
	return out, nil
}

func appCommand(r command.Request) AppCommand {
	return AppCommand{ID: r.ID, Command: r.Command, Reason: r.Reason, Status: string(r.Status), Client: r.Client, DecidedBy: r.DecidedBy,
		CreatedAt: RFC3339(r.CreatedAt), ExitCode: r.ExitCode}
}

// ServerMetrics answers GET /api/servers/{name}/metrics?since=1h: the
// server's history as get_metrics has it (at most 120 points a series).
func (a *Model) ServerMetrics(ctx context.Context, name, since string) (MetricsOutput, error) {
	if _, ok := a.d.Fleet.Server(name); !ok {
		return MetricsOutput{}, fmt.Errorf("%w: no server is named %q", ErrNotFound, name)
	}
	out, err := getMetrics(ctx, a.d, MetricsInput{Target: name, Since: since}, time.Now())
	if err != nil {
		return MetricsOutput{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return out, nil
}

// AppIncidents is GET /api/incidents: the open incidents and the history.
type AppIncidents struct {
	Open    IncidentOutput    `json:"open"`
	History []AppPastIncident `json:"history"`
	Gaps    []GapView         `json:"gaps,omitempty"`
}

// AppPastIncident is a recorded incident with its duration.
type AppPastIncident struct {
	IncidentView
	DurationSeconds int64 `json:"durationSeconds" jsonschema:"so far, while open"`
}

// Incidents answers GET /api/incidents.
func (a *Model) Incidents(ctx context.Context) (AppIncidents, error) {
	open, err := incidentReport(ctx, a.d, IncidentInput{})
	if err != nil {
		return AppIncidents{}, err
	}
	out := AppIncidents{Open: open, History: []AppPastIncident{}}
	if a.d.Incidents == nil {
		return out, nil
	}
	hist, err := a.d.Incidents.History(ctx, 200)
	if err != nil {
		out.Gaps = append(out.Gaps, GapView{Check: "store", Reason: "the incident history could not be read: " + err.Error()})
		return out, nil
	}
	now := time.Now()
	for _, in := range hist {
		end := in.EndedAt
		if end.IsZero() {
			end = now
		}
		out.History = append(out.History, AppPastIncident{IncidentView: IncidentView{Target: in.Target, Kind: in.Kind, Reason: in.Reason, StartedAt: RFC3339(in.StartedAt),
			EndedAt: RFC3339(in.EndedAt), Explains: orEmpty(in.Explains[:min(MaxListed, len(in.Explains))]), ExplainsCount: len(in.Explains)},
			DurationSeconds: int64(end.Sub(in.StartedAt) / time.Second)})
	}
	return out, nil
}

// Security answers GET /api/security?after=KEY, as security_findings does.
func (a *Model) Security(ctx context.Context, after string) (SecurityOutput, error) {
	out, err := securityFindings(ctx, a.d, SecurityInput{After: after})
	if err != nil && after != "" {
		return SecurityOutput{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return out, err
}
