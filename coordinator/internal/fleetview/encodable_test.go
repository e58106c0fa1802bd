package fleetview

import (
	"math"
	"testing"
)

func TestNotEncodable(t *testing.T) {
	type inner struct {
		X float64 `json:"x"`
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{ServerView{CPU: &CPUView{Load1: 0.5}}, ""},
		{ServerView{CPU: &CPUView{Load1: math.NaN()}}, "cpu.load1 = NaN"},
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
