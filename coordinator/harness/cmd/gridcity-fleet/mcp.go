package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// coordinatorAccess is what `gridcity mcp --json` prints.
type coordinatorAccess struct {
	Endpoint string `json:"endpoint"`
	Token    string `json:"token"`
}

// mcpAccess asks the coordinator's CLI for the endpoint and local token.
func mcpAccess(ctx context.Context, gridcity, data string) (coordinatorAccess, error) {
	var a coordinatorAccess
	out, err := exec.CommandContext(ctx, gridcity, "mcp", "--data", data, "--json").Output()
	if err != nil {
		return a, fmt.Errorf("gridcity mcp --data %s: %v%s", data, err, stderrOf(err))
	}
	if err := json.Unmarshal(out, &a); err != nil || a.Token == "" {
		return a, fmt.Errorf("gridcity mcp --json printed %q", out)
	}
	return a, nil
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects to the coordinator as the client "gridcity-fleet".
func mcpSession(ctx context.Context, a coordinatorAccess) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + a.Token, "X-Agent-Client": "gridcity-fleet"}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "gridcity-fleet", Version: "1"}, nil)
	return cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.Endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
}

// report is the part of incident_report the demo shows.
type report struct {
	Healthy    int `json:"healthy"`
	Total      int `json:"total"`
	RootCauses []struct {
		ID       string   `json:"id"`
		Kind     string   `json:"kind"`
		Status   string   `json:"status"`
		Reason   string   `json:"reason"`
		Explains []string `json:"explains"`
		AtRisk   []string `json:"atRisk"`
	} `json:"rootCauses"`
	Troubled []struct {
		ID        string `json:"id"`
		RootCause string `json:"rootCause"`
	} `json:"troubled"`
}

type resourceList struct {
	Resources []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"resources"`
}

type serverList struct {
	Rows []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"rows"`
	// Others are online servers with nothing serious, by name, when their
	// rows do not fit the fleet at a glance.
	Others []string `json:"others"`
}

// callTool calls a tool and decodes its structured result.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		return fmt.Errorf("%s: %s", name, b)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// summary is the report in a few lines, indented by indent after the
// first.
func (r report) summary(indent string) string {
	if len(r.RootCauses) == 0 {
		return fmt.Sprintf("all healthy: %d of %d targets", r.Healthy, r.Total)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d targets healthy", r.Healthy, r.Total)
	for _, rc := range r.RootCauses {
		fmt.Fprintf(&b, "\n%sroot cause: %s (%s, %s: %s)", indent, rc.ID, rc.Kind, rc.Status, rc.Reason)
		if len(rc.Explains) > 0 {
			fmt.Fprintf(&b, "\n%s  explains: %s", indent, strings.Join(rc.Explains, ", "))
		}
		if len(rc.AtRisk) > 0 {
			fmt.Fprintf(&b, "\n%s  at risk:  %s", indent, strings.Join(rc.AtRisk, ", "))
		}
	}
	return b.String()
}

// key changes when the root causes or what they explain change.
func (r report) key() string {
	var parts []string
	for _, rc := range r.RootCauses {
		ex := slices.Clone(rc.Explains)
		slices.Sort(ex)
		parts = append(parts, rc.ID+"→"+strings.Join(ex, ","))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d/%d %s", r.Healthy, r.Total, strings.Join(parts, ";"))
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}
