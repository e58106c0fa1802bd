package collect

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
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

func TestHostAddresses(t *testing.T) {
	cidr := func(s string) net.Addr {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		return n
	}
	in := []net.Addr{
		cidr("127.0.0.1/8"), cidr("::1/128"), // loopback
		cidr("10.0.4.20/24"), cidr("192.0.2.7/32"),
		cidr("fe80::1/64"), cidr("169.254.3.4/16"), // link-local
		cidr("2001:db8::20/64"),
		&net.IPAddr{IP: net.ParseIP("10.0.4.20")}, // the same address twice
		&net.IPAddr{IP: net.IPv4zero},
		&net.UnixAddr{Name: "/x", Net: "unix"},
	}
	got := hostAddresses(in)
	want := []string{"10.0.4.20", "192.0.2.7", "2001:db8::20"}
	if !slices.Equal(got, want) {
		t.Fatalf("hostAddresses = %v; want %v", got, want)
	}
	var many []net.Addr
	for i := range 300 {
		many = append(many, &net.IPAddr{IP: net.IPv4(10, 1, byte(i/250), byte(i%250+1))})
	}
	if n := len(hostAddresses(many)); n != maxAddresses {
		t.Fatalf("%d addresses kept; want the bound %d", n, maxAddresses)
	}
}

func TestHostCollectorReportsAddressesOrAGap(t *testing.T) {
	c := newHostCollector(DefaultConfig(), nil).(*hostCollector)
	c.addrs = func() ([]net.Addr, error) { return []net.Addr{&net.IPAddr{IP: net.ParseIP("10.9.8.7")}}, nil }
	var out gridcityv1.StateUpdate
	n := &notes{name: "host"}
	if err := c.update(context.Background(), &out, n); err != nil {
		t.Skipf("host facts unavailable here: %v", err)
	}
	if got := out.GetHost().GetAddresses(); !slices.Equal(got, []string{"10.9.8.7"}) || len(n.gaps) != 0 {
		t.Fatalf("addresses %v, gaps %v", got, n.gaps)
	}
	c.addrs = func() ([]net.Addr, error) { return nil, errors.New("netlink: permission denied") }
	out, n = gridcityv1.StateUpdate{}, &notes{name: "host"}
	if err := c.update(context.Background(), &out, n); err != nil {
		t.Fatal(err)
	}
	if out.GetHost().GetHostname() == "" || len(n.gaps) != 1 || n.gaps[0].GetCheck() != "host:addresses" || !strings.Contains(n.gaps[0].GetReason(), "permission denied") {
		t.Fatalf("a failed address listing: host %v, gaps %v; want the host section and one host:addresses gap", out.GetHost(), n.gaps)
	}
}
