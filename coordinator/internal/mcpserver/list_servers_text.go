package mcpserver

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
)

// renderListServers is list_servers' text content: the structured answer's
// facts for a model to read, a summary line and then aligned rows, in
// fewer characters than its JSON. One server in full stays JSON: every
// field of it is a fact.
func renderListServers(out fleetview.ListServersOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d servers: %s; %d match", out.Total, statusCounts(out.ByStatus), out.Matched)
	if out.Truncated {
		fmt.Fprintf(&b, "; truncated, not named here: %s", statusCounts(out.Omitted))
	}
	b.WriteString(" (as of " + out.GeneratedAt + ")\n")
	for _, g := range out.Gaps {
		b.WriteString("not checked (" + g.Check + "): " + g.Reason + "\n")
	}
	if len(out.Attention) > 0 {
		b.WriteString("needing attention: " + kindCounts(out.Attention) + "\n")
	}
	if len(out.Districts) > 0 {
		b.WriteString("districts (servers/not online/needing attention):")
		for i, dr := range out.Districts {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s %d/%d/%d", cmp.Or(dr.District, "(none)"), dr.Servers, dr.Offline, dr.Attention)
		}
		if out.DistrictsOmitted > 0 {
			fmt.Fprintf(&b, "; %d more districts", out.DistrictsOmitted)
		}
		b.WriteString("\n")
	}
	if len(out.Rows) > 0 {
		writeRows(&b, out.Rows)
	}
	if len(out.Others) > 0 {
		b.WriteString("others, online with nothing serious (names only): " + strings.Join(out.Others, " ") + "\n")
	}
	if len(out.Servers) > 0 {
		j, _ := json.Marshal(out.Servers)
		b.WriteString("servers in full (JSON; names, units, processes and reasons come from the servers: data):\n")
		b.Write(j)
		b.WriteString("\n")
	}
	if out.NextAfter != "" {
		fmt.Fprintf(&b, "next page: the same arguments with after %q\n", out.NextAfter)
	}
	if out.More != "" {
		b.WriteString("more: " + out.More + "\n")
	}
	return b.String()
}

// writeRows writes rows as aligned columns; a figure not known is "-".
func writeRows(b *strings.Builder, rows []fleetview.ServerRow) {
	wName, wStatus, wDistrict := len("name"), len("status"), len("district")
	for _, r := range rows {
		wName, wStatus, wDistrict = max(wName, len(r.Name)), max(wStatus, len(r.Status)), max(wDistrict, len(r.District))
	}
	fig := func(f *float64) string {
		if f == nil {
			return "-"
		}
		return strconv.FormatFloat(*f, 'f', -1, 64)
	}
	fmt.Fprintf(b, "%-*s %-*s %-*s %5s %5s %5s why\n", wName, "name", wStatus, "status", wDistrict, "district", "cpu%", "mem%", "load")
	for _, r := range rows {
		line := fmt.Sprintf("%-*s %-*s %-*s %5s %5s %5s %s", wName, r.Name, wStatus, r.Status, wDistrict, r.District, fig(r.CPU), fig(r.Mem), fig(r.Load), strings.Join(r.Why, "; "))
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}

// statusCounts is "9800 online, 100 offline", in the statuses' order.
func statusCounts(m map[string]int) string {
	var parts []string
	for _, s := range fleetview.ServerStatuses {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[s], s))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// kindCounts is "offline 100, failed units 200", most first.
func kindCounts(m map[string]int) string {
	kinds := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
