// Package fleetview is the coordinator's read model: how the fleet is read
// and judged for any face. The MCP tools, the approval app's pages and
// their API all answer from here, so that the person who approves sees
// what the AI saw: the glance rows and the reasons a server needs
// attention, a server in full, its metric history and trends, the
// security findings, the incident report, the topology, the resources and
// the runbooks, each cut to an answer budget.
//
// Faces (mcpserver, web) render these answers; they do not judge.
package fleetview

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// Store is the part of the coordinator's store the read model reads; it
// writes nothing to it.
type Store interface {
	// Agents tells list_servers which servers are revoked or never connected.
	Agents(ctx context.Context) ([]store.Agent, error)
	MetricHistory(ctx context.Context, server string, step time.Duration, since time.Time, every time.Duration) ([]store.MetricPoint, error)
}

// Deps is what the read model reads from.
type Deps struct {
	Fleet *fleet.Fleet
	Store Store
	// Commands lists a server's recent commands on its page.
	Commands *command.Service
	// Topology builds the graph of servers, resources, districts and links.
	Topology *topology.Source
	// Resources holds the probed state of the config's resources.
	Resources *resources.Prober
	// Incidents records incidents with their start and end (optional).
	Incidents *incidents.Tracker
	Logger    *slog.Logger
	// Agents keeps the enrolled agents between calls while the store's
	// stamp of them stays the same (optional: without it every call
	// reads them all).
	Agents *AgentsCache
}

// Model answers every read of the fleet over its Deps. Safe for
// concurrent use.
type Model struct{ d Deps }

// New returns the read model over d.
func New(d Deps) *Model { return &Model{d: d} }

// ListServers answers list_servers at now.
func (m *Model) ListServers(ctx context.Context, in ListServersInput, now time.Time) (ListServersOutput, error) {
	return listServers(ctx, m.d, in, now)
}

// Metrics answers get_metrics at now.
func (m *Model) Metrics(ctx context.Context, in MetricsInput, now time.Time) (MetricsOutput, error) {
	return getMetrics(ctx, m.d, in, now)
}

// SecurityFindings answers security_findings.
func (m *Model) SecurityFindings(ctx context.Context, in SecurityInput) (SecurityOutput, error) {
	return securityFindings(ctx, m.d, in)
}

// IncidentReport answers incident_report.
func (m *Model) IncidentReport(ctx context.Context, in IncidentInput) (IncidentOutput, error) {
	return incidentReport(ctx, m.d, in)
}

// noConfigNote is the note of an answer that is empty because the
// coordinator runs without a config file, which is the only source of what
// it names (what) until the AI is told how to load one.
func noConfigNote(d Deps, what string) string {
	if d.Topology == nil || d.Topology.Config().File() != "" {
		return ""
	}
	return "no coordinator config is loaded, so there are no " + what + ": start `gridcity serve` with --config FILE " +
		"(make run CONFIG=FILE); the README's coordinator config section shows the file's format"
}

// CloseMatches suggests known names near an unknown one.
func CloseMatches(want string, known []string) string {
	var near []string
	for _, k := range known {
		if strings.Contains(k, want) || strings.Contains(want, k) || levenshtein(k, want) <= 2 {
			near = append(near, k)
		}
	}
	if len(near) == 0 {
		near = known
	}
	if len(near) == 0 {
		return "none"
	}
	if len(near) > 10 {
		near = append(near[:10:10], fmt.Sprintf("and %d more", len(near)-10))
	}
	return strings.Join(near, ", ")
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
