package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDocsAgentExample reads the agent config that docs/configuration.md
// shows, so that the page cannot name a key the agent refuses or leave one
// out.
func TestDocsAgentExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- agent/cmd/gridcity-agent: TestDocsAgentExample reads this block -->\n```yaml\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/configuration.md has no agent config block under its marker")
	}
	got, err := decodeConfig([]byte(block))
	if err != nil {
		t.Fatalf("the agent config of docs/configuration.md: %v", err)
	}
	want := Config{Name: "web-1", District: "lekhix", RunAs: "root", Commands: true, Probes: true, AuthLogs: []string{"/var/log/auth.log", "/var/log/secure"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the agent config of docs/configuration.md reads as %+v; want every setting, as %+v", got, want)
	}
}
