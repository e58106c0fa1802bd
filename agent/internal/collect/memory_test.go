package collect

import (
	"testing"

	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestMemory(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *gridcityv1.Memory
		wantErr bool
	}{
		{
			name: "fixture",
			in:   mustRead(t, "testdata/proc/meminfo"),
			want: &gridcityv1.Memory{
				TotalBytes:     8130196 * 1024,
				UsedBytes:      (8130196 - 5324888) * 1024,
				AvailableBytes: 5324888 * 1024,
				UsedPercent:    34.5,
				SwapTotalBytes: 2097148 * 1024,
				SwapUsedBytes:  (2097148 - 1572860) * 1024,
			},
		},
		{
			name: "kernel without MemAvailable",
			in:   "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 100 kB\nCached: 200 kB\nSReclaimable: 100 kB\n",
			want: &gridcityv1.Memory{TotalBytes: 1024000, UsedBytes: 512000, AvailableBytes: 512000, UsedPercent: 50},
		},
		{
			name: "available above total is clamped",
			in:   "MemTotal: 1000 kB\nMemAvailable: 5000 kB\nSwapTotal: 10 kB\nSwapFree: 20 kB\n",
			want: &gridcityv1.Memory{TotalBytes: 1024000, AvailableBytes: 1024000, SwapTotalBytes: 10240},
		},
		{name: "no MemTotal", in: "MemFree: 100 kB\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := parseMeminfo(linesOf([]byte(tt.in), maxMeminfoLines))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := memorySection(m); !proto.Equal(got, tt.want) {
				t.Errorf("got %v; want %v", got, tt.want)
			}
		})
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte("MemTotal: 1000 kB\nMemAvailable: 400 kB\nSwapTotal: 10 kB\nSwapFree: 5 kB\n"))
	f.Add([]byte("MemTotal: 18446744073709551615 kB\nMemFree: 1 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMeminfo(linesOf(data, maxMeminfoLines))
		if err != nil {
			return
		}
		s := memorySection(m)
		if s.UsedBytes > s.TotalBytes || s.AvailableBytes > s.TotalBytes || s.SwapUsedBytes > s.SwapTotalBytes ||
			s.UsedPercent < 0 || s.UsedPercent > 100 {
			t.Fatalf("inconsistent memory section %v", s)
		}
	})
}
