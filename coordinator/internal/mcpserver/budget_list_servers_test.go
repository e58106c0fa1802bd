package mcpserver

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
)

// troubledFleet is benchFleet's fleet (1% offline, 1 in 500 revoked and as
// many never connected) with trouble mixed in: one server in 50 with
// failed units, one in 97 with a full /var, one in 131 overloaded, one in
// 211 out of memory, and one in 333 under an open SSH attack nobody blocks.
func troubledFleet(tb testing.TB, n int) Deps {
	tb.Helper()
	return fleetOf(tb, n, func(r *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate {
		st := simfleet.State(i, n, r, now)
		if i%50 == 7 {
			for u := range 1 + i%3 {
				st.FailedUnits.Items = append(st.FailedUnits.Items, &gridcityv1.Unit{Name: fmt.Sprintf("app-%d.service", u), SinceUnix: now.Add(-time.Hour).Unix()})
			}
		}
		if i%97 == 5 {
			st.Disks.Items[2] = simfleet.Disk("/var", "/dev/vdb1", 100*simfleet.GiB, 0.97)
		}
		if i%131 == 3 {
			st.Cpu.Load1 = float64(st.Cpu.GetCores()) * 3
		}
		if i%211 == 9 {
			st.Memory.UsedPercent = 97
		}
		if i%333 == 11 {
			st.Logins.Sources = append(st.Logins.Sources, &gridcityv1.AuthSource{Address: "192.0.2.66", Failures: 90, Users: []string{"root"},
				FirstSeenUnix: now.Add(-time.Hour).Unix(), LastSeenUnix: now.Add(-time.Minute).Unix()})
		}
		return st
	})
}

// expectedAttention counts troubledFleet's servers per attention kind, as the
// fixture makes them.
func expectedAttention(n int) map[string]int {
	want := map[string]int{}
	for i := range n {
		switch {
		case i%500 == 250:
			want["never connected"]++
			continue // no state at all
		case i%500 == 100:
			want["revoked"]++
		case i%100 == 42:
			want["offline"]++
		}
		if i%50 == 7 {
			want["failed units"]++
		}
		if i%97 == 5 {
			want["disk full"]++
		}
		if i%131 == 3 {
			want["load"]++
		}
		if i%211 == 9 {
			want["memory"]++
		}
		if i%333 == 11 {
			want["attack"]++
		}
	}
	return want
}

// mustList is callListServers that fails the test on an error answer.
func mustList(t *testing.T, cs *mcp.ClientSession, args map[string]any) (fleetview.ListServersOutput, *mcp.CallToolResult) {
	t.Helper()
	out, res := callListServers(t, cs, args)
	if res.IsError {
		t.Fatalf("list_servers(%v): %+v", args, res.Content)
	}
	return out, res
}

// TestListServersBudget: on 10,000 servers the fleet at a glance holds
// 16,000 characters in each form and every other answer 48,000; the
// compact text is shorter than the JSON; and nothing that matters is
// dropped: the counts hold every offline server and every server with
// failed units, the rows most serious first, and the pages of the
// servers needing attention reach each one of them.
func TestListServersBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a fleet of 10,000 servers")
	}
	const n = 10000
	cs := memSession(t, troubledFleet(t, n))
	want := expectedAttention(n)

	out, res := mustList(t, cs, map[string]any{})
	text, js := checkBudget(t, res, budgetDefault)
	t.Logf("the fleet at a glance, %d servers: %d characters of text, %d of JSON; %d rows, %d other names", n, text, js, len(out.Rows), len(out.Others))
	if text >= js {
		t.Errorf("text content %d characters; want fewer than the JSON's %d", text, js)
	}
	if out.Total != n || out.ByStatus["offline"] != want["offline"]+want["never connected"] || out.ByStatus["revoked"] != want["revoked"] ||
		out.ByStatus["online"] != n-want["offline"]-want["never connected"]-want["revoked"] {
		t.Errorf("total %d, by status %v; want %d with %d offline, %d revoked", out.Total, out.ByStatus, n, want["offline"]+want["never connected"], want["revoked"])
	}
	for kind, w := range want {
		if out.Attention[kind] != w {
			t.Errorf("attention[%s] = %d; want %d (all: %v)", kind, out.Attention[kind], w, out.Attention)
		}
	}
	if !out.Truncated || out.More == "" || len(out.Districts) == 0 || out.DistrictsOmitted != n/simfleet.Group+1-len(out.Districts) {
		t.Errorf("truncated %v, more %q, %d districts and %d left out; want truncated, with how to get the rest, and %d districts in all",
			out.Truncated, out.More, len(out.Districts), out.DistrictsOmitted, n/simfleet.Group+1) // and the never-connected servers' none
	}
	omitted := 0
	for _, c := range out.Omitted {
		omitted += c
	}
	if named := len(out.Rows) + len(out.Others); named+omitted != n {
		t.Errorf("%d named and %d omitted; want %d in all", named, omitted, n)
	}
	// Most serious first: the offline and never-connected servers lead,
	// every one of them, and rows of servers with security updates alone
	// come last, if at all.
	rank := map[string]int{"offline": 3, "never connected": 3, "revoked": 1, "security updates": 0}
	serious := func(r fleetview.ServerRow) int {
		best := 0
		for _, w := range r.Why {
			if k, ok := rank[whyKind(w)]; !ok {
				best = max(best, 2)
			} else {
				best = max(best, k)
			}
		}
		return best
	}
	for i, r := range out.Rows {
		if i > 0 && serious(r) > serious(out.Rows[i-1]) {
			t.Fatalf("row %d (%s, %v) ranks after a less serious one (%s, %v)", i, r.Name, r.Why, out.Rows[i-1].Name, out.Rows[i-1].Why)
		}
	}
	if len(out.Rows) < 50 || out.Rows[0].Status != "offline" {
		t.Errorf("%d rows, the first %+v; want dozens, the offline first", len(out.Rows), out.Rows[0])
	}

	for _, args := range []map[string]any{
		{"attention": true},
		{"status": "offline"},
		{"status": "offline", "full": true},
		{"district": "district-042"},
		{"district": "district-042", "full": true},
		{"name": "sim-0004"},
		{"name": "sim-00008"}, // exact, with failed units
		{"after": "sim-09800"},
		{"limit": 1000},
		{"full": true},
		{"full": true, "limit": 1000, "after": "sim-05000"},
		{"attention": true, "status": "online", "after": "sim-05000"},
	} {
		out, res := mustList(t, cs, args)
		text, js := checkBudget(t, res, budgetArgs)
		t.Logf("list_servers %v: %d characters of text, %d of JSON; %d rows, %d views, matched %d, truncated %v", args, text, js, len(out.Rows), len(out.Servers), out.Matched, out.Truncated)
		if len(out.Rows)+len(out.Servers) == 0 || out.Truncated != (out.NextAfter != "") {
			t.Errorf("list_servers %v: %d rows, %d views, truncated %v, nextAfter %q; want some, and nextAfter when truncated", args, len(out.Rows), len(out.Servers), out.Truncated, out.NextAfter)
		}
		if out.Rows != nil && text >= js {
			t.Errorf("list_servers %v: text content %d characters; want fewer than the JSON's %d", args, text, js)
		}
	}

}

// whyKind is the attention kind of a reason as a row has it.
func whyKind(w string) string {
	for _, k := range []struct{ prefix, kind string }{
		{"offline for", "offline"}, {"enrolled, never connected", "never connected"}, {"agent certificate revoked", "revoked"},
		{"1 failed unit", "failed units"}, {"2 failed units", "failed units"}, {"3 failed units", "failed units"}, {"disk ", "disk full"},
		{"load ", "load"}, {"memory ", "memory"}, {"open ssh attack", "attack"}, {"1 security update", "security updates"},
	} {
		if strings.HasPrefix(w, k.prefix) {
			return k.kind
		}
	}
	return w
}

// TestListServersAttentionPages: page by page, {"attention": true} reaches
// every server needing attention once, each with its reasons.
func TestListServersAttentionPages(t *testing.T) {
	const n = 2000
	cs := memSession(t, troubledFleet(t, n))
	want := expectedAttention(n)
	want["security updates"] = n - want["never connected"]
	found, pages := map[string]int{}, 0
	for after := ""; ; pages++ {
		out, res := mustList(t, cs, map[string]any{"attention": true, "after": after})
		checkBudget(t, res, budgetArgs)
		for _, r := range out.Rows {
			for _, w := range r.Why {
				found[whyKind(w)]++
			}
		}
		if after = out.NextAfter; after == "" {
			break
		}
	}
	if !maps.Equal(found, want) || pages < 2 {
		t.Errorf("%d pages of attention found %v; want %v", pages+1, found, want)
	}
}

// TestListServersGlanceNamesEveryServer: on a fleet of 50 the fleet at a
// glance has a row for every server; on one of a thousand a row for every
// server with something serious, and what it leaves out is online, by
// name or counted.
func TestListServersGlanceNamesEveryServer(t *testing.T) {
	for _, n := range []int{50, 1000} {
		out, res := mustList(t, memSession(t, troubledFleet(t, n)), map[string]any{})
		text, js := checkBudget(t, res, budgetDefault)
		t.Logf("the fleet at a glance, %d servers: %d characters of text, %d of JSON; %d rows, %d other names", n, text, js, len(out.Rows), len(out.Others))
		got := names(out)
		omitted := 0
		for _, c := range out.Omitted {
			omitted += c
		}
		if len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) || len(got)+omitted != n || omitted != out.Omitted["online"] {
			t.Errorf("%d servers: %d named (%d rows, %d others), omitted %v; want each once, and only online ones left out", n, len(got), len(out.Rows), len(out.Others), out.Omitted)
		}
		serious := 0
		for _, r := range out.Rows {
			if slices.ContainsFunc(r.Why, func(w string) bool { return whyKind(w) != "security updates" }) {
				serious++
			}
		}
		want := expectedAttention(n)
		if n == 50 && (len(out.Rows) != n || out.Truncated) {
			t.Errorf("50 servers: %d rows, truncated %v; want one each", len(out.Rows), out.Truncated)
		}
		if n == 1000 && serious != want["offline"]+want["never connected"]+want["revoked"]+want["failed units"]+want["disk full"]+want["load"]+want["memory"]+want["attack"]-overlap(n) {
			t.Errorf("1000 servers: %d rows of servers with something serious; want every one", serious)
		}
	}
}

// overlap counts troubledFleet's servers with two serious kinds of trouble,
// which expectedAttention counts twice.
func overlap(n int) int {
	c := 0
	for i := range n {
		k := 0
		if i%500 == 250 {
			continue
		}
		for _, hit := range []bool{i%500 == 100 || i%100 == 42, i%50 == 7, i%97 == 5, i%131 == 3, i%211 == 9, i%333 == 11} {
			if hit {
				k++
			}
		}
		c += max(k-1, 0)
	}
	return c
}

// TestListServersText: the text content is the rendering, the same facts as
// the JSON in aligned rows.
func TestListServersText(t *testing.T) {
	ctx := context.Background()
	d := smallFleet(t)
	out, err := fleetview.New(d.Deps).ListServers(ctx, fleetview.ListServersInput{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	text := renderListServers(out)
	for _, r := range out.Rows {
		found := false
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, r.Name+" ") && !slices.ContainsFunc(append([]string{r.Status, r.District}, r.Why...), func(f string) bool { return !strings.Contains(line, f) }) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line for %s (%s %s %v) in\n%s", r.Name, r.Status, r.District, r.Why, text)
		}
	}
}
