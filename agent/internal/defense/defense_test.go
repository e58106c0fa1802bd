package defense

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// blockText renders blocks one a line as "NETWORK by BY", for comparing
// with a want written out in the test.
func blockText(blocks []Block) string {
	var b strings.Builder
	for _, x := range blocks {
		fmt.Fprintf(&b, "%s by %s\n", x.Network, x.By)
	}
	return b.String()
}

func TestParseNetwork(t *testing.T) {
	tests := []struct {
		in, want string // want "" means refused
	}{
		{"203.0.113.7", "203.0.113.7/32"},
		{"198.51.100.0/24", "198.51.100.0/24"},
		{"198.51.100.77/24", "198.51.100.0/24"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"2001:DB8:1::/48", "2001:db8:1::/48"},
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.1/128"},
		{"fe80::1%eth0", ""},
		{"192.0.2.1/33", ""},
		{"192.0.2.0/255.255.255.0", ""},
		{"host.example", ""},
		{"", ""},
		{"@blocklist", ""},
	}
	for _, tt := range tests {
		p, ok := parseNetwork(tt.in)
		got := ""
		if ok {
			got = p.String()
		}
		if got != tt.want {
			t.Errorf("parseNetwork(%q): got %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestRangePrefixes(t *testing.T) {
	tests := []struct {
		first, last string
		max         int
		want        string // "" means refused
	}{
		{"203.0.113.10", "203.0.113.20", 16, "203.0.113.10/31 203.0.113.12/30 203.0.113.16/30 203.0.113.20/32"},
		{"192.0.2.0", "192.0.2.255", 16, "192.0.2.0/24"},
		{"192.0.2.7", "192.0.2.7", 16, "192.0.2.7/32"},
		{"0.0.0.0", "255.255.255.255", 16, "0.0.0.0/0"},
		{"0.0.0.1", "255.255.255.255", 64, "0.0.0.1/32 0.0.0.2/31 0.0.0.4/30 0.0.0.8/29 0.0.0.16/28 0.0.0.32/27 0.0.0.64/26 0.0.0.128/25 0.0.1.0/24 0.0.2.0/23 0.0.4.0/22 0.0.8.0/21 0.0.16.0/20 0.0.32.0/19 0.0.64.0/18 0.0.128.0/17 0.1.0.0/16 0.2.0.0/15 0.4.0.0/14 0.8.0.0/13 0.16.0.0/12 0.32.0.0/11 0.64.0.0/10 0.128.0.0/9 1.0.0.0/8 2.0.0.0/7 4.0.0.0/6 8.0.0.0/5 16.0.0.0/4 32.0.0.0/3 64.0.0.0/2 128.0.0.0/1"},
		{"2001:db8::", "2001:db8::ffff", 16, "2001:db8::/112"},
		{"::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 16, "::/0"},
		{"2001:db8::1", "2001:db8::2", 16, "2001:db8::1/128 2001:db8::2/128"},
		{"203.0.113.10", "203.0.113.20", 3, ""},
		{"203.0.113.20", "203.0.113.10", 16, ""},
		{"203.0.113.10", "2001:db8::1", 16, ""},
	}
	for _, tt := range tests {
		ps, ok := rangePrefixes(netip.MustParseAddr(tt.first), netip.MustParseAddr(tt.last), tt.max)
		var got []string
		for _, p := range ps {
			got = append(got, p.String())
		}
		if !ok && got != nil {
			t.Errorf("%s-%s: refused but returned %v", tt.first, tt.last, got)
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("%s-%s: got %q; want %q", tt.first, tt.last, g, tt.want)
		}
	}
}

func FuzzRangePrefixes(f *testing.F) {
	f.Add([]byte{203, 0, 113, 10}, []byte{203, 0, 113, 20})
	f.Add(make([]byte, 16), []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		first, ok1 := netip.AddrFromSlice(a)
		last, ok2 := netip.AddrFromSlice(b)
		if !ok1 || !ok2 {
			return
		}
		ps, ok := rangePrefixes(first, last, 300)
		if !ok {
			return
		}
		// The prefixes tile the range exactly, in order.
		next := first
		for i, p := range ps {
			if p.Addr() != next || p.Masked() != p {
				t.Fatalf("%s-%s: prefix %d is %s; want one starting at %s", first, last, i, p, next)
			}
			next = lastAddr(p).Next()
		}
		if end := lastAddr(ps[len(ps)-1]); end != last {
			t.Fatalf("%s-%s: prefixes end at %s", first, last, end)
		}
	})
}

func TestNormalize(t *testing.T) {
	in := []Block{
		{netip.MustParsePrefix("2001:db8::1/128"), "nftables inet filter input"},
		{netip.MustParsePrefix("203.0.113.7/32"), "iptables INPUT"},
		{netip.MustParsePrefix("192.0.2.10/32"), "fail2ban jail sshd"},
		{netip.MustParsePrefix("203.0.113.7/32"), "iptables INPUT"},
		{netip.MustParsePrefix("203.0.113.0/24"), "iptables INPUT"},
		{netip.MustParsePrefix("203.0.113.7/32"), "fail2ban jail sshd"},
	}
	got, left := normalize(in, 4)
	want := "192.0.2.10/32 by fail2ban jail sshd\n203.0.113.0/24 by iptables INPUT\n203.0.113.7/32 by fail2ban jail sshd\n203.0.113.7/32 by iptables INPUT\n"
	if blockText(got) != want || left != 1 {
		t.Errorf("got\n%s(%d left out); want\n%s(1 left out)", blockText(got), left, want)
	}
}

func TestFail2banJail(t *testing.T) {
	tests := []struct {
		name string
		ipv6 bool
		want string
	}{
		{"f2b-sshd", false, "sshd"},
		{"f2b-sshd6", true, "sshd"},
		{"f2b-sshd6", false, "sshd6"},
		{"f2b-ssh6", false, "ssh6"},
		{"fail2ban-ssh", false, "ssh"},
		{"f2b-chain", false, ""},
		{"f2b-", false, ""},
		{"INPUT", false, ""},
	}
	for _, tt := range tests {
		got, _ := fail2banJail(tt.name, tt.ipv6)
		if got != tt.want {
			t.Errorf("fail2banJail(%q, %v): got %q; want %q", tt.name, tt.ipv6, got, tt.want)
		}
	}
}

func TestCleanName(t *testing.T) {
	if got := cleanName("in put\x01\xff"); got != "in?put?\uFFFD" {
		t.Errorf("got %q", got)
	}
	if got := cleanName(strings.Repeat("é", 100)); len(got) > maxName || !strings.HasPrefix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("long name: got %q", got)
	}
}
