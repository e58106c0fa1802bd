package authlog

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// feed parses the lines of a text log into a.
func feed(t testing.TB, a *Aggregate, now time.Time, text string) {
	t.Helper()
	for line := range strings.Lines(text) {
		rec, ok := ParseSyslog([]byte(strings.TrimSuffix(line, "\n")), now, utc)
		if !ok {
			continue
		}
		if e, ok := ParseMessage(rec.Msg); ok {
			a.Observe(now, rec.Time, rec.PID, e)
		}
	}
}

// srcText writes a source on one line for comparisons.
func srcText(s *gridcityv1.AuthSource) string {
	ts := func(u int64) string {
		if u == 0 {
			return "-"
		}
		return time.Unix(u, 0).UTC().Format("15:04:05")
	}
	out := fmt.Sprintf("%s failures=%d invalid=%d users=%s+%d seen=%s..%s", s.Address, s.Failures, s.InvalidUsers,
		strings.Join(s.Users, ","), s.UsersMore, ts(s.FirstSeenUnix), ts(s.LastSeenUnix))
	if s.Successes > 0 || s.LastSuccessUnix != 0 {
		out += fmt.Sprintf(" ok=%d last=%s@%s before=%d", s.Successes, s.LastSuccessUser, ts(s.LastSuccessUnix), s.FailuresBeforeSuccess)
	}
	return out
}

func sourcesText(list []*gridcityv1.AuthSource) string {
	var lines []string
	for _, s := range list {
		lines = append(lines, srcText(s))
	}
	return strings.Join(lines, "\n")
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAggregateRealLog counts what real clients did to OpenSSH 9.2 (see
// testdata/README.md), connection by connection:
//
//	13614 13958        key accepted                         0
//	13804 15286        1 wrong password, key accepted       1 + 1
//	14081 14722        invalid user, key refused            1 + 1 (invalid)
//	14085 15521        7 keys refused, MaxAuthTries         1 + 1
//	14403              invalid user, 3 passwords            3 (invalid)
//	14555              root, 3 passwords                    3
//	14726              root, 7 passwords, MaxAuthTries 6    6
//	14857              root, 3 keyboard-interactive         3 (PAM errors only)
//	15074              invalid user, 2 keyboard-interactive 2 (invalid)
//	15146              ::1, invalid user, 1 password        1 (invalid)
//	15500              port scan                            0
//	15513              root, gave up after "none"           1
func TestAggregateRealLog(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 30, 0, 0, utc)
	want := strings.Join([]string{
		"127.0.0.1 failures=24 invalid=7 users=root,admin,guest,oracle+0 seen=17:51:12..17:52:29 ok=4 last=root@17:52:26 before=22",
		"::1 failures=1 invalid=1 users=ubuntu+0 seen=17:52:23..17:52:23",
	}, "\n")
	for _, file := range []string{"testdata/openssh-9.2-debian12.log", "testdata/openssh-9.2-debian12-rfc3339.log"} {
		a := NewAggregate()
		feed(t, a, now, mustRead(t, file))
		a.Expire(now)
		if got := sourcesText(a.Sources(now)); got != want {
			t.Errorf("%s: got\n%s\nwant\n%s", file, got, want)
		}
		if len(a.conns) != 0 {
			t.Errorf("%s: %d connections left after they expired", file, len(a.conns))
		}
	}
}

// TestAggregateOneAttemptOnce checks the lines of one attempt, as other
// OpenSSH versions write them, are counted once.
func TestAggregateOneAttemptOnce(t *testing.T) {
	tests := []struct{ name, log, want string }{
		{
			name: "OpenSSH 7.4 (CentOS 7), invalid user, one password",
			log: `Dec  2 10:00:00 h sshd[100]: Invalid user admin from 203.0.113.9 port 40000
Dec  2 10:00:00 h sshd[100]: input_userauth_request: invalid user admin [preauth]
Dec  2 10:00:02 h sshd[100]: pam_unix(sshd:auth): check pass; user unknown
Dec  2 10:00:02 h sshd[100]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost=203.0.113.9
Dec  2 10:00:04 h sshd[100]: Failed password for invalid user admin from 203.0.113.9 port 40000 ssh2
Dec  2 10:00:04 h sshd[100]: Received disconnect from 203.0.113.9 port 40000:11: Bye Bye [preauth]
Dec  2 10:00:04 h sshd[100]: Disconnected from 203.0.113.9 port 40000 [preauth]
`,
			want: "203.0.113.9 failures=1 invalid=1 users=admin+0 seen=10:00:04..10:00:04",
		},
		{
			name: "OpenSSH 7.4, invalid user that never tried",
			log: `Dec  2 10:00:00 h sshd[101]: Invalid user oracle from 203.0.113.9 port 40001
Dec  2 10:00:00 h sshd[101]: input_userauth_request: invalid user oracle [preauth]
Dec  2 10:00:01 h sshd[101]: Connection closed by 203.0.113.9 port 40001 [preauth]
`,
			want: "203.0.113.9 failures=1 invalid=1 users=oracle+0 seen=10:00:01..10:00:01",
		},
		{
			name: "rsyslog's repetition and PAM's summary of one connection",
			log: `Dec  2 10:00:00 h sshd[102]: Failed password for root from 203.0.113.9 port 40002 ssh2
Dec  2 10:00:09 h sshd[102]: message repeated 5 times: [ Failed password for root from 203.0.113.9 port 40002 ssh2]
Dec  2 10:00:09 h sshd[102]: error: maximum authentication attempts exceeded for root from 203.0.113.9 port 40002 ssh2 [preauth]
Dec  2 10:00:09 h sshd[102]: Disconnecting authenticating user root 203.0.113.9 port 40002: Too many authentication failures [preauth]
Dec  2 10:00:09 h sshd[102]: PAM 5 more authentication failures; logname= uid=0 euid=0 tty=ssh ruser= rhost=203.0.113.9  user=root
Dec  2 10:00:09 h sshd[102]: PAM service(sshd) ignoring max retries; 6 > 3
`,
			want: "203.0.113.9 failures=6 invalid=0 users=root+0 seen=10:00:00..10:00:09",
		},
		{
			name: "OpenSSH 8.2 (Ubuntu 20.04), three passwords, PAM's summary",
			log: `2026-12-02T10:00:00.000001+00:00 h sshd[103]: Failed password for root from 198.51.100.7 port 22000 ssh2
2026-12-02T10:00:03.000001+00:00 h sshd[103]: Failed password for root from 198.51.100.7 port 22000 ssh2
2026-12-02T10:00:06.000001+00:00 h sshd[103]: Failed password for root from 198.51.100.7 port 22000 ssh2
2026-12-02T10:00:07.000001+00:00 h sshd[103]: Connection closed by authenticating user root 198.51.100.7 port 22000 [preauth]
2026-12-02T10:00:07.000001+00:00 h sshd[103]: PAM 2 more authentication failures; logname= uid=0 euid=0 tty=ssh ruser= rhost=198.51.100.7  user=root
`,
			want: "198.51.100.7 failures=3 invalid=0 users=root+0 seen=10:00:00..10:00:06",
		},
		{
			name: "PAM's summary counts what sshd did not log at INFO",
			log: `Dec  2 10:00:00 h sshd[104]: Connection closed by authenticating user root 198.51.100.7 port 22001 [preauth]
Dec  2 10:00:00 h sshd[104]: PAM 2 more authentication failures; logname= uid=0 euid=0 tty=ssh ruser= rhost=198.51.100.7  user=root
`,
			want: "198.51.100.7 failures=3 invalid=0 users=root+0 seen=10:00:00..10:00:00",
		},
		{
			name: "OpenSSH 9.8+: sshd-session per connection, the listener's penalty line",
			log: `Dec  2 10:00:00 h sshd-session[2001]: Invalid user ubuntu from 2001:db8::66 port 50100
Dec  2 10:00:02 h sshd-session[2001]: Failed password for invalid user ubuntu from 2001:db8::66 port 50100 ssh2
Dec  2 10:00:03 h sshd-session[2001]: Connection closed by invalid user ubuntu 2001:db8::66 port 50100 [preauth]
Dec  2 10:00:03 h sshd[800]: drop connection #0 from [2001:db8::66]:50100 on [2001:db8::1]:22 penalty: failed authentication
`,
			want: "2001:db8::66 failures=1 invalid=1 users=ubuntu+0 seen=10:00:02..10:00:02",
		},
		{
			name: "failures before the latest success",
			log: `Dec  2 10:00:00 h sshd[105]: Failed password for deploy from 192.0.2.10 port 1 ssh2
Dec  2 10:00:01 h sshd[105]: Failed password for deploy from 192.0.2.10 port 1 ssh2
Dec  2 10:00:02 h sshd[105]: Accepted password for deploy from 192.0.2.10 port 1 ssh2
Dec  2 10:10:00 h sshd[106]: Failed password for root from 192.0.2.10 port 2 ssh2
Dec  2 10:20:00 h sshd[107]: Accepted publickey for admin from 192.0.2.10 port 3 ssh2: ED25519 SHA256:x
Dec  2 10:30:00 h sshd[108]: Failed password for root from 192.0.2.10 port 4 ssh2
`,
			want: "192.0.2.10 failures=4 invalid=0 users=deploy,root+0 seen=10:00:00..10:30:00 ok=2 last=admin@10:20:00 before=3",
		},
		{
			name: "a pid reused by another client",
			log: `Dec  2 10:00:00 h sshd[109]: Invalid user a from 192.0.2.20 port 1
Dec  2 10:00:30 h sshd[109]: Failed password for root from 192.0.2.21 port 2 ssh2
`,
			want: "192.0.2.21 failures=1 invalid=0 users=root+0 seen=10:00:30..10:00:30\n192.0.2.20 failures=1 invalid=1 users=a+0 seen=10:00:00..10:00:00",
		},
		{
			name: "without a pid, a close is not counted",
			log: `Dec  2 10:00:00 h sshd: Failed password for root from 192.0.2.30 port 1 ssh2
Dec  2 10:00:01 h sshd: Connection closed by authenticating user root 192.0.2.30 port 1 [preauth]
`,
			want: "192.0.2.30 failures=1 invalid=0 users=root+0 seen=10:00:00..10:00:00",
		},
		{
			name: "a refused key leaves a close only",
			log:  "Dec  2 10:00:00 h sshd[110]: Connection closed by authenticating user git 192.0.2.40 port 1 [preauth]\n",
			want: "192.0.2.40 failures=1 invalid=0 users=git+0 seen=10:00:00..10:00:00",
		},
		{
			name: "a user sshd_config refuses",
			log: `Dec  2 10:00:00 h sshd[111]: User root from 192.0.2.50 not allowed because not listed in AllowUsers
Dec  2 10:00:02 h sshd[111]: Failed password for invalid user root from 192.0.2.50 port 1 ssh2
Dec  2 10:00:03 h sshd[111]: Connection closed by invalid user root 192.0.2.50 port 1 [preauth]
`,
			want: "192.0.2.50 failures=1 invalid=1 users=root+0 seen=10:00:02..10:00:02",
		},
		{
			name: "scans are not attempts",
			log: `Dec  2 10:00:00 h sshd[112]: error: kex_exchange_identification: read: Connection reset by peer
Dec  2 10:00:00 h sshd[112]: Connection reset by 192.0.2.60 port 1
Dec  2 10:00:01 h sshd[113]: Received disconnect from 192.0.2.60 port 2:11: Bye Bye [preauth]
Dec  2 10:00:01 h sshd[113]: Disconnected from 192.0.2.60 port 2 [preauth]
`,
		},
	}
	now := time.Date(2026, 12, 2, 11, 0, 0, 0, utc)
	for _, tt := range tests {
		a := NewAggregate()
		feed(t, a, now, tt.log)
		a.Expire(now)
		if got := sourcesText(a.Sources(now)); got != tt.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

func TestAggregateWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, utc)
	a := NewAggregate()
	fail := func(at time.Time, pid int, addr, user string) {
		a.Observe(t0, at, pid, Event{Kind: KindFailed, Addr: netip.MustParseAddr(addr), User: user, HasUser: true, Count: 1})
	}
	fail(t0.Add(-26*time.Hour), 1, "192.0.2.1", "old") // before the window: not counted
	fail(t0.Add(-23*time.Hour-30*time.Minute), 2, "192.0.2.1", "early")
	fail(t0.Add(-30*time.Minute), 3, "192.0.2.1", "late")
	fail(t0.Add(time.Hour), 4, "192.0.2.2", "future") // a clock set back: counts as now
	a.Observe(t0, t0.Add(-23*time.Hour), 5, Event{Kind: KindAccepted, Addr: netip.MustParseAddr("192.0.2.1"), User: "ok", HasUser: true, Count: 1})

	steps := []struct {
		now  time.Time
		want string
	}{
		{t0, "192.0.2.1 failures=2 invalid=0 users=early,late+0 seen=12:30:00..11:30:00 ok=1 last=ok@13:00:00 before=1\n" +
			"192.0.2.2 failures=1 invalid=0 users=future+0 seen=12:00:00..12:00:00"},
		{t0.Add(59 * time.Minute), "192.0.2.1 failures=2 invalid=0 users=early,late+0 seen=12:30:00..11:30:00 ok=1 last=ok@13:00:00 before=1\n" +
			"192.0.2.2 failures=1 invalid=0 users=future+0 seen=12:00:00..12:00:00"},
		// The hour of 12:30 yesterday leaves the window.
		{t0.Add(time.Hour), "192.0.2.1 failures=1 invalid=0 users=late+0 seen=13:00:00..11:30:00 ok=1 last=ok@13:00:00 before=0\n" +
			"192.0.2.2 failures=1 invalid=0 users=future+0 seen=12:00:00..12:00:00"},
		// So does the success's.
		{t0.Add(2 * time.Hour), "192.0.2.2 failures=1 invalid=0 users=future+0 seen=12:00:00..12:00:00\n" +
			"192.0.2.1 failures=1 invalid=0 users=late+0 seen=11:30:00..11:30:00"},
		{t0.Add(25 * time.Hour), ""},
	}
	for _, s := range steps {
		if got := sourcesText(a.Sources(s.now)); got != s.want {
			t.Errorf("at %s: got\n%s\nwant\n%s", s.now.Format(time.RFC3339), got, s.want)
		}
	}
	if len(a.sources) != 0 || a.users != 0 || a.byLast.Len() != 0 {
		t.Errorf("got %d sources, %d users, %d in the heap after the window; want none", len(a.sources), a.users, a.byLast.Len())
	}
}

func TestAggregateVersion(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, utc)
	a := NewAggregate()
	v0 := a.Version()
	a.Observe(now, now, 1, Event{Kind: KindInvalidUser, Addr: netip.MustParseAddr("192.0.2.1"), User: "x", HasUser: true, Invalid: true, Count: 1})
	if a.Version() != v0 {
		t.Error("a pending invalid user changed the report")
	}
	a.Observe(now, now, 1, Event{Kind: KindFailed, Addr: netip.MustParseAddr("192.0.2.1"), User: "x", HasUser: true, Invalid: true, Count: 1})
	v1 := a.Version()
	if v1 == v0 {
		t.Error("a failure did not change the version")
	}
	a.Sources(now.Add(time.Minute))
	if a.Version() != v1 {
		t.Error("a report in the same hour changed the version")
	}
}

func TestAggregateBounds(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, utc)
	start := now.Add(-20 * time.Hour)
	a := NewAggregate()
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	const n = MaxSources + 904
	for i := range n {
		a.Observe(now, start.Add(time.Duration(i)*time.Second), i+1, Event{Kind: KindFailed, Addr: addr(i), User: "root", HasUser: true, Count: 1})
	}
	if len(a.sources) != MaxSources {
		t.Fatalf("got %d sources; want %d", len(a.sources), MaxSources)
	}
	if a.sources[addr(903)] != nil || a.sources[addr(904)] == nil {
		t.Error("the sources seen least recently were not the ones evicted")
	}
	got := a.Sources(now)
	if len(got) != MaxReported || got[0].Address != addr(n-1).String() {
		t.Errorf("got %d sources, first %s; want %d, first %s", len(got), got[0].Address, MaxReported, addr(n-1))
	}
	if len(a.conns) > maxConns {
		t.Errorf("got %d connections; want at most %d", len(a.conns), maxConns)
	}

	// 100 names from one source: 16 listed, the rest counted.
	b := NewAggregate()
	for i := range 100 {
		for range 100 - i { // name i is tried 100-i times
			b.Observe(now, now, 0, Event{Kind: KindFailed, Addr: netip.MustParseAddr("192.0.2.1"), User: fmt.Sprintf("u%02d", i), HasUser: true, Count: 1})
		}
	}
	s := b.Sources(now)[0]
	if len(s.Users) != reportedUsers || s.Users[0] != "u00" || s.Users[15] != "u15" || s.UsersMore != 100-reportedUsers {
		t.Errorf("got users %v + %d; want u00..u15 + %d", s.Users, s.UsersMore, 100-reportedUsers)
	}

	// Beyond the names told apart, every attempt counts as a name.
	for i := range maxOthers + 10 {
		b.Observe(now, now, 0, Event{Kind: KindFailed, Addr: netip.MustParseAddr("192.0.2.1"), User: fmt.Sprintf("x%d", i), HasUser: true, Count: 1})
	}
	b.Observe(now, now, 0, Event{Kind: KindFailed, Addr: netip.MustParseAddr("192.0.2.1"), User: "x1", HasUser: true, Count: 1})
	if s := b.Sources(now)[0]; s.UsersMore != 100-reportedUsers+maxOthers+10 {
		t.Errorf("got %d more names; want %d", s.UsersMore, 100-reportedUsers+maxOthers+10)
	}

	// Over all sources the names kept are bounded too.
	c := NewAggregate()
	for i := range maxUsersAll/maxUsers + 10 {
		for u := range maxUsers {
			c.Observe(now, now, 0, Event{Kind: KindFailed, Addr: addr(i), User: fmt.Sprintf("u%d", u), HasUser: true, Count: 1})
		}
	}
	more := uint32(0)
	for _, s := range c.sources {
		r := s.report()
		more += r.UsersMore + uint32(len(r.Users))
	}
	if c.users != maxUsersAll || c.others != 10*maxUsers {
		t.Errorf("got %d names kept, %d hashes; want %d, %d", c.users, c.others, maxUsersAll, 10*maxUsers)
	}
	if want := uint32((maxUsersAll/maxUsers + 10) * maxUsers); more != want {
		t.Errorf("got %d names in all; want %d", more, want)
	}
}

// TestAggregateConnBound opens more connections than are followed: every
// one that named an invalid user still counts once.
func TestAggregateConnBound(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, utc)
	a := NewAggregate()
	const n = maxConns + 1000
	for i := range n {
		a.Observe(now, now.Add(-time.Minute), i+1, Event{Kind: KindInvalidUser, Addr: netip.MustParseAddr("192.0.2.1"), User: "x", HasUser: true, Invalid: true, Count: 1})
	}
	if len(a.conns) > maxConns {
		t.Fatalf("got %d connections; want at most %d", len(a.conns), maxConns)
	}
	a.Expire(now.Add(time.Hour))
	if got := a.Sources(now.Add(time.Hour))[0]; got.Failures != n || got.InvalidUsers != n {
		t.Errorf("got %d failures, %d invalid; want %d", got.Failures, got.InvalidUsers, n)
	}
}

func TestAggregateSaveLoad(t *testing.T) {
	now := time.Date(2026, 12, 2, 17, 52, 0, 0, utc) // in the middle of the log: connections open
	a := NewAggregate()
	feed(t, a, now, mustRead(t, "testdata/openssh-9.2-debian12.log"))
	raw, err := json.Marshal(a.save())
	if err != nil {
		t.Fatal(err)
	}
	var saved savedAggregate
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	b, err := loadAggregate(saved)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour)
	a.Expire(later)
	b.Expire(later)
	ga, gb := a.Sources(later), b.Sources(later)
	if len(ga) == 0 || len(ga) != len(gb) {
		t.Fatalf("got %d and %d sources", len(ga), len(gb))
	}
	for i := range ga {
		if !proto.Equal(ga[i], gb[i]) {
			t.Errorf("source %d: got %s after loading; want %s", i, srcText(gb[i]), srcText(ga[i]))
		}
	}

	bad := []struct {
		name string
		edit func(*savedAggregate)
	}{
		{"not an address", func(s *savedAggregate) { s.Sources[0].Addr = "example.com" }},
		{"a source twice", func(s *savedAggregate) { s.Sources = append(s.Sources, s.Sources[0]) }},
		{"buckets out of order", func(s *savedAggregate) {
			s.Sources[0].Buckets = append(s.Sources[0].Buckets, s.Sources[0].Buckets[0])
		}},
		{"no buckets", func(s *savedAggregate) { s.Sources[0].Buckets = nil }},
		{"a bucket's times outside its hour", func(s *savedAggregate) { s.Sources[0].Buckets[0].First = 0 }},
		{"a connection without pid", func(s *savedAggregate) { s.Conns = append(s.Conns, savedConn{}) }},
		{"too many sources", func(s *savedAggregate) { s.Sources = make([]savedSource, MaxSources+1) }},
	}
	for _, tt := range bad {
		var s savedAggregate
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		tt.edit(&s)
		if _, err := loadAggregate(s); err == nil {
			t.Errorf("%s: loaded; want an error", tt.name)
		}
	}
}

// FuzzAggregate feeds any text as a log and checks what a report promises,
// and that the state file gives the same report back.
func FuzzAggregate(f *testing.F) {
	f.Add([]byte(mustRead(f, "testdata/openssh-9.2-debian12.log")))
	for _, s := range seedMessages {
		f.Add([]byte("Dec  2 17:14:26 web-1 sshd[1234]: " + s + "\nDec  2 17:14:27 web-1 sshd[1234]: Connection closed by 203.0.113.9 port 1 [preauth]\n"))
	}
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, utc)
	f.Fuzz(func(t *testing.T, text []byte) {
		a := NewAggregate()
		feed(t, a, now, string(text))
		raw, err := json.Marshal(a.save())
		if err != nil {
			t.Fatal(err)
		}
		a.Expire(now.Add(time.Hour))
		list := a.Sources(now.Add(time.Hour))
		if len(list) > MaxReported {
			t.Fatalf("%d sources", len(list))
		}
		for i, s := range list {
			if s.InvalidUsers > s.Failures || s.FailuresBeforeSuccess > s.Failures || len(s.Users) > reportedUsers ||
				s.FirstSeenUnix > s.LastSeenUnix || s.Failures == 0 && s.Successes == 0 {
				t.Fatalf("inconsistent: %s", srcText(s))
			}
			if i > 0 && list[i-1].Failures < s.Failures {
				t.Fatalf("not the busiest first: %s before %s", srcText(list[i-1]), srcText(s))
			}
			for _, u := range s.Users {
				if len(u) > MaxUser || u == "" {
					t.Fatalf("user %q", u)
				}
			}
		}
		var saved savedAggregate
		if err := json.Unmarshal(raw, &saved); err != nil {
			t.Fatal(err)
		}
		b, err := loadAggregate(saved)
		if err != nil {
			t.Fatalf("the state saved does not load: %v", err)
		}
		b.Expire(now.Add(time.Hour))
		if got, want := sourcesText(b.Sources(now.Add(time.Hour))), sourcesText(list); got != want {
			t.Fatalf("after loading:\n%s\nwant\n%s", got, want)
		}
	})
}
