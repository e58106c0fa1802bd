package defense

import (
	"bytes"
	"net/netip"
	"regexp"
	"strings"
)

const (
	// maxJails bounds the jails asked about one by one.
	maxJails = 64
	// maxJailBans bounds the addresses kept of one jail.
	maxJailBans = MaxBlocks
)

// jailName is what a jail may be called when the agent passes it back to
// fail2ban-client as an argument: fail2ban's own jail names are config
// section names, and nothing that could read as an option.
var jailName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@:+-]{0,63}$`)

// parseFail2banBanned reads `fail2ban-client banned` (fail2ban 0.10.6,
// 0.11.2 and later), which prints the Python repr of a list of one-entry
// dicts: [{'sshd': ['192.0.2.10', '2001:db8::1']}, {'recidive': []}]. ok is
// false when the output is not that shape. Output cut short is read up to
// the cut.
func parseFail2banBanned(data []byte) (bans map[string][]netip.Prefix, dropped int, ok bool) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '[' {
		return nil, 0, false
	}
	bans = map[string][]netip.Prefix{}
	var (
		jail  string
		depth int // 1 in the list, 2 in a dict, 3 in a jail's list
	)
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case '\'', '"':
			s, end := pyString(data, i)
			i = end
			switch depth {
			case 2:
				jail = ""
				if jailName.MatchString(s) && len(bans) < maxJails {
					jail = s
					if _, seen := bans[jail]; !seen {
						bans[jail] = nil
					}
				}
			case 3:
				if jail == "" {
					continue
				}
				if len(bans[jail]) >= maxJailBans {
					dropped++
					continue
				}
				if p, ok := parseNetwork(s); ok {
					bans[jail] = append(bans[jail], p)
				}
			}
		}
	}
	return bans, dropped, true
}

// pyString reads the Python string literal that starts at data[i] and
// returns it and the index of its closing quote.
func pyString(data []byte, i int) (string, int) {
	quote := data[i]
	var b strings.Builder
	for i++; i < len(data) && data[i] != quote; i++ {
		if data[i] == '\\' && i+1 < len(data) {
			i++
		}
		if b.Len() < 256 {
			b.WriteByte(data[i])
		}
	}
	return b.String(), i
}

// parseFail2banJails reads the jail list of `fail2ban-client status`:
//
//	Status
//	|- Number of jail:	2
//	`- Jail list:	recidive, sshd
func parseFail2banJails(data []byte) ([]string, bool) {
	for line := range bytes.Lines(data) {
		_, list, ok := bytes.Cut(line, []byte("Jail list:"))
		if !ok {
			continue
		}
		var jails []string
		for j := range bytes.SplitSeq(list, []byte(",")) {
			name := string(bytes.TrimSpace(j))
			if jailName.MatchString(name) && len(jails) < maxJails {
				jails = append(jails, name)
			}
		}
		return jails, true
	}
	return nil, false
}

// parseFail2banJail reads the banned addresses of `fail2ban-client status
// JAIL`, on the line "`- Banned IP list:	192.0.2.10 2001:db8::1" ("IP
// list:" before 0.9). It returns false when there is no such line.
func parseFail2banJail(data []byte) ([]netip.Prefix, int, bool) {
	for line := range bytes.Lines(data) {
		_, list, ok := bytes.Cut(line, []byte("IP list:"))
		if !ok {
			continue
		}
		var (
			nets    []netip.Prefix
			dropped int
		)
		for f := range bytes.FieldsSeq(list) {
			if len(nets) >= maxJailBans {
				dropped++
				continue
			}
			if p, ok := parseNetwork(string(f)); ok {
				nets = append(nets, p)
			}
		}
		return nets, dropped, true
	}
	return nil, 0, false
}

// fail2banError turns fail2ban-client's error line, which carries a time
// and a process id ("2024-05-01 10:00:00,123 fail2ban [1234]: ERROR
// Failed to access socket path: ... Is fail2ban running?"), into its
// message, so that the same problem reads the same every time.
func fail2banError(s string) string {
	if _, msg, ok := strings.Cut(s, "ERROR"); ok {
		if msg = strings.TrimSpace(msg); msg != "" {
			return msg
		}
	}
	return s
}
