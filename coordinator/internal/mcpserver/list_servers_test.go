package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
)

// listServers calls list_servers and decodes its answer; res is the raw
// result, for the error cases.
func callListServers(t *testing.T, cs *mcp.ClientSession, args map[string]any) (fleetview.ListServersOutput, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_servers", Arguments: args})
	if err != nil {
		t.Fatalf("list_servers(%v): %v", args, err)
	}
	var out fleetview.ListServersOutput
	if res.IsError {
		return out, res
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, res
}

// names are the servers an answer names, in its order: rows, the
// others' names, then whole views.
func names(out fleetview.ListServersOutput) []string {
	ns := []string{}
	for _, r := range out.Rows {
		ns = append(ns, r.Name)
	}
	ns = append(ns, out.Others...)
	for _, s := range out.Servers {
		ns = append(ns, s.Name)
	}
	return ns
}

// statuses are the statuses of the servers an answer has a row or a view of.
func statuses(out fleetview.ListServersOutput) map[string]string {
	m := map[string]string{}
	for _, r := range out.Rows {
		m[r.Name] = r.Status
	}
	for _, s := range out.Servers {
		m[s.Name] = s.Status
	}
	return m
}

// lightFleet is benchFleet's fleet with little state, so that the views of
// a thousand servers are cheap: paging does not look at the state.
func lightFleet(t *testing.T, n int) Deps {
	t.Helper()
	return fleetOf(t, n, func(_ *rand.Rand, i int, now time.Time) *gridcityv1.StateUpdate {
		return &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(), Host: &gridcityv1.HostInfo{Hostname: fmt.Sprintf("sim-%05d", i+1)}}
	})
}

// smallFleet: api-1 online without a district; db-1 offline, a member of
// the config's district shop; web-1 online declaring shop; web-2 online
// declaring blog; old-1 declaring blog, revoked; new-1 enrolled, never
// connected.
func smallFleet(t *testing.T) Deps {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	f, err := fleet.New(ctx, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	es := enrolledStore{fleetAndTools: st}
	for _, s := range []struct {
		name, district  string
		online, revoked bool
	}{
		{"api-1", "", true, false}, {"db-1", "", false, false}, {"web-1", "shop", true, false},
		{"web-2", "blog", true, false}, {"old-1", "blog", false, true},
	} {
		id := f.Connect(&gridcityv1.Hello{Name: s.name, District: s.district})
		f.Apply(s.name, id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(), Host: &gridcityv1.HostInfo{Hostname: s.name}})
		if !s.online {
			f.Disconnect(s.name, id)
		}
		a := store.Agent{Name: s.name, EnrolledAt: now}
		if s.revoked {
			a.RevokedAt = now
		}
		es.agents = append(es.agents, a)
	}
	es.agents = append(es.agents, store.Agent{Name: "new-1", EnrolledAt: now})
	cfg := config.Default()
	cfg.Districts = []config.District{{ID: "shop", Name: "Shop", Members: []string{"db-1", "shop-lb"}}}
	return Deps{Deps: fleetview.Deps{Fleet: f, Store: es, Topology: topology.New(cfg, f, nil), Logger: logger}, Store: es}
}

func TestListServersFilters(t *testing.T) {
	cs := memSession(t, smallFleet(t))
	for _, tc := range []struct {
		args      map[string]any
		want      []string
		matched   int
		nextAfter string
	}{
		{map[string]any{}, []string{"api-1", "db-1", "new-1", "old-1", "web-1", "web-2"}, 6, ""},
		{map[string]any{"name": "WEB"}, []string{"web-1", "web-2"}, 2, ""},
		{map[string]any{"name": "web-1"}, []string{"web-1"}, 1, ""}, // exact: that one in full
		{map[string]any{"name": "WEB-2"}, []string{"web-2"}, 1, ""},
		{map[string]any{"attention": true}, []string{"db-1", "new-1", "old-1"}, 3, ""},
		{map[string]any{"attention": true, "full": true}, []string{"db-1", "new-1", "old-1"}, 3, ""},
		{map[string]any{"district": "shop", "full": true}, []string{"db-1", "web-1"}, 2, ""},
		{map[string]any{"name": "-1"}, []string{"api-1", "db-1", "new-1", "old-1", "web-1"}, 5, ""},
		{map[string]any{"district": "shop"}, []string{"db-1", "web-1"}, 2, ""}, // a config member and a declared one
		{map[string]any{"district": "SHOP"}, []string{"db-1", "web-1"}, 2, ""},
		{map[string]any{"district": "blog"}, []string{"old-1", "web-2"}, 2, ""}, // declared only
		{map[string]any{"status": "online"}, []string{"api-1", "web-1", "web-2"}, 3, ""},
		{map[string]any{"status": "offline"}, []string{"db-1", "new-1"}, 2, ""}, // never connected counts offline
		{map[string]any{"status": "Revoked"}, []string{"old-1"}, 1, ""},
		{map[string]any{"status": "online", "district": "shop"}, []string{"web-1"}, 1, ""},
		{map[string]any{"name": "web", "status": "offline"}, []string{}, 0, ""},
		{map[string]any{"after": "db-1"}, []string{"new-1", "old-1", "web-1", "web-2"}, 6, ""},
		{map[string]any{"after": "zzz"}, []string{}, 6, ""},
		{map[string]any{"limit": 2}, []string{"api-1", "db-1"}, 6, "db-1"},
		{map[string]any{"limit": 2, "after": "db-1"}, []string{"new-1", "old-1"}, 6, "old-1"},
		{map[string]any{"limit": 2, "after": "old-1"}, []string{"web-1", "web-2"}, 6, ""},
		{map[string]any{"district": "shop", "limit": 1}, []string{"db-1"}, 2, "db-1"},
		{map[string]any{"status": "", "name": "", "district": "", "after": ""}, []string{"api-1", "db-1", "new-1", "old-1", "web-1", "web-2"}, 6, ""},
	} {
		out, res := callListServers(t, cs, tc.args)
		if res.IsError {
			t.Errorf("list_servers(%v): error %+v", tc.args, res.Content)
			continue
		}
		got := names(out)
		if len(tc.args) == 0 || tc.args["name"] == "" {
			slices.Sort(got) // the fleet at a glance ranks its rows
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("list_servers(%v) = %v; want %v", tc.args, got, tc.want)
		}
		if out.Matched != tc.matched || out.NextAfter != tc.nextAfter || out.Truncated != (tc.nextAfter != "") {
			t.Errorf("list_servers(%v): matched %d, truncated %v, nextAfter %q; want %d, %v, %q", tc.args, out.Matched, out.Truncated, out.NextAfter,
				tc.matched, tc.nextAfter != "", tc.nextAfter)
		}
		if full := tc.args["full"] == true || tc.args["name"] == "web-1" || tc.args["name"] == "WEB-2"; full != (out.Rows == nil && len(out.Servers) > 0) && len(tc.want) > 0 {
			t.Errorf("list_servers(%v): %d rows, %d whole views; want whole views %v", tc.args, len(out.Rows), len(out.Servers), full)
		}
		if out.Online != 3 || out.Total != 6 {
			t.Errorf("list_servers(%v): online %d of %d; want 3 of 6 whatever the filters", tc.args, out.Online, out.Total)
		}
	}
}

func TestListServersStatuses(t *testing.T) {
	cs := memSession(t, smallFleet(t))
	out, _ := callListServers(t, cs, map[string]any{})
	got := statuses(out)
	want := map[string]string{"api-1": "online", "db-1": "offline", "new-1": "offline", "old-1": "revoked", "web-1": "online", "web-2": "online"}
	for n, st := range want {
		if got[n] != st {
			t.Errorf("%s is %q; want %q", n, got[n], st)
		}
	}
	one := func(name string) fleetview.ServerView {
		out, res := callListServers(t, cs, map[string]any{"name": name})
		if res.IsError || len(out.Servers) != 1 {
			t.Fatalf("list_servers {name: %s}: %+v", name, res.Content)
		}
		return out.Servers[0]
	}
	if s := one("new-1"); len(s.Gaps) != 1 || !strings.Contains(s.Gaps[0].Reason, "never connected") {
		t.Errorf("new-1 gaps %+v; want one saying it never connected", s.Gaps)
	}
	if s := one("old-1"); !slices.ContainsFunc(s.Gaps, func(g fleetview.GapView) bool { return strings.Contains(g.Reason, "revoked") }) {
		t.Errorf("old-1 gaps %+v; want one saying its certificate was revoked", s.Gaps)
	}
}

func TestListServersBadInput(t *testing.T) {
	cs := memSession(t, smallFleet(t))
	for _, tc := range []struct {
		args map[string]any
		want []string // in the error text
	}{
		{map[string]any{"status": "down"}, []string{`unknown status "down"`, "online, reconnecting, offline, revoked"}},
		{map[string]any{"district": "shpo"}, []string{`unknown district "shpo"`, "shop"}},
		{map[string]any{"colour": "red"}, []string{"colour"}},
	} {
		_, res := callListServers(t, cs, tc.args)
		if !res.IsError {
			t.Errorf("list_servers(%v) answered; want an error", tc.args)
			continue
		}
		text := res.Content[0].(*mcp.TextContent).Text
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("list_servers(%v) error %q; want it to say %q", tc.args, text, w)
			}
		}
	}
}

// Reading page after page visits every server once, in order, even when
// servers connect between the pages: after is a name, not an offset.
func TestListServersPaging(t *testing.T) {
	const n = 450
	d := lightFleet(t, n) // with offline, revoked and never-connected servers
	cs := memSession(t, d)
	for _, tc := range []struct {
		args  map[string]any
		pages int
		want  func(name, status string) bool
	}{
		{map[string]any{"limit": 100}, 5, nil},
		{map[string]any{"full": true}, 0, nil}, // as many as fit 48,000 characters
		{map[string]any{"limit": 3, "status": "offline"}, 2, func(_, s string) bool { return s == "offline" }}, // 42, 142 … 442 and 250
		{map[string]any{"limit": 3, "status": "revoked"}, 1, func(_, s string) bool { return s == "revoked" }},
		{map[string]any{"limit": 10, "name": "sim-001"}, 10, func(n, _ string) bool { return strings.HasPrefix(n, "sim-001") }},
		{map[string]any{"limit": 2, "attention": true}, 4, func(_, s string) bool { return s != "online" }}, // the offline, revoked and never connected
	} {
		var seen []string
		pages, matched := 0, -1
		args := tc.args
		for after := ""; ; pages++ {
			args["after"] = after
			out, res := callListServers(t, cs, args)
			if res.IsError {
				t.Fatalf("list_servers(%v): %+v", args, res.Content)
			}
			if matched == -1 {
				matched = out.Matched
			} else if out.Matched != matched {
				t.Errorf("list_servers(%v): matched %d; the first page said %d", args, out.Matched, matched)
			}
			for n, s := range statuses(out) {
				if tc.want != nil && !tc.want(n, s) {
					t.Errorf("list_servers(%v) listed %s (%s)", args, n, s)
				}
			}
			seen = append(seen, names(out)...)
			if out.Truncated != (out.NextAfter != "") {
				t.Fatalf("list_servers(%v): truncated %v with nextAfter %q", args, out.Truncated, out.NextAfter)
			}
			if out.NextAfter == "" {
				break
			}
			if out.NextAfter != seen[len(seen)-1] {
				t.Fatalf("list_servers(%v): nextAfter %q; want the page's last server, %s", args, out.NextAfter, seen[len(seen)-1])
			}
			after = out.NextAfter
		}
		pages++
		if len(seen) != matched || !slices.IsSorted(seen) || len(slices.Compact(slices.Clone(seen))) != len(seen) {
			t.Errorf("list_servers(%v): %d pages listed %d servers (sorted and once each: %v); matched %d", tc.args, pages, len(seen),
				slices.IsSorted(seen) && len(slices.Compact(slices.Clone(seen))) == len(seen), matched)
		}
		if tc.pages > 0 && pages != tc.pages || tc.pages == 0 && pages < 2 {
			t.Errorf("list_servers(%v): %d pages; want %d", tc.args, pages, tc.pages)
		}
		if tc.want == nil && len(seen) != n {
			t.Errorf("list_servers(%v): %d servers over all pages; want all %d", tc.args, len(seen), n)
		}
	}

	// Servers connecting between pages: the one sorting before the page
	// read next is left out, the one after it is listed; nothing else moves.
	out, _ := callListServers(t, cs, map[string]any{"limit": 150})
	for _, name := range []string{"sim-00001a", "sim-00300a"} {
		id := d.Fleet.Connect(&gridcityv1.Hello{Name: name})
		d.Fleet.Apply(name, id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli()})
	}
	seen := names(out)
	for after := out.NextAfter; after != ""; after = out.NextAfter {
		out, _ = callListServers(t, cs, map[string]any{"limit": 150, "after": after})
		seen = append(seen, names(out)...)
	}
	if len(seen) != n+1 || slices.Contains(seen, "sim-00001a") || !slices.Contains(seen, "sim-00300a") {
		t.Errorf("with two servers joining between pages: %d servers listed (sim-00001a %v, sim-00300a %v); want %d without the first, with the second",
			len(seen), slices.Contains(seen, "sim-00001a"), slices.Contains(seen, "sim-00300a"), n+1)
	}
}

// A limit of 0 or less means as many as fit; one above the maximum is
// taken as the maximum rather than refused; either way the page stops at
// its size bound, and the answer says it is truncated.
func TestListServersLimits(t *testing.T) {
	cs := memSession(t, lightFleet(t, 1001))
	for _, tc := range []struct {
		args map[string]any
		want int // 0: as many as fit
	}{
		{map[string]any{"limit": 1}, 1},
		{map[string]any{"limit": 300}, 300},
		{map[string]any{"limit": -5, "status": "online"}, 0},
		{map[string]any{"limit": 5000}, 0},
	} {
		out, res := callListServers(t, cs, tc.args)
		if res.IsError {
			t.Fatalf("list_servers(%v): %+v", tc.args, res.Content)
		}
		n := len(out.Rows)
		if tc.want > 0 && n != tc.want || tc.want == 0 && (n < 300 || n >= fleetview.MaxServersLimit) || !out.Truncated || out.NextAfter != out.Rows[n-1].Name || out.Total != 1001 {
			t.Errorf("list_servers(%v): %d rows, truncated %v, nextAfter %q, total %d; want %d (0: as many as fit), true, the last one's name, 1001",
				tc.args, n, out.Truncated, out.NextAfter, out.Total, tc.want)
		}
		checkBudget(t, res, budgetArgs)
	}
}

// The servers resource is the fleet at a glance, within the budget: what
// it leaves out is counted, and the one-server template reads any server,
// listed or not.
func TestServerResourcesPastOnePage(t *testing.T) {
	const n = 1001
	cs := memSession(t, lightFleet(t, n))
	var idx ServerIndex
	readJSON(t, cs, uriServers, &idx)
	if len(idx.Servers) < 100 || len(idx.Servers)+idx.Omitted["online"] != n || idx.Total != n || !idx.Truncated || idx.More == "" {
		t.Errorf("%s lists %d of %d servers and omits %v, more %q; want as many as fit, the others counted", uriServers, len(idx.Servers), idx.Total, idx.Omitted, idx.More)
	}
	for _, name := range []string{"sim-00001", "sim-01001"} {
		var v fleetview.ServerView
		readJSON(t, cs, serverURI(name), &v)
		if v.Name != name {
			t.Errorf("%s is %q", serverURI(name), v.Name)
		}
	}
}

// The fleet looks for revocations every 30 s, list_servers reads the store
// at each call: when the two disagree (web-1 revoked and enrolled again in
// between, web-2 revoked since the fleet's last look) the store wins, and
// nothing breaks (a revoked mark without a revoked agent once crashed the
// coordinator).
func TestListServersWhenTheFleetsRevokedMarkLags(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	es := &enrolledStore{fleetAndTools: st, agents: []store.Agent{{Name: "web-1", EnrolledAt: now, RevokedAt: now}, {Name: "web-2", EnrolledAt: now}}}
	f, err := fleet.New(ctx, es, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-1", "web-2"} {
		f.Disconnect(name, f.Connect(&gridcityv1.Hello{Name: name}))
	}
	if err := f.SyncRevoked(ctx); err != nil {
		t.Fatal(err)
	}
	es.agents = []store.Agent{{Name: "web-1", EnrolledAt: now}, {Name: "web-2", EnrolledAt: now, RevokedAt: now}}
	cs := memSession(t, Deps{Deps: fleetview.Deps{Fleet: f, Store: es, Logger: slog.New(slog.DiscardHandler)}, Store: es})
	out, res := callListServers(t, cs, map[string]any{})
	if res.IsError {
		t.Fatalf("list_servers: %+v", res.Content)
	}
	got := statuses(out)
	if got["web-1"] != fleet.StatusOffline || got["web-2"] != fleet.StatusRevoked {
		t.Fatalf("statuses %v; want web-1 offline (enrolled again), web-2 revoked (as the store says)", got)
	}
}

// TestListServersUnknownIsAbsent: a section the agent has not reported is
// absent from the answer, with a gap, never a zero: a just-started agent
// used to show updates {pending: 0, security: 0} on a host with 129
// pending. An empty list the agent did report stays: it means none.
func TestListServersUnknownIsAbsent(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f, err := fleet.New(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const notYet = "not collected yet: the updates check has not run yet; it runs right after the agent connects, then every 30 min by default"
	id := f.Connect(&gridcityv1.Hello{Name: "fresh-1"})
	f.Apply("fresh-1", id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: "fresh-1"}, Cpu: &gridcityv1.CPU{Cores: 4, Load1: 0.5}, Memory: &gridcityv1.Memory{TotalBytes: 1 << 30},
		Disks: &gridcityv1.Disks{}, Listeners: &gridcityv1.Listeners{}, FailedUnits: &gridcityv1.Units{}, Containers: &gridcityv1.Containers{},
		Gaps: &gridcityv1.Gaps{Items: []*gridcityv1.Gap{{Check: "cpu:busy", Reason: "not collected yet: two samples"}, {Check: "updates", Reason: notYet}}}})
	id = f.Connect(&gridcityv1.Hello{Name: "busy-1"}) // cpu without a busy share, and no gap for it
	f.Apply("busy-1", id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(), Host: &gridcityv1.HostInfo{Hostname: "busy-1"},
		Cpu: &gridcityv1.CPU{Cores: 2}, Memory: &gridcityv1.Memory{TotalBytes: 1 << 30}, Disks: &gridcityv1.Disks{}, Listeners: &gridcityv1.Listeners{},
		FailedUnits: &gridcityv1.Units{}, Containers: &gridcityv1.Containers{}, Updates: &gridcityv1.Updates{Manager: "apt", CheckedUnix: now.Add(-time.Minute).Unix()}})
	id = f.Connect(&gridcityv1.Hello{Name: "older-1"})
	f.Apply("older-1", id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: now.UnixMilli(), Host: &gridcityv1.HostInfo{Hostname: "older-1"}})
	d := Deps{Deps: fleetview.Deps{Fleet: f, Store: enrolledStore{fleetAndTools: st}}, Store: enrolledStore{fleetAndTools: st}}

	out, err := fleetview.New(d.Deps).ListServers(ctx, fleetview.ListServersInput{Full: true}, now)
	if err != nil || len(out.Servers) != 3 {
		t.Fatalf("got %d servers, %v; want 3", len(out.Servers), err)
	}
	gapChecks := func(v fleetview.ServerView) []string {
		var cs []string
		for _, g := range v.Gaps {
			cs = append(cs, g.Check)
		}
		return cs
	}
	busy, fresh, older := out.Servers[0], out.Servers[1], out.Servers[2]
	if got := gapChecks(busy); !slices.Equal(got, []string{"cpu:busy"}) || busy.CPU == nil || busy.CPU.BusyPercent != nil || busy.Updates == nil || busy.Updates.Pending != 0 ||
		busy.Updates.CheckedAt != fleetview.RFC3339(now.Add(-time.Minute).Truncate(time.Second)) {
		t.Errorf("busy-1: cpu %+v, updates %+v, gaps %v; want no busy share with a cpu:busy gap, and the 0 pending it reported with when", busy.CPU, busy.Updates, got)
	}
	b, _ := json.Marshal(fresh)
	js := string(b)
	for _, absent := range []string{`"updates":`, `"busyPercent"`, `"pending"`} {
		if strings.Contains(js, absent) {
			t.Errorf("fresh-1 has %s: %s; want it absent", absent, js)
		}
	}
	for _, present := range []string{`"failedUnits":[]`, `"containers":[]`, `"listening":[]`, `"disks":[]`, `"cores":4`} {
		if !strings.Contains(js, present) {
			t.Errorf("fresh-1 lacks %s: %s; an empty list reported by the agent means none", present, js)
		}
	}
	if got := gapChecks(fresh); !slices.Equal(got, []string{"cpu:busy", "updates"}) || fresh.Gaps[1].Reason != notYet {
		t.Errorf("fresh-1 gaps %+v; want the agent's cpu:busy and updates gaps, once each", fresh.Gaps)
	}

	b, _ = json.Marshal(older)
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"updates", "cpu", "memory", "disks", "listening", "containers", "failedUnits", "uptimeSeconds"} {
		if _, ok := keys[absent]; ok {
			t.Errorf("older-1 has %s: %s; want it absent", absent, b)
		}
	}
	if got, want := gapChecks(older), []string{"cpu", "memory", "disks", "sockets", "failed_units", "containers", "updates"}; !slices.Equal(got, want) {
		t.Errorf("older-1 gaps %v; want %v", got, want)
	}
}

// TestListServersOneServerInFullFits: a host with thousands of sockets and
// containers is still answered in full within the 48,000 characters of an
// answer with arguments, its lists cut with a gap saying how many were left
// out; one with a few is answered whole.
func TestListServersOneServerInFullFits(t *testing.T) {
	d := lightFleet(t, 3)
	st := &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(), Host: &gridcityv1.HostInfo{Hostname: "big-1"},
		Listeners: &gridcityv1.Listeners{}, Containers: &gridcityv1.Containers{}}
	for i := range 3000 {
		st.Listeners.Items = append(st.Listeners.Items, &gridcityv1.Listener{Proto: "tcp", Address: "10.0.0.1", Port: uint32(10000 + i), Process: "worker"})
	}
	for i := range 500 {
		st.Containers.Items = append(st.Containers.Items, &gridcityv1.Container{Id: fmt.Sprintf("%064d", i), Name: fmt.Sprintf("job-%d", i), Image: "registry.example/job:1", State: "running", Status: "Up 2 hours"})
	}
	d.Fleet.Apply("big-1", d.Fleet.Connect(&gridcityv1.Hello{Name: "big-1"}), st)
	cs := memSession(t, d)
	for _, args := range []map[string]any{{"name": "big-1"}, {"name": "big", "full": true}} {
		out, res := callListServers(t, cs, args)
		checkBudget(t, res, budgetArgs)
		if len(out.Servers) != 1 {
			t.Fatalf("list_servers %v: %d servers; want big-1 in full", args, len(out.Servers))
		}
		v := out.Servers[0]
		var cut []string
		for _, g := range v.Gaps {
			if g.Check == "listening" || g.Check == "containers" {
				cut = append(cut, g.Check+": "+g.Reason)
			}
		}
		if len(v.Listening) == 0 || len(v.Listening) == 3000 || v.Listening[0].Port != 10000 || len(cut) == 0 ||
			!strings.Contains(strings.Join(cut, " "), fmt.Sprintf("%d of 3000 left out", 3000-len(v.Listening))) {
			t.Errorf("list_servers %v: %d sockets, %d containers, gaps %v; want the first sockets, and gaps counting what was left out", args, len(v.Listening), len(v.Containers), cut)
		}
	}
	out, _ := callListServers(t, cs, map[string]any{"name": "sim-00001"})
	if len(out.Servers) != 1 || slices.ContainsFunc(out.Servers[0].Gaps, func(g fleetview.GapView) bool { return strings.Contains(g.Reason, "left out to keep") }) {
		t.Errorf("sim-00001: %+v; want it whole", out.Servers)
	}
}
