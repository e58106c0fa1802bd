// Package config is the coordinator's configuration file (--config): the
// districts, resources, declared links, probe defaults and runbooks of
// docs/configuration.md ("Coordinator config").
//
// The file is decoded by hand from a yaml.Node tree rather than straight
// into structs, so that every problem can name the line it is on, every
// problem in the file is reported at once (one a line) instead of only the
// first, and an unknown key is refused with the key's name and line: a typo
// must not quietly leave a resource unprobed.
//
// Parse checks the shape of the file (keys, types, durations); Validate
// checks the meaning (ids, kinds, engines, targets, references, ranges).
// Validate takes the names of the enrolled servers, because links, districts
// and probeFrom may name servers as well as resources.
package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxSize is the largest config file Parse reads.
const MaxSize = 1 << 20

// Probe defaults, used when the file has no probes: section.
const (
	DefaultInterval               = 15 * time.Second
	DefaultTimeout                = 5 * time.Second
	DefaultFailuresBeforeTroubled = 2
)

// Config is the coordinator's configuration file.
type Config struct {
	Districts []District
	Resources []Resource
	Links     []Link // declared "from uses to" links
	Probes    ProbeDefaults
	// Collect sets how often the agents sample each tier of facts.
	Collect  CollectIntervals
	Runbooks []Runbook
	// Metrics says how long the metric history is kept.
	Metrics MetricsRetention
	// Notify are the notifiers that tell people about approval cards,
	// incidents, attacks and servers gone offline.
	Notify []Notifier

	file  string         // the name given to Parse, for messages
	lines map[string]int // field path (resources[2].target) → line, for messages
}

// District groups servers and resources (a product, an environment).
type District struct {
	ID, Name string // Name defaults to ID
	Members  []string
	Line     int // line in the file; 0 when not from a file
}

// Resource is something the fleet depends on that is not a server: a
// database, a bucket, a probed endpoint or a load balancer.
type Resource struct {
	ID, Name string // Name defaults to ID
	Kind     string // database | bucket | probe | load_balancer
	Engine   string // postgres | mysql | redis | http | https | tcp | s3 | dns
	Target   string // host:port, a URL or a DNS name, depending on Engine
	// ProbeFrom names the servers whose agents run this probe; empty means
	// the servers that use the resource, else the coordinator.
	ProbeFrom []string
	// Interval and Timeout override the probe defaults; 0 means the default.
	Interval, Timeout time.Duration
	Line              int // line in the file; 0 when not from a file
}

// Link says that From uses To (servers or resources).
type Link struct {
	From, To string
	Line     int // line in the file; 0 when not from a file
}

// ProbeDefaults apply to every resource that does not set its own.
type ProbeDefaults struct {
	Interval, Timeout time.Duration
	// FailuresBeforeTroubled damps flapping: a target must fail this many
	// consecutive checks before it counts as troubled.
	FailuresBeforeTroubled int
}

// CollectIntervals are how often agents sample their facts: cheap ones
// (CPU, memory, SSH logins), medium ones (ports, units, containers,
// firewall), slow ones (host info), and package updates.
type CollectIntervals struct {
	Fast, Medium, Slow, Updates time.Duration
}

// Default collection intervals, and the shortest allowed.
var (
	DefaultCollect = CollectIntervals{Fast: 5 * time.Second, Medium: 30 * time.Second, Slow: 5 * time.Minute, Updates: 30 * time.Minute}
	MinCollect     = CollectIntervals{Fast: time.Second, Medium: 2 * time.Second, Slow: 10 * time.Second, Updates: time.Minute}
)

// MetricsRetention is how long the coordinator keeps each resolution of
// its servers' metric history (get_metrics): one-minute buckets for Raw,
// quarter-hour buckets for Rollup. Per server and metric that is Raw/1m +
// Rollup/15m rows: 2,112 at the defaults.
type MetricsRetention struct {
	Raw, Rollup time.Duration
}

// The default retention (a day at one minute, a week at a quarter hour),
// and its bounds: at least an hour at one minute, so that get_metrics'
// default window is whole; the rollup at least as long as the minutes; at
// most a month of minutes and a year of quarter hours, which bound the
// store's size.
var (
	DefaultMetrics = MetricsRetention{Raw: 24 * time.Hour, Rollup: 7 * 24 * time.Hour}
	MinMetricsRaw  = time.Hour
	MaxMetrics     = MetricsRetention{Raw: 31 * 24 * time.Hour, Rollup: 366 * 24 * time.Hour}
)

// Runbook is a named command an operator (or a model, through run_command
// and its approval) may run on the targets it matches.
type Runbook struct {
	Name, Description, Command string
	ReadOnly                   bool
	// Match selects targets by id, kind, engine or server; all must match.
	Match map[string]string
	Line  int // line in the file; 0 when not from a file
}

// Default is an empty configuration with the probe defaults: what the
// coordinator runs with when no --config is given.
func Default() *Config {
	return &Config{Collect: DefaultCollect, Metrics: DefaultMetrics, Probes: ProbeDefaults{
		Interval:               DefaultInterval,
		Timeout:                DefaultTimeout,
		FailuresBeforeTroubled: DefaultFailuresBeforeTroubled,
	}}
}

// Notifier returns the notifier named name.
func (c *Config) Notifier(name string) (Notifier, bool) {
	for _, n := range c.Notify {
		if n.Name == name {
			return n, true
		}
	}
	return Notifier{}, false
}

// File is the name of the file the config was read from: empty for Default,
// the coordinator started without --config.
func (c *Config) File() string { return c.file }

// Load reads, parses and validates the file at path. Names that are not
// resources are taken to be servers; call Validate with the enrolled
// servers' names to check those too. An error is an *Error listing every
// problem found.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	return load(f, path, nil)
}

// load parses and validates, reporting the problems of shape and of meaning
// together.
func load(r io.Reader, name string, servers []string) (*Config, error) {
	c, perr := parse(r, name)
	if c == nil {
		return nil, perr
	}
	if err := merge(perr, c.validate(servers)); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse decodes a config file; name is used in messages (the file's path).
// It checks the file's shape — known keys, the types of values, durations —
// and leaves the meaning to Validate. An error is an *Error listing every
// problem found (a read error or a file over MaxSize is its one problem).
func Parse(r io.Reader, name string) (*Config, error) {
	c, err := parse(r, name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// parse returns what it could decode along with the problems, so that Load
// can report the problems of meaning beside those of shape.
func parse(r io.Reader, name string) (*Config, *Error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, &Error{Problems: []Problem{{File: name, Msg: fmt.Sprintf("cannot read the config: %v", err)}}}
	}
	if len(b) > MaxSize {
		return nil, &Error{Problems: []Problem{{File: name, Msg: fmt.Sprintf(
			"the config is larger than %d bytes (1 MiB); is this the right file? a coordinator config is a few kilobytes", MaxSize)}}}
	}
	c := Default()
	c.file = name
	d := &decoder{file: name, lines: map[string]int{}, budget: maxNodes}
	d.decodeFile(bytes.NewReader(b), c)
	c.lines = d.lines
	if len(d.probs) > 0 {
		return c, &Error{Problems: d.probs}
	}
	return c, nil
}

// line is the line of a field when the config came from a file, else
// fallback.
func (c *Config) line(path string, fallback int) int {
	if l, ok := c.lines[path]; ok {
		return l
	}
	return fallback
}
