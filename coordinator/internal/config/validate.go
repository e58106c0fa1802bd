package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kinds and the engines each may have.
var engines = map[string][]string{
	"database":      {"postgres", "mysql", "redis"},
	"bucket":        {"s3"},
	"probe":         {"http", "https", "tcp", "dns"},
	"load_balancer": {"http", "https", "tcp"},
}

var (
	kindNames   = []string{"database", "bucket", "probe", "load_balancer"}
	engineNames = []string{"dns", "http", "https", "mysql", "postgres", "redis", "s3", "tcp"}
	matchKeys   = []string{"id", "kind", "engine", "server", "finding"}
	// FindingKinds are the security findings a runbook may match
	// (match: {finding: ssh_brute_force}); its command may use {source},
	// {server} and {port}.
	FindingKinds = []string{"ssh_brute_force", "ssh_login_after_failures", "exposed_port", "ssh_password_login", "ssh_root_login", "security_updates", "tls_expiring"}
)

// Limits on probe timing.
const (
	MinInterval               = time.Second
	MinTimeout                = 100 * time.Millisecond
	MaxFailuresBeforeTroubled = 20
)

// Validate checks the meaning of the config: ids present, unique and of
// safe characters; kinds and engines known and compatible; targets
// well-formed for their engine; probe timing in range; runbooks named and
// matching on known keys; and that links, district members and probeFrom
// name targets that exist.
//
// servers are the names of the enrolled servers. When servers is nil the
// servers are not known yet, and a name that is not a resource is taken to
// be a server; pass the names (an empty, non-nil slice for none) to check
// those too. A resource may not share its id with a server.
//
// The error is an *Error listing every problem, in file order.
func (c *Config) Validate(servers []string) error {
	return asError(c.validate(servers))
}

func (c *Config) validate(servers []string) *Error {
	v := &validator{c: c, servers: servers != nil, isServer: map[string]bool{}, resource: map[string]int{}}
	for _, s := range servers {
		v.isServer[s] = true
	}
	v.resources()
	v.probes()
	v.collect()
	v.metrics()
	v.links()
	v.districts()
	v.runbooks()
	v.notifiers()
	if len(v.probs) == 0 {
		return nil
	}
	sortProblems(v.probs)
	return &Error{Problems: v.probs}
}

type validator struct {
	c        *Config
	servers  bool            // whether the servers are known
	isServer map[string]bool // enrolled servers by name
	resource map[string]int  // resource id → index
	probs    []Problem
}

func (v *validator) problem(line int, format string, args ...any) {
	v.probs = append(v.probs, Problem{File: v.c.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// safeID reports whether id is made only of letters, digits, - _ and .
func safeID(id string) bool {
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return id != ""
}

const idChars = "letters, digits, '-', '_' and '.'"

func (v *validator) resources() {
	c := v.c
	for i, r := range c.Resources {
		p := fmt.Sprintf("resources[%d]", i)
		idLine := c.line(p+".id", r.Line)
		who := fmt.Sprintf("resource %q", r.ID)
		switch {
		case r.ID == "":
			v.problem(idLine, "a resource has no id; give it one (%s)", idChars)
			who = "a resource"
		case !safeID(r.ID):
			v.problem(idLine, "resource id %q: use only %s", r.ID, idChars)
		default:
			if first, dup := v.resource[r.ID]; dup {
				v.problem(idLine, "resource id %q is used twice (first at line %d); ids must be unique", r.ID, c.Resources[first].Line)
			} else {
				v.resource[r.ID] = i
			}
			if v.isServer[r.ID] {
				v.problem(idLine, "resource id %q is also the name of an enrolled server; rename the resource", r.ID)
			}
		}

		kindLine := c.line(p+".kind", r.Line)
		allowed, kindOK := engines[r.Kind]
		switch {
		case r.Kind == "":
			v.problem(kindLine, "%s has no kind; set kind: to one of %s", who, strings.Join(kindNames, ", "))
		case !kindOK:
			v.problem(kindLine, "%s: unknown kind %q%s; known kinds: %s", who, r.Kind, didYouMean(r.Kind, kindNames), strings.Join(kindNames, ", "))
		}
		engineLine := c.line(p+".engine", r.Line)
		engineOK := false
		switch {
		case r.Engine == "" && kindOK:
			v.problem(engineLine, "%s has no engine; a %s's engine is one of %s", who, r.Kind, strings.Join(allowed, ", "))
		case r.Engine == "":
			v.problem(engineLine, "%s has no engine; set engine: to one of %s", who, strings.Join(engineNames, ", "))
		case !contains(engineNames, r.Engine):
			v.problem(engineLine, "%s: unknown engine %q%s; known engines: %s", who, r.Engine, didYouMean(r.Engine, engineNames), strings.Join(engineNames, ", "))
		case kindOK && !contains(allowed, r.Engine):
			v.problem(engineLine, "%s: a %s cannot have engine %q; a %s's engine is one of %s", who, r.Kind, r.Engine, r.Kind, strings.Join(allowed, ", "))
		default:
			engineOK = true
		}
		targetLine := c.line(p+".target", r.Line)
		switch {
		case r.Target == "":
			v.problem(targetLine, "%s has no target; set target: to %s", who, targetHint(r.Engine))
		case engineOK:
			if why := checkTarget(r.Engine, r.Target); why != "" {
				v.problem(targetLine, "%s: target %q %s; write %s", who, r.Target, why, targetHint(r.Engine))
			}
		}

		interval, timeout := c.Probes.Interval, c.Probes.Timeout
		intervalFrom, timeoutFrom := "probes.interval", "probes.timeout"
		if r.Interval != 0 {
			interval, intervalFrom = r.Interval, "its interval"
			if r.Interval < MinInterval {
				v.problem(c.line(p+".interval", r.Line), "%s: interval %s is too short; use %s or more", who, r.Interval, MinInterval)
			}
		}
		if r.Timeout != 0 {
			timeout, timeoutFrom = r.Timeout, "its timeout"
			if r.Timeout < MinTimeout {
				v.problem(c.line(p+".timeout", r.Line), "%s: timeout %s is too short; use %s or more", who, r.Timeout, MinTimeout)
			}
		}
		if (r.Interval != 0 || r.Timeout != 0) && timeout >= interval {
			line := c.line(p+".timeout", c.line(p+".interval", r.Line))
			v.problem(line, "%s: %s %s must be shorter than %s %s, or one check would still run when the next starts", who, timeoutFrom, timeout, intervalFrom, interval)
		}
	}
	// probeFrom after every id is known.
	for i, r := range c.Resources {
		for j, s := range r.ProbeFrom {
			line := c.line(fmt.Sprintf("resources[%d].probeFrom[%d]", i, j), r.Line)
			what := fmt.Sprintf("resource %q: probeFrom", r.ID)
			switch {
			case s == "":
				v.problem(line, "%s has an empty name; name a server whose agent runs the probe", what)
			case v.isResource(s):
				v.problem(line, "%s names resource %q; probeFrom names servers, whose agents run the probe", what, s)
			case v.servers && !v.isServer[s]:
				v.problem(line, "%s names unknown server %q%s; enrolled servers: %s", what, s, didYouMean(s, v.serverNames()), listNames(v.serverNames()))
			}
		}
	}
}

func (v *validator) isResource(id string) bool { _, ok := v.resource[id]; return ok }

// known reports whether name is a target links and districts may name.
func (v *validator) known(name string) bool {
	return v.isResource(name) || v.isServer[name] || !v.servers
}

func (v *validator) serverNames() []string {
	names := make([]string, 0, len(v.isServer))
	for s := range v.isServer {
		names = append(names, s)
	}
	slices.Sort(names)
	return names
}

func (v *validator) targetNames() []string {
	names := v.serverNames()
	for id := range v.resource {
		if !v.isServer[id] {
			names = append(names, id)
		}
	}
	slices.Sort(names)
	return names
}

// unknown is the tail of a message about a name that is no target: what
// the name was (target, member …), the name, the known names and what to do.
func (v *validator) unknown(what, name string) string {
	names := v.targetNames()
	return fmt.Sprintf("unknown %s %q%s; known: %s; declare it under resources, enroll the server, or fix the name",
		what, name, didYouMean(name, names), listNames(names))
}

func (v *validator) collect() {
	c := v.c
	for _, x := range []struct {
		key      string
		got, min time.Duration
	}{{"fast", c.Collect.Fast, MinCollect.Fast}, {"medium", c.Collect.Medium, MinCollect.Medium}, {"slow", c.Collect.Slow, MinCollect.Slow}, {"updates", c.Collect.Updates, MinCollect.Updates}} {
		if x.got < x.min {
			v.problem(c.line("collect."+x.key, 0), "collect.%s %s is too short; use %s or more", x.key, x.got, x.min)
		}
	}
}

func (v *validator) metrics() {
	c, m := v.c, v.c.Metrics
	switch {
	case m.Raw < MinMetricsRaw:
		v.problem(c.line("metrics.raw", 0), "metrics.raw %s is too short; keep %s or more of one-minute history (the default is %s)", m.Raw, MinMetricsRaw, DefaultMetrics.Raw)
	case m.Raw > MaxMetrics.Raw:
		v.problem(c.line("metrics.raw", 0), "metrics.raw %s is too long; keep at most %s of one-minute history, and longer at quarter hours with metrics.rollup", m.Raw, MaxMetrics.Raw)
	}
	switch {
	case m.Rollup < m.Raw && m.Raw >= MinMetricsRaw:
		v.problem(c.line("metrics.rollup", c.line("metrics.raw", 0)), "metrics.rollup %s is shorter than metrics.raw %s; keep the quarter hours at least as long as the minutes", m.Rollup, m.Raw)
	case m.Rollup > MaxMetrics.Rollup:
		v.problem(c.line("metrics.rollup", 0), "metrics.rollup %s is too long; keep at most %s of quarter-hour history", m.Rollup, MaxMetrics.Rollup)
	}
}

func (v *validator) probes() {
	c, pd := v.c, v.c.Probes
	if pd.Interval < MinInterval {
		v.problem(c.line("probes.interval", 0), "probes.interval %s is too short; use %s or more", pd.Interval, MinInterval)
	}
	if pd.Timeout < MinTimeout {
		v.problem(c.line("probes.timeout", 0), "probes.timeout %s is too short; use %s or more", pd.Timeout, MinTimeout)
	}
	if pd.Timeout >= pd.Interval && pd.Interval >= MinInterval {
		v.problem(c.line("probes.timeout", c.line("probes.interval", 0)), "probes.timeout %s must be shorter than probes.interval %s, or one check would still run when the next starts", pd.Timeout, pd.Interval)
	}
	if pd.FailuresBeforeTroubled < 1 || pd.FailuresBeforeTroubled > MaxFailuresBeforeTroubled {
		v.problem(c.line("probes.failuresBeforeTroubled", 0), "probes.failuresBeforeTroubled %d is out of range; use 1 to %d", pd.FailuresBeforeTroubled, MaxFailuresBeforeTroubled)
	}
}

func (v *validator) links() {
	c := v.c
	for i, l := range c.Links {
		p := fmt.Sprintf("links[%d]", i)
		who := fmt.Sprintf("link from %q to %q", l.From, l.To)
		switch {
		case l.From == "" || l.To == "":
			v.problem(l.Line, "%s: a link needs both ends; write {from: USER, to: USED}", who)
		case l.From == l.To:
			v.problem(l.Line, "%s: a target cannot use itself", who)
		default:
			if !v.known(l.From) {
				v.problem(c.line(p+".from", l.Line), "%s: %s", who, v.unknown("target", l.From))
			}
			if !v.known(l.To) {
				v.problem(c.line(p+".to", l.Line), "%s: %s", who, v.unknown("target", l.To))
			}
		}
	}
}

func (v *validator) districts() {
	c := v.c
	seen := map[string]int{}
	for i, d := range c.Districts {
		p := fmt.Sprintf("districts[%d]", i)
		who := v.ident(c.line(p+".id", d.Line), d.Line, "district", "id", d.ID, seen)
		for j, m := range d.Members {
			line := c.line(fmt.Sprintf("%s.members[%d]", p, j), d.Line)
			switch {
			case m == "":
				v.problem(line, "%s: a member has an empty name", who)
			case !v.known(m):
				v.problem(line, "%s: %s", who, v.unknown("member", m))
			}
		}
	}
}

// ident checks the field that identifies an item (missing, malformed, used
// twice; seen maps values to the line of the item that used them first)
// and returns how messages name the item.
func (v *validator) ident(line, itemLine int, item, field, value string, seen map[string]int) string {
	switch {
	case value == "":
		v.problem(line, "a %s has no %s; give it one (%s)", item, field, idChars)
		return "a " + item
	case !safeID(value):
		v.problem(line, "%s %s %q: use only %s", item, field, value, idChars)
	default:
		if first, dup := seen[value]; dup {
			v.problem(line, "%s %s %q is used twice (first at line %d); %ss must be unique", item, field, value, first, field)
		} else {
			seen[value] = itemLine
		}
	}
	return fmt.Sprintf("%s %q", item, value)
}

func (v *validator) runbooks() {
	c := v.c
	seen := map[string]int{}
	for i, rb := range c.Runbooks {
		p := fmt.Sprintf("runbooks[%d]", i)
		who := v.ident(c.line(p+".name", rb.Line), rb.Line, "runbook", "name", rb.Name, seen)
		if strings.TrimSpace(rb.Command) == "" {
			v.problem(c.line(p+".command", rb.Line), "%s has no command; set command: to what it runs", who)
		}
		keys := make([]string, 0, len(rb.Match))
		for k := range rb.Match {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			val := rb.Match[k]
			line := c.line(p+".match."+k, c.line(p+".match", rb.Line))
			switch {
			case !contains(matchKeys, k):
				v.problem(line, "%s: unknown match key %q%s; match on %s", who, k, didYouMean(k, matchKeys), strings.Join(matchKeys, ", "))
			case val == "":
				v.problem(line, "%s: match.%s is empty; give a value or leave the key out", who, k)
			case k == "kind" && !contains(kindNames, val) && val != "server":
				v.problem(line, "%s: match.kind %q is no kind%s; kinds: server, %s", who, val, didYouMean(val, kindNames), strings.Join(kindNames, ", "))
			case k == "finding" && !contains(FindingKinds, val):
				v.problem(line, "%s: match.finding %q is no finding%s; findings: %s", who, val, didYouMean(val, FindingKinds), strings.Join(FindingKinds, ", "))
			case k == "engine" && !contains(engineNames, val):
				v.problem(line, "%s: match.engine %q is no engine%s; engines: %s", who, val, didYouMean(val, engineNames), strings.Join(engineNames, ", "))
			case k == "id" && !v.known(val):
				v.problem(line, "%s: match.id: %s", who, v.unknown("target", val))
			case k == "server" && v.servers && !v.isServer[val]:
				v.problem(line, "%s: match.server names unknown server %q%s; enrolled servers: %s", who, val, didYouMean(val, v.serverNames()), listNames(v.serverNames()))
			}
		}
	}
}

// targetHint says what a target for engine looks like.
func targetHint(engine string) string {
	switch engine {
	case "postgres":
		return "host:port, like 10.0.4.20:5432"
	case "mysql":
		return "host:port, like 10.0.4.21:3306"
	case "redis":
		return "host:port, like 10.0.4.22:6379"
	case "tcp":
		return "host:port, like 10.0.4.10:443"
	case "http", "https":
		return "a URL, like https://lekhix.com/health"
	case "s3":
		return "a bucket URL, like s3://backups or https://s3.eu-west-1.amazonaws.com/backups"
	case "dns":
		return "a host name to resolve, like lekhix.com"
	}
	return "host:port, a URL or a host name, depending on the engine"
}

// checkTarget says what is wrong with target for engine, or "".
func checkTarget(engine, target string) string {
	switch engine {
	case "postgres", "mysql", "redis", "tcp":
		if strings.Contains(target, "://") {
			return "is a URL, not host:port"
		}
		host, port, err := net.SplitHostPort(target)
		if err != nil {
			return "is not host:port (" + strings.TrimPrefix(err.Error(), "address "+target+": ") + ")"
		}
		if host == "" {
			return "has no host"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("has port %q, which is not a number from 1 to 65535", port)
		}
	case "http", "https", "s3":
		u, err := url.Parse(target)
		if err != nil || u.Scheme == "" || !strings.Contains(target, "://") {
			return "is not a URL with a scheme"
		}
		schemes := map[string][]string{"http": {"http", "https"}, "https": {"https"}, "s3": {"s3", "http", "https"}}[engine]
		if !contains(schemes, u.Scheme) {
			return fmt.Sprintf("has scheme %q; engine %s takes %s://", u.Scheme, engine, strings.Join(schemes, ":// or "))
		}
		if u.Host == "" {
			return "has no host"
		}
		if u.Scheme != "s3" && u.Port() != "" {
			if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
				return fmt.Sprintf("has port %q, which is not a number from 1 to 65535", u.Port())
			}
		}
	case "dns":
		if !hostName(target) {
			return "is not a host name"
		}
	}
	return ""
}

// hostName reports whether s is a DNS name: dot-separated labels of letters,
// digits, '-' and '_', none empty (but a final dot) or longer than 63, 253
// in all.
func hostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// listNames lists names for a message, the first dozen of a long list.
func listNames(names []string) string {
	const most = 12
	if len(names) == 0 {
		return "none"
	}
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(", … (%d more)", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// didYouMean is ` (did you mean "x"?)` when a candidate is close to s.
func didYouMean(s string, candidates []string) string {
	if m := suggest(s, candidates); m != "" {
		return fmt.Sprintf(" (did you mean %q?)", m)
	}
	return ""
}

// suggest returns the candidate closest to s, if it is close enough to be a
// typo: the same but for case, '-' and '_', or within two edits.
func suggest(s string, candidates []string) string {
	fold := func(x string) string { return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(x)) }
	best, bestD := "", 3
	for _, c := range candidates {
		if fold(c) == fold(s) {
			return c
		}
		if d := distance(s, c); d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between short strings; long ones
// are never typos of each other worth the quadratic cost.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
