package config

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxNodes bounds the work of decoding: aliases let a small file name the
// same big mapping many times over.
const maxNodes = 200_000

var errBudget = errors.New("budget spent")

// decoder walks a yaml.Node tree into a Config, collecting problems.
type decoder struct {
	file   string
	probs  []Problem
	lines  map[string]int
	budget int
}

func (d *decoder) problem(line int, format string, args ...any) {
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// yamlLine picks the line out of the YAML library's messages
// ("yaml: line 3: mapping values are not allowed in this context").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *decoder) decodeFile(r io.Reader, c *Config) {
	defer func() {
		// The budget is spent deep in the walk; unwinding by panic keeps
		// every step free of checks. Any other panic is a bug: re-raise.
		if v := recover(); v != nil {
			if v != errBudget {
				panic(v)
			}
			d.problem(0, "the config expands to more than %d values through its aliases (*name); write it out instead", maxNodes)
		}
	}()
	dec := yaml.NewDecoder(r)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // an empty file: the defaults
		}
		d.syntax(err)
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.problem(extra.Line, "a second YAML document (after ---); the config is one document")
	} else if !errors.Is(err, io.EOF) {
		d.syntax(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return
	}
	d.root(doc.Content[0], c)
}

func (d *decoder) syntax(err error) {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		// The library gives the line where the broken construct starts,
		// which may be above the mistake.
		d.problem(line, "YAML syntax: %s; check the indentation and quoting from this line on", m[2])
		return
	}
	d.problem(0, "YAML syntax: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}

// node follows aliases and charges the budget.
func (d *decoder) node(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	d.budget--
	if d.budget < 0 {
		panic(errBudget)
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names a node's kind for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// mapping calls each for every key of a mapping, after refusing keys that
// are not scalars, repeated, or not among known. A null is an empty mapping.
func (d *decoder) mapping(n *yaml.Node, what string, known []string, each func(key string, v *yaml.Node)) bool {
	n = d.node(n)
	if isNull(n) {
		return true
	}
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, "%s: want a mapping (key: value lines), got %s", what, describe(n))
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.node(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.problem(k.Line, "%s: a key must be a plain word, got %s", what, describe(k))
			continue
		}
		if k.Tag == "!!merge" {
			d.problem(k.Line, "%s: merge keys (<<) are not supported; write the keys out", what)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.problem(k.Line, "%s: key %q appears twice (first at line %d); keep one", what, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		if known != nil && !contains(known, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", what, k.Value)
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			d.problem(k.Line, "%s (known keys: %s)", msg, strings.Join(known, ", "))
			continue
		}
		each(k.Value, v)
	}
	return true
}

// sequence calls each for every item of a list. A null is an empty list.
func (d *decoder) sequence(n *yaml.Node, what, want string, each func(i int, item *yaml.Node)) {
	n = d.node(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.problem(n.Line, "%s: want a list of %s, got %s", what, want, describe(n))
		return
	}
	for i, item := range n.Content {
		each(i, item)
	}
}

// scalar returns a scalar's text; a null is "". The line is recorded under
// path either way, so that a later problem with the value points at it.
func (d *decoder) scalar(n *yaml.Node, path, what string) (string, bool) {
	n = d.node(n)
	d.lines[path] = n.Line
	if n.Kind != yaml.ScalarNode {
		d.problem(n.Line, "%s: want a single value, got %s", what, describe(n))
		return "", false
	}
	if isNull(n) {
		return "", true
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, path, what string, dst *string) {
	if s, ok := d.scalar(n, path, what); ok {
		*dst = s
	}
}

func (d *decoder) strs(n *yaml.Node, path, what string, dst *[]string) {
	d.lines[path] = d.node(n).Line
	d.sequence(n, what, "names", func(i int, item *yaml.Node) {
		if s, ok := d.scalar(item, fmt.Sprintf("%s[%d]", path, i), what); ok {
			*dst = append(*dst, s)
		}
	})
}

func (d *decoder) duration(n *yaml.Node, path, what string, dst *time.Duration) {
	s, ok := d.scalar(n, path, what)
	if !ok {
		return
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.problem(d.lines[path], "%s: %q is not a duration; write a number with a unit, like 15s, 500ms or 1m30s", what, s)
		return
	}
	*dst = v
}

func (d *decoder) integer(n *yaml.Node, path, what string, dst *int) {
	s, ok := d.scalar(n, path, what)
	if !ok {
		return
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		d.problem(d.lines[path], "%s: %q is not a whole number", what, s)
		return
	}
	*dst = v
}

func (d *decoder) boolean(n *yaml.Node, path, what string, dst *bool) {
	s, ok := d.scalar(n, path, what)
	if !ok {
		return
	}
	switch s {
	case "true", "True", "TRUE":
		*dst = true
	case "false", "False", "FALSE":
		*dst = false
	default:
		d.problem(d.lines[path], "%s: want true or false, got %q", what, s)
	}
}

var (
	rootKeys     = []string{"districts", "resources", "links", "probes", "runbooks", "collect", "metrics", "notify"}
	metricsKeys  = []string{"raw", "rollup"}
	collectKeys  = []string{"fast", "medium", "slow", "updates"}
	districtKeys = []string{"id", "name", "members"}
	resourceKeys = []string{"id", "name", "kind", "engine", "target", "probeFrom", "interval", "timeout"}
	linkKeys     = []string{"from", "to"}
	probeKeys    = []string{"interval", "timeout", "failuresBeforeTroubled"}
	runbookKeys  = []string{"name", "description", "command", "readOnly", "match"}
)

func (d *decoder) root(n *yaml.Node, c *Config) {
	d.mapping(n, "config", rootKeys, func(key string, v *yaml.Node) {
		switch key {
		case "districts":
			d.sequence(v, "districts", "districts ({id, name, members})", func(i int, item *yaml.Node) {
				if x, ok := d.district(item, i); ok {
					c.Districts = append(c.Districts, x)
				}
			})
		case "resources":
			d.sequence(v, "resources", "resources ({id, kind, engine, target})", func(i int, item *yaml.Node) {
				if x, ok := d.resource(item, i); ok {
					c.Resources = append(c.Resources, x)
				}
			})
		case "links":
			d.sequence(v, "links", "links ({from: USER, to: USED})", func(i int, item *yaml.Node) {
				if x, ok := d.link(item, i); ok {
					c.Links = append(c.Links, x)
				}
			})
		case "probes":
			d.probes(v, &c.Probes)
		case "collect":
			d.mapping(v, "collect", collectKeys, func(key string, v *yaml.Node) {
				dst := map[string]*time.Duration{"fast": &c.Collect.Fast, "medium": &c.Collect.Medium, "slow": &c.Collect.Slow, "updates": &c.Collect.Updates}[key]
				d.duration(v, "collect."+key, "collect."+key, dst)
			})
		case "metrics":
			d.mapping(v, "metrics", metricsKeys, func(key string, v *yaml.Node) {
				dst := map[string]*time.Duration{"raw": &c.Metrics.Raw, "rollup": &c.Metrics.Rollup}[key]
				d.duration(v, "metrics."+key, "metrics."+key, dst)
			})
		case "notify":
			d.sequence(v, "notify", "notifiers ({name, kind, …})", func(i int, item *yaml.Node) {
				if x, ok := d.notifier(item, i); ok {
					c.Notify = append(c.Notify, x)
				}
			})
		case "runbooks":
			d.sequence(v, "runbooks", "runbooks ({name, command, match})", func(i int, item *yaml.Node) {
				if x, ok := d.runbook(item, i); ok {
					c.Runbooks = append(c.Runbooks, x)
				}
			})
		}
	})
}

// item resolves a list item that must be a mapping.
func (d *decoder) item(n *yaml.Node, what string) *yaml.Node {
	n = d.node(n)
	if n.Kind != yaml.MappingNode {
		d.problem(n.Line, "%s: want a mapping, got %s", what, describe(n))
		return nil
	}
	return n
}

func (d *decoder) district(n *yaml.Node, i int) (District, bool) {
	p := fmt.Sprintf("districts[%d]", i)
	n = d.item(n, "a district")
	if n == nil {
		return District{}, false
	}
	x := District{Line: n.Line}
	d.mapping(n, "a district", districtKeys, func(key string, v *yaml.Node) {
		switch key {
		case "id":
			d.str(v, p+".id", "id", &x.ID)
		case "name":
			d.str(v, p+".name", "name", &x.Name)
		case "members":
			d.strs(v, p+".members", "members", &x.Members)
		}
	})
	if x.Name == "" {
		x.Name = x.ID
	}
	return x, true
}

func (d *decoder) resource(n *yaml.Node, i int) (Resource, bool) {
	p := fmt.Sprintf("resources[%d]", i)
	n = d.item(n, "a resource")
	if n == nil {
		return Resource{}, false
	}
	x := Resource{Line: n.Line}
	d.mapping(n, "a resource", resourceKeys, func(key string, v *yaml.Node) {
		switch key {
		case "id":
			d.str(v, p+".id", "id", &x.ID)
		case "name":
			d.str(v, p+".name", "name", &x.Name)
		case "kind":
			d.str(v, p+".kind", "kind", &x.Kind)
		case "engine":
			d.str(v, p+".engine", "engine", &x.Engine)
		case "target":
			d.str(v, p+".target", "target", &x.Target)
		case "probeFrom":
			d.strs(v, p+".probeFrom", "probeFrom", &x.ProbeFrom)
		case "interval":
			d.duration(v, p+".interval", "interval", &x.Interval)
		case "timeout":
			d.duration(v, p+".timeout", "timeout", &x.Timeout)
		}
	})
	if x.Name == "" {
		x.Name = x.ID
	}
	return x, true
}

func (d *decoder) link(n *yaml.Node, i int) (Link, bool) {
	p := fmt.Sprintf("links[%d]", i)
	n = d.item(n, "a link")
	if n == nil {
		return Link{}, false
	}
	x := Link{Line: n.Line}
	d.mapping(n, "a link", linkKeys, func(key string, v *yaml.Node) {
		switch key {
		case "from":
			d.str(v, p+".from", "from", &x.From)
		case "to":
			d.str(v, p+".to", "to", &x.To)
		}
	})
	return x, true
}

func (d *decoder) probes(n *yaml.Node, x *ProbeDefaults) {
	d.mapping(n, "probes", probeKeys, func(key string, v *yaml.Node) {
		switch key {
		case "interval":
			d.duration(v, "probes.interval", "probes.interval", &x.Interval)
		case "timeout":
			d.duration(v, "probes.timeout", "probes.timeout", &x.Timeout)
		case "failuresBeforeTroubled":
			d.integer(v, "probes.failuresBeforeTroubled", "probes.failuresBeforeTroubled", &x.FailuresBeforeTroubled)
		}
	})
}

func (d *decoder) runbook(n *yaml.Node, i int) (Runbook, bool) {
	p := fmt.Sprintf("runbooks[%d]", i)
	n = d.item(n, "a runbook")
	if n == nil {
		return Runbook{}, false
	}
	x := Runbook{Line: n.Line}
	d.mapping(n, "a runbook", runbookKeys, func(key string, v *yaml.Node) {
		switch key {
		case "name":
			d.str(v, p+".name", "name", &x.Name)
		case "description":
			d.str(v, p+".description", "description", &x.Description)
		case "command":
			d.str(v, p+".command", "command", &x.Command)
		case "readOnly":
			d.boolean(v, p+".readOnly", "readOnly", &x.ReadOnly)
		case "match":
			d.lines[p+".match"] = d.node(v).Line
			d.mapping(v, "match", nil, func(key string, v *yaml.Node) {
				var s string
				d.str(v, p+".match."+key, "match."+key, &s)
				if x.Match == nil {
					x.Match = map[string]string{}
				}
				x.Match[key] = s
			})
		}
	})
	return x, true
}
