package collect

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestHostSection(t *testing.T) {
	now := time.Unix(1733140800+3600, 0)
	tests := []struct {
		name         string
		in           *gridcityv1.HostInfo
		boot         uint64
		system, role string
		want         *gridcityv1.HostInfo
	}{
		{
			name: "kvm guest", in: &gridcityv1.HostInfo{Hostname: "db1", Os: "ubuntu"}, boot: 1733140800, system: "kvm", role: "guest",
			want: &gridcityv1.HostInfo{Hostname: "db1", Os: "ubuntu", BootUnix: 1733140800, UptimeSeconds: 3600, Virtualization: "kvm"},
		},
		{
			name: "hypervisor", in: &gridcityv1.HostInfo{}, boot: 1733140800, system: "kvm", role: "host",
			want: &gridcityv1.HostInfo{BootUnix: 1733140800, UptimeSeconds: 3600, Virtualization: "kvm host"},
		},
		{
			name: "boot in the future gives no uptime", in: &gridcityv1.HostInfo{}, boot: 1733140800 + 7200,
			want: &gridcityv1.HostInfo{BootUnix: 1733140800 + 7200},
		},
		{
			name: "hostile os-release cleaned", in: &gridcityv1.HostInfo{Os: "deb\x1bian", OsVersion: "12\xff"}, boot: 0,
			want: &gridcityv1.HostInfo{Os: "deb?ian", OsVersion: "12\uFFFD"},
		},
	}
	for _, tt := range tests {
		if got := hostSection(tt.in, tt.boot, now, tt.system, tt.role); !proto.Equal(got, tt.want) {
			t.Errorf("%s: got %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseBtime(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{mustRead(t, "testdata/proc/stat"), 1733140800, false},
		{"cpu 1 2 3 4\nbtime x\n", 0, true},
		{"cpu 1 2 3 4\n", 0, true},
	}
	for _, tt := range tests {
		got, err := parseBtime(linesOf([]byte(tt.in), maxStatLines))
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("parseBtime(%.20q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseBtime(f *testing.F) {
	f.Add([]byte("cpu 1 2 3 4\nbtime 1733140800\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		boot, err := parseBtime(linesOf(data, maxStatLines))
		if err != nil {
			return
		}
		h := hostSection(&gridcityv1.HostInfo{}, boot, time.Now(), "", "")
		if h.BootUnix < 0 {
			t.Fatalf("negative boot time %d from %d", h.BootUnix, boot)
		}
	})
}
