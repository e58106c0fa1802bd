package fleetview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/security"
)

// ServerRow is one server in a line: who it is, why it needs attention,
// and the three figures that say how busy it is. list_servers {"name"}
// has the rest.
type ServerRow struct {
	Name     string   `json:"name"`
	Status   string   `json:"status" jsonschema:"online, reconnecting, offline or revoked"`
	District string   `json:"district,omitempty"`
	Why      []string `json:"why,omitempty" jsonschema:"most serious first; absent when nothing needs attention"`
	CPU      *float64 `json:"cpu,omitempty" jsonschema:"CPU busy %"`
	Mem      *float64 `json:"mem,omitempty" jsonschema:"memory used %"`
	Load     *float64 `json:"load,omitempty" jsonschema:"load1"`

	// sev is the most serious reason's, kinds the reasons' kinds: for
	// ranking and counting, not sent.
	sev   int
	kinds []string
	l     listed
}

// Thresholds past which a figure needs attention.
const (
	diskFull        = 95.0 // % used: full for practical purposes
	diskFilling     = 90.0
	memHigh         = 90.0
	cpuHigh         = 90.0
	loadPerCoreHigh = 1.5 // load1 per core
)

// minorSev is the severity of a reason that alone does not earn a row in
// the fleet at a glance when space is short: pending security updates,
// which most fleets have somewhere and security_findings details.
const minorSev = 10

// A reason's kind (the key of attention counts) and severity: rows are
// ranked by their most serious reason.
type reason struct {
	kind string
	sev  int
	text string
}

// rowOf is l's row, with every reason it needs attention; state is what
// rankState makes of its server at now, when the caller has it (nil: made
// here).
func rowOf(l listed, now time.Time, state *rowState) ServerRow {
	r := ServerRow{Name: l.name, Status: l.status, District: cmp.Or(l.district, l.configDistrict), l: l}
	if !l.connected {
		r.Why, r.kinds, r.sev = []string{"enrolled, never connected"}, []string{"never connected"}, 100
		return r
	}
	if state == nil {
		st, _ := rankState(*l.srv, now)
		state = &st
	}
	// The figures of a server that is not online are its last report's:
	// stale, so left out of its row (its view has them).
	if l.status == fleet.StatusOnline {
		r.CPU, r.Mem, r.Load = state.cpu, state.mem, state.load
	}
	r.Why, r.kinds, r.sev = state.why, state.kinds, state.sev
	for _, st := range statusReasons(*l.srv, l.status, now) {
		// Ranked as a stable sort of the status first, then the state's
		// reasons, would rank it: after the more serious ones.
		p := 0
		for p < len(state.ranked) && state.ranked[p].sev > st.sev {
			p++
		}
		r.Why = slices.Concat(state.why[:p], []string{st.text}, state.why[p:])
		k := 0
		for k < len(state.kinds) && state.first[k] < p {
			k++
		}
		r.kinds = slices.Concat(state.kinds[:k], []string{st.kind}, state.kinds[k:])
		r.sev = max(r.sev, st.sev)
	}
	return r
}

// rowState is what a row takes from its server's state: the reasons its
// report gives, ranked most serious first (a stable sort), their texts,
// their kinds in the order they first come (first is where), the most
// serious one's severity, and the figures an online server's row shows.
// Kept for other calls, so never changed.
type rowState struct {
	ranked         []reason
	why, kinds     []string
	first          []int
	sev            int
	cpu, mem, load *float64
}

// rankState is srv's rowState at now, and the last time it holds for
// (see stateReasons).
func rankState(srv fleet.Server, now time.Time) (rowState, time.Time) {
	rs, until := stateReasons(srv, now)
	slices.SortStableFunc(rs, func(a, b reason) int { return cmp.Compare(b.sev, a.sev) })
	st := rowState{ranked: rs}
	for i, x := range rs {
		st.why = append(st.why, x.text)
		if !slices.Contains(st.kinds, x.kind) {
			st.kinds, st.first = append(st.kinds, x.kind), append(st.first, i)
		}
		st.sev = max(st.sev, x.sev)
	}
	if c := srv.State.GetCpu(); c != nil {
		if c.BusyPercent != nil {
			st.cpu = finite(round1(c.GetBusyPercent()))
		}
		st.load = finite(math.Round(c.GetLoad1()*100) / 100)
	}
	if m := srv.State.GetMemory(); m != nil {
		st.mem = finite(round1(m.GetUsedPercent()))
	}
	return st, until
}

// stateMemo keys the fleet's kept rowState of each server (see perServer).
type stateMemo struct{}

// rowStatesOf is rankState of every server of v at now, in v's order,
// made again only for the servers that changed since the last call or
// whose open attacks have ended since.
func rowStatesOf(d Deps, v *fleet.View, now time.Time) []*judged[rowState] {
	judged, _ := memoOf[rowState](d.Fleet, stateMemo{}, nil).all(v, now, judgeRow)
	return judged
}

func judgeRow(srv *fleet.Server, now time.Time) (rowState, time.Time) { return rankState(*srv, now) }

// reasonsOf is why srv needs attention: its status, and what its last
// report shows.
func reasonsOf(srv fleet.Server, status string, now time.Time) []reason {
	state, _ := stateReasons(srv, now)
	return append(statusReasons(srv, status, now), state...)
}

// statusReasons is why srv needs attention for its status.
func statusReasons(srv fleet.Server, status string, now time.Time) []reason {
	switch status {
	case fleet.StatusOffline:
		return []reason{{"offline", 100, "offline for " + age(now.Sub(srv.LastSeen))}}
	case fleet.StatusReconnecting:
		return []reason{{"reconnecting", 30, "reconnecting after the coordinator's restart"}}
	case statusRevoked:
		return []reason{{"revoked", 20, "agent certificate revoked"}}
	}
	return nil
}

// stateReasons is why srv needs attention for what its last report shows,
// at now, and the last time the same reasons hold for while that report
// stays as it is (its open attacks end).
func stateReasons(srv fleet.Server, now time.Time) ([]reason, time.Time) {
	var rs []reason
	st := srv.State
	until := forever
	if srv.Refused != "" {
		rs = append(rs, reason{"state refused", 50, "latest state refused"})
	}
	if st.GetCollectedUnixMs() == 0 {
		if srv.Online {
			rs = append(rs, reason{"no state", 40, "no state yet"})
		}
		return rs, until
	}
	if bad := notANumber(st); bad != "" {
		// Its view leaves its facts out and says why (unencodableServer).
		rs = append(rs, reason{"state refused", 50, "state not a number: " + bad})
		return rs, until
	}
	if units := st.GetFailedUnits().GetItems(); len(units) > 0 {
		names := make([]string, 0, 2)
		for _, u := range units[:min(2, len(units))] {
			names = append(names, security.Clean(u.GetName(), 64))
		}
		text := fmt.Sprintf("%d failed units: %s", len(units), strings.Join(names, ", "))
		if len(units) == 1 {
			text = "1 failed unit: " + names[0]
		} else if len(units) > 2 {
			text += " …"
		}
		rs = append(rs, reason{"failed units", 80, text})
	}
	for _, dk := range st.GetDisks().GetItems() {
		mount := security.Clean(dk.GetMount(), 64)
		switch p := dk.GetUsedPercent(); {
		case p >= diskFull:
			rs = append(rs, reason{"disk full", 80, fmt.Sprintf("disk %s %.0f%%", mount, p)})
		case p >= diskFilling:
			rs = append(rs, reason{"disk filling", 60, fmt.Sprintf("disk %s %.0f%%", mount, p)})
		}
		if p := dk.GetInodesUsedPercent(); p >= diskFilling {
			rs = append(rs, reason{"inodes", 70, fmt.Sprintf("inodes %s %.0f%%", mount, p)})
		}
	}
	if m := st.GetMemory(); m != nil && m.GetUsedPercent() >= memHigh {
		rs = append(rs, reason{"memory", 60, fmt.Sprintf("memory %.0f%%", m.GetUsedPercent())})
	}
	if c := st.GetCpu(); c != nil {
		if c.GetCores() > 0 && c.GetLoad1()/float64(c.GetCores()) >= loadPerCoreHigh {
			rs = append(rs, reason{"load", 50, fmt.Sprintf("load %.1f on %d cores", c.GetLoad1(), c.GetCores())})
		} else if c.BusyPercent != nil && c.GetBusyPercent() >= cpuHigh {
			rs = append(rs, reason{"cpu", 50, fmt.Sprintf("cpu %.0f%%", c.GetBusyPercent())})
		}
	}
	if st.GetLogins() != nil {
		// Only the open attacks: the exposures judged from the rest of the
		// state cost more than the row.
		o := security.DefaultOptions()
		until = security.OpenAttacksUntil(st, now, o)
		for _, a := range security.OpenAttacks(srv.Name, st, now, o) {
			switch {
			case a.Kind == security.KindLoginAfterFails:
				rs = append(rs, reason{"attack", 90, fmt.Sprintf("login as %s from %s after %d failures", a.LastSuccessUser, a.Source, a.Count)})
			case !a.Blocked:
				rs = append(rs, reason{"attack", 70, fmt.Sprintf("open ssh attack from %s, %d failures, not blocked", a.Source, a.Count)})
			}
		}
	}
	if u := st.GetUpdates(); u != nil && u.GetSecurity() > 0 {
		text := fmt.Sprintf("%d security updates", u.GetSecurity())
		if u.GetSecurity() == 1 {
			text = "1 security update"
		}
		rs = append(rs, reason{"security updates", minorSev, text})
	}
	return rs, until
}

// notANumber names the first figure a row or a reason reads that is NaN or
// infinite: a cheap stand-in for notEncodable over the whole view, which
// would build the view of every server of the fleet.
func notANumber(st *gridcityv1.StateUpdate) string {
	c, m := st.GetCpu(), st.GetMemory()
	type figure struct {
		name string
		f    float64
	}
	figures := []figure{{"cpu.busyPercent", c.GetBusyPercent()}, {"cpu.load1", c.GetLoad1()}, {"memory.usedPercent", m.GetUsedPercent()}}
	for _, dk := range st.GetDisks().GetItems() {
		figures = append(figures, figure{"disk " + security.Clean(dk.GetMount(), 64), dk.GetUsedPercent()})
	}
	for _, x := range figures {
		if math.IsNaN(x.f) || math.IsInf(x.f, 0) {
			return fmt.Sprintf("%s = %v", x.name, x.f)
		}
	}
	return ""
}

// age is a duration as a model reads it: 3d4h, 2h5m, 7m, 40s.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func finite(f float64) *float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// attentionCounts counts the rows needing attention by reason kind.
func attentionCounts(rows []ServerRow) map[string]int {
	var out map[string]int
	for _, r := range rows {
		for _, k := range r.kinds {
			if out == nil {
				out = map[string]int{}
			}
			out[k]++
		}
	}
	return out
}

// jsonLen is how many characters v takes in the structured content.
func jsonLen(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

// maxDistricts bounds the districts of the fleet at a glance.
const maxDistricts = 30

// glance fills out with the fleet at a glance: districts, then the rows of
// the servers needing attention (most serious first), then the healthy
// ones, as rows when they all fit and else as names, within glanceBudget;
// what is left out is counted.
func glance(out *ListServersOutput, rows []ServerRow) {
	byDistrict := map[string]*DistrictRow{}
	for _, r := range rows {
		dr := byDistrict[r.District]
		if dr == nil {
			dr = &DistrictRow{District: r.District}
			byDistrict[r.District] = dr
		}
		dr.Servers++
		if r.Status != fleet.StatusOnline {
			dr.Offline++
		}
		if len(r.Why) > 0 {
			dr.Attention++
		}
	}
	districts := slices.SortedFunc(maps.Values(byDistrict), func(a, b *DistrictRow) int {
		return cmp.Or(cmp.Compare(b.Offline, a.Offline), cmp.Compare(b.Attention, a.Attention), cmp.Compare(a.District, b.District))
	})
	if len(districts) > 1 || (len(districts) == 1 && districts[0].District != "") {
		for _, dr := range districts[:min(len(districts), maxDistricts)] {
			out.Districts = append(out.Districts, *dr)
		}
		out.DistrictsOmitted = len(districts) - len(out.Districts)
	}

	// The servers with something serious get rows, most serious first;
	// the others (nothing, or security updates only) follow as rows when
	// all of them fit, else by name, so that more servers are named.
	// Pointers: a row is some hundred bytes, and the whole fleet's are
	// sorted and split here at every call.
	var troubled, others []*ServerRow
	for i := range rows {
		if r := &rows[i]; r.sev > minorSev {
			troubled = append(troubled, r)
		} else {
			others = append(others, r)
		}
	}
	slices.SortStableFunc(troubled, func(a, b *ServerRow) int {
		return cmp.Or(cmp.Compare(b.sev, a.sev), cmp.Compare(len(b.Why), len(a.Why)), cmp.Compare(a.Name, b.Name))
	})
	budget := glanceBudget - budgetSlack
	size := jsonLen(out)
	named := map[string]bool{}
	for _, r := range troubled {
		n := jsonLen(r) + 1
		if size+n > budget {
			break
		}
		size += n
		out.Rows = append(out.Rows, *r)
		named[r.Name] = true
	}
	if len(out.Rows) == len(troubled) {
		all := 0
		for _, r := range others {
			if all += jsonLen(r) + 1; size+all > budget {
				break // they do not all fit: no need to size the rest
			}
		}
		if size+all <= budget {
			for _, r := range others {
				out.Rows = append(out.Rows, *r)
				named[r.Name] = true
			}
		} else {
			size += len(`,"others":[]`)
			for _, r := range others {
				n := jsonLen(r.Name) + 1
				if size+n > budget {
					break
				}
				size += n
				out.Others = append(out.Others, r.Name)
				named[r.Name] = true
			}
		}
	}
	for _, r := range rows {
		if !named[r.Name] {
			if out.Omitted == nil {
				out.Omitted = map[string]int{}
			}
			out.Omitted[r.Status]++
		}
	}
	if out.Truncated = out.Omitted != nil; out.Truncated {
		out.More = `list_servers {"attention": true} pages through every server needing attention; {"status": …} or {"district": …} pages through the rest, ` +
			`by name (pass nextAfter as after); {"name": NAME} shows one server in full`
	}
}

// page fills out with the rows (with full, the whole views) of the
// matching servers after in.After, sorted by name, up to in.Limit and
// within pageBudget.
//
// states, when not nil, are rowStatesOf the fleet's view at now, which the
// rows are made from.
func page(d Deps, out *ListServersOutput, in ListServersInput, matched []listed, now time.Time, states []*judged[rowState]) {
	limit := in.Limit
	if limit <= 0 || limit > MaxServersLimit {
		limit = MaxServersLimit
	}
	budget := pageBudget - budgetSlack
	size := jsonLen(out)
	listed := 0
	for i, l := range matched {
		if in.After != "" && l.name <= in.After {
			continue
		}
		if listed == limit {
			out.Truncated = true
		}
		var (
			v ServerView
			r ServerRow
			n int
		)
		if !out.Truncated {
			if in.Full {
				v = fitView(fullView(d, l, now, false), pageBudget-budgetSlack)
				n = jsonLen(v) + 1
			} else {
				var state *rowState
				if states != nil && l.connected {
					state = &states[l.idx].val
				}
				r = rowOf(l, now, state)
				n = jsonLen(r) + 1
			}
			// One server in full is answered whatever its size.
			out.Truncated = size+n > budget && listed > 0
		}
		if out.Truncated {
			out.NextAfter = matched[i-1].name
			out.Omitted = map[string]int{}
			for _, rest := range matched[i:] {
				out.Omitted[rest.status]++
			}
			break
		}
		size += n
		listed++
		if in.Full {
			out.Servers = append(out.Servers, v)
		} else {
			out.Rows = append(out.Rows, r)
		}
	}
	if in.Full && out.Servers == nil {
		out.Servers = []ServerView{}
	}
}
