package mcpserver

import (
	"math"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestNotEncodable(t *testing.T) {
	type inner struct {
		X float64 `json:"x"`
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{ServerView{CPU: CPUView{Load1: 0.5}}, ""},
		{ServerView{CPU: CPUView{Load1: math.NaN()}}, "cpu.load1 = NaN"},
		{ServerView{Disks: []DiskView{{}, {UsedPercent: math.Inf(1)}}}, "disks[1].usedPercent = +Inf"},
		{map[string]float64{"days_left": math.Inf(-1)}, "days_left = -Inf"},
		{&struct {
			In []*inner `json:"in"`
		}{In: []*inner{nil, {X: math.NaN()}}}, "in[1].x = NaN"},
	} {
		if got := notEncodable(c.v); got != c.want {
			t.Errorf("notEncodable(%+v) = %q; want %q", c.v, got, c.want)
		}
	}
}

// TestListServersSurvivesABadServer: a server whose state holds NaN (the
// fleet took it from somewhere the agent API does not guard) is a row with
// a gap; every other server is answered in full.
func TestListServersSurvivesABadServer(t *testing.T) {
	d := smallFleet(t)
	id := d.Fleet.Connect(&gridcityv1.Hello{Name: "web-2", District: "blog"})
	d.Fleet.Apply("web-2", id, &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(),
		Host: &gridcityv1.HostInfo{Hostname: "web-2"}, Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: math.NaN(), Load1: math.Inf(1)}})
	out, res := callListServers(t, memSession(t, d), map[string]any{})
	if res.IsError {
		t.Fatalf("list_servers failed for the whole fleet: %+v", res.Content)
	}
	byName := map[string]ServerView{}
	for _, s := range out.Servers {
		byName[s.Name] = s
	}
	if s := byName["web-1"]; s.OS.Hostname != "web-1" || s.Status != "online" {
		t.Errorf("web-1 = %+v; want its full row", s)
	}
	bad := byName["web-2"]
	if bad.Status != "online" || bad.OS.Hostname != "" || bad.CPU.Cores != 0 {
		t.Errorf("web-2 = %+v; want its status and no facts", bad)
	}
	var gap string
	for _, g := range bad.Gaps {
		if g.Check == "state" {
			gap = g.Reason
		}
	}
	if !strings.Contains(gap, "cpu.busyPercent = NaN") {
		t.Errorf("web-2 gaps %+v; want one naming cpu.busyPercent = NaN", bad.Gaps)
	}
	if out.Total != 6 || len(out.Servers) != 6 {
		t.Errorf("total %d, %d rows; want 6 and 6", out.Total, len(out.Servers))
	}
}
