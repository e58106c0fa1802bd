// Package defense reads what protects a host's SSH: sshd's effective
// authentication settings from sshd_config and its drop-ins, and the source
// networks its firewall drops or rejects, from nftables, iptables and
// ip6tables (with ipset) and fail2ban.
//
// The parsers are pure functions over the text the tools print, tested on
// real output; ReadFirewall runs the tools through a Runner that the caller
// provides, so that only agent/internal/hostquery starts processes and tests
// can replay captured output. Everything read is treated as hostile: every
// parser is bounded in input, items and string length, and a network leaves
// the package only after net/netip has parsed it.
package defense

import (
	"cmp"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxBlocks is the most blocks a Firewall section carries (the proto's
// bound).
const MaxBlocks = 4096

// maxCandidates bounds the blocks a parser gathers before they are
// de-duplicated and cut to MaxBlocks: enough for a few tools listing the
// same bans, small enough that sorting them costs nothing.
const maxCandidates = 4 * MaxBlocks

// maxName bounds a name taken from a tool's output (table, chain, set,
// jail) before it goes into a Block's by.
const maxName = 96

// Block is one source network that a firewall drops or rejects, and what
// does it.
type Block struct {
	Network netip.Prefix
	By      string
}

func (b Block) compare(o Block) int {
	if c := b.Network.Addr().Compare(o.Network.Addr()); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Network.Bits(), o.Network.Bits()); c != 0 {
		return c
	}
	return strings.Compare(b.By, o.By)
}

// normalize sorts blocks (IPv4 before IPv6, then by address, prefix length
// and by), drops duplicates and keeps at most max. It returns how many
// distinct blocks were left out.
func normalize(blocks []Block, max int) ([]Block, int) {
	// sort.Slice, not slices.SortFunc: a SortFunc over a struct type
	// compiles a sorter of its own, about 10 KiB of the binary; the order is
	// total, so the result is the same.
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].compare(blocks[j]) < 0 })
	blocks = slices.CompactFunc(blocks, func(a, b Block) bool { return a == b })
	if len(blocks) <= max {
		return blocks, 0
	}
	return blocks[:max], len(blocks) - max
}

// blockList gathers blocks up to maxCandidates and counts what it had to
// leave out.
type blockList struct {
	blocks  []Block
	dropped int
}

func (l *blockList) add(p netip.Prefix, by string) {
	if len(l.blocks) >= maxCandidates {
		l.dropped++
		return
	}
	l.blocks = append(l.blocks, Block{Network: p, By: by})
}

// parseNetwork parses an address ("192.0.2.7", a /32 or /128) or a CIDR
// ("198.51.100.0/24") into its canonical, masked prefix. Zoned addresses
// are refused: a firewall block has no zone.
func parseNetwork(s string) (netip.Prefix, bool) {
	if len(s) > 64 {
		return netip.Prefix{}, false
	}
	if strings.IndexByte(s, '/') >= 0 {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, false
		}
		return p.Masked(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// rangePrefixes returns the fewest prefixes that cover the addresses from
// first to last (inclusive), at most max of them; ok is false for a bad
// range (mixed families, first after last) or one that needs more.
func rangePrefixes(first, last netip.Addr, max int) ([]netip.Prefix, bool) {
	if !first.IsValid() || !last.IsValid() || first.Is4() != last.Is4() || first.Zone() != "" || last.Zone() != "" || last.Less(first) {
		return nil, false
	}
	var out []netip.Prefix
	for {
		if len(out) >= max {
			return nil, false
		}
		// The widest prefix that starts at first and ends at or before
		// last.
		bits := first.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(first, bits-1)
			if p.Masked().Addr() != first || lastAddr(p).Compare(last) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(first, bits)
		out = append(out, p)
		end := lastAddr(p)
		if end.Compare(last) >= 0 {
			return out, true
		}
		first = end.Next()
	}
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.As16()
	start := 0
	if a.Is4() {
		start = 12
	}
	host := a.BitLen() - p.Bits()
	for i := 15; i >= start && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	out := netip.AddrFrom16(b)
	if a.Is4() {
		out = out.Unmap()
	}
	return out
}

// cleanName makes a name from a tool's output fit for a Block's by: valid
// UTF-8, no control characters or spaces (which would blur the words of
// by), at most maxName bytes.
func cleanName(s string) string {
	if len(s) > 4*maxName {
		s = s[:4*maxName]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r <= 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) <= maxName {
		return s
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// fail2banJail returns the jail a fail2ban-made name belongs to: chains
// "f2b-JAIL" (iptables actions since 0.9) and "fail2ban-JAIL" (0.8), the
// same in ip6tables; sets and ipsets "f2b-JAIL" (ipset and firewalld
// actions, nftables before 0.11), with "6" appended for IPv6 ones (ipv6).
func fail2banJail(name string, ipv6 bool) (string, bool) {
	var jail string
	switch {
	case strings.HasPrefix(name, "f2b-"):
		jail = name[len("f2b-"):]
	case strings.HasPrefix(name, "fail2ban-"):
		jail = name[len("fail2ban-"):]
	default:
		return "", false
	}
	if ipv6 && len(jail) > 1 && strings.HasSuffix(jail, "6") {
		jail = jail[:len(jail)-1]
	}
	// f2b-chain and f2b-table are the nftables action's own names.
	if jail == "" || jail == "chain" || jail == "table" {
		return "", false
	}
	return jail, true
}

func byJail(jail string) string { return "fail2ban jail " + cleanName(jail) }
