package defense

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// nftables' JSON (libnftables-json(5)), as `nft -j list ruleset` prints it:
//
//	{"nftables": [
//	  {"metainfo": {...}},
//	  {"table": {"family": "inet", "name": "f2b-table", ...}},
//	  {"set": {"family": "inet", "table": "f2b-table", "name": "addr-set-sshd",
//	           "type": "ipv4_addr", "elem": ["192.0.2.10", ...]}},
//	  {"chain": {...}},
//	  {"rule": {"family": "inet", "table": "f2b-table", "chain": "f2b-chain",
//	            "expr": [{"match": {"op": "==",
//	                                "left": {"payload": {"protocol": "ip", "field": "saddr"}},
//	                                "right": "@addr-set-sshd"}},
//	                     {"reject": {...}}]}}]}
//
// A set element is an address, {"prefix": {"addr", "len"}}, {"range": [a,
// b]}, or one of those wrapped as {"elem": {"val": ..., "timeout": ...}}
// when it carries a timeout, counter or comment; a rule's right-hand side
// is one of those, an anonymous {"set": [...]}, or "@name" for a named set.

const (
	// maxSetElems bounds the networks kept of one named set: more could
	// never be reported.
	maxSetElems = MaxBlocks
	// maxSets and maxKept bound the sets kept and their networks in all
	// (a few MiB), for the rules that come after them.
	maxSets = 4096
	maxKept = 16 * MaxBlocks
	// maxRangePrefixes bounds the prefixes one range element becomes.
	maxRangePrefixes = 256
)

type nftKey struct{ family, table, name string }

type nftSet struct {
	nets    []netip.Prefix
	ipv6    bool
	dropped int // networks past maxSetElems
}

// nftCandidate is a rule that drops or rejects by source address, or that
// jumps to a chain which might.
type nftCandidate struct {
	chain  nftKey // the rule's own chain
	nets   []netip.Prefix
	setRef string // or the named set it matches
	jumpTo string // "" for drop and reject
}

type nftRule struct {
	Family string            `json:"family"`
	Table  string            `json:"table"`
	Chain  string            `json:"chain"`
	Expr   []json.RawMessage `json:"expr"`
}

type nftParser struct {
	skip       map[nftKey]bool // tables (name "") read through iptables-nft instead
	sets       map[nftKey]*nftSet
	candidates []nftCandidate
	nCand      int
	// dropsAll holds the chains whose last rule so far drops or rejects
	// without a condition: a rule that jumps there drops too.
	dropsAll map[nftKey]bool
	kept     int // networks kept of all sets
}

// parseNft reads the output of `nft -j list ruleset` and returns the source
// networks its rules drop or reject. skip names tables (family and table,
// name "") whose rules are reported through iptables-save already, as
// iptables-nft keeps its tables in nftables. Output cut short (a ruleset
// larger than the bound on it) is read up to the cut; the error then says
// so, with what was read.
func parseNft(data []byte, skip map[nftKey]bool) ([]Block, int, error) {
	p := &nftParser{skip: skip, sets: map[nftKey]*nftSet{}, dropsAll: map[nftKey]bool{}}
	err := p.parse(json.NewDecoder(bytes.NewReader(data)))
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = errors.New("output ends early")
	}
	var list blockList
	for _, c := range p.candidates {
		if c.jumpTo != "" && !p.dropsAll[nftKey{c.chain.family, c.chain.table, c.jumpTo}] {
			continue
		}
		nets, by := c.nets, nftBy(c.chain)
		if c.setRef != "" {
			key := nftKey{c.chain.family, c.chain.table, c.setRef}
			s := p.sets[key]
			if s == nil {
				continue
			}
			nets = s.nets
			list.dropped += s.dropped
			if jail, ok := nftSetJail(key, s.ipv6); ok {
				by = byJail(jail)
			}
		}
		for _, n := range nets {
			list.add(n, by)
		}
	}
	return list.blocks, list.dropped, err
}

// nftBy names the chain a block is in: "nftables inet filter input", or
// the fail2ban jail of an iptables-nft chain "f2b-sshd".
func nftBy(chain nftKey) string {
	if jail, ok := fail2banJail(chain.name, false); ok {
		return byJail(jail)
	}
	return "nftables " + cleanName(chain.family) + " " + cleanName(chain.table) + " " + cleanName(chain.name)
}

// nftSetJail names the fail2ban jail of a set its nftables action made:
// "addr-set-JAIL" and "addr6-set-JAIL" in table f2b-table, or "f2b-JAIL"
// (older versions, firewalld's ipsets).
func nftSetJail(set nftKey, ipv6 bool) (string, bool) {
	if set.table == "f2b-table" {
		for _, prefix := range []string{"addr-set-", "addr6-set-"} {
			if jail, ok := strings.CutPrefix(set.name, prefix); ok && jail != "" {
				return jail, true
			}
		}
	}
	return fail2banJail(set.name, ipv6)
}

func (p *nftParser) parse(dec *json.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		if key != "nftables" {
			if err := skipValue(dec); err != nil {
				return err
			}
			continue
		}
		if err := expectDelim(dec, '['); err != nil {
			return err
		}
		for dec.More() {
			if err := p.item(dec); err != nil {
				return err
			}
		}
		if err := expectDelim(dec, ']'); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// item reads one {"kind": {...}} of the list.
func (p *nftParser) item(dec *json.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		kind, err := objectKey(dec)
		if err != nil {
			return err
		}
		switch kind {
		case "set":
			err = p.set(dec)
		case "rule":
			var r nftRule
			if err = dec.Decode(&r); err == nil {
				p.rule(r)
			}
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

// set reads a set's name and elements, keeping at most maxSetElems
// networks, without holding the rest of a large set in memory.
func (p *nftParser) set(dec *json.Decoder) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	var key nftKey
	s := &nftSet{}
	// Kept also when the output ends inside the set: nft prints the name
	// before the elements.
	defer func() {
		if key.name != "" && len(p.sets) < maxSets {
			p.sets[key] = s
		}
	}()
	for dec.More() {
		field, err := objectKey(dec)
		if err != nil {
			return err
		}
		switch field {
		case "family":
			err = dec.Decode(&key.family)
		case "table":
			err = dec.Decode(&key.table)
		case "name":
			err = dec.Decode(&key.name)
		case "type":
			// A string, or a list for a concatenation.
			var t json.RawMessage
			if err = dec.Decode(&t); err == nil {
				s.ipv6 = string(t) == `"ipv6_addr"`
			}
		case "elem":
			err = p.elems(dec, s)
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

func (p *nftParser) elems(dec *json.Decoder, s *nftSet) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		if len(s.nets) >= maxSetElems || p.kept >= maxKept {
			s.dropped++
			if err := skipValue(dec); err != nil {
				return err
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		nets, _ := nftNetworks(raw, 0)
		room := min(maxSetElems-len(s.nets), maxKept-p.kept)
		if len(nets) > room {
			s.dropped += len(nets) - room
			nets = nets[:room]
		}
		s.nets = append(s.nets, nets...)
		p.kept += len(nets)
	}
	return expectDelim(dec, ']')
}

// rule records a rule that matches source addresses and drops, rejects or
// jumps, and whether it drops everything that reaches it.
func (p *nftParser) rule(r nftRule) {
	chain := nftKey{r.Family, r.Table, r.Chain}
	if p.skip[nftKey{r.Family, r.Table, ""}] {
		return
	}
	var (
		verdict, target string
		conditional     bool
		saddr           json.RawMessage
	)
	for _, raw := range r.Expr {
		var stmt map[string]json.RawMessage
		if json.Unmarshal(raw, &stmt) != nil || len(stmt) != 1 {
			conditional = true
			continue
		}
		for kind, body := range stmt {
			switch kind {
			case "match":
				conditional = true
				if v, ok := saddrMatch(body); ok && saddr == nil {
					saddr = v
				}
			case "counter", "log":
				// Do not change what the rule does.
			case "drop", "accept", "return", "continue", "queue":
				verdict = kind
			case "reject":
				verdict = "drop"
			case "jump", "goto":
				var t struct {
					Target string `json:"target"`
				}
				_ = json.Unmarshal(body, &t)
				verdict, target = "jump", t.Target
			case "xt":
				// iptables-nft's targets that nftables cannot show
				// natively: REJECT is one.
				var x struct{ Type, Name string }
				_ = json.Unmarshal(body, &x)
				if x.Type == "target" {
					verdict = "xt"
					if x.Name == "REJECT" || x.Name == "DROP" {
						verdict = "drop"
					}
				} else {
					conditional = true
				}
			default:
				// limit, ct, meta, vmap, set updates ...: conditions or
				// side effects; the rule may not drop everything.
				conditional = true
			}
		}
	}
	p.dropsAll[chain] = verdict == "drop" && !conditional
	if saddr == nil || (verdict != "drop" && verdict != "jump") || p.nCand >= maxCandidates {
		return
	}
	c := nftCandidate{chain: chain}
	if verdict == "jump" {
		c.jumpTo = target
	}
	var ref string
	if json.Unmarshal(saddr, &ref) == nil && strings.HasPrefix(ref, "@") {
		c.setRef = ref[1:]
	} else {
		var ok bool
		if c.nets, ok = nftNetworks(saddr, 0); !ok || len(c.nets) == 0 {
			return
		}
	}
	p.nCand += max(1, len(c.nets))
	p.candidates = append(p.candidates, c)
}

// saddrMatch returns the right-hand side of a positive match on the IPv4
// or IPv6 source address. A negated one ("ip saddr != 10.0.0.0/8") drops
// everything else, which is no block of those networks.
func saddrMatch(body json.RawMessage) (json.RawMessage, bool) {
	var m struct {
		Op   string `json:"op"`
		Left struct {
			Payload *struct {
				Protocol string `json:"protocol"`
				Field    string `json:"field"`
			} `json:"payload"`
		} `json:"left"`
		Right json.RawMessage `json:"right"`
	}
	if json.Unmarshal(body, &m) != nil || m.Left.Payload == nil {
		return nil, false
	}
	pl := m.Left.Payload
	if pl.Field != "saddr" || (pl.Protocol != "ip" && pl.Protocol != "ip6") {
		return nil, false
	}
	if m.Op != "==" && m.Op != "in" || len(m.Right) == 0 {
		return nil, false
	}
	return m.Right, true
}

// nftNetworks reads a value that is an address, a prefix, a range, an
// anonymous set of those, or an element wrapping one. ok is false when the
// value is something else (a concatenation, a port).
func nftNetworks(raw json.RawMessage, depth int) ([]netip.Prefix, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || depth > 3 {
		return nil, false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		p, ok := parseNetwork(s)
		if !ok {
			return nil, false
		}
		return []netip.Prefix{p}, true
	case '{':
		var v struct {
			Prefix *struct {
				Addr string `json:"addr"`
				Len  int    `json:"len"`
			} `json:"prefix"`
			Range []string          `json:"range"`
			Set   []json.RawMessage `json:"set"`
			Elem  *struct {
				Val json.RawMessage `json:"val"`
			} `json:"elem"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return nil, false
		}
		switch {
		case v.Prefix != nil:
			p, ok := parseNetwork(fmt.Sprintf("%s/%d", v.Prefix.Addr, v.Prefix.Len))
			if !ok {
				return nil, false
			}
			return []netip.Prefix{p}, true
		case len(v.Range) == 2:
			first, err1 := netip.ParseAddr(v.Range[0])
			last, err2 := netip.ParseAddr(v.Range[1])
			if err1 != nil || err2 != nil {
				return nil, false
			}
			return rangePrefixes(first, last, maxRangePrefixes)
		case v.Elem != nil:
			return nftNetworks(v.Elem.Val, depth+1)
		case v.Set != nil:
			var out []netip.Prefix
			for _, e := range v.Set {
				if len(out) >= maxSetElems {
					break
				}
				nets, _ := nftNetworks(e, depth+1)
				out = append(out, nets...)
			}
			return out, true
		}
	}
	return nil, false
}

// JSON stream helpers.

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("unexpected %v; want %v", t, want)
	}
	return nil
}

func objectKey(dec *json.Decoder) (string, error) {
	t, err := dec.Token()
	if err != nil {
		return "", err
	}
	k, ok := t.(string)
	if !ok {
		return "", fmt.Errorf("unexpected %v; want an object key", t)
	}
	return k, nil
}

// skipValue reads past one value without keeping it.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}
