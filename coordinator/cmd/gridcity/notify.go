package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/notify"
	"github.com/gridcity/gridcity/coordinator/internal/security"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// newNotifyHub reads the notifiers' secrets. appURL is where people open
// the app, for the links in messages.
func newNotifyHub(cfg *config.Config, appURL string, topo *topology.Source, metrics *telemetry.Metrics, logger *slog.Logger) (*notify.Hub, error) {
	if u, err := url.Parse(appURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--app-url %q: give the app's address as people open it, e.g. https://gridcity.example.com/", appURL)
	}
	hub, err := notify.New(cfg.Notify, notify.Options{AppURL: appURL, Metrics: metrics, Logger: logger, Districts: func(targets []string) []string {
		g, err := topo.Graph()
		if err != nil {
			return nil
		}
		var out []string
		for _, d := range g.Districts() {
			if slices.ContainsFunc(targets, func(t string) bool { return slices.Contains(d.Members, t) }) {
				out = append(out, d.ID)
			}
		}
		return out
	}})
	if err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	for _, n := range cfg.Notify {
		events := "all"
		if len(n.Events) > 0 {
			events = fmt.Sprint(n.Events)
		}
		logger.Info("notifier ready", "notifier", n.Name, "kind", n.Kind, "events", events, "districts", n.Districts)
	}
	return hub, nil
}

// notifySources are what the leader's watcher judges: the open incidents,
// the fleet, and its attacks.
func notifySources(cfg *config.Config, tracker *incidents.Tracker, fl *fleet.Fleet, topo *topology.Source, leads func() bool) notify.Sources {
	attacks := security.DefaultOptions()
	attacks.Runbooks = cfg.Runbooks
	return notify.Sources{Incidents: tracker.Open, Servers: fl.Servers, Attacks: attacks, Leads: leads, Grace: tracker.Grace,
		AtRisk: func(target string) int {
			g, err := topo.Graph()
			if err != nil {
				return 0
			}
			for _, rc := range g.IncidentsWith(graph.IncidentOptions{MaxAtRisk: -1}).RootCauses {
				if rc.ID == target {
					return rc.AtRiskCount
				}
			}
			return 0
		}}
}
