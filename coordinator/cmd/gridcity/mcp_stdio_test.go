package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Without GRIDCITY_URL and GRIDCITY_TOKEN, the bridge finds the coordinator
// and the local token in the data directory, as `gridcity mcp` does.
func TestStdioBridgeFindsTheDataDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.OpenSQLite(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := dataDirEndpoint(data); got != "" {
		t.Errorf("before any coordinator ran: endpoint %q; want none", got)
	}
	if err := writeJSONFile(data, "coordinator.json", runtimeInfo{HTTP: "0.0.0.0:4777"}); err != nil {
		t.Fatal(err)
	}
	if got, want := dataDirEndpoint(data), "http://127.0.0.1:4777/mcp"; got != want {
		t.Errorf("endpoint %q; want %q", got, want)
	}
	tok, from, err := dataDirToken(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if from != filepath.Join(data, "mcp-token") {
		t.Errorf("the token comes from %q; want the data directory's mcp-token", from)
	}
	if tk, err := st.TokenByHash(ctx, bearer.Hash(tok)); err != nil || tk.Name != "local" || tk.Scope != store.ScopeOperate {
		t.Errorf("the token found is %+v (%v); want the local operate token", tk, err)
	}

	// No data directory at all: a message that says what to set.
	if _, _, err := dataDirToken(ctx, filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "set GRIDCITY_TOKEN") {
		t.Errorf("no data directory: %v; want advice to set GRIDCITY_TOKEN", err)
	}
}

func TestStdioRequested(t *testing.T) {
	t.Setenv("GRIDCITY_STDIO", "")
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--stdio"}, true},
		{[]string{"--data", "/x", "-stdio"}, true},
		{[]string{"--stdio=false"}, false},
		{[]string{"--json"}, false},
		{nil, false},
	} {
		if got := stdioRequested(tt.args); got != tt.want {
			t.Errorf("stdioRequested(%q) = %v; want %v", tt.args, got, tt.want)
		}
	}
	t.Setenv("GRIDCITY_STDIO", "1")
	if !stdioRequested(nil) {
		t.Error("GRIDCITY_STDIO=1 does not ask for the bridge")
	}
}

// `gridcity mcp tools` writes the committed snapshot, byte for byte.
func TestMCPToolsWritesTheSnapshot(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"mcp", "tools"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	want, err := os.ReadFile("../../internal/mcpserver/testdata/tools.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Error("`gridcity mcp tools` differs from internal/mcpserver/testdata/tools.json; run go test ./coordinator/internal/mcpserver -run TestToolSnapshot -update")
	}
}
