package collect

import (
	"bytes"
	"encoding/binary"
	"iter"
	"net/netip"
	"sort"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// The sockets collector fills two sections, listeners and connections,
// from one read of /proc/net/{tcp,tcp6,udp,udp6}: telling outbound
// connections from inbound ones needs the listening ports.
func init() { register("sockets", TierMedium, newSocketsCollector) }

// Bounds on the socket tables. A busy proxy holds hundreds of thousands of
// connections; past maxSocketLines a file is cut and the gap says so.
const (
	maxSocketLines  = 1 << 20
	maxListeners    = 1024
	maxConnGroups   = 256
	tcpEstablished  = 0x01
	tcpListen       = 0x0A
	udpUnconnected  = 0x07 // TCP_CLOSE, what an unconnected UDP socket shows
	maxEstablishedN = maxSocketLines
)

// socket is one line of a /proc/net socket table.
type socket struct {
	local, remote netip.AddrPort
	state         uint8
	inode         uint64
}

// parseSockets calls fn for each well-formed line of a /proc/net/tcp-style
// table: "sl local_address rem_address st ... uid timeout inode ...", with
// addresses as hex "0100007F:0277". Each 32-bit word of an address is
// printed in the kernel's byte order, so the parser takes it (the host's,
// binary.NativeEndian; tests pass the order their fixtures were made in).
// Other lines, the header among them, are passed over.
func parseSockets(lines iter.Seq[[]byte], order binary.ByteOrder, fn func(socket)) {
	var buf [11][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) < 10 {
			continue
		}
		local, ok1 := parseSockAddr(f[1], order)
		remote, ok2 := parseSockAddr(f[2], order)
		state, ok3 := parseHex(f[3])
		inode, ok4 := parseUint(f[9])
		if !ok1 || !ok2 || !ok3 || !ok4 || state > 0xff {
			continue
		}
		fn(socket{local: local, remote: remote, state: uint8(state), inode: inode})
	}
}

// parseSockAddr parses "0100007F:0277" (IPv4) or 32 hex digits and a port
// (IPv6).
func parseSockAddr(b []byte, order binary.ByteOrder) (netip.AddrPort, bool) {
	hexAddr, hexPort, ok := bytes.Cut(b, []byte(":"))
	if !ok || len(hexPort) != 4 {
		return netip.AddrPort{}, false
	}
	port, ok := parseHex(hexPort)
	if !ok {
		return netip.AddrPort{}, false
	}
	var a [16]byte
	switch len(hexAddr) {
	case 8:
		w, ok := parseHex(hexAddr)
		if !ok {
			return netip.AddrPort{}, false
		}
		order.PutUint32(a[:4], uint32(w))
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), uint16(port)), true
	case 32:
		for i := 0; i < 4; i++ {
			w, ok := parseHex(hexAddr[i*8 : i*8+8])
			if !ok {
				return netip.AddrPort{}, false
			}
			order.PutUint32(a[i*4:], uint32(w))
		}
		return netip.AddrPortFrom(netip.AddrFrom16(a), uint16(port)), true
	}
	return netip.AddrPort{}, false
}

// listenKey identifies a listener; sockets that share one (SO_REUSEPORT,
// pre-forked workers) are one listener.
type listenKey struct {
	proto string
	addr  netip.Addr
	port  uint16
}

// outbound is an established TCP socket seen from our side.
type outbound struct {
	remote    netip.AddrPort
	localPort uint16
}

// owner is the process holding a socket; the zero owner means it was
// looked for and not found.
type owner struct {
	pid  int32
	comm string
}

// sockTally accumulates the socket tables of one sample. It is reused
// from sample to sample so that its maps and slices keep their capacity.
type sockTally struct {
	listen   map[listenKey]uint64 // → inode of the first socket seen
	tcpPorts [65536 / 64]uint64   // bitset of TCP listening ports
	out      []outbound
	groups   map[netip.AddrPort]uint32
}

func (t *sockTally) reset() {
	if t.listen == nil {
		t.listen = map[listenKey]uint64{}
		t.groups = map[netip.AddrPort]uint32{}
	}
	clear(t.listen)
	clear(t.groups)
	t.tcpPorts = [len(t.tcpPorts)]uint64{}
	t.out = t.out[:0]
}

// add takes one socket of the table proto (tcp, tcp6, udp, udp6).
func (t *sockTally) add(proto string, udp bool, s socket) {
	port := s.local.Port()
	switch {
	case !udp && s.state == tcpListen,
		udp && s.state == udpUnconnected && port != 0 && s.remote.Port() == 0 && s.remote.Addr().IsUnspecified():
		k := listenKey{proto: proto, addr: s.local.Addr(), port: port}
		if _, seen := t.listen[k]; !seen && len(t.listen) >= maxListeners {
			return
		}
		if t.listen[k] == 0 {
			t.listen[k] = s.inode
		}
		if !udp {
			t.tcpPorts[port/64] |= 1 << (port % 64)
		}
	case !udp && s.state == tcpEstablished && len(t.out) < maxEstablishedN:
		t.out = append(t.out, outbound{remote: s.remote, localPort: port})
	}
}

// listenerInodes calls fn with the inode of every listener.
func (t *sockTally) listenerInodes(fn func(uint64)) {
	for _, inode := range t.listen {
		if inode != 0 {
			fn(inode)
		}
	}
}

// listeners builds the section, naming each socket's process through
// owners.
func (t *sockTally) listeners(owners map[uint64]owner) *gridcityv1.Listeners {
	l := &gridcityv1.Listeners{Items: make([]*gridcityv1.Listener, 0, len(t.listen))}
	for k, inode := range t.listen {
		o := owners[inode]
		l.Items = append(l.Items, &gridcityv1.Listener{
			Proto:   k.proto,
			Address: k.addr.String(),
			Port:    uint32(k.port),
			Process: o.comm,
			Pid:     o.pid,
		})
	}
	sort.Slice(l.Items, func(i, j int) bool {
		a, b := l.Items[i], l.Items[j]
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.Address < b.Address
	})
	return l
}

// connections groups the established sockets that we opened (their local
// port is not one we listen on) to other hosts by remote endpoint, largest
// groups first, at most maxConnGroups of them.
func (t *sockTally) connections() *gridcityv1.Connections {
	for _, o := range t.out {
		if t.tcpPorts[o.localPort/64]&(1<<(o.localPort%64)) != 0 {
			continue // inbound: a client of one of our listeners
		}
		addr := o.remote.Addr().Unmap()
		if addr.IsLoopback() || addr.IsUnspecified() {
			continue
		}
		t.groups[netip.AddrPortFrom(addr, o.remote.Port())]++
	}
	type group struct {
		ap netip.AddrPort
		n  uint32
	}
	all := make([]group, 0, len(t.groups))
	for ap, n := range t.groups {
		all = append(all, group{ap, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].ap.Compare(all[j].ap) < 0
	})
	all = all[:min(len(all), maxConnGroups)]
	c := &gridcityv1.Connections{Items: make([]*gridcityv1.Connection, len(all))}
	for i, g := range all {
		c.Items[i] = &gridcityv1.Connection{
			RemoteAddress: g.ap.Addr().String(),
			RemotePort:    uint32(g.ap.Port()),
			Count:         g.n,
		}
	}
	return c
}

// parseSockstat reads /proc/net/sockstat{,6} ("TCP: inuse 5 orphan 0 tw
// 31 alloc 8 mem 1", "TCP6: inuse 0") into sockets in use by table name
// (tcp, udp, tcp6, udp6). Generating a table walks the kernel's whole
// connection hash, which costs milliseconds on a large host even when the
// table is empty; these counts say for free when it is.
func parseSockstat(lines iter.Seq[[]byte], into map[string]uint64) {
	var buf [4][]byte
	for line := range lines {
		f := fields(line, buf[:0])
		if len(f) < 3 || string(f[1]) != "inuse" {
			continue
		}
		var table string
		switch string(f[0]) {
		case "TCP:":
			table = "tcp"
		case "UDP:":
			table = "udp"
		case "TCP6:":
			table = "tcp6"
		case "UDP6:":
			table = "udp6"
		default:
			continue
		}
		if n, ok := parseUint(f[2]); ok {
			into[table] = n
		}
	}
}

// parseSocketLink returns N from a /proc/[pid]/fd link "socket:[N]".
func parseSocketLink(link []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(link, []byte("socket:["))
	if !ok {
		return 0, false
	}
	num, ok := bytes.CutSuffix(rest, []byte("]"))
	if !ok {
		return 0, false
	}
	return parseUint(num)
}
