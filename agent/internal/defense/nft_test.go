package defense

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseNft(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		skip    map[nftKey]bool
		want    string
		dropped int
		err     bool
	}{
		{
			// Every way ruleset.nft drops by source (a literal, an
			// anonymous set with counter and reject, named sets with
			// prefixes, a range and timeouts, a log before the drop, a jump
			// to a chain that drops), and what it must pass over (accept,
			// "!=", daddr), plus fail2ban's nftables action.
			name: "nftables and fail2ban's nftables action, real output",
			in:   string(mustRead(t, "testdata/nftables-host/nft.json")),
			want: `100.64.0.1/32 by nftables inet filter input
192.0.2.5/32 by nftables inet filter input
192.0.2.10/32 by fail2ban jail sshd
192.0.2.11/32 by fail2ban jail sshd
192.0.2.64/28 by nftables inet filter input
192.0.2.128/25 by nftables inet filter input
198.18.0.0/15 by nftables inet filter input
198.51.100.0/24 by nftables inet filter input
198.51.100.200/32 by fail2ban jail recidive
203.0.113.7/32 by nftables inet filter input
203.0.113.10/31 by nftables inet filter input
203.0.113.12/30 by nftables inet filter input
203.0.113.16/30 by nftables inet filter input
203.0.113.20/32 by nftables inet filter input
2001:db8::bad/128 by nftables inet filter input
2001:db8:1::/48 by nftables inet filter input
2001:db8:dead::1/128 by fail2ban jail sshd
`,
		},
		{
			// iptables-nft's rules as nftables shows them: REJECT is an xt
			// target, ipset matches are xt matches nftables cannot show.
			name: "iptables-nft tables, real output",
			in:   string(mustRead(t, "testdata/iptables-host/nft.json")),
			want: `100.64.0.1/32 by nftables ip filter INPUT
192.0.2.10/32 by fail2ban jail sshd
192.0.2.11/32 by fail2ban jail sshd
192.0.2.64/28 by nftables ip filter INPUT
203.0.113.7/32 by nftables ip filter INPUT
2001:db8::bad/128 by nftables ip6 filter INPUT
2001:db8:1::/48 by nftables ip6 filter INPUT
2001:db8:dead::1/128 by fail2ban jail sshd
`,
		},
		{
			name: "iptables-nft tables left to iptables-save",
			in:   string(mustRead(t, "testdata/iptables-host/nft.json")),
			skip: map[nftKey]bool{{"ip", "filter", ""}: true, {"ip6", "filter", ""}: true},
		},
		{
			name: "empty ruleset",
			in:   `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}]}`,
		},
		{
			// A chain that accepts something before it drops still drops
			// by its last rule; one whose last rule has a condition does
			// not drop everything.
			name: "jump targets",
			in: nftRuleset(
				`{"rule": {"family": "ip", "table": "t", "chain": "in", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "192.0.2.1"}}, {"goto": {"target": "drop-all"}}]}}`,
				`{"rule": {"family": "ip", "table": "t", "chain": "in", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "192.0.2.2"}}, {"jump": {"target": "drop-ssh"}}]}}`,
				`{"rule": {"family": "ip", "table": "t", "chain": "in", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "192.0.2.3"}}, {"jump": {"target": "missing"}}]}}`,
				`{"rule": {"family": "ip", "table": "t", "chain": "drop-all", "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "icmp"}}, {"accept": null}]}}`,
				`{"rule": {"family": "ip", "table": "t", "chain": "drop-all", "expr": [{"log": {"prefix": "x"}}, {"reject": null}]}}`,
				`{"rule": {"family": "ip", "table": "t", "chain": "drop-ssh", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 22}}, {"drop": null}]}}`,
			),
			want: "192.0.2.1/32 by nftables ip t in\n",
		},
		{
			// Sets defined after the rules that use them, sets of other
			// tables, concatenations, an "in" match, and an element of a
			// set whose value is a prefix wrapped with a timeout.
			name: "set references",
			in: nftRuleset(
				`{"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@late"}}, {"drop": null}]}}`,
				`{"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [{"match": {"op": "in", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@other"}}, {"drop": null}]}}`,
				`{"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"concat": [{"payload": {"protocol": "ip", "field": "saddr"}}, {"payload": {"protocol": "tcp", "field": "dport"}}]}, "right": "@pairs"}}, {"drop": null}]}}`,
				`{"set": {"family": "inet", "table": "t", "name": "late", "type": "ipv4_addr", "elem": [{"elem": {"val": {"prefix": {"addr": "198.51.100.0", "len": 24}}, "timeout": 600, "expires": 12, "comment": "crowdsec"}}, "bogus", 7]}}`,
				`{"set": {"family": "inet", "table": "u", "name": "other", "type": "ipv4_addr", "elem": ["192.0.2.9"]}}`,
				`{"set": {"family": "inet", "table": "t", "name": "pairs", "type": ["ipv4_addr", "inet_service"], "elem": [{"concat": ["192.0.2.8", 22]}]}}`,
			),
			want: "198.51.100.0/24 by nftables inet t c\n",
		},
		{
			name: "fail2ban sets of older versions and firewalld",
			in: nftRuleset(
				`{"set": {"family": "inet", "table": "firewalld", "name": "f2b-sshd6", "type": "ipv6_addr", "elem": ["2001:db8::7"]}}`,
				`{"set": {"family": "inet", "table": "f2b-table", "name": "f2b-postfix", "type": "ipv4_addr", "elem": ["192.0.2.7"]}}`,
				`{"rule": {"family": "inet", "table": "firewalld", "chain": "filter_IN_public_deny", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "saddr"}}, "right": "@f2b-sshd6"}}, {"reject": {"type": "icmpx", "expr": "admin-prohibited"}}]}}`,
				`{"rule": {"family": "inet", "table": "f2b-table", "chain": "f2b-chain", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@f2b-postfix"}}, {"reject": null}]}}`,
			),
			want: "192.0.2.7/32 by fail2ban jail postfix\n2001:db8::7/128 by fail2ban jail sshd\n",
		},
		{
			name: "cut short keeps what came before the cut",
			in: cut(nftRuleset(
				`{"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "192.0.2.1"}}, {"drop": null}]}}`,
				`{"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "192.0.2.2"}}, {"drop": null}]}}`,
			), 40),
			want: "192.0.2.1/32 by nftables ip t c\n",
			err:  true,
		},
		{
			name: "cut inside a set keeps its first elements",
			in: cut(nftRuleset(
				`{"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@s"}}, {"drop": null}]}}`,
				`{"set": {"family": "ip", "table": "t", "name": "s", "type": "ipv4_addr", "elem": ["192.0.2.1", "192.0.2.2", "192.0.2.3"]}}`,
			), 18),
			want: "192.0.2.1/32 by nftables ip t c\n192.0.2.2/32 by nftables ip t c\n",
			err:  true,
		},
		{name: "not JSON", in: "table inet filter {\n", err: true},
		{name: "empty", in: "", err: true},
		{name: "wrong shape", in: `{"nftables": {"rule": 1}}`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks, dropped, err := parseNft([]byte(tt.in), tt.skip)
			blocks, _ = normalize(blocks, MaxBlocks)
			if got := blockText(blocks); got != tt.want || dropped != tt.dropped || (err != nil) != tt.err {
				t.Errorf("got\n%s(%d dropped, error %v); want\n%s(%d dropped, error %v)", got, dropped, err, tt.want, tt.dropped, tt.err)
			}
		})
	}
}

// cut drops the last n bytes of s, as a bound on output would.
func cut(s string, n int) string { return s[:len(s)-n] }

// nftRuleset wraps items in nft's top-level object.
func nftRuleset(items ...string) string {
	return `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}, ` + strings.Join(items, ", ") + `]}`
}

// TestParseNftBounds feeds a set larger than anything reported, of the
// shape CrowdSec's bouncer fills: elements with timeouts.
func TestParseNftBounds(t *testing.T) {
	var elems []string
	for i := range maxSetElems + 100 {
		elems = append(elems, fmt.Sprintf(`{"elem": {"val": "10.%d.%d.%d", "timeout": 86400, "expires": 100}}`, i>>16, i>>8&255, i&255))
	}
	in := nftRuleset(
		`{"set": {"family": "ip", "table": "crowdsec", "name": "crowdsec-blacklists", "type": "ipv4_addr", "flags": ["timeout"], "elem": [`+strings.Join(elems, ", ")+`]}}`,
		`{"rule": {"family": "ip", "table": "crowdsec", "chain": "crowdsec-chain", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@crowdsec-blacklists"}}, {"drop": null}]}}`,
	)
	blocks, dropped, err := parseNft([]byte(in), nil)
	if err != nil || len(blocks) != maxSetElems || dropped != 100 {
		t.Errorf("got %d blocks, %d dropped, error %v; want %d, 100, none", len(blocks), dropped, err, maxSetElems)
	}
}

func FuzzParseNft(f *testing.F) {
	f.Add(mustRead(f, "testdata/nftables-host/nft.json"))
	f.Add(mustRead(f, "testdata/iptables-host/nft.json"))
	f.Add([]byte(nftRuleset(`{"set": {"family": "ip", "table": "t", "name": "s", "elem": [{"range": ["0.0.0.1", "255.255.255.254"]}, {"elem": {"val": {"elem": {"val": "1.2.3.4"}}}}]}}`,
		`{"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "@s"}}, {"jump": {"target": "d"}}]}}`,
		`{"rule": {"family": "ip", "table": "t", "chain": "d", "expr": [{"drop": null}]}}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		blocks, _, _ := parseNft(data, nil)
		checkBlocks(t, blocks)
	})
}

// checkBlocks checks what every parser promises of its blocks.
func checkBlocks(t *testing.T, blocks []Block) {
	t.Helper()
	if len(blocks) > maxCandidates {
		t.Fatalf("%d blocks; at most %d", len(blocks), maxCandidates)
	}
	for _, b := range blocks {
		if !b.Network.IsValid() || b.Network.Masked() != b.Network || b.Network.Addr().Zone() != "" {
			t.Fatalf("bad network %v", b.Network)
		}
		if b.By == "" || len(b.By) > 3*maxName+32 || strings.ContainsFunc(b.By, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("bad by %q", b.By)
		}
	}
}
