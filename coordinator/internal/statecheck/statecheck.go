// Package statecheck checks what an agent sends before the coordinator
// keeps it: one value that JSON cannot carry (NaN, ±Inf) would fail every
// answer that shows the fleet, and an impossible one (a negative size, 300 %
// busy, a clock an hour ahead) would mislead whoever reads it. Each state
// section has its own table of numeric fields, each field a rule for its
// class of value, so that a field added to the proto without a rule fails
// TestEveryNumericFieldHasARule. The agent API refuses an update with a bad
// value whole; the fleet repairs a stored state that fails (see Repair).
package statecheck

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Limits on what one state update may hold. They are far above any real
// host and keep a broken or hostile agent from filling the coordinator.
const (
	MaxItems  = 4096
	maxString = 1024
	// maxUsers bounds the user names of one login source (the agent sends 16).
	maxUsers = 64
)

// Bounds of the numeric rules.
const (
	// maxSize is 1 EiB: no disk, memory or filesystem reported by one host
	// comes near it; a uint64 at or above 2^63 is a negative number sent
	// as unsigned.
	maxSize = 1 << 60
	// maxCores is far above the largest single-image machines.
	maxCores = 1 << 20
	// maxLoad is a load average no host survives; Linux shows thousands on
	// a hung NFS mount, not millions.
	maxLoad = 1e6
	// maxUptime is 100 years.
	maxUptime = 100 * 365 * 24 * 3600
	// maxPid is Linux's PID_MAX_LIMIT (2^22).
	maxPid = 1 << 22
	// maxLatencyUs is an hour: no probe waits that long.
	maxLatencyUs = int64(time.Hour / time.Microsecond)
	// maxFuture is how far ahead of the coordinator's clock a time the
	// agent read from its own clock may be: NTP keeps hosts within
	// seconds, and a host further off misdates everything it reports.
	maxFuture = 10 * time.Minute
)

// oldest is the earliest time a host can report: before it, the host's
// clock is unset (a board without a real-time clock before NTP) or the
// value is garbage.
var oldest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// certNotAfterMax is the latest notAfter an X.509 certificate can carry
// (GeneralizedTime 9999-12-31); a later one does not print as RFC 3339.
var certNotAfterMax = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// InvalidValue is a field an agent sent with a value outside its range.
// Field is the path in the message, e.g. "state.disks[2].usedBytes".
type InvalidValue struct {
	Field  string
	Value  string
	Reason string
}

func (e *InvalidValue) Error() string {
	return fmt.Sprintf("%s = %s: %s", e.Field, e.Value, e.Reason)
}

// number is a field's value, whatever its wire type.
type number struct {
	kind byte // 'f' floating point, 'i' signed, 'u' unsigned
	f    float64
	i    int64
	u    uint64
}

func flt(x float64) number { return number{kind: 'f', f: x} }
func sgn(x int64) number   { return number{kind: 'i', i: x} }
func uns(x uint64) number  { return number{kind: 'u', u: x} }

func (n number) String() string {
	switch n.kind {
	case 'f':
		return strconv.FormatFloat(n.f, 'g', -1, 64)
	case 'i':
		return strconv.FormatInt(n.i, 10)
	}
	s := strconv.FormatUint(n.u, 10)
	if n.u >= 1<<63 {
		s += fmt.Sprintf(" (%d as a signed number)", int64(n.u))
	}
	return s
}

// rule says what is wrong with a value, or "" when nothing is; now is the
// coordinator's clock, for times.
type rule func(n number, now time.Time) string

// field is one numeric field of a message of type M, by its JSON name.
type field[M any] struct {
	name string
	get  func(M) number
	rule rule
}

// atMost is a cross-field rule: the first field may not exceed the second
// (used ≤ total).
type atMost[M any] struct {
	name, limit string
	get         func(M) (v, limit uint64)
}

// section is the table of one message: its numeric fields and the order
// between them.
type section[M any] struct {
	fields []field[M]
	order  []atMost[M]
}

// check applies the table to m, the message at path.
func (s section[M]) check(path string, m M, now time.Time) error {
	for _, f := range s.fields {
		n := f.get(m)
		if why := f.rule(n, now); why != "" {
			return &InvalidValue{Field: path + "." + f.name, Value: n.String(), Reason: why}
		}
	}
	for _, o := range s.order {
		if v, limit := o.get(m); v > limit {
			return &InvalidValue{Field: path + "." + o.name, Value: strconv.FormatUint(v, 10),
				Reason: fmt.Sprintf("more than %s (%d)", o.limit, limit)}
		}
	}
	return nil
}

// names lists the fields the table checks, for the test that every numeric
// field of the proto has a rule.
func (s section[M]) names() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.name
	}
	return out
}

// ---- the rules, one per class of value ----

// finite is any real number: a float that JSON can carry.
func finite(n number, _ time.Time) string {
	if math.IsNaN(n.f) || math.IsInf(n.f, 0) {
		return "not a number; the agent must leave out what it could not measure"
	}
	return ""
}

func percent(n number, now time.Time) string {
	if why := finite(n, now); why != "" {
		return why
	}
	if n.f < 0 || n.f > 100 {
		return "a percentage is between 0 and 100"
	}
	return ""
}

func loadAverage(n number, now time.Time) string {
	if why := finite(n, now); why != "" {
		return why
	}
	if n.f < 0 {
		return "a load average cannot be negative"
	}
	if n.f > maxLoad {
		return fmt.Sprintf("a load average above %g is not a real host's", float64(maxLoad))
	}
	return ""
}

// size is bytes or inodes: unsigned on the wire, so a negative number
// arrives as a huge one.
func size(n number, _ time.Time) string {
	switch {
	case n.u >= 1<<63:
		return "a size cannot be negative"
	case n.u > maxSize:
		return "larger than 1 EiB: not a real host's"
	}
	return ""
}

// upTo is a count or an id with a limit.
func upTo(limit uint64, what string) rule {
	return func(n number, _ time.Time) string {
		if n.kind == 'i' && n.i < 0 {
			return what + " cannot be negative"
		}
		if n.kind == 'i' && uint64(n.i) > limit || n.kind == 'u' && n.u > limit {
			return fmt.Sprintf("%s is at most %d", what, limit)
		}
		return ""
	}
}

// anyCount is a uint32 count: every value is one (the agent saturates its
// counters at the maximum rather than wrapping).
func anyCount(number, time.Time) string { return "" }

func port(n number, _ time.Time) string {
	if n.u < 1 || n.u > 65535 {
		return "a port is between 1 and 65535"
	}
	return ""
}

// atLeastOne is a count of things that exist, such as connections in a group.
func atLeastOne(n number, _ time.Time) string {
	if n.u < 1 {
		return "a group of connections has at least one"
	}
	return ""
}

// unixTime is a time the agent read from its clock, in seconds (or
// milliseconds with scale 1000); 0 is unknown.
func unixTime(scale int64) rule {
	return func(n number, now time.Time) string {
		if n.i == 0 {
			return ""
		}
		// Compared as integers: a time.Time of a huge value overflows.
		switch {
		case n.i < oldest.Unix()*scale:
			return "before 2000: the host's clock is not set, or the value is garbage"
		case n.i/scale > now.Add(maxFuture).Unix():
			return fmt.Sprintf("more than %s ahead of the coordinator's clock (%s): check the host's clock (NTP)",
				maxFuture, now.UTC().Format(time.RFC3339))
		}
		return ""
	}
}

// certTime is a certificate's notAfter: years ahead is fine.
func certTime(n number, _ time.Time) string {
	if n.i != 0 && (n.i < 0 || n.i > certNotAfterMax.Unix()) {
		return "not a date a certificate can carry"
	}
	return ""
}

var (
	unixSeconds = unixTime(1)
	unixMillis  = unixTime(1000)
)

// ---- the tables, one per state section ----

var hostTable = section[*gridcityv1.HostInfo]{fields: []field[*gridcityv1.HostInfo]{
	{"uptimeSeconds", func(m *gridcityv1.HostInfo) number { return uns(m.GetUptimeSeconds()) }, upTo(maxUptime, "an uptime in seconds")},
	{"bootUnix", func(m *gridcityv1.HostInfo) number { return sgn(m.GetBootUnix()) }, unixSeconds},
}}

var cpuTable = section[*gridcityv1.CPU]{fields: []field[*gridcityv1.CPU]{
	{"cores", func(m *gridcityv1.CPU) number { return uns(uint64(m.GetCores())) }, upTo(maxCores, "a core count")},
	{"busyPercent", func(m *gridcityv1.CPU) number { return flt(m.GetBusyPercent()) }, percent},
	{"load1", func(m *gridcityv1.CPU) number { return flt(m.GetLoad1()) }, loadAverage},
	{"load5", func(m *gridcityv1.CPU) number { return flt(m.GetLoad5()) }, loadAverage},
	{"load15", func(m *gridcityv1.CPU) number { return flt(m.GetLoad15()) }, loadAverage},
}}

var memoryTable = section[*gridcityv1.Memory]{
	fields: []field[*gridcityv1.Memory]{
		{"totalBytes", func(m *gridcityv1.Memory) number { return uns(m.GetTotalBytes()) }, size},
		{"usedBytes", func(m *gridcityv1.Memory) number { return uns(m.GetUsedBytes()) }, size},
		{"availableBytes", func(m *gridcityv1.Memory) number { return uns(m.GetAvailableBytes()) }, size},
		{"usedPercent", func(m *gridcityv1.Memory) number { return flt(m.GetUsedPercent()) }, percent},
		{"swapTotalBytes", func(m *gridcityv1.Memory) number { return uns(m.GetSwapTotalBytes()) }, size},
		{"swapUsedBytes", func(m *gridcityv1.Memory) number { return uns(m.GetSwapUsedBytes()) }, size},
	},
	order: []atMost[*gridcityv1.Memory]{
		{"usedBytes", "totalBytes", func(m *gridcityv1.Memory) (uint64, uint64) { return m.GetUsedBytes(), m.GetTotalBytes() }},
		{"availableBytes", "totalBytes", func(m *gridcityv1.Memory) (uint64, uint64) { return m.GetAvailableBytes(), m.GetTotalBytes() }},
		{"swapUsedBytes", "swapTotalBytes", func(m *gridcityv1.Memory) (uint64, uint64) { return m.GetSwapUsedBytes(), m.GetSwapTotalBytes() }},
	},
}

var diskTable = section[*gridcityv1.Disk]{
	fields: []field[*gridcityv1.Disk]{
		{"totalBytes", func(m *gridcityv1.Disk) number { return uns(m.GetTotalBytes()) }, size},
		{"usedBytes", func(m *gridcityv1.Disk) number { return uns(m.GetUsedBytes()) }, size},
		{"usedPercent", func(m *gridcityv1.Disk) number { return flt(m.GetUsedPercent()) }, percent},
		{"inodesTotal", func(m *gridcityv1.Disk) number { return uns(m.GetInodesTotal()) }, size},
		{"inodesUsed", func(m *gridcityv1.Disk) number { return uns(m.GetInodesUsed()) }, size},
		{"inodesUsedPercent", func(m *gridcityv1.Disk) number { return flt(m.GetInodesUsedPercent()) }, percent},
		{"availableBytes", func(m *gridcityv1.Disk) number { return uns(m.GetAvailableBytes()) }, size},
	},
	order: []atMost[*gridcityv1.Disk]{
		{"usedBytes", "totalBytes", func(m *gridcityv1.Disk) (uint64, uint64) { return m.GetUsedBytes(), m.GetTotalBytes() }},
		{"availableBytes", "totalBytes", func(m *gridcityv1.Disk) (uint64, uint64) { return m.GetAvailableBytes(), m.GetTotalBytes() }},
		{"inodesUsed", "inodesTotal", func(m *gridcityv1.Disk) (uint64, uint64) { return m.GetInodesUsed(), m.GetInodesTotal() }},
	},
}

var listenerTable = section[*gridcityv1.Listener]{fields: []field[*gridcityv1.Listener]{
	{"port", func(m *gridcityv1.Listener) number { return uns(uint64(m.GetPort())) }, port},
	{"pid", func(m *gridcityv1.Listener) number { return sgn(int64(m.GetPid())) }, upTo(maxPid, "a process id")},
}}

var connectionTable = section[*gridcityv1.Connection]{fields: []field[*gridcityv1.Connection]{
	{"remotePort", func(m *gridcityv1.Connection) number { return uns(uint64(m.GetRemotePort())) }, port},
	{"count", func(m *gridcityv1.Connection) number { return uns(uint64(m.GetCount())) }, atLeastOne},
}}

var unitTable = section[*gridcityv1.Unit]{fields: []field[*gridcityv1.Unit]{
	{"sinceUnix", func(m *gridcityv1.Unit) number { return sgn(m.GetSinceUnix()) }, unixSeconds},
}}

var containerTable = section[*gridcityv1.Container]{fields: []field[*gridcityv1.Container]{
	{"createdUnix", func(m *gridcityv1.Container) number { return sgn(m.GetCreatedUnix()) }, unixSeconds},
}}

var updatesTable = section[*gridcityv1.Updates]{fields: []field[*gridcityv1.Updates]{
	{"pending", func(m *gridcityv1.Updates) number { return uns(uint64(m.GetPending())) }, anyCount},
	{"security", func(m *gridcityv1.Updates) number { return uns(uint64(m.GetSecurity())) }, anyCount},
	{"checkedUnix", func(m *gridcityv1.Updates) number { return sgn(m.GetCheckedUnix()) }, unixSeconds},
}}

var authSourceTable = section[*gridcityv1.AuthSource]{fields: []field[*gridcityv1.AuthSource]{
	{"failures", func(m *gridcityv1.AuthSource) number { return uns(uint64(m.GetFailures())) }, anyCount},
	{"invalidUsers", func(m *gridcityv1.AuthSource) number { return uns(uint64(m.GetInvalidUsers())) }, anyCount},
	{"usersMore", func(m *gridcityv1.AuthSource) number { return uns(uint64(m.GetUsersMore())) }, anyCount},
	{"firstSeenUnix", func(m *gridcityv1.AuthSource) number { return sgn(m.GetFirstSeenUnix()) }, unixSeconds},
	{"lastSeenUnix", func(m *gridcityv1.AuthSource) number { return sgn(m.GetLastSeenUnix()) }, unixSeconds},
	{"successes", func(m *gridcityv1.AuthSource) number { return uns(uint64(m.GetSuccesses())) }, anyCount},
	{"lastSuccessUnix", func(m *gridcityv1.AuthSource) number { return sgn(m.GetLastSuccessUnix()) }, unixSeconds},
	{"failuresBeforeSuccess", func(m *gridcityv1.AuthSource) number { return uns(uint64(m.GetFailuresBeforeSuccess())) }, anyCount},
}}

// cpuShare is a process's CPU as top shows it: 100 per core busy.
func cpuShare(n number, now time.Time) string {
	if why := finite(n, now); why != "" {
		return why
	}
	if n.f < 0 || n.f > 100*maxCores {
		return fmt.Sprintf("a process's CPU share is between 0 and %d (100 per core)", 100*maxCores)
	}
	return ""
}

var processTable = section[*gridcityv1.Process]{fields: []field[*gridcityv1.Process]{
	{"pid", func(m *gridcityv1.Process) number { return sgn(int64(m.GetPid())) }, upTo(maxPid, "a process id")},
	{"cpuPercent", func(m *gridcityv1.Process) number { return flt(m.GetCpuPercent()) }, cpuShare},
	{"rssBytes", func(m *gridcityv1.Process) number { return uns(m.GetRssBytes()) }, size},
}}

var stateTable = section[*gridcityv1.StateUpdate]{fields: []field[*gridcityv1.StateUpdate]{
	{"collectedUnixMs", func(m *gridcityv1.StateUpdate) number { return sgn(m.GetCollectedUnixMs()) }, unixMillis},
}}

var probeResultTable = section[*gridcityv1.ProbeResult]{fields: []field[*gridcityv1.ProbeResult]{
	{"latencyUs", func(m *gridcityv1.ProbeResult) number { return sgn(m.GetLatencyUs()) }, upTo(uint64(maxLatencyUs), "a latency in microseconds")},
	{"checkedUnixMs", func(m *gridcityv1.ProbeResult) number { return sgn(m.GetCheckedUnixMs()) }, unixMillis},
	{"tlsNotAfterUnix", func(m *gridcityv1.ProbeResult) number { return sgn(m.GetTlsNotAfterUnix()) }, certTime},
}}

// ---- the section validators ----

// strs checks the lengths of a message's strings, given as name, value
// pairs; an empty name is the string at path itself (an item of a list).
func strs(path string, fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if len(fields[i+1]) > maxString {
			f := path
			if fields[i] != "" {
				f += "." + fields[i]
			}
			return &InvalidValue{Field: f, Value: fmt.Sprintf("(%d bytes)", len(fields[i+1])),
				Reason: fmt.Sprintf("longer than %d bytes", maxString)}
		}
	}
	return nil
}

// items checks a list's length and then each item.
func items[M any](path string, list []M, each func(path string, m M) error) error {
	if len(list) > MaxItems {
		return fmt.Errorf("%s has %d items; at most %d are accepted", path, len(list), MaxItems)
	}
	for i, m := range list {
		if err := each(fmt.Sprintf("%s[%d]", path, i), m); err != nil {
			return err
		}
	}
	return nil
}

func validateHost(path string, h *gridcityv1.HostInfo, now time.Time) error {
	if err := hostTable.check(path, h, now); err != nil {
		return err
	}
	if err := strs(path, "hostname", h.GetHostname(), "os", h.GetOs(), "osVersion", h.GetOsVersion(), "platformFamily", h.GetPlatformFamily(),
		"kernel", h.GetKernel(), "arch", h.GetArch(), "virtualization", h.GetVirtualization()); err != nil {
		return err
	}
	return items(path+".addresses", h.GetAddresses(), func(p, a string) error {
		if net.ParseIP(a) == nil {
			return &InvalidValue{Field: p, Value: fmt.Sprintf("%.64q", a), Reason: "not an IP address"}
		}
		return nil
	})
}

func validateCPU(path string, c *gridcityv1.CPU, now time.Time) error {
	if err := cpuTable.check(path, c, now); err != nil {
		return err
	}
	return strs(path, "model", c.GetModel())
}

func validateMemory(path string, m *gridcityv1.Memory, now time.Time) error {
	return memoryTable.check(path, m, now)
}

func validateDisks(path string, d *gridcityv1.Disks, now time.Time) error {
	return items(path, d.GetItems(), func(p string, d *gridcityv1.Disk) error {
		if err := diskTable.check(p, d, now); err != nil {
			return err
		}
		return strs(p, "mount", d.GetMount(), "device", d.GetDevice(), "filesystem", d.GetFilesystem())
	})
}

func validateListeners(path string, l *gridcityv1.Listeners, now time.Time) error {
	return items(path, l.GetItems(), func(p string, l *gridcityv1.Listener) error {
		if err := listenerTable.check(p, l, now); err != nil {
			return err
		}
		return strs(p, "proto", l.GetProto(), "address", l.GetAddress(), "process", l.GetProcess())
	})
}

func validateConnections(path string, c *gridcityv1.Connections, now time.Time) error {
	return items(path, c.GetItems(), func(p string, c *gridcityv1.Connection) error {
		if err := connectionTable.check(p, c, now); err != nil {
			return err
		}
		return strs(p, "remoteAddress", c.GetRemoteAddress())
	})
}

func validateUnits(path string, u *gridcityv1.Units, now time.Time) error {
	return items(path, u.GetItems(), func(p string, u *gridcityv1.Unit) error {
		if err := unitTable.check(p, u, now); err != nil {
			return err
		}
		return strs(p, "name", u.GetName(), "description", u.GetDescription(), "activeState", u.GetActiveState(), "subState", u.GetSubState())
	})
}

func validateContainers(path string, c *gridcityv1.Containers, now time.Time) error {
	return items(path, c.GetItems(), func(p string, c *gridcityv1.Container) error {
		if err := containerTable.check(p, c, now); err != nil {
			return err
		}
		return strs(p, "id", c.GetId(), "name", c.GetName(), "image", c.GetImage(), "state", c.GetState(), "status", c.GetStatus())
	})
}

func validateUpdates(path string, u *gridcityv1.Updates, now time.Time) error {
	if err := updatesTable.check(path, u, now); err != nil {
		return err
	}
	if err := strs(path, "manager", u.GetManager()); err != nil {
		return err
	}
	return items(path+".securityPackages", u.GetSecurityPackages(), func(p, s string) error { return strs(p, "", s) })
}

func validateGaps(path string, g *gridcityv1.Gaps, _ time.Time) error {
	return items(path, g.GetItems(), func(p string, g *gridcityv1.Gap) error {
		return strs(p, "check", g.GetCheck(), "reason", g.GetReason())
	})
}

func validateLogins(path string, l *gridcityv1.Logins, now time.Time) error {
	if err := items(path+".logSources", l.GetLogSources(), func(p, s string) error { return strs(p, "", s) }); err != nil {
		return err
	}
	return items(path+".sources", l.GetSources(), func(p string, s *gridcityv1.AuthSource) error {
		if err := authSourceTable.check(p, s, now); err != nil {
			return err
		}
		if err := strs(p, "address", s.GetAddress(), "lastSuccessUser", s.GetLastSuccessUser()); err != nil {
			return err
		}
		if len(s.GetUsers()) > maxUsers {
			return fmt.Errorf("%s.users has %d items; at most %d are accepted", p, len(s.GetUsers()), maxUsers)
		}
		return items(p+".users", s.GetUsers(), func(p, u string) error { return strs(p, "", u) })
	})
}

func validateDefenses(path string, d *gridcityv1.Defenses, _ time.Time) error {
	fw := d.GetFirewall()
	if err := items(path+".firewall.tools", fw.GetTools(), func(p, s string) error { return strs(p, "", s) }); err != nil {
		return err
	}
	if err := items(path+".firewall.blocks", fw.GetBlocks(), func(p string, b *gridcityv1.Block) error {
		return strs(p, "network", b.GetNetwork(), "by", b.GetBy())
	}); err != nil {
		return err
	}
	s := d.GetSshd()
	if err := strs(path+".sshd", "passwordAuthentication", s.GetPasswordAuthentication(), "permitRootLogin", s.GetPermitRootLogin(),
		"kbdInteractiveAuthentication", s.GetKbdInteractiveAuthentication(), "usePam", s.GetUsePam(),
		"passwordAuthenticationFrom", s.GetPasswordAuthenticationFrom(), "permitRootLoginFrom", s.GetPermitRootLoginFrom(),
		"kbdInteractiveAuthenticationFrom", s.GetKbdInteractiveAuthenticationFrom()); err != nil {
		return err
	}
	return items(path+".sshd.files", s.GetFiles(), func(p, f string) error { return strs(p, "", f) })
}

// maxProcesses bounds the top processes: the agent sends at most 5 by CPU
// and 5 by memory.
const maxProcesses = 64

func validateProcesses(path string, p *gridcityv1.Processes, now time.Time) error {
	if len(p.GetItems()) > maxProcesses {
		return fmt.Errorf("%s has %d items; at most %d are accepted", path, len(p.GetItems()), maxProcesses)
	}
	return items(path, p.GetItems(), func(p string, x *gridcityv1.Process) error {
		if err := processTable.check(p, x, now); err != nil {
			return err
		}
		return strs(p, "name", x.GetName(), "user", x.GetUser(), "unit", x.GetUnit())
	})
}

// sections are the state's sections by their JSON names, each with its
// validator; TestEverySectionIsChecked keeps the list whole.
var sections = []struct {
	name  string
	check func(path string, u *gridcityv1.StateUpdate, now time.Time) error
}{
	{"host", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateHost(p, u.GetHost(), now)
	}},
	{"cpu", func(p string, u *gridcityv1.StateUpdate, now time.Time) error { return validateCPU(p, u.GetCpu(), now) }},
	{"memory", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateMemory(p, u.GetMemory(), now)
	}},
	{"disks", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateDisks(p, u.GetDisks(), now)
	}},
	{"listeners", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateListeners(p, u.GetListeners(), now)
	}},
	{"connections", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateConnections(p, u.GetConnections(), now)
	}},
	{"failedUnits", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateUnits(p, u.GetFailedUnits(), now)
	}},
	{"containers", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateContainers(p, u.GetContainers(), now)
	}},
	{"updates", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateUpdates(p, u.GetUpdates(), now)
	}},
	{"gaps", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateGaps(p, u.GetGaps(), now)
	}},
	{"logins", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateLogins(p, u.GetLogins(), now)
	}},
	{"defenses", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateDefenses(p, u.GetDefenses(), now)
	}},
	{"processes", func(p string, u *gridcityv1.StateUpdate, now time.Time) error {
		return validateProcesses(p, u.GetProcesses(), now)
	}},
}

// State checks every section a state update carries against now, the
// coordinator's clock, and returns the first bad value: an *InvalidValue
// naming the field (state.disks[2].usedBytes), its value and what is
// wrong, or an error saying which list is too long. Sections the update
// does not carry are not looked at.
func State(u *gridcityv1.StateUpdate, now time.Time) error {
	if err := stateTable.check("state", u, now); err != nil {
		return err
	}
	m := u.ProtoReflect()
	fields := m.Descriptor().Fields()
	for _, s := range sections {
		if m.Has(fields.ByJSONName(s.name)) {
			if err := s.check("state."+s.name, u, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// Repair clears what State would refuse in a state kept from before (the
// store of an older coordinator that did not check): each section with a
// bad value, and a bad collection time. It returns what it found, one error
// per thing cleared; the agent sends the sections again when it connects.
func Repair(u *gridcityv1.StateUpdate, now time.Time) []error {
	var found []error
	if err := stateTable.check("state", u, now); err != nil {
		u.CollectedUnixMs = 0
		found = append(found, err)
	}
	m := u.ProtoReflect()
	fields := m.Descriptor().Fields()
	for _, s := range sections {
		fd := fields.ByJSONName(s.name)
		if !m.Has(fd) {
			continue
		}
		if err := s.check("state."+s.name, u, now); err != nil {
			m.Clear(fd)
			found = append(found, err)
		}
	}
	return found
}

// maxMetrics bounds the metrics of one probe result.
const maxMetrics = 64

// ProbeResult checks the numbers of a probe result as State
// checks a state's: its metrics reach list_resources and diagnose as JSON.
func ProbeResult(r *gridcityv1.ProbeResult, now time.Time) error {
	if err := probeResultTable.check("probeResult", r, now); err != nil {
		return err
	}
	if len(r.GetMetrics()) > maxMetrics {
		return fmt.Errorf("probeResult.metrics has %d items; at most %d are accepted", len(r.GetMetrics()), maxMetrics)
	}
	for k, v := range r.GetMetrics() {
		if why := finite(flt(v), now); why != "" {
			return &InvalidValue{Field: fmt.Sprintf("probeResult.metrics[%.64q]", k), Value: flt(v).String(), Reason: why}
		}
	}
	return strs("probeResult", "probeId", r.GetProbeId(), "resourceId", r.GetResourceId(), "status", r.GetStatus())
}
