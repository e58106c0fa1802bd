package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// yamlV3 decodes b as LoadConfig did with go.yaml.in/yaml/v3, which the
// agent's own reader replaced: the reference it must agree with.
func yamlV3(b []byte) (Config, error) {
	cfg := testDefaults()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, err
	}
	return cfg, nil
}

// testDefaults are DefaultConfig's settings without the host's name.
func testDefaults() Config {
	c := DefaultConfig()
	c.Name = "host-1"
	return c
}

func decodeConfig(b []byte) (Config, error) {
	cfg := testDefaults()
	err := cfg.decode(b)
	return cfg, err
}

// configSeeds are agent.yaml files as people and the installers write them,
// and the YAML forms a setting can take.
var configSeeds = []string{
	"",
	"# only a comment\n",
	"name: web-1\ncommands: false\n",
	"name: web-1\nrunAs: root                     # the user approved commands run as\ncommands: true\nprobes: true\nauthLogs: [/var/log/auth.log, /var/log/secure]\n",
	"---\nname: web-1\ndistrict: shop\n",
	"---\nname: web-1\n...\n",
	"name: web-1\n---\nname: web-2\n",
	"name: web-1\n...\n\"\n",
	"authLogs:\n  - /var/log/auth.log\n  - /var/log/secure # the other\n",
	"authLogs:\n- /var/log/auth.log\n-\n- ~\nname: x\n",
	"authLogs: []\n",
	"authLogs:\n",
	"authLogs: ~\n",
	"authLogs: [a, ~, 'b', \"c\",]\n",
	"authLogs: [a,\n  b]\n",
	"authLogs: /var/log/auth.log\n",
	"name:\ndistrict: ~\nrunAs: null\ncommands:\n",
	"name: 'it''s'\ndistrict: \"a\\tb\\u00e9\\x41\"\n",
	"name: \"\"\n",
	"name: 12\ndistrict: 1.5\nrunAs: 2001-12-14\n",
	"name: true\n",
	"commands: yes\nprobes: off\n",
	"commands: 'no'\nprobes: \"true\"\n",
	"commands: 1\n",
	"commands: True\nprobes: FALSE\n",
	"name: a#b\ndistrict: a # b\n",
	"name: a: b\n",
	"name: [a]\n",
	"nmae: web-1\n",
	"name: a\nname: b\n",
	"name: &a x\ndistrict: *a\n",
	"name: !!str x\n",
	"name: |\n  x\n",
	"name: x\n  y\n",
	"  name: x\n",
	"- a\n",
	"x\n",
	"{name: x}\n",
	"name:\n  x\n",
	"name: \"x\n",
	"name:\tx\n",
	"\"name\": x\n",
	"name: x\r\nprobes: false\r\n",
	"\ufeffname: x\n",
	"district: -x\nname: :x\n",
	"authLogs: [a: b]\n",
	"authLogs: [a,#b]\n",
	"authLogs:\n  - a\n - b\n",
	"authLogs:\n  - a\n    b\n",
	"authLogs:\n  - [a]\n",
	"authLogs:\n  - a: b\n",
	"name: x # c\n# c\n\nprobes: on # c\n",
}

// The agent reads its config as go.yaml.in/yaml/v3 did: for every file
// both read, the same settings; for every file yaml/v3 refused, an error.
// The reader may refuse YAML it does not take (anchors, tags, block
// scalars, …), never read it differently.
func checkConfigLikeYAMLv3(t *testing.T, in string) {
	t.Helper()
	want, wantErr := yamlV3([]byte(in))
	got, err := decodeConfig([]byte(in))
	switch {
	case err != nil && wantErr != nil:
	case err != nil:
		if !strings.Contains(err.Error(), "line ") && !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%q: error %q names no line", in, err)
		}
	case wantErr != nil:
		t.Errorf("%q: got %+v; yaml/v3 refused it: %v", in, got, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Errorf("%q: got %+v; yaml/v3 read %+v", in, got, want)
	}
}

func TestConfigLikeYAMLv3(t *testing.T) {
	for _, in := range configSeeds {
		checkConfigLikeYAMLv3(t, in)
	}
}

func FuzzConfigLikeYAMLv3(f *testing.F) {
	for _, in := range configSeeds {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		// yaml/v3 takes time quadratic in the nesting of [ and {, which
		// the agent's reader refuses at once: leave it out of the race.
		if len(in) > 1024 || strings.Count(in, "[")+strings.Count(in, "{") > 16 {
			t.Skip()
		}
		checkConfigLikeYAMLv3(t, in)
	})
}

// The files the installers and packages write are read, not refused.
func TestConfigShippedFiles(t *testing.T) {
	for _, in := range []string{
		"name: web-1\nrunAs: root                     # the user approved commands run as\ncommands: true\nprobes: true\nauthLogs: [/var/log/auth.log, /var/log/secure]\n# district: shop\n",
	} {
		got, err := decodeConfig([]byte(in))
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		want := Config{Name: "web-1", RunAs: "root", Commands: true, Probes: true, AuthLogs: []string{"/var/log/auth.log", "/var/log/secure"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v; want %+v", got, want)
		}
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "package", "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeConfig(b); err != nil {
		t.Errorf("deploy/package/agent.yaml: %v", err)
	}
}

// What the reader refuses, it refuses naming the line and the setting.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nmae: web-1\n", `line 1: unknown setting "nmae"`},
		{"name: a\nname: b\n", "line 2: name is given twice (first on line 1)"},
		{"commands: maybe\n", `commands: line 1: want true or false, not "maybe"`},
		{"probes: [a]\n", "probes: line 1: want true or false, not a list"},
		{"authLogs: x\n", `authLogs: line 1: want a list`},
		{"name: &a x\n", "line 1: a value starting with '&' is not supported"},
		{"name: x\n  y\n", "line 2: a value continued on an indented line is not supported"},
	} {
		_, err := decodeConfig([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got error %v; want one containing %q", tc.in, err, tc.want)
		}
	}
}
