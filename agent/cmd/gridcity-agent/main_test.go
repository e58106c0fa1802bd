package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The agent reads GRIDCITY_AGENT_<FLAG>; the coordinator's GRIDCITY_<FLAG>
// is ignored, with a warning when the agent's own name is not set.
func TestParseEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name         string
		env          map[string]string
		args         []string
		wantName     string
		wantLevel    string
		wantWarnings []string // each a variable named in one warning
	}{
		{name: "agent names are read", env: map[string]string{"GRIDCITY_AGENT_NAME": "web-1", "GRIDCITY_AGENT_LOG_LEVEL": "debug"}, wantName: "web-1", wantLevel: "debug"},
		{name: "flags win over the environment", env: map[string]string{"GRIDCITY_AGENT_NAME": "web-1"}, args: []string{"--name", "web-2"}, wantName: "web-2", wantLevel: "info"},
		{name: "coordinator names are ignored with a warning", env: map[string]string{"GRIDCITY_NAME": "coord", "GRIDCITY_LOG_LEVEL": "debug"}, wantName: "", wantLevel: "info", wantWarnings: []string{"GRIDCITY_LOG_LEVEL", "GRIDCITY_NAME"}},
		{name: "both set: the agent's wins, no warning", env: map[string]string{"GRIDCITY_NAME": "coord", "GRIDCITY_AGENT_NAME": "web-1"}, wantName: "web-1", wantLevel: "info"},
		{name: "old name under a flag given: no warning", env: map[string]string{"GRIDCITY_NAME": "coord", "GRIDCITY_LOG_LEVEL": "debug"}, args: []string{"--name", "web-2"}, wantName: "web-2", wantLevel: "info", wantWarnings: []string{"GRIDCITY_LOG_LEVEL"}},
		{name: "coordinator-only names say nothing", env: map[string]string{"GRIDCITY_HTTP": "127.0.0.1:4600", "GRIDCITY_DATA": "/var/lib/gridcity"}, wantName: "", wantLevel: "info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			name := fs.String("name", "", "")
			level := fs.String("log-level", "info", "")
			warnings, err := parse(fs, tc.args)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if *name != tc.wantName || *level != tc.wantLevel {
				t.Errorf("got name %q, log level %q; want %q, %q", *name, *level, tc.wantName, tc.wantLevel)
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Fatalf("got warnings %q; want one for each of %q", warnings, tc.wantWarnings)
			}
			for i, w := range warnings {
				old := tc.wantWarnings[i]
				renamed := "GRIDCITY_AGENT_" + strings.TrimPrefix(old, "GRIDCITY_")
				if !strings.Contains(w, old+" is set but ignored") || !strings.Contains(w, renamed) {
					t.Errorf("warning %q; want it to name %s and say to use %s", w, old, renamed)
				}
			}
		})
	}
}

func TestParseEnvironmentBadValue(t *testing.T) {
	t.Setenv("GRIDCITY_AGENT_JSON", "maybe")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Bool("json", false, "")
	_, err := parse(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "GRIDCITY_AGENT_JSON") {
		t.Fatalf("got %v; want an error naming GRIDCITY_AGENT_JSON", err)
	}
}

// GRIDCITY_CONFIG=city.yaml make run: the coordinator's config in the shell
// must not become the agent's, which refused it and exited.
func TestRunIgnoresCoordinatorConfig(t *testing.T) {
	dir := t.TempDir()
	city := filepath.Join(dir, "city.yaml")
	if err := os.WriteFile(city, []byte("districts:\n  - id: a\n    name: A\n    members: [web-1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agentCfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(agentCfg, []byte("name: web-1\ncommands: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GRIDCITY_CONFIG", city)
	t.Setenv("GRIDCITY_AGENT_CONFIG", agentCfg)
	t.Setenv("GRIDCITY_AGENT_STATE", filepath.Join(dir, "state"))
	t.Setenv("GRIDCITY_LOG_LEVEL", "debug") // the coordinator's, and the agent's once
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"enroll"}, io.Discard, &stderr)
	var cfgErr *configError
	if !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), "not enrolled yet") || !strings.Contains(err.Error(), filepath.Join(dir, "state")) {
		t.Fatalf("got %v; want the agent's own config loaded and 'not enrolled yet' in its state directory", err)
	}
	log := stderr.String()
	if strings.Contains(log, "GRIDCITY_CONFIG") {
		t.Errorf("a warning about GRIDCITY_CONFIG although GRIDCITY_AGENT_CONFIG is set:\n%s", log)
	}
	if n := strings.Count(log, "GRIDCITY_LOG_LEVEL is set but ignored"); n != 1 {
		t.Errorf("%d warnings about GRIDCITY_LOG_LEVEL in the log, want 1:\n%s", n, log)
	}
}

// --log-format json: every line the agent logs is one JSON object with
// time, level and msg; an unknown format is refused, naming the variable.
func TestLogFormat(t *testing.T) {
	dir := t.TempDir()
	agentCfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(agentCfg, []byte("name: web-1\ncommands: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GRIDCITY_AGENT_CONFIG", agentCfg)
	t.Setenv("GRIDCITY_AGENT_STATE", filepath.Join(dir, "state"))
	t.Setenv("GRIDCITY_LOG_LEVEL", "debug") // the coordinator's: a warning to log
	var stderr bytes.Buffer
	run(context.Background(), []string{"enroll", "--log-format", "json"}, io.Discard, &stderr)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("nothing logged; want the warning about GRIDCITY_LOG_LEVEL")
	}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := ev[k]; !ok {
				t.Errorf("log line %q has no %q", l, k)
			}
		}
	}
	t.Setenv("GRIDCITY_AGENT_LOG_FORMAT", "xml")
	if err := run(context.Background(), []string{"enroll"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "GRIDCITY_AGENT_LOG_FORMAT") || !strings.Contains(err.Error(), "text or json") {
		t.Fatalf("log format xml: %v; want an error naming GRIDCITY_AGENT_LOG_FORMAT and the formats", err)
	}
}
