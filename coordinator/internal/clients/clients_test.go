package clients

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func testServer(c Client) Server {
	return Server{
		Endpoint: "http://127.0.0.1:4600/mcp",
		Token:    "gc_token-for-" + c.ID,
		Command:  "/usr/local/bin/gridcity",
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// others decodes a settings file without the gridcity entry, to check that
// an install kept everything else.
func others(t *testing.T, c Client, text []byte) any {
	t.Helper()
	root, err := parseJSONC(text)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if root == nil {
		return map[string]any{}
	}
	v := root.value(text).(map[string]any)
	if servers, ok := v[c.servers].(map[string]any); ok {
		delete(servers, ServerName)
		if len(servers) == 0 {
			delete(v, c.servers)
		}
	}
	return v
}

func TestApplyGolden(t *testing.T) {
	for _, c := range All() {
		for _, tc := range []string{"fresh", "merge", "update"} {
			t.Run(c.ID+"/"+tc, func(t *testing.T) {
				var in []byte
				if tc != "fresh" {
					var err error
					if in, err = os.ReadFile(filepath.Join("testdata", c.ID, tc+".in")); err != nil {
						t.Fatal(err)
					}
				}
				s := testServer(c)
				out, changed, err := c.Apply(in, s)
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if !changed {
					t.Errorf("Apply reported no change")
				}
				golden(t, filepath.Join(c.ID, tc+".golden"), out)

				// The entry is there, with this client's token and name.
				if tok, err := c.CurrentToken(out); err != nil || tok != s.Token {
					t.Errorf("CurrentToken = %q, %v; want %q", tok, err, s.Token)
				}
				if !strings.Contains(string(out), `"`+c.ID+`"`) {
					t.Errorf("the entry does not name the client %q", c.ID)
				}
				// Nothing else was lost or changed.
				if got, want := others(t, c, out), others(t, c, in); !reflect.DeepEqual(got, want) {
					t.Errorf("the rest of the file changed:\ngot  %v\nwant %v", got, want)
				}
				// Running again changes nothing.
				again, changed, err := c.Apply(out, s)
				if err != nil || changed || !bytes.Equal(again, out) {
					t.Errorf("second Apply: changed=%v err=%v, same bytes=%v", changed, err, bytes.Equal(again, out))
				}
			})
		}
	}
}

func TestApplyMalformed(t *testing.T) {
	want := map[string]string{
		"claude-code":    "line 3, column 17: object opened here is never closed",
		"claude-desktop": `line 3, column 3: expected ',' or '}' after an object member, found '"'`,
		"cursor":         `line 2, column 17: "mcpServers" is an array, not an object`,
		"vscode":         "line 3, column 3: comment /* is never closed",
		"windsurf":       `line 3, column 5: expected a quoted key or '}', found '\''`,
		"zed":            `line 3, column 22: "context_servers" is a string, not an object`,
		"gemini":         "line 2, column 12: expected a value, found 'D'",
	}
	for _, c := range All() {
		t.Run(c.ID, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", c.ID, "malformed.in"))
			if err != nil {
				t.Fatal(err)
			}
			out, changed, err := c.Apply(in, testServer(c))
			if err == nil || out != nil || changed {
				t.Fatalf("Apply = %q, %v, %v; want an error and nothing to write", out, changed, err)
			}
			if err.Error() != want[c.ID] {
				t.Errorf("error = %q; want %q", err, want[c.ID])
			}
			var se *SyntaxError
			var pe *PathError
			if !errors.As(err, &se) && !errors.As(err, &pe) {
				t.Errorf("error %T is neither a SyntaxError nor a PathError", err)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	hosts := []Host{
		{Home: "/home/ada", OS: "linux"},
		{Home: "/home/ada", OS: "linux", ConfigHome: "/home/ada/.xdg"},
		{Home: "/Users/ada", OS: "darwin", ConfigHome: "/ignored/on/macos"},
	}
	var b strings.Builder
	for _, h := range hosts {
		fmt.Fprintf(&b, "# %s HOME=%s XDG_CONFIG_HOME=%s\n", h.OS, h.Home, h.ConfigHome)
		for _, c := range All() {
			fmt.Fprintf(&b, "%-15s %s\n", c.ID, c.Path(h))
		}
	}
	golden(t, "paths.golden", []byte(b.String()))
}

func TestSnippets(t *testing.T) {
	var b strings.Builder
	for _, c := range All() {
		s := testServer(c)
		fmt.Fprintf(&b, "## %s (%s)\n%s\n", c.Name, c.ID, c.Snippet(s))
		if cmd := c.Command(s); cmd != "" {
			fmt.Fprintf(&b, "$ %s\n", cmd)
		}
	}
	golden(t, "snippets.golden", []byte(b.String()))
}

func TestInstalled(t *testing.T) {
	h := Host{Home: "/home/ada", OS: "linux"}
	tests := []struct {
		client  Client
		present []string
		path    []string
		ok      bool
		why     string
	}{
		{zed, nil, nil, false, "no ~/.config/zed"},
		{zed, []string{"/home/ada/.config/zed"}, nil, true, ""},
		{gemini, nil, nil, false, "no ~/.gemini and no gemini on PATH"},
		{gemini, nil, []string{"gemini"}, true, ""},
		{claudeCode, []string{"/home/ada/.claude.json"}, nil, true, ""},
		{claudeCode, nil, []string{"claude"}, true, ""},
		{vscode, []string{"/home/ada/.config/Code"}, nil, false, "no ~/.config/Code/User"},
		{claudeDesktop, []string{"/home/ada/.config/Claude"}, nil, true, ""},
	}
	for _, tt := range tests {
		exists := func(p string) bool { return contains(tt.present, p) }
		onPath := func(n string) bool { return contains(tt.path, n) }
		ok, why := tt.client.Installed(h, exists, onPath)
		if ok != tt.ok || why != tt.why {
			t.Errorf("%s with %v on disk, %v on PATH: got %v %q; want %v %q", tt.client.ID, tt.present, tt.path, ok, why, tt.ok, tt.why)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCurrentToken(t *testing.T) {
	tests := []struct {
		client Client
		text   string
		want   string
	}{
		{cursor, ``, ""},
		{cursor, `{"mcpServers": {}}`, ""},
		{cursor, `{"mcpServers": {"gridcity": {"url": "u", "headers": {"Authorization": "Bearer gc_a"}}}}`, "gc_a"},
		{cursor, `{"mcpServers": {"gridcity": {"headers": {"Authorization": "Basic x"}}}}`, ""},
		{cursor, `{"mcpServers": {"gridcity": {"headers": "Bearer gc_a"}}}`, ""},
		{claudeDesktop, `{"mcpServers": {"gridcity": {"env": {"GRIDCITY_TOKEN": "gc_b"}}}}`, "gc_b"},
		{zed, "// hi\n{\"context_servers\": {\"gridcity\": {\"headers\": {\"Authorization\": \"Bearer gc_c\",},},},}", "gc_c"},
	}
	for _, tt := range tests {
		got, err := tt.client.CurrentToken([]byte(tt.text))
		if err != nil || got != tt.want {
			t.Errorf("%s CurrentToken(%s) = %q, %v; want %q", tt.client.ID, tt.text, got, err, tt.want)
		}
	}
	if _, err := cursor.CurrentToken([]byte(`{"mcpServers": `)); err == nil {
		t.Error("CurrentToken of a broken file: want an error")
	}
}

func TestLookup(t *testing.T) {
	if c, err := Lookup("vscode"); err != nil || c.Name != "VS Code" {
		t.Errorf("Lookup(vscode) = %v, %v", c.Name, err)
	}
	_, err := Lookup("emacs")
	want := `unknown client "emacs"; known clients: claude-code, claude-desktop, cursor, vscode, windsurf, zed, gemini`
	if err == nil || err.Error() != want {
		t.Errorf("Lookup(emacs) error = %v; want %s", err, want)
	}
}
