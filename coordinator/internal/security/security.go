// Package security judges what the agents gather — SSH logins per source,
// firewall blocks, sshd's settings, listening ports, pending updates — and
// the probed resources' certificates into findings: attacks, exposures,
// and gaps (the checks that could not run, so that "nothing found" is
// never mistaken for "nothing there").
//
// Everything an agent sends about logins came from logs an attacker wrote
// into: it is already bounded by the agent, is bounded again here, and
// leaves only as data.
package security

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
)

// Finding kinds; a runbook whose match names one (match: {finding: …}) is
// offered as the advice for it.
const (
	KindBruteForce      = "ssh_brute_force"
	KindLoginAfterFails = "ssh_login_after_failures"
	KindExposedPort     = "exposed_port"
	KindPasswordLogin   = "ssh_password_login"
	KindRootLogin       = "ssh_root_login"
	KindSecurityUpdates = "security_updates"
	KindTLSExpiring     = "tls_expiring"
)

// Kinds lists every finding kind; the config validates runbook matches
// against the same list.
var Kinds = config.FindingKinds

// Options tune the judgement; DefaultOptions gives the defaults.
type Options struct {
	// AttackFailures: a source with at least this many failures is an attack.
	AttackFailures uint32
	// OpenFor: an attack seen within this long is open, else ended.
	OpenFor time.Duration
	// TLSWarn: certificates expiring within this long are findings.
	TLSWarn time.Duration
	// Runbooks are offered as advice where their match names a finding.
	Runbooks []config.Runbook
	// Full lists every pending security package and every user name tried
	// that the agents sent, instead of the first few with a count of the
	// rest: for one server's findings (security_findings {"server": …}),
	// which a shortened answer names as the call that lists them all.
	Full bool
}

// DefaultOptions: five failures make an attack, open for fifteen minutes
// after the last one, certificates flagged two weeks ahead.
func DefaultOptions() Options {
	return Options{AttackFailures: 5, OpenFor: 15 * time.Minute, TLSWarn: 14 * 24 * time.Hour}
}

// Attack is a source that failed to log in over SSH, often; or that then
// logged in.
type Attack struct {
	Kind, Server, Source string
	Users                []string
	UsersMore            int
	Count, InvalidUsers  int
	FirstSeen, LastSeen  time.Time
	Blocked              bool
	BlockedBy            []string
	State                string // open or ended
	Successes            int
	LastSuccessUser      string
	LastSuccess          time.Time
	Advice               string
	Runbook              string
}

// Exposure is something reachable that should not be, or a weakness.
type Exposure struct {
	Kind, Server, Resource string
	Severity               string // high, medium, low
	Detail                 string
	Address                string
	Port                   uint32
	Process                string
	Advice                 string
	Runbook                string
}

// Gap is a check that could not run on a server.
type Gap struct {
	Server, Check, Reason string
}

// Report is the judgement over the fleet.
type Report struct {
	Attacks   []Attack
	Exposures []Exposure
	Gaps      []Gap
}

// riskyPorts are database, cache and admin ports that should not face a
// network their clients are not on.
var riskyPorts = map[uint32]string{
	5432: "PostgreSQL", 3306: "MySQL", 6379: "Redis", 27017: "MongoDB", 9200: "Elasticsearch", 9300: "Elasticsearch transport",
	11211: "memcached", 2375: "the Docker API without TLS", 2376: "the Docker API", 2379: "etcd", 2380: "etcd peers",
	5984: "CouchDB", 9042: "Cassandra", 8086: "InfluxDB", 15672: "RabbitMQ management", 5672: "RabbitMQ",
	8500: "Consul", 4369: "Erlang port mapper", 6443: "the Kubernetes API", 10250: "the kubelet API", 5601: "Kibana",
}

// maxUsers bounds the user names an attack lists, maxPackages the pending
// security packages an exposure names, unless Options.Full.
const (
	maxUsers    = 16
	maxPackages = 10
)

// FullListCall is the call that lists what a shortened finding left out,
// for the text that says so.
func FullListCall(server string) string {
	return fmt.Sprintf("security_findings {\"server\": %q}", server)
}

// Judge turns the fleet's facts and the resources' states into findings.
func Judge(servers []fleet.Server, res []resources.State, now time.Time, o Options) Report {
	found := make([]Findings, len(servers))
	for i, srv := range servers {
		found[i], _ = JudgeServer(srv, now, o)
	}
	return Collect(found, res, now, o)
}

// Findings are what Judge finds on one server.
type Findings struct {
	Attacks   []Attack
	Exposures []Exposure
	Gaps      []Gap
}

// JudgeServer is Judge's part for one server at now, and the last time the
// same findings hold for: attacks open and end, and an ended attack's
// advice says how long ago it stopped, to the minute. A caller that kept
// them may reuse them at any time from now to then (both included) for as
// long as the server's state is the same.
func JudgeServer(srv fleet.Server, now time.Time, o Options) (Findings, time.Time) {
	var f Findings
	until := farFuture
	st := srv.State
	if !srv.Online {
		f.Gaps = append(f.Gaps, Gap{Server: srv.Name, Check: "agent",
			Reason: fmt.Sprintf("the agent is offline (last seen %s): what follows is as of then", srv.LastSeen.UTC().Format(time.RFC3339))})
	}
	blocks := parseBlocks(st.GetDefenses().GetFirewall().GetBlocks())
	for _, src := range st.GetLogins().GetSources() {
		as, u := attacks(srv.Name, src, blocks, now, o)
		f.Attacks = append(f.Attacks, as...)
		until = minTime(until, u)
	}
	f.Exposures = exposures(srv, o)
	f.Gaps = append(f.Gaps, gaps(srv)...)
	return f, until
}

// CertificatesExpiring says whether a resource's certificate is a finding
// at now: without one, Collect's report is the servers' findings alone.
func CertificatesExpiring(res []resources.State, now time.Time, o Options) bool {
	return slices.ContainsFunc(res, func(r resources.State) bool { return expiring(r, now, o) })
}

func expiring(r resources.State, now time.Time, o Options) bool {
	return !r.TLSNotAfter.IsZero() && r.TLSNotAfter.Sub(now) <= o.TLSWarn
}

// farFuture is the end of findings that do not change with the time.
var farFuture = time.Unix(1<<62, 0)

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Collect is the report of the servers' findings, in any order, and of the
// resources' certificates at now, ranked as Judge ranks them.
func Collect(found []Findings, res []resources.State, now time.Time, o Options) Report {
	// A fleet has tens of thousands of findings, each some hundred bytes:
	// they are ranked by pointer and copied once, into lists of their size.
	var attacks []*Attack
	var exposures []*Exposure
	gaps := 0
	for i := range found {
		for j := range found[i].Attacks {
			attacks = append(attacks, &found[i].Attacks[j])
		}
		for j := range found[i].Exposures {
			exposures = append(exposures, &found[i].Exposures[j])
		}
		gaps += len(found[i].Gaps)
	}
	rep := Report{Gaps: make([]Gap, 0, gaps)}
	for _, f := range found {
		rep.Gaps = append(rep.Gaps, f.Gaps...)
	}
	for _, r := range res {
		if !expiring(r, now, o) {
			continue
		}
		left := r.TLSNotAfter.Sub(now)
		detail := fmt.Sprintf("the TLS certificate of %s expires %s (in %d days)", r.Target, r.TLSNotAfter.UTC().Format(time.RFC3339), int(left.Hours()/24))
		sev := "medium"
		if left <= 0 {
			detail, sev = fmt.Sprintf("the TLS certificate of %s expired %s", r.Target, r.TLSNotAfter.UTC().Format(time.RFC3339)), "high"
		} else if left < 3*24*time.Hour {
			sev = "high"
		}
		e := Exposure{Kind: KindTLSExpiring, Resource: r.ID, Severity: sev, Detail: detail,
			Advice: "renew the certificate (certbot renew, or your CA's process) and reload the server that presents it"}
		e.Runbook, e.Advice = advise(o.Runbooks, KindTLSExpiring, "", nil, e.Advice)
		exposures = append(exposures, &e)
	}
	blockedLast := func(b bool) int {
		if b {
			return 1
		}
		return -1
	}
	slices.SortStableFunc(attacks, func(a, b *Attack) int {
		if a.State != b.State {
			return cmp.Compare(b.State, a.State) // open before ended
		}
		if a.Blocked != b.Blocked {
			return blockedLast(a.Blocked) // nothing blocks it: it needs doing first
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Kind, b.Kind))
	})
	sevRank := func(s string) int {
		switch s {
		case "high":
			return 0
		case "medium":
			return 1
		case "low":
			return 2
		}
		return 0 // as a map without the key would have it
	}
	slices.SortStableFunc(exposures, func(a, b *Exposure) int {
		return cmp.Or(cmp.Compare(sevRank(a.Severity), sevRank(b.Severity)), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Resource, b.Resource),
			cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Address, b.Address))
	})
	rep.Attacks, rep.Exposures = values(attacks), values(exposures)
	return rep
}

// values are the values ps point to, in order; never nil.
func values[T any](ps []*T) []T {
	out := make([]T, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

type block struct {
	net netip.Prefix
	by  string
}

// OpenAttacks are the attacks on one server still open at now: what a
// row of list_servers says of it. The sources whose attacks ended are
// passed over before any address is parsed or advice written, so that a
// fleet of 10,000 servers is judged in a few milliseconds.
func OpenAttacks(server string, st *gridcityv1.StateUpdate, now time.Time, o Options) []Attack {
	var out []Attack
	var blocks []block
	parsed := false
	open := func(atUnix int64) bool { return now.Sub(unix(atUnix)) <= o.OpenFor }
	for _, src := range st.GetLogins().GetSources() {
		bruteForce := src.GetFailures() >= o.AttackFailures && open(src.GetLastSeenUnix())
		loginAfter := src.GetSuccesses() > 0 && src.GetFailuresBeforeSuccess() >= o.AttackFailures && open(src.GetLastSuccessUnix())
		if !bruteForce && !loginAfter {
			continue
		}
		if !parsed {
			blocks, parsed = parseBlocks(st.GetDefenses().GetFirewall().GetBlocks()), true
		}
		as, _ := attacks(server, src, blocks, now, o)
		for _, a := range as {
			if a.State == "open" {
				out = append(out, a)
			}
		}
	}
	return out
}

// OpenAttacksUntil is the last time OpenAttacks finds the same attacks on
// this state as it does at now: when the first of the sources open at now
// has been quiet for OpenFor. A source ended at now stays ended.
func OpenAttacksUntil(st *gridcityv1.StateUpdate, now time.Time, o Options) time.Time {
	until := farFuture
	for _, src := range st.GetLogins().GetSources() {
		for _, at := range []int64{src.GetLastSeenUnix(), src.GetLastSuccessUnix()} {
			if end := unix(at).Add(o.OpenFor); !now.After(end) {
				until = minTime(until, end)
			}
		}
	}
	return until
}

func parseBlocks(bs []*gridcityv1.Block) []block {
	var out []block
	for _, b := range bs {
		p, err := netip.ParsePrefix(b.GetNetwork())
		if err != nil {
			a, err := netip.ParseAddr(b.GetNetwork())
			if err != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, block{net: p.Masked(), by: Clean(b.GetBy(), 128)})
	}
	return out
}

// attacks are one source's attacks at now, and the last time they stay as
// they are (see JudgeServer).
func attacks(server string, s *gridcityv1.AuthSource, blocks []block, now time.Time, o Options) ([]Attack, time.Time) {
	addr, err := netip.ParseAddr(s.GetAddress())
	if err != nil {
		return nil, farFuture // not an address: nothing an agent of ours sends
	}
	addr = addr.Unmap()
	var by []string
	for _, b := range blocks {
		if b.net.Contains(addr) && !slices.Contains(by, b.by) {
			by = append(by, b.by)
		}
	}
	keep := maxUsers
	if o.Full {
		keep = len(s.GetUsers())
	}
	users := make([]string, 0, min(len(s.GetUsers()), keep))
	for _, u := range s.GetUsers()[:min(len(s.GetUsers()), keep)] {
		users = append(users, Clean(u, 64))
	}
	base := Attack{Server: server, Source: addr.String(), Users: users, UsersMore: int(s.GetUsersMore()) + len(s.GetUsers()) - len(users),
		Count: int(s.GetFailures()), InvalidUsers: int(s.GetInvalidUsers()),
		FirstSeen: unix(s.GetFirstSeenUnix()), LastSeen: unix(s.GetLastSeenUnix()), Blocked: len(by) > 0, BlockedBy: by,
		Successes: int(s.GetSuccesses()), LastSuccessUser: Clean(s.GetLastSuccessUser(), 64), LastSuccess: unix(s.GetLastSuccessUnix())}
	base.State = "ended"
	if now.Sub(base.LastSeen) <= o.OpenFor {
		base.State = "open"
	}
	// Open until OpenFor after the last attempt or login, then ended for
	// good; an ended one's advice counts the minutes since.
	until := farFuture
	for _, last := range []time.Time{base.LastSeen, base.LastSuccess} {
		if end := last.Add(o.OpenFor); !now.After(end) {
			until = minTime(until, end)
		}
	}
	if base.State == "ended" && !base.Blocked {
		// now.Sub(LastSeen).Round(time.Minute) is the same until the
		// half minute past it, rounded up from there.
		ago := now.Sub(base.LastSeen).Round(time.Minute)
		until = minTime(until, base.LastSeen.Add(ago+30*time.Second-time.Nanosecond))
	}
	var out []Attack
	if s.GetFailures() >= o.AttackFailures {
		a := base
		a.Kind = KindBruteForce
		vars := map[string]string{"source": a.Source, "server": server}
		switch {
		case a.Blocked:
			a.Advice = fmt.Sprintf("already blocked (%s); nothing to do unless it comes back from elsewhere", strings.Join(by, "; "))
		case a.State == "open":
			a.Runbook, a.Advice = advise(o.Runbooks, KindBruteForce, server, vars, fmt.Sprintf(
				"block %s on %s (e.g. nft add rule inet filter input ip%s saddr %s drop, through run_command), and consider fail2ban for the sshd jail; "+
					"if password login is on, turn it off", a.Source, server, map[bool]string{true: "", false: "6"}[addr.Is4()], a.Source))
		default:
			a.Runbook, a.Advice = advise(o.Runbooks, KindBruteForce, server, vars, fmt.Sprintf(
				"it stopped %s ago; fail2ban on %s would block the next one by itself", now.Sub(a.LastSeen).Round(time.Minute), server))
		}
		out = append(out, a)
	}
	if s.GetSuccesses() > 0 && s.GetFailuresBeforeSuccess() >= o.AttackFailures {
		a := base
		a.Kind, a.Count = KindLoginAfterFails, int(s.GetFailuresBeforeSuccess())
		a.State = "ended"
		if now.Sub(a.LastSuccess) <= o.OpenFor {
			a.State = "open"
		}
		a.Runbook, a.Advice = advise(o.Runbooks, KindLoginAfterFails, server, map[string]string{"source": a.Source, "server": server}, fmt.Sprintf(
			"%s logged in as %q after %d failures from the same address: confirm with that user that it was them; if not, treat %s as compromised "+
				"(lock the account, look at `last` and the user's ~/.ssh/authorized_keys)", a.Source, a.LastSuccessUser, a.Count, server))
		out = append(out, a)
	}
	return out, until
}

func exposures(srv fleet.Server, o Options) []Exposure {
	st := srv.State
	var out []Exposure
	public := slices.ContainsFunc(st.GetHost().GetAddresses(), func(a string) bool { return isPublic(a) })
	seen := map[string]bool{}
	sshPort, sshAddr := uint32(0), ""
	for _, l := range st.GetListeners().GetItems() {
		if !strings.HasPrefix(l.GetProto(), "tcp") {
			continue
		}
		addr, err := netip.ParseAddr(strings.Trim(l.GetAddress(), "[]"))
		if err != nil || addr.IsLoopback() {
			continue
		}
		proc := Clean(l.GetProcess(), 64)
		if sshPort == 0 && (proc == "sshd" || l.GetPort() == 22) {
			sshPort, sshAddr = l.GetPort(), addr.String()
		}
		what, ok := riskyPorts[l.GetPort()]
		key := fmt.Sprint(l.GetPort())
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		e := Exposure{Kind: KindExposedPort, Server: srv.Name, Address: addr.String(), Port: l.GetPort(), Process: proc}
		switch {
		case addr.IsUnspecified() && public:
			e.Severity, e.Detail = "high", fmt.Sprintf("%s (port %d) listens on all addresses, and %s has a public one", what, l.GetPort(), srv.Name)
		case addr.IsUnspecified():
			e.Severity, e.Detail = "medium", fmt.Sprintf("%s (port %d) listens on all addresses (only private ones on %s now, but any added later too)", what, l.GetPort(), srv.Name)
		case isPublic(addr.String()):
			e.Severity, e.Detail = "high", fmt.Sprintf("%s (port %d) listens on the public address %s", what, l.GetPort(), addr)
		default:
			e.Severity, e.Detail = "low", fmt.Sprintf("%s (port %d) listens on the private address %s", what, l.GetPort(), addr)
		}
		e.Runbook, e.Advice = advise(o.Runbooks, KindExposedPort, srv.Name, map[string]string{"server": srv.Name, "port": fmt.Sprint(l.GetPort())},
			fmt.Sprintf("bind it to loopback or to the private address its clients use, or allow port %d only from them in the firewall", l.GetPort()))
		out = append(out, e)
	}
	if sshd := st.GetDefenses().GetSshd(); sshd != nil {
		if sshd.GetPasswordAuthentication() == "yes" || (sshd.GetKbdInteractiveAuthentication() == "yes" && sshd.GetUsePam() == "yes") {
			from := sshd.GetPasswordAuthenticationFrom()
			detail := fmt.Sprintf("sshd accepts passwords (PasswordAuthentication %s, from %s)", sshd.GetPasswordAuthentication(), Clean(from, 256))
			if sshd.GetPasswordAuthentication() != "yes" {
				detail = fmt.Sprintf("sshd accepts passwords through PAM (KbdInteractiveAuthentication yes from %s, UsePAM yes)", Clean(sshd.GetKbdInteractiveAuthenticationFrom(), 256))
			}
			if sshd.GetHasMatchBlocks() {
				detail += "; Match blocks may change it for some users or addresses"
			}
			sev := "medium"
			if public {
				sev = "high"
			}
			e := Exposure{Kind: KindPasswordLogin, Server: srv.Name, Severity: sev, Detail: detail, Address: sshAddr, Port: sshPort, Process: "sshd"}
			e.Runbook, e.Advice = advise(o.Runbooks, KindPasswordLogin, srv.Name, map[string]string{"server": srv.Name},
				"after checking that key login works for everyone who needs it, set PasswordAuthentication no and KbdInteractiveAuthentication no in /etc/ssh/sshd_config.d/ (a drop-in read first wins) and reload sshd")
			out = append(out, e)
		}
		if sshd.GetPermitRootLogin() == "yes" {
			e := Exposure{Kind: KindRootLogin, Server: srv.Name, Severity: "medium", Address: sshAddr, Port: sshPort, Process: "sshd",
				Detail: fmt.Sprintf("sshd lets root log in with a password (PermitRootLogin yes, from %s)", Clean(sshd.GetPermitRootLoginFrom(), 256))}
			e.Runbook, e.Advice = advise(o.Runbooks, KindRootLogin, srv.Name, map[string]string{"server": srv.Name},
				"set PermitRootLogin prohibit-password (or no) in a drop-in under /etc/ssh/sshd_config.d/ and reload sshd")
			out = append(out, e)
		}
	}
	if u := st.GetUpdates(); u.GetSecurity() > 0 {
		pkgs := u.GetSecurityPackages()
		keep := maxPackages
		if o.Full {
			keep = len(pkgs)
		}
		list := make([]string, 0, min(len(pkgs), keep))
		for _, p := range pkgs[:min(len(pkgs), keep)] {
			list = append(list, Clean(p, 64))
		}
		detail := fmt.Sprintf("%d security updates pending", u.GetSecurity())
		if len(list) > 0 {
			detail += ": " + strings.Join(list, ", ")
			switch {
			case len(pkgs) > len(list):
				detail += fmt.Sprintf(" and %d more (%s lists them all)", len(pkgs)-len(list), FullListCall(srv.Name))
			case int(u.GetSecurity()) > len(pkgs):
				detail += fmt.Sprintf("; the agent sent the names of these %d only (apt list --upgradable or dnf updateinfo list --security on the server shows the rest)", len(pkgs))
			}
		}
		e := Exposure{Kind: KindSecurityUpdates, Server: srv.Name, Severity: "medium", Detail: detail}
		cmd := "apt-get install --only-upgrade PACKAGES (or unattended-upgrade)"
		if m := u.GetManager(); m == "dnf" || m == "yum" {
			cmd = m + " upgrade --security"
		}
		e.Runbook, e.Advice = advise(o.Runbooks, KindSecurityUpdates, srv.Name, map[string]string{"server": srv.Name}, "install them: "+cmd+", through run_command")
		out = append(out, e)
	}
	return out
}

// securityChecks are the collectors whose gaps hide findings.
var securityChecks = []string{"logins", "defenses", "updates", "sockets"}

func gaps(srv fleet.Server) []Gap {
	var out []Gap
	for _, g := range srv.State.GetGaps().GetItems() {
		check := g.GetCheck()
		name, _, _ := strings.Cut(check, ":")
		if slices.Contains(securityChecks, name) {
			out = append(out, Gap{Server: srv.Name, Check: Clean(check, 64), Reason: Clean(g.GetReason(), 512)})
		}
	}
	if srv.State != nil && srv.State.GetLogins() == nil && !hasGap(out, "logins") {
		out = append(out, Gap{Server: srv.Name, Check: "logins", Reason: "the agent sent no SSH login facts (an agent older than this coordinator, or not collected yet)"})
	}
	if srv.State != nil && srv.State.GetDefenses() == nil && !hasGap(out, "defenses") {
		out = append(out, Gap{Server: srv.Name, Check: "defenses", Reason: "the agent sent no firewall or sshd facts (an agent older than this coordinator, or not collected yet)"})
	}
	// Without these no exposure can be found: their absence is a gap, not
	// "no pending security updates" or "no port open".
	if srv.State != nil && srv.State.GetUpdates() == nil && !hasGap(out, "updates") {
		out = append(out, Gap{Server: srv.Name, Check: "updates", Reason: "the agent has not reported pending updates yet: security updates are unknown, not none"})
	}
	if srv.State != nil && srv.State.GetListeners() == nil && !hasGap(out, "sockets") {
		out = append(out, Gap{Server: srv.Name, Check: "sockets", Reason: "the agent has not reported its listening ports yet: exposed ports are unknown, not none"})
	}
	return out
}

func hasGap(gs []Gap, check string) bool {
	return slices.ContainsFunc(gs, func(g Gap) bool { name, _, _ := strings.Cut(g.Check, ":"); return name == check })
}

// advise returns the first runbook whose match names the finding (and the
// server, if it names one), with {source}, {server} and {port} in its
// command filled in, or the fallback advice.
func advise(rbs []config.Runbook, kind, server string, vars map[string]string, fallback string) (runbook, advice string) {
	for _, rb := range rbs {
		if rb.Match["finding"] != kind {
			continue
		}
		if s, ok := rb.Match["server"]; ok && s != server {
			continue
		}
		cmd := rb.Command
		for k, v := range vars {
			cmd = strings.ReplaceAll(cmd, "{"+k+"}", v)
		}
		where := ""
		if server != "" {
			where = " on " + server
		}
		return rb.Name, fmt.Sprintf("run the runbook %q%s through run_command: %s", rb.Name, where, cmd)
	}
	return "", fallback
}

// isPublic reports a global unicast address outside the private,
// shared (CGNAT) and documentation ranges.
func isPublic(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (CGNAT, tailscale)
	netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("2001:db8::/32"),
}

func unix(s int64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}

// Clean bounds text from a host: valid UTF-8, no control characters, at
// most n bytes.
func Clean(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
