package collect

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestFailedUnits(t *testing.T) {
	tests := []struct {
		name string
		in   []unitStatus
		want *gridcityv1.Units
	}{
		{name: "none", in: nil, want: &gridcityv1.Units{}},
		{
			name: "sorted, with the time of the failure",
			in: []unitStatus{
				{Name: "nginx.service", Description: "A high performance web server", ActiveState: "failed", SubState: "failed", StateChangeUsec: 1733140800123456, InactiveEnterUsec: 1733140800000000},
				{Name: "backup.service", Description: "Nightly backup", ActiveState: "failed", SubState: "failed", StateChangeUsec: 1733054400999999},
			},
			want: &gridcityv1.Units{Items: []*gridcityv1.Unit{
				{Name: "backup.service", Description: "Nightly backup", SinceUnix: 1733054400, ActiveState: "failed", SubState: "failed"},
				{Name: "nginx.service", Description: "A high performance web server", SinceUnix: 1733140800, ActiveState: "failed", SubState: "failed"},
			}},
		},
		{
			name: "old systemd: inactive-enter time stands in",
			in:   []unitStatus{{Name: "a.service", ActiveState: "failed", SubState: "failed", InactiveEnterUsec: 1700000000000000}},
			want: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "a.service", SinceUnix: 1700000000, ActiveState: "failed", SubState: "failed"}}},
		},
		{
			name: "ListUnits fallback: others dropped, duplicates once",
			in: []unitStatus{
				{Name: "ok.service", ActiveState: "active", SubState: "running"},
				{Name: "x.mount", ActiveState: "failed", SubState: "failed"},
				{Name: "x.mount", ActiveState: "failed", SubState: "failed"},
			},
			want: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "x.mount", ActiveState: "failed", SubState: "failed"}}},
		},
		{
			name: "hostile text cleaned",
			in:   []unitStatus{{Name: "evil\n.service", Description: "\x1b[2J", ActiveState: "failed"}},
			want: &gridcityv1.Units{Items: []*gridcityv1.Unit{{Name: "evil?.service", Description: "?[2J", ActiveState: "failed"}}},
		},
	}
	for _, tt := range tests {
		if got := failedUnits(tt.in); !proto.Equal(got, tt.want) {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, prototext.Format(got), prototext.Format(tt.want))
		}
	}
}

func TestFailedUnitsBound(t *testing.T) {
	var in []unitStatus
	for i := range maxFailedUnits + 10 {
		in = append(in, unitStatus{Name: fmt.Sprintf("u%04d.service", i), ActiveState: "failed"})
	}
	if got := failedUnits(in); len(got.Items) != maxFailedUnits {
		t.Errorf("got %d units; want %d", len(got.Items), maxFailedUnits)
	}
}

func FuzzFailedUnits(f *testing.F) {
	f.Add("nginx.service", "web server", "failed", "failed", uint64(1733140800123456), uint64(0))
	f.Add("evil\n", "\xff", "failed", "x", uint64(1<<64-1), uint64(1<<64-1))
	f.Fuzz(func(t *testing.T, name, desc, active, sub string, change, inactive uint64) {
		u := failedUnits([]unitStatus{{name, desc, active, sub, change, inactive}})
		for _, it := range u.Items {
			for _, s := range []string{it.Name, it.Description, it.ActiveState, it.SubState} {
				if len(s) > maxName || !fitText(s) {
					t.Fatalf("field %q too long or not clean", s)
				}
			}
			if it.SinceUnix < 0 {
				t.Fatalf("negative since %d", it.SinceUnix)
			}
		}
	})
}
