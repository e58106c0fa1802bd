package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
)

// queried collects every PromQL text of a Grafana dashboard: panel
// targets' expr and the variables' queries.
func queried(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "definition" || k == "query") {
				*out = append(*out, s)
				continue
			}
			queried(x, out)
		}
	case []any:
		for _, x := range v {
			queried(x, out)
		}
	}
}

// Every metric deploy/grafana/gridcity.json queries is one the coordinator
// serves, at /metrics or /metrics/fleet: a renamed metric fails here, not
// as an empty panel in an operator's Grafana.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/grafana/gridcity.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana/gridcity.json: %v", err)
	}
	logger := slog.New(slog.DiscardHandler)
	m := telemetry.New("test")
	registerGauges(m, nil, nil, nil, nil, "self", replicas.NewLeader(logger), logger)
	served := append(m.Names(), telemetry.FleetNames()...)

	var exprs []string
	queried(dash, &exprs)
	if len(exprs) < 30 {
		t.Fatalf("%d queries found in the dashboard; want its panels' and variables' (30 or more)", len(exprs))
	}
	name := regexp.MustCompile(`\b(?:gridcity|go|process)_[a-zA-Z0-9_:]*`)
	used := map[string]bool{}
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			used[n] = true
			if !slices.Contains(served, n) {
				t.Errorf("the dashboard queries %s (in %q), which the coordinator does not serve", n, e)
			}
		}
	}
	// Each query is PromQL Prometheus parses: promtool checks them as the
	// expressions of recording rules, with Grafana's variables filled in.
	checkPromQL(t, exprs)
	// And it shows the fleet: every series of /metrics/fleet is on it.
	for _, n := range telemetry.FleetNames() {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
}

func checkPromQL(t *testing.T, exprs []string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must install promtool (Debian's prometheus package)")
		}
		t.Log("promtool not found (apt-get install prometheus): the dashboard's PromQL is not parsed")
		return
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$district", ".*", "$job", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	n := 0
	for _, e := range exprs {
		if strings.HasPrefix(e, "label_values(") {
			continue // a Grafana function, not PromQL
		}
		n++
		q, _ := json.Marshal(vars.Replace(e))
		fmt.Fprintf(&rules, "  - record: dashboard:query:%d\n    expr: %s\n", n, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, rules.String())
	}
}
