package authlog

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on what the parsers accept. sshd's own lines are a few hundred
// bytes (it cuts a user name at 100 bytes); anything near these bounds is
// hostile or not sshd's.
const (
	// MaxLine bounds a log line; a longer one is dropped whole.
	MaxLine = 8 << 10
	// MaxJournalEntry bounds a journal entry as journalctl -o json prints
	// it: the line of a text log plus the other fields, and a message that
	// is not valid UTF-8 printed as an array of numbers (up to 4 bytes per
	// byte).
	MaxJournalEntry = 4 * MaxLine
	// MaxUser bounds a user name as the agent reports it.
	MaxUser = 64
	// maxRepeat bounds the count of a "message repeated N times" line.
	maxRepeat = 1 << 20
)

// idents are the programs whose lines are sshd's: sshd before OpenSSH 9.8,
// and since then the listener sshd with the per-connection sshd-session
// (and sshd-auth, which does the authentication in OpenSSH 10).
var idents = []string{"sshd", "sshd-session", "sshd-auth"}

// Record is one message of sshd as a log line or a journal entry carries
// it.
type Record struct {
	Time time.Time
	// PID is the logging process: sshd forks one per connection (the
	// monitor), which logs every line of that connection, so the pid ties
	// the lines of one connection together. 0 when the line has none.
	PID int
	// Msg is the message after "sshd[PID]: ". From ParseSyslog it shares
	// the line's memory.
	Msg []byte
}

// Kind is what an sshd message says happened.
type Kind uint8

const (
	// KindFailed is a failed attempt: a wrong password, a refused key
	// signature, a failed keyboard-interactive round ("Failed METHOD for
	// …").
	KindFailed Kind = iota + 1
	// KindProbe is "Failed none for …": the client asking which methods it
	// may use. It names the user but is no attempt; sshd does not count it
	// either.
	KindProbe
	// KindInvalidUser says that sshd refuses the user whatever the
	// credentials: it does not exist ("Invalid user …") or sshd_config
	// denies it ("User … not allowed because …").
	KindInvalidUser
	// KindAccepted is a successful login.
	KindAccepted
	// KindClosed is the end of a connection that had not authenticated.
	KindClosed
	// KindTooMany is sshd ending a connection at its maximum of failed
	// attempts (MaxAuthTries).
	KindTooMany
	// KindPAMFailures is PAM's summary when a connection ends: "PAM N more
	// authentication failures", N+1 failures in all.
	KindPAMFailures
	// KindPAMError is sshd's "error: PAM: Authentication failure for …",
	// one failed keyboard-interactive round: sshd logs those as "Failed"
	// only from the connection's third failure on.
	KindPAMError
)

// Event is what one sshd message says.
type Event struct {
	Kind Kind
	// Addr is the client's address; unset when the line names it by host
	// name (PAM's rhost with UseDNS) or not at all.
	Addr netip.Addr
	// User is the user name the client asked for, cleaned: valid UTF-8,
	// without control or format characters, at most MaxUser bytes.
	// HasUser says whether the line names one (it may be empty).
	User    string
	HasUser bool
	// Invalid says that sshd does not know the user or refuses it.
	Invalid bool
	// Count is how many attempts the line stands for: 1, N for rsyslog's
	// "message repeated N times", N+1 for PAM's "N more".
	Count uint32
}

// ParseSyslog parses a line of a text log as rsyslog, syslog-ng or
// sysklogd write it: a timestamp, the host, the program and the message.
// The timestamp is either the classic "Dec  2 17:14:26", in loc and with
// the year inferred from now (a month later than now's is last year's), or
// RFC 3339 as rsyslog writes it on newer Debian and Ubuntu
// ("2026-12-02T17:14:26.123456+00:00"). Only lines of sshd, sshd-session
// and sshd-auth are accepted.
func ParseSyslog(line []byte, now time.Time, loc *time.Location) (Record, bool) {
	if len(line) > MaxLine || len(line) < 16 {
		return Record{}, false
	}
	var (
		t    time.Time
		rest []byte
		ok   bool
	)
	if isDigit(line[0]) {
		t, rest, ok = parseRFC3339(line)
	} else {
		t, rest, ok = parseClassic(line, now, loc)
	}
	if !ok {
		return Record{}, false
	}
	// "host sshd[1234]: msg"; a log written without the host is accepted
	// too.
	pid, msg, ok := cutTag(rest)
	if !ok {
		i := bytes.IndexByte(rest, ' ')
		if i <= 0 {
			return Record{}, false
		}
		if pid, msg, ok = cutTag(rest[i+1:]); !ok {
			return Record{}, false
		}
	}
	return Record{Time: t, PID: pid, Msg: bytes.TrimRight(msg, "\r")}, true
}

var months = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// parseClassic parses "Dec  2 17:14:26 " (or "Dec 02 …").
func parseClassic(line []byte, now time.Time, loc *time.Location) (time.Time, []byte, bool) {
	if line[3] != ' ' || line[6] != ' ' || line[9] != ':' || line[12] != ':' || line[15] != ' ' {
		return time.Time{}, nil, false
	}
	month := 0
	for i, m := range months {
		if string(line[:3]) == m {
			month = i + 1
			break
		}
	}
	d1 := line[4]
	if d1 == ' ' {
		d1 = '0'
	}
	day, ok1 := twoDigits(d1, line[5])
	hh, ok2 := twoDigits(line[7], line[8])
	mm, ok3 := twoDigits(line[10], line[11])
	ss, ok4 := twoDigits(line[13], line[14])
	if month == 0 || !ok1 || !ok2 || !ok3 || !ok4 || day < 1 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}, nil, false
	}
	if loc == nil {
		loc = time.Local
	}
	local := now.In(loc)
	year := local.Year()
	if time.Month(month) > local.Month() {
		year--
	}
	t := time.Date(year, time.Month(month), day, hh, mm, ss, 0, loc)
	if t.Day() != day {
		return time.Time{}, nil, false // Feb 30
	}
	return t, line[16:], true
}

// parseRFC3339 parses the first field of line as an RFC 3339 timestamp.
func parseRFC3339(line []byte) (time.Time, []byte, bool) {
	i := bytes.IndexByte(line, ' ')
	if i < 20 || i > 40 {
		return time.Time{}, nil, false
	}
	// time.Parse is lenient (a one-digit hour); the shape is checked first.
	tok := line[:i]
	if tok[4] != '-' || tok[7] != '-' || tok[10] != 'T' || tok[13] != ':' || tok[16] != ':' {
		return time.Time{}, nil, false
	}
	t, err := time.Parse(time.RFC3339, string(tok))
	if err != nil || t.Year() < 1970 {
		return time.Time{}, nil, false
	}
	return t, line[i+1:], true
}

// cutTag parses "sshd[1234]: msg" or "sshd: msg".
func cutTag(b []byte) (pid int, msg []byte, ok bool) {
	i := bytes.IndexByte(b, ' ')
	if i < 2 || b[i-1] != ':' {
		return 0, nil, false
	}
	tag := b[:i-1]
	msg = b[i+1:]
	if j := bytes.IndexByte(tag, '['); j >= 0 {
		if tag[len(tag)-1] != ']' {
			return 0, nil, false
		}
		if pid, ok = parsePID(tag[j+1 : len(tag)-1]); !ok {
			return 0, nil, false
		}
		tag = tag[:j]
	}
	if !isIdent(tag) {
		return 0, nil, false
	}
	return pid, msg, true
}

func isIdent(b []byte) bool {
	for _, id := range idents {
		if string(b) == id {
			return true
		}
	}
	return false
}

// parsePID parses a process id: up to 7 digits (pid_max is at most 2^22).
func parsePID(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 7 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n > 0
}

// journalEntry holds the fields of a journal entry that matter, raw: a
// field is a string, an array of numbers (bytes that are not valid UTF-8),
// an array of values (a field set more than once), or null (a field larger
// than journalctl prints without --all).
type journalEntry struct {
	Cursor    json.RawMessage `json:"__CURSOR"`
	Realtime  json.RawMessage `json:"__REALTIME_TIMESTAMP"`
	Ident     json.RawMessage `json:"SYSLOG_IDENTIFIER"`
	SyslogPID json.RawMessage `json:"SYSLOG_PID"`
	PID       json.RawMessage `json:"_PID"`
	Message   json.RawMessage `json:"MESSAGE"`
}

// ParseJournal parses one entry of `journalctl -o json`. It returns the
// entry's cursor whenever the entry is valid JSON with one, so that a
// reader moves past entries that are not sshd's; ok says whether the entry
// is an sshd message.
func ParseJournal(line []byte) (rec Record, cursor string, ok bool) {
	if len(line) > MaxJournalEntry {
		return Record{}, "", false
	}
	var e journalEntry
	if json.Unmarshal(line, &e) != nil {
		return Record{}, "", false
	}
	if c, ok := journalValue(e.Cursor); ok && len(c) <= 512 && utf8.Valid(c) {
		cursor = string(c)
	}
	ident, ok1 := journalValue(e.Ident)
	usec, ok2 := journalValue(e.Realtime)
	msg, ok3 := journalValue(e.Message)
	if !ok1 || !ok2 || !ok3 || !isIdent(ident) || len(msg) > MaxLine {
		return Record{}, cursor, false
	}
	us, ok := parseUint(usec)
	if !ok || us > 1<<62 {
		return Record{}, cursor, false
	}
	pid := 0
	for _, raw := range []json.RawMessage{e.SyslogPID, e.PID} {
		if v, ok := journalValue(raw); ok {
			if p, ok := parsePID(v); ok {
				pid = p
				break
			}
		}
	}
	msg = bytes.TrimRight(msg, "\r\n")
	return Record{Time: time.UnixMicro(int64(us)), PID: pid, Msg: msg}, cursor, true
}

// journalValue decodes a field of journalctl's JSON: a string, an array of
// byte values, or the first of several values.
func journalValue(raw json.RawMessage) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return []byte(s), true
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
			return nil, false
		}
		first := bytes.TrimSpace(items[0])
		if len(first) > 0 && (first[0] == '"' || first[0] == '[') {
			return journalValue(first) // a field with several values
		}
		out := make([]byte, 0, len(items))
		for _, it := range items {
			n, ok := parseUint(bytes.TrimSpace(it))
			if !ok || n > 255 {
				return nil, false
			}
			out = append(out, byte(n))
		}
		return out, true
	}
	return nil, false
}

// ParseMessage parses an sshd message (Record.Msg). It recognises what
// OpenSSH 7.x to 10.x log at the default LogLevel INFO about
// authentication; everything else is not an event.
//
// User names and, in a few lines, text after the address are chosen by the
// client, so every line is taken apart from the side sshd wrote last where
// the client's text comes first: the real address of "Failed password for
// invalid user x from 1.2.3.4 port 1 ssh2 from 203.0.113.9 port 22 ssh2" is
// 203.0.113.9.
func ParseMessage(msg []byte) (Event, bool) {
	if len(msg) > MaxLine {
		return Event{}, false
	}
	rest, repeated := bytes.CutPrefix(msg, []byte("message repeated "))
	if !repeated {
		return parseMessage(msg)
	}
	// rsyslog: "message repeated N times: [ MSG]", N identical messages
	// after the one logged.
	i := bytes.IndexByte(rest, ' ')
	if i < 0 {
		return Event{}, false
	}
	n, ok := parseUint(rest[:i])
	if !ok || n == 0 || n > maxRepeat {
		return Event{}, false
	}
	inner, ok := bytes.CutPrefix(rest[i:], []byte(" times: ["))
	if !ok {
		return Event{}, false
	}
	inner = bytes.TrimPrefix(inner, []byte(" "))
	inner = bytes.TrimSuffix(inner, []byte("]"))
	ev, ok := parseMessage(inner)
	if !ok {
		return Event{}, false
	}
	if ev.Kind == KindFailed || ev.Kind == KindPAMError {
		ev.Count = uint32(n)
	}
	return ev, true
}

var (
	preauth   = []byte(" [preauth]")
	tooMany   = []byte(": Too many authentication failures")
	notAllow  = []byte(" not allowed because ")
	fromSep   = []byte(" from ")
	invalidU  = []byte("invalid user ")
	authingU  = []byte("authenticating user ")
	illegalU  = []byte("illegal user ")
	rhostSep  = []byte("rhost=")
	userField = []byte("user=")
)

func parseMessage(msg []byte) (Event, bool) {
	has := func(p string) ([]byte, bool) { return bytes.CutPrefix(msg, []byte(p)) }
	if r, ok := has("Failed "); ok {
		return parseAuthLog(r, KindFailed)
	}
	if r, ok := has("Accepted "); ok {
		return parseAuthLog(r, KindAccepted)
	}
	if r, ok := has("Invalid user "); ok {
		return parseInvalidUser(r)
	}
	if r, ok := has("Connection closed by "); ok {
		return parseClosed(r, KindClosed)
	}
	if r, ok := has("Connection reset by "); ok {
		return parseClosed(r, KindClosed)
	}
	if r, ok := has("Disconnected from "); ok {
		return parseClosed(r, KindClosed)
	}
	if r, ok := has("Disconnecting"); ok {
		return parseDisconnecting(r)
	}
	if r, ok := has("Received disconnect from "); ok {
		return parseReceivedDisconnect(r)
	}
	if r, ok := has("error: maximum authentication attempts exceeded for "); ok {
		return parseMaxAuth(r)
	}
	if r, ok := has("PAM "); ok {
		return parsePAMMore(r)
	}
	if r, ok := has("error: PAM: Authentication failure for "); ok {
		return parsePAMError(r)
	}
	if r, ok := has("error: PAM: User not known to the underlying authentication module for "); ok {
		return parsePAMError(r)
	}
	if r, ok := has("User "); ok {
		return parseNotAllowed(r)
	}
	if r, ok := has("fatal: Timeout before authentication for "); ok {
		return parseTimeout(r)
	}
	if r, ok := has("Timeout before authentication for "); ok {
		return parseTimeout(r)
	}
	return Event{}, false
}

// parseAuthLog parses the rest of sshd's auth_log line, "METHOD for
// [invalid user ]USER from ADDR port N ssh2[: EXTRA]", where EXTRA
// describes a key: "ED25519 SHA256:…", or for a certificate "… ID KEYID
// (serial N) CA …" with a key id the client chose.
func parseAuthLog(r []byte, kind Kind) (Event, bool) {
	sp := bytes.IndexByte(r, ' ')
	if sp <= 0 || sp > 64 || !isMethod(r[:sp]) {
		return Event{}, false
	}
	method := r[:sp]
	r, ok := bytes.CutPrefix(r[sp:], []byte(" for "))
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: kind, Count: 1, HasUser: true}
	if kind == KindFailed && string(method) == "none" {
		ev.Kind = KindProbe
	}
	if rest, ok := bytes.CutPrefix(r, invalidU); ok {
		ev.Invalid, r = true, rest
	}
	// Candidates for the real " from ADDR port N ssh2", which the client's
	// user name before it may imitate, and a certificate's key id after it
	// too. The last one is the real one when nothing the client chose
	// follows it: the end of the line, or a plain key's "TYPE FP". After a
	// certificate only a single candidate can be trusted.
	var (
		userEnd, count int
		extra          []byte
	)
	for i := 0; ; {
		j := bytes.Index(r[i:], fromSep)
		if j < 0 {
			break
		}
		at := i + j
		i = at + 1
		addr, tail, ok := cutAddrPort(r[at+len(fromSep):])
		if !ok {
			continue
		}
		tail, ok = bytes.CutPrefix(tail, []byte(" ssh2"))
		if !ok || (len(tail) > 0 && !bytes.HasPrefix(tail, []byte(": "))) {
			continue
		}
		count++
		userEnd, ev.Addr, extra = at, addr, tail
	}
	if count == 0 || (count > 1 && !plainExtra(extra)) {
		return Event{}, false
	}
	ev.User = cleanUser(r[:userEnd])
	return ev, true
}

// plainExtra reports whether EXTRA is empty or a plain key, "TYPE FP",
// whose two fields the client cannot shape into text.
func plainExtra(extra []byte) bool {
	if len(extra) == 0 {
		return true
	}
	f := bytes.Fields(extra[2:])
	return len(f) == 2 && bytes.Count(extra, []byte(" ")) == 2
}

func isMethod(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || isDigit(c) || c == '-' || c == '/' || c == '@' || c == '.') {
			return false
		}
	}
	return true
}

// cutAddrPort parses "ADDR port N" at the start of b.
func cutAddrPort(b []byte) (netip.Addr, []byte, bool) {
	sp := bytes.IndexByte(b, ' ')
	if sp <= 0 {
		return netip.Addr{}, nil, false
	}
	addr, ok := parseAddr(b[:sp])
	if !ok {
		return netip.Addr{}, nil, false
	}
	r, ok := bytes.CutPrefix(b[sp:], []byte(" port "))
	if !ok {
		return netip.Addr{}, nil, false
	}
	n := 0
	for n < len(r) && n < 6 && isDigit(r[n]) {
		n++
	}
	if n == 0 {
		return netip.Addr{}, nil, false
	}
	return addr, r[n:], true
}

// cutPortSuffix removes " port N" from the end of b.
func cutPortSuffix(b []byte) ([]byte, bool) {
	i := bytes.LastIndex(b, []byte(" port "))
	if i < 0 {
		return nil, false
	}
	digits := b[i+len(" port "):]
	if len(digits) == 0 || len(digits) > 5 {
		return nil, false
	}
	for _, c := range digits {
		if !isDigit(c) {
			return nil, false
		}
	}
	return b[:i], true
}

// parseAddr accepts an IPv4 or IPv6 address, nothing else (no host names).
// An IPv4-mapped IPv6 address is reported as IPv4, and an IPv6 zone is
// dropped.
func parseAddr(b []byte) (netip.Addr, bool) {
	if len(b) == 0 || len(b) > 64 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(string(b))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// parseInvalidUser parses "USER from ADDR port N", or "USER from ADDR"
// before OpenSSH 7.5.
func parseInvalidUser(r []byte) (Event, bool) {
	if b, ok := cutPortSuffix(r); ok {
		if ev, ok := userFromAddr(b, KindInvalidUser); ok {
			return ev, true
		}
	}
	return userFromAddr(r, KindInvalidUser)
}

// userFromAddr parses "USER from ADDR" from the right.
func userFromAddr(b []byte, kind Kind) (Event, bool) {
	i := bytes.LastIndex(b, fromSep)
	if i < 0 {
		return Event{}, false
	}
	addr, ok := parseAddr(b[i+len(fromSep):])
	if !ok {
		return Event{}, false
	}
	return Event{Kind: kind, Addr: addr, User: cleanUser(b[:i]), HasUser: true, Invalid: kind == KindInvalidUser, Count: 1}, true
}

// parseClosed parses what follows "Connection closed by", "Connection
// reset by" and "Disconnected from": "[invalid user USER |authenticating
// user USER ]ADDR port N[ [preauth]]". "Disconnected from user USER …" is
// the end of a session, not of an attempt.
func parseClosed(r []byte, kind Kind) (Event, bool) {
	r = bytes.TrimSuffix(r, preauth)
	b, ok := cutPortSuffix(r)
	if !ok {
		return Event{}, false
	}
	who, addrText := []byte(nil), b
	if i := bytes.LastIndexByte(b, ' '); i >= 0 {
		who, addrText = b[:i+1], b[i+1:]
	}
	addr, ok := parseAddr(addrText)
	if !ok {
		return Event{}, false
	}
	ev := Event{Kind: kind, Addr: addr, Count: 1}
	// who keeps the space before the address: "invalid user  " is the
	// empty user name.
	switch {
	case len(who) == 0:
	case bytes.HasPrefix(who, invalidU) && len(who) > len(invalidU):
		ev.Invalid, ev.HasUser = true, true
		ev.User = cleanUser(who[len(invalidU) : len(who)-1])
	case bytes.HasPrefix(who, authingU) && len(who) > len(authingU):
		ev.HasUser = true
		ev.User = cleanUser(who[len(authingU) : len(who)-1])
	default:
		return Event{}, false
	}
	return ev, true
}

// parseDisconnecting parses sshd's "Disconnecting invalid user USER ADDR
// port N: Too many authentication failures [preauth]" (or "authenticating
// user"), and OpenSSH 7.4's "Disconnecting: Too many authentication
// failures [preauth]", which names no one.
func parseDisconnecting(r []byte) (Event, bool) {
	r = bytes.TrimSuffix(r, preauth)
	b, ok := bytes.CutSuffix(r, tooMany)
	if !ok {
		return Event{}, false
	}
	if len(b) == 0 {
		return Event{Kind: KindTooMany, Count: 1}, true
	}
	b, ok = bytes.CutPrefix(b, []byte(" "))
	if !ok {
		return Event{}, false
	}
	ev, ok := parseClosed(b, KindTooMany)
	if !ok || !ev.HasUser {
		return Event{}, false
	}
	return ev, true
}

// parseReceivedDisconnect parses "ADDR port N:CODE: TEXT [preauth]", where
// TEXT is the client's: the address is read from the left.
func parseReceivedDisconnect(r []byte) (Event, bool) {
	if !bytes.HasSuffix(r, preauth) {
		return Event{}, false // the end of a session
	}
	addr, tail, ok := cutAddrPort(r)
	if !ok || len(tail) == 0 || tail[0] != ':' {
		return Event{}, false
	}
	return Event{Kind: KindClosed, Addr: addr, Count: 1}, true
}

// parseMaxAuth parses "[invalid user ]USER from ADDR port N ssh2
// [preauth]".
func parseMaxAuth(r []byte) (Event, bool) {
	r = bytes.TrimSuffix(r, preauth)
	r, ok := bytes.CutSuffix(r, []byte(" ssh2"))
	if !ok {
		return Event{}, false
	}
	if r, ok = cutPortSuffix(r); !ok {
		return Event{}, false
	}
	invalid := false
	if rest, ok := bytes.CutPrefix(r, invalidU); ok {
		invalid, r = true, rest
	}
	ev, ok := userFromAddr(r, KindTooMany)
	ev.Invalid = invalid
	return ev, ok
}

// parsePAMMore parses pam_unix's "N more authentication failure[s];
// logname= uid=0 euid=0 tty=ssh ruser= rhost=ADDR  user=USER". The user
// comes last and is the client's, so rhost is the first one.
func parsePAMMore(r []byte) (Event, bool) {
	sp := bytes.IndexByte(r, ' ')
	if sp <= 0 {
		return Event{}, false
	}
	n, ok := parseUint(r[:sp])
	if !ok || n == 0 || n > maxRepeat {
		return Event{}, false
	}
	r = r[sp:]
	if !bytes.HasPrefix(r, []byte(" more authentication failure")) {
		return Event{}, false
	}
	ev := Event{Kind: KindPAMFailures, Count: uint32(n) + 1}
	i := bytes.Index(r, rhostSep)
	if i < 0 {
		return Event{}, false
	}
	r = r[i+len(rhostSep):]
	host := r
	if j := bytes.IndexByte(r, ' '); j >= 0 {
		host, r = r[:j], r[j:]
	} else {
		r = nil
	}
	ev.Addr, _ = parseAddr(host)
	if u, ok := bytes.CutPrefix(bytes.TrimLeft(r, " "), userField); ok {
		ev.User, ev.HasUser = cleanUser(u), true
	}
	return ev, true
}

// parsePAMError parses "[illegal user ]USER from HOST" of sshd's PAM
// errors; HOST is an address, or a name with UseDNS.
func parsePAMError(r []byte) (Event, bool) {
	ev := Event{Kind: KindPAMError, Count: 1, HasUser: true}
	if rest, ok := bytes.CutPrefix(r, illegalU); ok {
		ev.Invalid, r = true, rest
	}
	i := bytes.LastIndex(r, fromSep)
	if i < 0 {
		return Event{}, false
	}
	host := r[i+len(fromSep):]
	if len(host) == 0 || bytes.IndexByte(host, ' ') >= 0 {
		return Event{}, false
	}
	ev.Addr, _ = parseAddr(host)
	ev.User = cleanUser(r[:i])
	return ev, true
}

// parseNotAllowed parses "USER from HOST not allowed because REASON"
// (AllowUsers, DenyUsers, a locked account …). REASON is sshd's, so the
// last " not allowed because " is the real one.
func parseNotAllowed(r []byte) (Event, bool) {
	i := bytes.LastIndex(r, notAllow)
	if i < 0 {
		return Event{}, false
	}
	r = r[:i]
	j := bytes.LastIndex(r, fromSep)
	if j < 0 {
		return Event{}, false
	}
	host := r[j+len(fromSep):]
	if len(host) == 0 || bytes.IndexByte(host, ' ') >= 0 {
		return Event{}, false
	}
	ev := Event{Kind: KindInvalidUser, User: cleanUser(r[:j]), HasUser: true, Invalid: true, Count: 1}
	ev.Addr, _ = parseAddr(host)
	return ev, true
}

// parseTimeout parses "ADDR port N" of "Timeout before authentication for".
func parseTimeout(r []byte) (Event, bool) {
	addr, tail, ok := cutAddrPort(r)
	if !ok || len(tail) != 0 {
		return Event{}, false
	}
	return Event{Kind: KindClosed, Addr: addr, Count: 1}, true
}

// cleanUser makes a user name fit to leave the agent: valid UTF-8 (invalid
// bytes replaced), without control or format characters (which could
// forge lines or reorder text where it is shown), at most MaxUser bytes cut
// on a rune boundary.
func cleanUser(b []byte) string {
	if len(b) > 4*MaxUser {
		b = b[:4*MaxUser] // spare converting what is cut anyway
	}
	if fitUser(b) {
		return string(b)
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= MaxUser {
		return s
	}
	cut := MaxUser
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// fitUser reports whether b is printable ASCII and short enough.
func fitUser(b []byte) bool {
	if len(b) > MaxUser {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func twoDigits(a, b byte) (int, bool) {
	if !isDigit(a) || !isDigit(b) {
		return 0, false
	}
	return int(a-'0')*10 + int(b-'0'), true
}

// parseUint parses a decimal number of up to 19 digits.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
