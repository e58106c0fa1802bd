// Package collect gathers the facts a gridcity agent reports about its host:
// host identity, cpu, memory, disks, listening sockets and outbound
// connections, failed systemd units, containers and pending package
// updates.
//
// Every collector lives in its own file and registers itself in init() with
// a name and a Tier, the way node_exporter's collectors do; the tiers let
// the agent sample cheap facts every few seconds and expensive ones rarely.
// A collector that cannot run (no systemd, no docker socket, no permission)
// is recorded as a gap with the real error, never left out silently; a gap's
// check is the collector's name, or "<name>:<part>" for a part it could not
// see while the rest was collected (a hung NFS mount, say). The collectors
// and the sections they fill:
//
//	host          HostInfo        TierSlow
//	cpu           CPU             TierFast
//	memory        Memory          TierFast
//	disks         Disks           TierMedium
//	sockets       Listeners and Connections (one read of /proc/net)  TierMedium
//	failed_units  Units           TierMedium
//	containers    Containers      TierMedium
//	updates       Updates         TierUpdates
//	defenses      Defenses (firewall blocks, sshd settings)  TierMedium
//	logins        Logins (SSH authentication per source)      TierFast
//	processes     Processes (top by CPU and memory; walked every fast tick only while the host is busy)  TierFast
//
// The agent sends Full first and then, per tier tick, Changes between the
// state it last sent and a Collect, merging what it sends into that state
// with Merge. All
// text read from the host is treated as hostile: every parser is bounded in
// lines, line length, items and string length, and every string that leaves
// the package is valid UTF-8.
package collect

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Tier says how often a collector is worth running, by its cost and by how
// fast its facts change.
type Tier int

const (
	// TierFast is cpu and memory, sampled every 5 s.
	TierFast Tier = iota
	// TierMedium is disks, listeners, connections, failed units,
	// containers and defenses, every 30 s.
	TierMedium
	// TierSlow is host information, every 5 min.
	TierSlow
	// TierUpdates is pending package updates, every 30 min.
	TierUpdates
)

// String names the tier for logs.
func (t Tier) String() string {
	switch t {
	case TierFast:
		return "fast"
	case TierMedium:
		return "medium"
	case TierSlow:
		return "slow"
	case TierUpdates:
		return "updates"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// allTiers is every tier, for Full.
var allTiers = []Tier{TierFast, TierMedium, TierSlow, TierUpdates}

// Config says where the collectors find the host's facts. The roots exist
// so that tests can point them at fixture trees and an agent running in a
// container can point them at the host's (/host/proc …).
type Config struct {
	// ProcRoot is where procfs is mounted. Default /proc.
	ProcRoot string
	// SysRoot is where sysfs is mounted. Default /sys.
	SysRoot string
	// EtcRoot is the host's /etc (os-release). Default /etc.
	EtcRoot string
	// RootFS is prefixed to mount points before statfs, for an agent in a
	// container with the host's / mounted elsewhere. Default /.
	RootFS string
	// SystemdDir exists only when systemd is the init system (the test
	// sd_booted(3) makes). Default /run/systemd/system.
	SystemdDir string
	// SystemBus is the D-Bus address of the system bus. Empty means
	// DBUS_SYSTEM_BUS_ADDRESS or the well-known socket.
	SystemBus string
	// DockerSocket is the Docker Engine API socket. Default
	// /var/run/docker.sock.
	DockerSocket string
	// AuthLogs are the SSH authentication logs to follow (the agent
	// config's authLogs); the journal is read where none of them exists.
	AuthLogs []string
	// StateDir keeps what must survive a restart of the agent (how far
	// the logs were read, and the last day's logins). Empty: nothing is
	// kept; each start reads the last 8 MiB of each log (or the journal's
	// last 24 h) again.
	StateDir string
	// SSHDConfig is sshd's main config file. Default /etc/ssh/sshd_config.
	SSHDConfig string
}

// DefaultConfig returns the configuration for an agent running directly on
// its host.
func DefaultConfig() Config {
	return Config{
		ProcRoot:     "/proc",
		SysRoot:      "/sys",
		EtcRoot:      "/etc",
		RootFS:       "/",
		SystemdDir:   "/run/systemd/system",
		DockerSocket: "/var/run/docker.sock",
		AuthLogs:     []string{"/var/log/auth.log", "/var/log/secure"},
		SSHDConfig:   "/etc/ssh/sshd_config",
	}
}

// withDefaults fills the fields left empty, so a partly set Config (a test
// that only moves ProcRoot) still works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	fill := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	fill(&c.ProcRoot, d.ProcRoot)
	fill(&c.SysRoot, d.SysRoot)
	fill(&c.EtcRoot, d.EtcRoot)
	fill(&c.RootFS, d.RootFS)
	fill(&c.SSHDConfig, d.SSHDConfig)
	fill(&c.SystemdDir, d.SystemdDir)
	fill(&c.DockerSocket, d.DockerSocket)
	return c
}

// collector is what a registered collector provides.
type collector interface {
	// update fills the collector's sections of out. It sets them only when
	// it succeeds: on an error they stay unset and the error becomes the
	// collector's gap. notes takes gaps about parts it could not see while
	// the rest was collected (a mount whose statfs hangs).
	update(ctx context.Context, out *gridcityv1.StateUpdate, notes *notes) error
}

// factory builds a collector for one Set; collectors keep state (the
// previous cpu sample, the socket owner cache) per Set.
type factory func(cfg Config, logger *slog.Logger) collector

type registration struct {
	name    string
	tier    Tier
	factory factory
}

// registry holds every collector, filled by the collectors' init funcs.
var registry []registration

// register adds a collector; it is called from init() in each collector's
// file.
func register(name string, tier Tier, f factory) {
	registry = append(registry, registration{name: name, tier: tier, factory: f})
}

// notes gathers the partial gaps of one collector run.
type notes struct {
	name string
	gaps []*gridcityv1.Gap
}

// add records that part of the collector's facts could not be collected;
// the check reads "<collector>:<part>".
func (n *notes) add(part, reason string) {
	n.gaps = append(n.gaps, &gridcityv1.Gap{
		Check:  clean(n.name+":"+part, maxName),
		Reason: clean(reason, maxReason),
	})
}

// entry is one collector of a Set.
type entry struct {
	name string
	tier Tier
	c    collector
	// lock serialises runs of this collector across concurrent Collect
	// calls; a channel so that waiting for it respects ctx.
	lock chan struct{}

	// Until its first run ends (done) a collector has neither a section
	// nor a gap of its own; gapList says it is not collected yet, and
	// since when and until when its first run goes, when one has started.
	// Guarded by Set.mu.
	done            bool
	started, before time.Time
}

// Set is the collectors of one agent with their state and the current gaps.
// It is safe for concurrent use: a caller may run TierUpdates in its own
// goroutine so that a slow package manager never delays the cpu samples.
type Set struct {
	logger  *slog.Logger
	entries []*entry

	mu   sync.Mutex
	gaps map[string][]*gridcityv1.Gap // by collector name
}

// New builds every registered collector with cfg (empty fields take their
// defaults).
func New(cfg Config, logger *slog.Logger) *Set {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	s := &Set{logger: logger, gaps: map[string][]*gridcityv1.Gap{}}
	for _, r := range registry {
		s.entries = append(s.entries, &entry{
			name: r.name,
			tier: r.tier,
			c:    r.factory(cfg, logger.With("collector", r.name)),
			lock: make(chan struct{}, 1),
		})
	}
	sort.Slice(s.entries, func(i, j int) bool { return s.entries[i].name < s.entries[j].name })
	return s
}

// Collect runs the collectors of the given tiers and returns an update
// (full=false) holding the sections they produced; Gaps is always set and
// holds every current gap of the Set, also those of tiers not run now, and
// a "not collected yet" gap for each collector whose first run has not
// ended (its section is unknown, and absent, until then). A
// collector that fails leaves its section unset and records a gap; its next
// success clears it. A collector still busy in another Collect call when
// ctx ends is skipped and keeps its previous gap.
func (s *Set) Collect(ctx context.Context, tiers ...Tier) *gridcityv1.StateUpdate {
	out := &gridcityv1.StateUpdate{}
	for _, e := range s.entries {
		if slices.Contains(tiers, e.tier) {
			s.run(ctx, e, out)
		}
	}
	out.CollectedUnixMs = time.Now().UnixMilli()
	out.Gaps = s.gapList()
	return out
}

// Full collects every tier, for the first message on a stream and for a
// snapshot. It runs the package manager too, which can take seconds; give
// ctx a deadline.
func (s *Set) Full(ctx context.Context) *gridcityv1.StateUpdate {
	u := s.Collect(ctx, allTiers...)
	u.Full = true
	return u
}

// run runs one collector into out and records its gaps.
func (s *Set) run(ctx context.Context, e *entry, out *gridcityv1.StateUpdate) {
	if ctx.Err() != nil {
		return
	}
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-e.lock }()

	s.mu.Lock()
	if !e.done && e.started.IsZero() {
		e.started = time.Now()
		e.before, _ = ctx.Deadline()
	}
	s.mu.Unlock()
	n := &notes{name: e.name}
	// The collector writes into its own scratch message so that a panic
	// half-way cannot leave a half-filled section in out.
	var scratch gridcityv1.StateUpdate
	err := s.safeUpdate(ctx, e, &scratch, n)
	if bad := notFinite(scratch.ProtoReflect()); err == nil && bad != "" {
		err = fmt.Errorf("collected a value that is not a number (%s); the section is left out until it measures again", bad)
	}
	if err == nil {
		Merge(out, &scratch)
	} else {
		n.gaps = append(n.gaps, &gridcityv1.Gap{Check: e.name, Reason: clean(err.Error(), maxReason)})
	}
	s.setGaps(e, n.gaps)
}

// safeUpdate turns a collector's panic into its error: a parser bug meeting
// hostile input must cost one fact, not the agent. The stack goes to the
// log, not into the gap that travels to the coordinator.
func (s *Set) safeUpdate(ctx context.Context, e *entry, out *gridcityv1.StateUpdate, n *notes) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("collector panicked", "collector", e.name, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("collector panicked: %v", r)
		}
	}()
	return e.c.update(ctx, out, n)
}

// setGaps replaces the gaps of one collector and logs the transitions, so
// that a gap shows once in the log rather than every sample.
func (s *Set) setGaps(e *entry, gaps []*gridcityv1.Gap) {
	name := e.name
	s.mu.Lock()
	e.done = true
	old := s.gaps[name]
	if len(gaps) == 0 {
		delete(s.gaps, name)
	} else {
		s.gaps[name] = gaps
	}
	s.mu.Unlock()

	for _, g := range gaps {
		if !containsGap(old, g) {
			s.logger.Warn("fact not collected", "check", g.GetCheck(), "reason", g.GetReason())
		}
	}
	for _, g := range old {
		if !containsGap(gaps, g) {
			s.logger.Info("fact collected again", "check", g.GetCheck())
		}
	}
}

func containsGap(gaps []*gridcityv1.Gap, g *gridcityv1.Gap) bool {
	return slices.ContainsFunc(gaps, func(o *gridcityv1.Gap) bool {
		return o.GetCheck() == g.GetCheck() && o.GetReason() == g.GetReason()
	})
}

// gapList returns every current gap sorted by check. The Gap messages are
// shared with the Set, which never changes one after creating it.
func (s *Set) gapList() *gridcityv1.Gaps {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &gridcityv1.Gaps{}
	for _, gaps := range s.gaps {
		list.Items = append(list.Items, gaps...)
	}
	for _, e := range s.entries {
		if !e.done {
			list.Items = append(list.Items, &gridcityv1.Gap{Check: e.name, Reason: e.notYet()})
		}
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.GetCheck() != b.GetCheck() {
			return a.GetCheck() < b.GetCheck()
		}
		return a.GetReason() < b.GetReason()
	})
	return list
}

// notYet is the gap of a collector whose first run has not ended: its
// facts are unknown, which a zero must never stand for (0 pending updates
// on a host with 129). The caller holds Set.mu.
func (e *entry) notYet() string {
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	switch {
	case e.started.IsZero():
		return fmt.Sprintf("not collected yet: the %s check has not run yet; it runs %s", e.name, e.tier.schedule())
	case e.before.IsZero():
		return fmt.Sprintf("not collected yet: the first %s check is running since %s", e.name, at(e.started))
	}
	return fmt.Sprintf("not collected yet: the first %s check is running since %s; its result is expected by %s (its time limit)", e.name, at(e.started), at(e.before))
}

// schedule says when the agent runs a tier, for a gap (the coordinator's
// settings can change the intervals).
func (t Tier) schedule() string {
	switch t {
	case TierFast:
		return "every 5 s by default"
	case TierMedium:
		return "every 30 s by default"
	case TierSlow:
		return "every 5 min by default"
	case TierUpdates:
		return "right after the agent connects, then every 30 min by default; a package manager can take minutes"
	}
	return "at its tier's interval"
}

// unsupported is the collector of a platform that lacks a fact's source.
type unsupported struct{}

func (unsupported) update(context.Context, *gridcityv1.StateUpdate, *notes) error {
	return fmt.Errorf("not supported on %s", runtime.GOOS)
}

func newUnsupported(Config, *slog.Logger) collector { return unsupported{} }
