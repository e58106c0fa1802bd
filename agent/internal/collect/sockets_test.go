package collect

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func TestParseSockAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"0100007F:0277", "127.0.0.1:631"},
		{"00000000:0016", "0.0.0.0:22"},
		{"0500000A:AD18", "10.0.0.5:44312"},
		{"00000000000000000000000000000000:0050", "[::]:80"},
		{"00000000000000000000000001000000:0143", "[::1]:323"},
		{"B80D0120000000000000000005000000:A028", "[2001:db8::5]:41000"},
		{"0000000000000000FFFF00000500000A:80E8", "[::ffff:10.0.0.5]:33000"},
		{"0100007F:277", ""},
		{"0100007:0277", ""},
		{"0100007G:0277", ""},
		{"0100007F", ""},
	}
	for _, tt := range tests {
		got, ok := parseSockAddr([]byte(tt.in), binary.LittleEndian)
		if s := got.String(); (ok && s != tt.want) || (!ok && tt.want != "") {
			t.Errorf("parseSockAddr(%q) = %v, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}

func TestParseSockets(t *testing.T) {
	in := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   114        0 26456 1 0000000000000000 100 0 0 10 0
   1: 0500000A:AD18 0700000A:1538 01 00000000:00000000 02:000A3F2C 00000000  1000        0 31337 2 0000000000000000 20 4 30 10 -1
   2: garbage
   3: 0500000A:AD18 0700000A:1538 XX 00000000:00000000 02:000A3F2C 00000000  1000        0 31337 2 0000000000000000 20 4 30 10 -1
`
	var got []string
	parseSockets(linesOf([]byte(in), maxSocketLines), binary.LittleEndian, func(s socket) {
		got = append(got, fmt.Sprintf("%v %v %02X %d", s.local, s.remote, s.state, s.inode))
	})
	want := []string{
		"127.0.0.1:3306 0.0.0.0:0 0A 26456",
		"10.0.0.5:44312 10.0.0.7:5432 01 31337",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// tallyFixture reads the fixture socket tables into a tally.
func tallyFixture(t testing.TB) *sockTally {
	t.Helper()
	var tally sockTally
	tally.reset()
	for _, tb := range []struct {
		proto string
		udp   bool
	}{{"tcp", false}, {"tcp6", false}, {"udp", true}, {"udp6", true}} {
		data := mustRead(t, "testdata/proc/net/"+tb.proto)
		parseSockets(linesOf([]byte(data), maxSocketLines), binary.LittleEndian, func(s socket) { tally.add(tb.proto, tb.udp, s) })
	}
	return &tally
}

func TestSockTally(t *testing.T) {
	tally := tallyFixture(t)
	owners := map[uint64]owner{20001: {812, "sshd"}, 20004: {1001, "nginx"}}

	gotL := tally.listeners(owners)
	wantL := &gridcityv1.Listeners{Items: []*gridcityv1.Listener{
		{Proto: "tcp", Address: "0.0.0.0", Port: 22, Process: "sshd", Pid: 812},
		{Proto: "tcp6", Address: "::", Port: 22},
		{Proto: "udp", Address: "127.0.0.53", Port: 53},
		{Proto: "udp", Address: "0.0.0.0", Port: 68},
		{Proto: "tcp6", Address: "::", Port: 80, Process: "nginx", Pid: 1001},
		{Proto: "udp6", Address: "::1", Port: 323},
		{Proto: "tcp", Address: "0.0.0.0", Port: 2049},
		{Proto: "tcp", Address: "127.0.0.1", Port: 5432},
	}}
	if !proto.Equal(gotL, wantL) {
		t.Errorf("listeners: got\n%s\nwant\n%s", prototext.Format(gotL), prototext.Format(wantL))
	}

	// Outbound only: the inbound ssh and http clients, loopback, the
	// TIME_WAIT socket and connected UDP are not connections; the
	// IPv4-mapped postgres connection joins the two IPv4 ones.
	gotC := tally.connections()
	wantC := &gridcityv1.Connections{Items: []*gridcityv1.Connection{
		{RemoteAddress: "10.0.0.7", RemotePort: 5432, Count: 3},
		{RemoteAddress: "93.184.216.34", RemotePort: 443, Count: 1},
		{RemoteAddress: "2001:db8::9", RemotePort: 443, Count: 1},
	}}
	if !proto.Equal(gotC, wantC) {
		t.Errorf("connections: got\n%s\nwant\n%s", prototext.Format(gotC), prototext.Format(wantC))
	}
}

func TestConnectionsBound(t *testing.T) {
	var tally sockTally
	tally.reset()
	// The last maxConnGroups endpoints have two connections each, the
	// first hundred one.
	for i := range maxConnGroups + 100 {
		remote := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 443)
		for range 1 + min(1, i/100) {
			tally.add("tcp", false, socket{local: netip.MustParseAddrPort("10.0.0.5:40000"), remote: remote, state: tcpEstablished})
		}
	}
	c := tally.connections()
	if len(c.Items) != maxConnGroups {
		t.Fatalf("got %d groups; want %d", len(c.Items), maxConnGroups)
	}
	for _, g := range c.Items {
		if g.Count != 2 {
			t.Fatalf("got group %v; want only the groups of two kept", g)
		}
	}
}

func FuzzParseSockets(f *testing.F) {
	f.Add([]byte(`   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   114        0 26456 1 0 100 0 0 10 0`), false)
	f.Add([]byte(`   0: 0000000000000000FFFF00000500000A:80E8 0000000000000000FFFF00000700000A:1538 01 0:0 0:0 0 0 0 30005 1`), false)
	f.Add([]byte(`  0: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 12345 2 0 0`), true)
	f.Fuzz(func(t *testing.T, data []byte, udp bool) {
		var tally sockTally
		tally.reset()
		parseSockets(linesOf(data, maxSocketLines), binary.LittleEndian, func(s socket) { tally.add("tcp", udp, s) })
		l := tally.listeners(nil)
		c := tally.connections()
		if len(l.Items) > maxListeners || len(c.Items) > maxConnGroups {
			t.Fatalf("got %d listeners, %d groups: over the bounds", len(l.Items), len(c.Items))
		}
		for _, g := range c.Items {
			if a := netip.MustParseAddr(g.RemoteAddress); a.IsLoopback() || a.Is4In6() {
				t.Fatalf("group %v: loopback or not unmapped", g)
			}
		}
	})
}

func TestParseSocketLink(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"socket:[20001]", 20001, true},
		{"pipe:[20001]", 0, false},
		{"/dev/null", 0, false},
		{"socket:[]", 0, false},
		{"socket:[12", 0, false},
	}
	for _, tt := range tests {
		if got, ok := parseSocketLink([]byte(tt.in)); got != tt.want || ok != tt.ok {
			t.Errorf("parseSocketLink(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseSockstat(t *testing.T) {
	in := `sockets: used 180
TCP: inuse 5 orphan 0 tw 31 alloc 8 mem 1
UDP: inuse 2 mem 0
UDPLITE: inuse 0
RAW: inuse 0
FRAG: inuse 0 memory 0
TCP6: inuse 0
UDP6: inuse 3
UDPLITE6: inuse 0
`
	got := map[string]uint64{}
	parseSockstat(linesOf([]byte(in), maxMeminfoLines), got)
	want := map[string]uint64{"tcp": 5, "udp": 2, "tcp6": 0, "udp6": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v; want %v", got, want)
	}
}

func FuzzParseSockstat(f *testing.F) {
	f.Add([]byte("TCP: inuse 5 orphan 0 tw 31 alloc 8 mem 1\nTCP6: inuse 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got := map[string]uint64{}
		parseSockstat(linesOf(data, maxMeminfoLines), got)
		for k := range got {
			if k != "tcp" && k != "udp" && k != "tcp6" && k != "udp6" {
				t.Fatalf("unexpected table %q", k)
			}
		}
	})
}
