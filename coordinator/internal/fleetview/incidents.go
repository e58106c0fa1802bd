package fleetview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// IncidentInput is incident_report's input.
type IncidentInput struct {
	RootCause string `json:"root_cause,omitempty" jsonschema:"one root cause's id: only it, with every troubled target it explains (paged by after)"`
	After     string `json:"after,omitempty" jsonschema:"continue a list cut short: the answer's nextAfter (root causes), or with root_cause its explainsNextAfter"`
}

// IncidentOutput is incident_report's result.
type IncidentOutput struct {
	Healthy         int             `json:"healthy"`
	Total           int             `json:"total"`
	RootCauses      []RootCauseView `json:"rootCauses" jsonschema:"troubled targets none of whose dependencies is troubled: fix these first; those explaining the most first"`
	RootCausesCount int             `json:"rootCausesCount" jsonschema:"how many root causes there are, however many are listed"`
	NextAfter       string          `json:"nextAfter,omitempty" jsonschema:"set when rootCauses was cut short: pass it as after for the next ones"`
	Troubled        []TroubledView  `json:"troubled" jsonschema:"troubled targets by id, each with its root cause; cut short on a large fleet (root_cause lists what one explains)"`
	TroubledCount   int             `json:"troubledCount" jsonschema:"how many targets are troubled, however many are listed"`
	Recent          []IncidentView  `json:"recent" jsonschema:"the latest incidents, open and ended, newest first (kept across restarts)"`
	Gaps            []GapView       `json:"gaps,omitempty" jsonschema:"what this answer could not check, and why: e.g. the store is unreachable, so recent is left out"`
	GeneratedAt     string          `json:"generatedAt"`
}

type RootCauseView struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Status   string   `json:"status"`
	Reason   string   `json:"reason"`
	Since    string   `json:"since,omitempty"`
	Explains []string `json:"explains" jsonschema:"troubled targets that depend on it, by id: they should recover when it does (the first 10; with root_cause, as many as fit)"`
	// ExplainsCount counts them all; ExplainsNextAfter pages the rest.
	ExplainsCount     int      `json:"explainsCount" jsonschema:"how many troubled targets it explains, however many explains lists"`
	ExplainsNextAfter string   `json:"explainsNextAfter,omitempty" jsonschema:"set when explains was cut short: call with root_cause and this as after for the next ones"`
	AtRisk            []string `json:"atRisk" jsonschema:"healthy targets that depend on it, directly or through others, nearest first (the first 10; with root_cause 25); get_topology on it gives the whole blast radius"`
	// AtRiskCount is the full count when atRisk was cut short.
	AtRiskCount int `json:"atRiskCount" jsonschema:"how many healthy targets depend on it: all of them, however many atRisk lists"`
}

type TroubledView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Since     string `json:"since,omitempty"`
	RootCause string `json:"rootCause"`
}

// IncidentView is one recorded incident.
type IncidentView struct {
	Target    string   `json:"target"`
	Kind      string   `json:"kind"`
	Reason    string   `json:"reason"`
	StartedAt string   `json:"startedAt"`
	EndedAt   string   `json:"endedAt,omitempty" jsonschema:"empty while it is open"`
	Explains  []string `json:"explains" jsonschema:"the first 10 targets it explained"`
	// ExplainsCount counts them all.
	ExplainsCount int `json:"explainsCount"`
}

// maxAtRisk bounds each root cause's atRisk list (the schema says 25);
// atRiskCount counts them all. A shared database can have most of the fleet
// at risk: its nearest users say more than a list of thousands. The report
// for the whole fleet lists fewer (MaxListed), so that more root causes fit.
const (
	maxAtRisk = 25
	MaxListed = 10
)

// incidentReport answers incident_report.
func incidentReport(ctx context.Context, d Deps, in IncidentInput) (IncidentOutput, error) {
	g, err := d.Topology.Graph()
	if err != nil {
		return IncidentOutput{}, fmt.Errorf("the topology cannot be built: %v", err)
	}
	rep := incidentsOf(d, g, graph.IncidentOptions{MaxAtRisk: maxAtRisk})
	out := IncidentOutput{Healthy: rep.Healthy, Total: rep.Total, RootCauses: []RootCauseView{}, Troubled: []TroubledView{}, Recent: []IncidentView{},
		RootCausesCount: len(rep.RootCauses), TroubledCount: len(rep.Troubled), GeneratedAt: RFC3339(time.Now())}
	budget := BudgetFor(in.RootCause != "" || in.After != "")
	// The root causes that explain the most come first: fixing one of
	// them ends the most trouble.
	causes := slices.Clone(rep.RootCauses)
	slices.SortStableFunc(causes, func(a, b graph.RootCause) int {
		return cmp.Or(cmp.Compare(len(b.Explains), len(a.Explains)), cmp.Compare(b.AtRiskCount, a.AtRiskCount), cmp.Compare(a.ID, b.ID))
	})
	ids := make([]string, len(causes))
	for i, rc := range causes {
		ids[i] = rc.ID
	}
	view := func(rc graph.RootCause, explains, atRisk int) RootCauseView {
		if d.Incidents != nil {
			// The incident's recorded start survives restarts; the
			// probe's own "since" starts over with the coordinator.
			if since, ok := d.Incidents.Since(rc.ID); ok {
				rc.Since = since
			}
		}
		v := RootCauseView{ID: rc.ID, Name: rc.Name, Kind: rc.Kind, Status: rc.Status, Reason: rc.Reason, Since: RFC3339(rc.Since),
			Explains: orEmpty(rc.Explains[:min(explains, len(rc.Explains))]), ExplainsCount: len(rc.Explains),
			AtRisk: orEmpty(rc.AtRisk[:min(atRisk, len(rc.AtRisk))]), AtRiskCount: rc.AtRiskCount}
		if explains > 0 && explains < len(rc.Explains) {
			v.ExplainsNextAfter = rc.Explains[explains-1]
		}
		return v
	}
	if in.RootCause != "" {
		i := slices.Index(ids, in.RootCause)
		if i < 0 {
			return IncidentOutput{}, fmt.Errorf("%q is not a root cause now; root causes: %s", in.RootCause, CloseMatches(in.RootCause, ids))
		}
		rc := causes[i]
		from, err := afterKey(rc.Explains, in.After, "targets "+rc.ID+" explains")
		if err != nil {
			return IncidentOutput{}, err
		}
		rc.Explains = rc.Explains[from:]
		head := view(rc, 0, maxAtRisk)
		n := max(1, Fitting(rc.Explains, budget-JSONSize(out)-JSONSize(head)-500))
		out.RootCauses = append(out.RootCauses, view(rc, n, maxAtRisk))
		return out, nil
	}
	from, err := afterKey(ids, in.After, "root causes")
	if err != nil {
		return IncidentOutput{}, err
	}
	views := make([]RootCauseView, 0, len(causes)-from)
	for _, rc := range causes[from:] {
		views = append(views, view(rc, MaxListed, MaxListed))
	}
	// Root causes first, then the latest incidents, then as many
	// troubled targets as the rest of the budget holds.
	n := Fitting(views, budget*3/5)
	if n == 0 && len(views) > 0 {
		n = 1
	}
	out.RootCauses = views[:n]
	if n < len(views) {
		out.NextAfter = views[n-1].ID
	}
	if d.Incidents != nil {
		hist, err := d.Incidents.History(ctx, 20)
		if down, asOf, ok := storeOutage(d, err, time.Now()); ok && errors.Is(err, store.ErrUnavailable) {
			// What this coordinator judges from memory still stands.
			out.Gaps = []GapView{{Check: "store", Reason: down + ": recent incidents are left out until it is back; root causes and troubled targets are judged from what this coordinator holds, the servers other coordinators hold " + asOf + " (stale)"}}
		} else if err != nil {
			return IncidentOutput{}, fmt.Errorf("reading the incident history failed (%v); retry", err)
		}
		var recent []IncidentView
		for _, in := range hist {
			recent = append(recent, IncidentView{Target: in.Target, Kind: in.Kind, Reason: in.Reason,
				StartedAt: RFC3339(in.StartedAt), EndedAt: RFC3339(in.EndedAt), Explains: orEmpty(in.Explains[:min(MaxListed, len(in.Explains))]), ExplainsCount: len(in.Explains)})
		}
		out.Recent = orEmptyOf(recent[:Fitting(recent, budget/5)])
	}
	troubled := make([]TroubledView, 0, len(rep.Troubled))
	for _, t := range rep.Troubled {
		troubled = append(troubled, TroubledView{ID: t.ID, Name: t.Name, Kind: t.Kind, Status: t.Status, Reason: t.Reason, Since: RFC3339(t.Since), RootCause: t.RootCause})
	}
	out.Troubled = troubled[:Fitting(troubled, budget-JSONSize(out)-200)]
	return out, nil
}
