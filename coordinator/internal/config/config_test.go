package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var servers = []string{"web-1", "web-2"}

// problems loads src as c.yaml and returns its problems one a line.
func problems(t *testing.T, src string, servers []string) []string {
	t.Helper()
	c, err := load(strings.NewReader(src), "c.yaml", servers)
	if err == nil {
		if c == nil {
			t.Fatal("load returned neither a config nor an error")
		}
		return nil
	}
	if c != nil {
		t.Errorf("load returned a config with the error %v", err)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is a %T; want *Error", err, err)
	}
	return strings.Split(err.Error(), "\n")
}

func TestProblems(t *testing.T) {
	const known = "known: orders-db, web-1, web-2; declare it under resources, enroll the server, or fix the name"
	const res = "resources:\n  - id: orders-db\n    kind: database\n    engine: postgres\n    target: 10.0.4.20:5432\n"
	tests := []struct {
		name    string
		src     string
		servers []string
		want    []string
	}{
		{"unknown keys", res + "    probe_from: [web-1]\n    color: red\n", servers, []string{
			`c.yaml:6: a resource: unknown key "probe_from"; did you mean "probeFrom"? (known keys: id, name, kind, engine, target, probeFrom, interval, timeout)`,
			`c.yaml:7: a resource: unknown key "color" (known keys: id, name, kind, engine, target, probeFrom, interval, timeout)`,
		}},
		{"unknown top-level key", "resource: []\n", nil, []string{
			`c.yaml:1: config: unknown key "resource"; did you mean "resources"? (known keys: districts, resources, links, probes, runbooks, collect, metrics, notify)`,
		}},
		{"links", res + "links:\n  - {from: web-1, to: orders-dbb}\n  - {from: web-3, to: orders-db}\n  - {from: web-1, to: web-1}\n  - {from: web-1}\n  - {from: web-2,\n     to: orders-db}\n", servers, []string{
			`c.yaml:7: link from "web-1" to "orders-dbb": unknown target "orders-dbb" (did you mean "orders-db"?); ` + known,
			`c.yaml:8: link from "web-3" to "orders-db": unknown target "web-3" (did you mean "web-1"?); ` + known,
			`c.yaml:9: link from "web-1" to "web-1": a target cannot use itself`,
			`c.yaml:10: link from "web-1" to "": a link needs both ends; write {from: USER, to: USED}`,
		}},
		{"link line is the line of the bad end", res + "links:\n  - from: web-1\n    to: nope\n", servers, []string{
			`c.yaml:8: link from "web-1" to "nope": unknown target "nope"; ` + known,
		}},
		{"without servers a name that is no resource is a server", res + "links:\n  - {from: web-3, to: orders-db}\ndistricts:\n  - {id: d, members: [web-9]}\n", nil, nil},
		{"kinds and engines", `resources:
  - {id: a, kind: databse, engine: postgres, target: "x:1"}
  - {id: b, kind: database, engine: http, target: "x:1"}
  - {id: c, kind: probe, engine: postgress, target: "x:1"}
  - {id: d, kind: bucket, target: s3://b}
  - id: e
`, nil, []string{
			`c.yaml:2: resource "a": unknown kind "databse" (did you mean "database"?); known kinds: database, bucket, probe, load_balancer`,
			`c.yaml:3: resource "b": a database cannot have engine "http"; a database's engine is one of postgres, mysql, redis`,
			`c.yaml:4: resource "c": unknown engine "postgress" (did you mean "postgres"?); known engines: dns, http, https, mysql, postgres, redis, s3, tcp`,
			`c.yaml:5: resource "d" has no engine; a bucket's engine is one of s3`,
			`c.yaml:6: resource "e" has no kind; set kind: to one of database, bucket, probe, load_balancer`,
			`c.yaml:6: resource "e" has no engine; set engine: to one of dns, http, https, mysql, postgres, redis, s3, tcp`,
			`c.yaml:6: resource "e" has no target; set target: to host:port, a URL or a host name, depending on the engine`,
		}},
		{"ids", `resources:
  - {kind: probe, engine: dns, target: a.com}
  - {id: a b, kind: probe, engine: dns, target: a.com}
  - {id: a, kind: probe, engine: dns, target: a.com}
  - {id: a, kind: probe, engine: dns, target: b.com}
  - {id: web-1, kind: probe, engine: dns, target: c.com}
`, servers, []string{
			`c.yaml:2: a resource has no id; give it one (letters, digits, '-', '_' and '.')`,
			`c.yaml:3: resource id "a b": use only letters, digits, '-', '_' and '.'`,
			`c.yaml:5: resource id "a" is used twice (first at line 4); ids must be unique`,
			`c.yaml:6: resource id "web-1" is also the name of an enrolled server; rename the resource`,
		}},
		{"targets", `resources:
  - {id: a, kind: bucket, engine: s3, target: backups}
  - {id: b, kind: probe, engine: dns, target: "https://x.com"}
  - {id: c, kind: probe, engine: tcp, target: 10.0.0.1}
  - {id: d, kind: probe, engine: https, target: "http://a.example/"}
  - {id: e, kind: probe, engine: http, target: a.example/health}
  - {id: f, kind: load_balancer, engine: tcp, target: "[::1]:99999"}
  - {id: g, kind: database, engine: redis, target: "redis://10.0.0.1:6379"}
  - {id: h, kind: database, engine: mysql, target: ":3306"}
  - {id: i, kind: probe, engine: http, target: "https://"}
  - {id: j, kind: bucket, engine: s3, target: "ftp://x/b"}
  - {id: k, kind: database, engine: postgres}
`, nil, []string{
			`c.yaml:2: resource "a": target "backups" is not a URL with a scheme; write a bucket URL, like s3://backups or https://s3.eu-west-1.amazonaws.com/backups`,
			`c.yaml:3: resource "b": target "https://x.com" is not a host name; write a host name to resolve, like lekhix.com`,
			`c.yaml:4: resource "c": target "10.0.0.1" is not host:port (missing port in address); write host:port, like 10.0.4.10:443`,
			`c.yaml:5: resource "d": target "http://a.example/" has scheme "http"; engine https takes https://; write a URL, like https://lekhix.com/health`,
			`c.yaml:6: resource "e": target "a.example/health" is not a URL with a scheme; write a URL, like https://lekhix.com/health`,
			`c.yaml:7: resource "f": target "[::1]:99999" has port "99999", which is not a number from 1 to 65535; write host:port, like 10.0.4.10:443`,
			`c.yaml:8: resource "g": target "redis://10.0.0.1:6379" is a URL, not host:port; write host:port, like 10.0.4.22:6379`,
			`c.yaml:9: resource "h": target ":3306" has no host; write host:port, like 10.0.4.21:3306`,
			`c.yaml:10: resource "i": target "https://" has no host; write a URL, like https://lekhix.com/health`,
			`c.yaml:11: resource "j": target "ftp://x/b" has scheme "ftp"; engine s3 takes s3:// or http:// or https://; write a bucket URL, like s3://backups or https://s3.eu-west-1.amazonaws.com/backups`,
			`c.yaml:12: resource "k" has no target; set target: to host:port, like 10.0.4.20:5432`,
		}},
		{"probe defaults out of range", "probes:\n  interval: 500ms\n  timeout: 50ms\n  failuresBeforeTroubled: 0\n", nil, []string{
			`c.yaml:2: probes.interval 500ms is too short; use 1s or more`,
			`c.yaml:3: probes.timeout 50ms is too short; use 100ms or more`,
			`c.yaml:4: probes.failuresBeforeTroubled 0 is out of range; use 1 to 20`,
		}},
		{"probe defaults timeout not below interval", "probes:\n  interval: 5s\n  timeout: 5s\n  failuresBeforeTroubled: 21\n", nil, []string{
			`c.yaml:3: probes.timeout 5s must be shorter than probes.interval 5s, or one check would still run when the next starts`,
			`c.yaml:4: probes.failuresBeforeTroubled 21 is out of range; use 1 to 20`,
		}},
		{"probe defaults of the wrong type", "probes:\n  interval: 15\n  timeout: [5s]\n  failuresBeforeTroubled: two\n", nil, []string{
			`c.yaml:2: probes.interval: "15" is not a duration; write a number with a unit, like 15s, 500ms or 1m30s`,
			`c.yaml:3: probes.timeout: want a single value, got a list`,
			`c.yaml:4: probes.failuresBeforeTroubled: "two" is not a whole number`,
		}},
		{"resource timing", `resources:
  - {id: a, kind: probe, engine: dns, target: a.com, interval: 2s}
  - {id: b, kind: probe, engine: dns, target: a.com, timeout: 20s}
  - id: c
    kind: probe
    engine: dns
    target: a.com
    interval: 10ms
    timeout: 1ms
  - {id: d, kind: probe, engine: dns, target: a.com, interval: 1m, timeout: 30s}
  - {id: e, kind: probe, engine: dns, target: a.com, interval: soon}
`, nil, []string{
			`c.yaml:2: resource "a": probes.timeout 5s must be shorter than its interval 2s, or one check would still run when the next starts`,
			`c.yaml:3: resource "b": its timeout 20s must be shorter than probes.interval 15s, or one check would still run when the next starts`,
			`c.yaml:8: resource "c": interval 10ms is too short; use 1s or more`,
			`c.yaml:9: resource "c": timeout 1ms is too short; use 100ms or more`,
			`c.yaml:11: interval: "soon" is not a duration; write a number with a unit, like 15s, 500ms or 1m30s`,
		}},
		{"probeFrom", `resources:
  - id: a
    kind: probe
    engine: tcp
    target: 127.0.0.1:80
    probeFrom:
      - a
      - web-7
      - ""
      - web-2
`, servers, []string{
			`c.yaml:7: resource "a": probeFrom names resource "a"; probeFrom names servers, whose agents run the probe`,
			`c.yaml:8: resource "a": probeFrom names unknown server "web-7" (did you mean "web-1"?); enrolled servers: web-1, web-2`,
			`c.yaml:9: resource "a": probeFrom has an empty name; name a server whose agent runs the probe`,
		}},
		{"districts", `districts:
  - id: lekhix
    members: [web-1, nope, ""]
  - id: lekhix
  - name: x
  - {id: "a/b", members: web-1}
`, servers, []string{
			`c.yaml:3: district "lekhix": unknown member "nope"; known: web-1, web-2; declare it under resources, enroll the server, or fix the name`,
			`c.yaml:3: district "lekhix": a member has an empty name`,
			`c.yaml:4: district id "lekhix" is used twice (first at line 2); ids must be unique`,
			`c.yaml:5: a district has no id; give it one (letters, digits, '-', '_' and '.')`,
			`c.yaml:6: members: want a list of names, got "web-1"`,
		}},
		{"runbooks", `runbooks:
  - name: r
    command: ""
    match: {host: web-1, engine: postgress, kind: databse, server: web-9, id: nope, }
  - name: r
    command: ls
    readOnly: yes
  - command: ls
    match: {kind: server, server: web-1, engine: ""}
  - {name: "x y", command: "  "}
  - {name: block, command: "nft add element inet filter blocked { {source} }", match: {finding: ssh_bruteforce}}
`, servers, []string{
			`c.yaml:3: runbook "r" has no command; set command: to what it runs`,
			`c.yaml:4: runbook "r": match.engine "postgress" is no engine (did you mean "postgres"?); engines: dns, http, https, mysql, postgres, redis, s3, tcp`,
			`c.yaml:4: runbook "r": unknown match key "host"; match on id, kind, engine, server, finding`,
			`c.yaml:4: runbook "r": match.id: unknown target "nope"; known: web-1, web-2; declare it under resources, enroll the server, or fix the name`,
			`c.yaml:4: runbook "r": match.kind "databse" is no kind (did you mean "database"?); kinds: server, database, bucket, probe, load_balancer`,
			`c.yaml:4: runbook "r": match.server names unknown server "web-9" (did you mean "web-1"?); enrolled servers: web-1, web-2`,
			`c.yaml:5: runbook name "r" is used twice (first at line 2); names must be unique`,
			`c.yaml:7: readOnly: want true or false, got "yes"`,
			`c.yaml:8: a runbook has no name; give it one (letters, digits, '-', '_' and '.')`,
			`c.yaml:9: a runbook: match.engine is empty; give a value or leave the key out`,
			`c.yaml:10: runbook name "x y": use only letters, digits, '-', '_' and '.'`,
			`c.yaml:10: runbook "x y" has no command; set command: to what it runs`,
			`c.yaml:11: runbook "block": match.finding "ssh_bruteforce" is no finding (did you mean "ssh_brute_force"?); findings: ssh_brute_force, ssh_login_after_failures, exposed_port, ssh_password_login, ssh_root_login, security_updates, tls_expiring`,
		}},
		{"collect keys", "collect: {fast: 1s, slow: soon, every: 1s}\n", nil, []string{
			`c.yaml:1: collect.slow: "soon" is not a duration; write a number with a unit, like 15s, 500ms or 1m30s`,
			`c.yaml:1: collect: unknown key "every" (known keys: fast, medium, slow, updates)`,
		}},
		{"collect too fast", "collect:\n  fast: 100ms\n  medium: 1m\n", nil, []string{
			`c.yaml:2: collect.fast 100ms is too short; use 1s or more`,
		}},
		{"metrics retention", "metrics:\n  raw: 30m\n  rollup: 1y\n", nil, []string{
			`c.yaml:2: metrics.raw 30m0s is too short; keep 1h0m0s or more of one-minute history (the default is 24h0m0s)`,
			`c.yaml:3: metrics.rollup: "1y" is not a duration; write a number with a unit, like 15s, 500ms or 1m30s`,
		}},
		{"metrics rollup shorter than raw", "metrics: {raw: 48h, rollup: 24h}\n", nil, []string{
			`c.yaml:1: metrics.rollup 24h0m0s is shorter than metrics.raw 48h0m0s; keep the quarter hours at least as long as the minutes`,
		}},
		{"metrics keys", "metrics: {raw: 48h, keep: 1h}\n", nil, []string{
			`c.yaml:1: metrics: unknown key "keep" (known keys: raw, rollup)`,
		}},
		{"metrics too long", "metrics:\n  raw: 1000h\n  rollup: 9000h\n", nil, []string{
			`c.yaml:2: metrics.raw 1000h0m0s is too long; keep at most 744h0m0s of one-minute history, and longer at quarter hours with metrics.rollup`,
			`c.yaml:3: metrics.rollup 9000h0m0s is too long; keep at most 8784h0m0s of quarter-hour history`,
		}},
		{"sections of the wrong type", "resources: {id: a}\nlinks: nope\nprobes: [1]\nextra: 1\n", nil, []string{
			`c.yaml:1: resources: want a list of resources ({id, kind, engine, target}), got a mapping`,
			`c.yaml:2: links: want a list of links ({from: USER, to: USED}), got "nope"`,
			`c.yaml:3: probes: want a mapping (key: value lines), got a list`,
			`c.yaml:4: config: unknown key "extra" (known keys: districts, resources, links, probes, runbooks, collect, metrics, notify)`,
		}},
		{"not a mapping", "- a\n", nil, []string{
			`c.yaml:1: config: want a mapping (key: value lines), got a list`,
		}},
		{"syntax", "resources:\n  - id: a\n    kind: probe\n   engine: dns\n", nil, []string{
			`c.yaml:1: YAML syntax: did not find expected '-' indicator; check the indentation and quoting from this line on`,
		}},
		{"tabs", "probes:\n\tinterval: 1s\n", nil, []string{
			`c.yaml:2: YAML syntax: found character that cannot start any token; check the indentation and quoting from this line on`,
		}},
		{"repeated key, bad items, second document", res + "    id: b\n  - 5\n  -\n---\nx: 1\n", nil, []string{
			`c.yaml:6: a resource: key "id" appears twice (first at line 2); keep one`,
			`c.yaml:7: a resource: want a mapping, got "5"`,
			`c.yaml:8: a resource: want a mapping, got ""`,
			`c.yaml:9: a second YAML document (after ---); the config is one document`,
		}},
		{"merge keys", "base: &b {kind: probe}\n", nil, []string{
			`c.yaml:1: config: unknown key "base" (known keys: districts, resources, links, probes, runbooks, collect, metrics, notify)`,
		}},
		{"merge key (its line keeps only the problem of shape)", "resources:\n  - {id: a, kind: probe, engine: dns, target: a.com}\n  - {<<: {kind: probe}, id: b, engine: dns, target: a.com}\n", nil, []string{
			`c.yaml:3: a resource: merge keys (<<) are not supported; write the keys out`,
		}},
		{"a key that is not a word", "resources:\n  - {[a]: 1, id: a, kind: probe, engine: dns, target: a.com}\n", nil, []string{
			`c.yaml:2: a resource: a key must be a plain word, got a list`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.src, tt.servers)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func contract() *Config {
	return &Config{
		Districts: []District{{ID: "lekhix", Name: "Lekhix", Line: 2,
			Members: []string{"lekhix-api", "lekhix-web", "lekhix-alb", "lekhix.com", "orders-db", "lekhix-scraper"}}},
		Resources: []Resource{
			{ID: "orders-db", Name: "orders-db", Kind: "database", Engine: "postgres", Target: "10.0.4.20:5432", ProbeFrom: []string{"lekhix-api"}, Line: 6},
			{ID: "lekhix.com", Name: "lekhix.com", Kind: "probe", Engine: "http", Target: "https://lekhix.com/health", Line: 11},
			{ID: "lekhix-alb", Name: "lekhix-alb", Kind: "load_balancer", Engine: "http", Target: "http://10.0.4.10/", Line: 15},
		},
		Links: []Link{
			{From: "lekhix-api", To: "orders-db", Line: 20},
			{From: "lekhix-alb", To: "lekhix-api", Line: 21},
			{From: "lekhix.com", To: "lekhix-alb", Line: 22},
		},
		Probes:  ProbeDefaults{Interval: 15 * time.Second, Timeout: 5 * time.Second, FailuresBeforeTroubled: 2},
		Collect: DefaultCollect,
		Metrics: DefaultMetrics,
		Runbooks: []Runbook{{Name: "restart-postgres", Description: "Restart PostgreSQL on a database server",
			Command: "systemctl restart postgresql", Match: map[string]string{"engine": "postgres"}, Line: 28}},
	}
}

// TestContract loads the example of docs/configuration.md ("Coordinator config").
func TestContract(t *testing.T) {
	c, err := Load("testdata/contract.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := *c
	got.file, got.lines = "", nil
	if want := contract(); !reflect.DeepEqual(&got, want) {
		t.Errorf("Load(contract.yaml) =\n%+v\nwant\n%+v", got, *want)
	}
	if err := c.Validate([]string{"lekhix-api", "lekhix-web", "lekhix-scraper"}); err != nil {
		t.Errorf("Validate(the servers it names) = %v; want nil", err)
	}
	// Before its servers enroll, the same config names unknown targets.
	err = c.Validate([]string{"lekhix-web", "lekhix-scraper"})
	want := `testdata/contract.yaml:4: district "lekhix": unknown member "lekhix-api" (did you mean "lekhix-alb"?); known: lekhix-alb, lekhix-scraper, lekhix-web, lekhix.com, orders-db; declare it under resources, enroll the server, or fix the name
testdata/contract.yaml:10: resource "orders-db": probeFrom names unknown server "lekhix-api"; enrolled servers: lekhix-scraper, lekhix-web
testdata/contract.yaml:20: link from "lekhix-api" to "orders-db": unknown target "lekhix-api" (did you mean "lekhix-alb"?); known: lekhix-alb, lekhix-scraper, lekhix-web, lekhix.com, orders-db; declare it under resources, enroll the server, or fix the name
testdata/contract.yaml:21: link from "lekhix-alb" to "lekhix-api": unknown target "lekhix-api" (did you mean "lekhix-alb"?); known: lekhix-alb, lekhix-scraper, lekhix-web, lekhix.com, orders-db; declare it under resources, enroll the server, or fix the name`
	if err == nil || err.Error() != want {
		t.Errorf("Validate(without lekhix-api) =\n%v\nwant\n%s", err, want)
	}
}

func TestDefault(t *testing.T) {
	d := Default()
	if err := d.Validate(nil); err != nil {
		t.Errorf("Default().Validate(nil) = %v", err)
	}
	for _, src := range []string{"", "# nothing yet\n", "~\n", "probes:\n"} {
		c, err := Parse(strings.NewReader(src), "c.yaml")
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if !reflect.DeepEqual(c.Probes, d.Probes) || c.Resources != nil || c.Links != nil {
			t.Errorf("Parse(%q) = %+v; want the defaults %+v", src, *c, *d)
		}
	}
}

// A config built in code has no file or lines; its problems still read.
func TestValidateBuilt(t *testing.T) {
	c := Default()
	c.Resources = []Resource{{ID: "db", Kind: "database", Engine: "redis", Target: "db:6379"}}
	c.Links = []Link{{From: "web-1", To: "dbx"}}
	err := c.Validate(servers)
	want := `link from "web-1" to "dbx": unknown target "dbx" (did you mean "db"?); known: db, web-1, web-2; declare it under resources, enroll the server, or fix the name`
	if err == nil || err.Error() != want {
		t.Errorf("Validate = %v; want %s", err, want)
	}
}

func TestParseKeepsProblemsOfMeaningForValidate(t *testing.T) {
	// Parse checks only the shape: an unknown engine passes it.
	c, err := Parse(strings.NewReader("resources:\n  - {id: a, kind: probe, engine: gopher, target: x}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(nil); err == nil || !strings.HasPrefix(err.Error(), `c.yaml:2: resource "a": unknown engine "gopher"`) {
		t.Errorf("Validate = %v; want the unknown engine on line 2", err)
	}
	if _, err := Parse(strings.NewReader("resources: 1\n"), "c.yaml"); err == nil {
		t.Error("Parse(resources: 1) = nil error")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/nope.yaml")
	if err == nil || !strings.Contains(err.Error(), "testdata/nope.yaml") {
		t.Errorf("Load(missing) = %v; want an error naming the file", err)
	}
}

func TestTooLarge(t *testing.T) {
	src := "# " + strings.Repeat("x", MaxSize) + "\n"
	_, err := Parse(strings.NewReader(src), "big.yaml")
	want := "big.yaml: the config is larger than 1048576 bytes (1 MiB); is this the right file? a coordinator config is a few kilobytes"
	if err == nil || err.Error() != want {
		t.Errorf("Parse(2 MiB) = %v; want %s", err, want)
	}
}

// Aliases let a small file expand without end (a "billion laughs"); the
// decoder stops at a budget.
func TestAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("districts:\n  - &d {id: d, members: [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("m")
	}
	b.WriteString("]}\n")
	for range 2000 {
		b.WriteString("  - *d\n")
	}
	_, err := Parse(strings.NewReader(b.String()), "c.yaml")
	want := "c.yaml: the config expands to more than 200000 values through its aliases (*name); write it out instead"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse(alias bomb) = %v; want %s", err, want)
	}
	// A modest alias is fine.
	c, err := Parse(strings.NewReader("districts:\n  - {id: a, members: &m [x, y]}\n  - {id: b, members: *m}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Districts[1].Members; !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Errorf("members through an alias = %v; want [x y]", got)
	}
}

func TestManyProblemsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("resources:\n  - id: a\n")
	for i := range 80 {
		b.WriteString("    k" + strings.Repeat("x", i) + ": 1\n")
	}
	_, err := Parse(strings.NewReader(b.String()), "c.yaml")
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxReported+1 || lines[maxReported] != "… and 30 more problems" {
		t.Errorf("got %d lines ending %q; want %d and a count of the rest", len(lines), lines[len(lines)-1], maxReported+1)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("")
	f.Add("resources:\n  - {id: a, kind: probe, engine: dns, target: a.com}\n")
	f.Add("districts:\n  - &d {id: d, members: [a, b]}\n  - *d\n")
	f.Add("links: [{from: a, to: b}]\nprobes: {interval: 1s, timeout: 2s}\nrunbooks: [{name: x, match: {id: a}}]\n")
	f.Add("a: [\n")
	f.Add("notify:\n  - {name: a, kind: email, smtp: \"h:25\", from: a@b, to: [c@d], username: u, passwordEnv: P, events: [agent.offline]}\n")
	f.Fuzz(func(t *testing.T, src string) {
		c, err := Parse(strings.NewReader(src), "f.yaml")
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v; want exactly one", c, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		_ = c.Validate(nil)
		_ = c.Validate([]string{"a", "web-1"})
	})
}
