package clientinstall

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/bearer"
	"github.com/gridcity/gridcity/coordinator/internal/clients"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// testInstaller installs into a temporary home on "linux", with a real store.
func testInstaller(t *testing.T, onPath ...string) (*Installer, *bytes.Buffer) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var out bytes.Buffer
	in := &Installer{
		Store: st,
		Mint: func(ctx context.Context, name string, scope store.Scope) (string, error) {
			return mint(ctx, st, name, scope)
		},
		Host:     clients.Host{Home: t.TempDir(), OS: "linux"},
		Endpoint: "http://127.0.0.1:4600/mcp",
		Command:  "/usr/local/bin/gridcity",
		Out:      &out,
		Now:      func() time.Time { return time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC) },
		Exists:   func(p string) bool { _, err := os.Stat(p); return err == nil },
		OnPath: func(name string) bool {
			for _, n := range onPath {
				if n == name {
					return true
				}
			}
			return false
		},
	}
	return in, &out
}

func mkdir(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// mint creates a token as `gridcity token create` does: random, stored
// hashed.
func mint(ctx context.Context, st store.Store, name string, scope store.Scope) (string, error) {
	b := make([]byte, 24)
	rand.Read(b)
	tok := "gc_" + hex.EncodeToString(b)
	return tok, st.CreateToken(ctx, store.Token{Name: name, Scope: scope, Hash: bearer.Hash(tok), CreatedAt: time.Now()})
}

func liveTokens(t *testing.T, st Store) map[string]store.Scope {
	t.Helper()
	ts, err := st.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]store.Scope{}
	for _, tk := range ts {
		if tk.RevokedAt.IsZero() {
			live[tk.Name] = tk.Scope
		}
	}
	return live
}

func TestInstallWritesEachClientWithItsOwnToken(t *testing.T) {
	ctx := context.Background()
	in, out := testInstaller(t)
	home := in.Host.Home
	mkdir(t, filepath.Join(home, ".cursor"), filepath.Join(home, ".config", "zed"))
	zedFile := filepath.Join(home, ".config", "zed", "settings.json")
	zedOld := "// mine\n{\n  \"vim_mode\": true,\n}\n"
	if err := os.WriteFile(zedFile, []byte(zedOld), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := in.Run(ctx); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	text := out.String()
	for _, want := range []string{
		"Claude Code: not installed here (no ~/.claude and no claude on PATH), skipped",
		"Claude Desktop: not installed here (no ~/.config/Claude), skipped",
		`Cursor: wrote ~/.cursor/mcp.json (token "cursor", operate, new)`,
		"VS Code: not installed here (no ~/.config/Code/User), skipped",
		`Zed: wrote ~/.config/zed/settings.json (token "zed", operate, new); the old file is ~/.config/zed/settings.json.bak-gridcity-20260504-030201`,
		"Gemini CLI: not installed here (no ~/.gemini and no gemini on PATH), skipped",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if got := liveTokens(t, in.Store); len(got) != 2 || got["cursor"] != store.ScopeOperate || got["zed"] != store.ScopeOperate {
		t.Errorf("tokens = %v; want cursor and zed, operate", got)
	}

	// Each file holds a live token of its own, named after its client.
	for id, path := range map[string]string{"cursor": filepath.Join(home, ".cursor", "mcp.json"), "zed": zedFile} {
		c, _ := clients.Lookup(id)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := c.CurrentToken(b)
		tk, err := in.Store.TokenByHash(ctx, bearer.Hash(tok))
		if err != nil || tk.Name != id {
			t.Errorf("%s: the token in the file is %q (%v); want the live token %q", id, tk.Name, err, id)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v; want 0600", path, fi.Mode().Perm())
		}
	}
	if b, _ := os.ReadFile(zedFile); !strings.HasPrefix(string(b), "// mine\n{\n  \"vim_mode\": true,\n  \"context_servers\"") {
		t.Errorf("zed settings lost their comment or key:\n%s", b)
	}
	if b, _ := os.ReadFile(zedFile + ".bak-gridcity-20260504-030201"); string(b) != zedOld {
		t.Errorf("backup = %q; want the old file", b)
	}

	// Again: nothing changes, no token is minted, no backup is made.
	out.Reset()
	before, _ := os.ReadFile(zedFile)
	if err := in.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`Cursor: ~/.cursor/mcp.json already set up (token "cursor"), unchanged`,
		`Zed: ~/.config/zed/settings.json already set up (token "zed"), unchanged`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("second run lacks %q:\n%s", want, out)
		}
	}
	if after, _ := os.ReadFile(zedFile); !bytes.Equal(before, after) {
		t.Error("the second run changed the zed settings")
	}
	if got := liveTokens(t, in.Store); len(got) != 2 {
		t.Errorf("tokens after the second run = %v", got)
	}
	backups, _ := filepath.Glob(zedFile + ".bak-gridcity-*")
	if len(backups) != 1 {
		t.Errorf("backups = %v; want one", backups)
	}

	// Revoking Cursor's token leaves Zed's working; the next install gives
	// Cursor a new one under its own name again.
	if err := in.Store.RevokeToken(ctx, "cursor", time.Now()); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	in.IDs = []string{"cursor"}
	if err := in.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `Cursor: wrote ~/.cursor/mcp.json (token "cursor", operate, new)`) {
		t.Errorf("reinstall after revoke:\n%s", out)
	}
	if got := liveTokens(t, in.Store); len(got) != 2 {
		t.Errorf("tokens = %v", got)
	}
}

func TestInstallScopeAndTakenNames(t *testing.T) {
	ctx := context.Background()
	in, out := testInstaller(t, "gemini")
	// A live "gemini" token exists already (another machine's Gemini CLI).
	if _, err := in.Mint(ctx, "gemini", store.ScopeOperate); err != nil {
		t.Fatal(err)
	}
	in.Options = Options{IDs: []string{"gemini"}, Scope: store.ScopeRead}
	if err := in.Run(ctx); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out.String(), `Gemini CLI: wrote ~/.gemini/settings.json (token "gemini-2", read, new)`) {
		t.Errorf("output:\n%s", out)
	}
	// Without --scope, running again keeps the read-only token.
	out.Reset()
	in.Scope = ""
	if err := in.Run(ctx); err != nil || !strings.Contains(out.String(), `already set up (token "gemini-2"), unchanged`) {
		t.Errorf("rerun without --scope: %v\n%s", err, out)
	}
	// --scope operate replaces it, and revokes the read-only one.
	out.Reset()
	in.Scope = store.ScopeOperate
	if err := in.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `(token "gemini-3", operate, new)`) || !strings.Contains(out.String(), `revoked its previous token "gemini-2" (scope read)`) {
		t.Errorf("scope change:\n%s", out)
	}
	if got := liveTokens(t, in.Store); len(got) != 2 || got["gemini"] != store.ScopeOperate || got["gemini-3"] != store.ScopeOperate {
		t.Errorf("tokens = %v", got)
	}
}

func TestInstallPrintWritesNothing(t *testing.T) {
	ctx := context.Background()
	in, out := testInstaller(t)
	dir := filepath.Join(in.Host.Home, ".codeium", "windsurf")
	mkdir(t, dir)
	path := filepath.Join(dir, "mcp_config.json")
	old := "{\n  \"mcpServers\": {\n    \"github\": {\"command\": \"npx\"}\n  }\n}\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	in.Options = Options{IDs: []string{"windsurf"}, Print: true}
	if err := in.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := `Windsurf: would update ~/.codeium/windsurf/mcp_config.json (a new token named after it):
@@ -1,5 +1,12 @@
  {
    "mcpServers": {
-     "github": {"command": "npx"}
+     "github": {"command": "npx"},
+     "gridcity": {
+       "serverUrl": "http://127.0.0.1:4600/mcp",
+       "headers": {
+         "Authorization": "Bearer <new token for windsurf>",
+         "X-Agent-Client": "windsurf"
+       }
+     }
    }
  }
`
	if out.String() != want {
		t.Errorf("--print:\n%s\nwant:\n%s", out, want)
	}
	if b, _ := os.ReadFile(path); string(b) != old {
		t.Error("--print changed the file")
	}
	if got := liveTokens(t, in.Store); len(got) != 0 {
		t.Errorf("--print minted %v", got)
	}
}

func TestInstallLeavesABrokenFileAlone(t *testing.T) {
	ctx := context.Background()
	in, out := testInstaller(t)
	dir := filepath.Join(in.Host.Home, ".cursor")
	mkdir(t, dir)
	path := filepath.Join(dir, "mcp.json")
	old := "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"npx\"}\n    \"b\": {}\n  }\n}\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	in.IDs = []string{"cursor"}
	err := in.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "cursor not set up") {
		t.Errorf("error = %v", err)
	}
	want := `Cursor: ~/.cursor/mcp.json: line 4, column 5: expected ',' or '}' after an object member, found '"'; left untouched: fix the file (or move it aside) and run again`
	if !strings.Contains(out.String(), want) {
		t.Errorf("output:\n%s\nwant the line:\n%s", out, want)
	}
	if b, _ := os.ReadFile(path); string(b) != old {
		t.Error("the broken file was changed")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Error("the broken file's mode was changed")
	}
	if got := liveTokens(t, in.Store); len(got) != 0 {
		t.Errorf("tokens minted for a file that was not written: %v", got)
	}
}

func TestInstallFollowsSymlinksAndKeepsStricterModes(t *testing.T) {
	ctx := context.Background()
	in, out := testInstaller(t)
	home := in.Host.Home
	mkdir(t, filepath.Join(home, ".gemini"), filepath.Join(home, "dotfiles"))
	real := filepath.Join(home, "dotfiles", "gemini.json")
	if err := os.WriteFile(real, []byte("{}\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, ".gemini", "settings.json")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	in.IDs = []string{"gemini"}
	if err := in.Run(ctx); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi.Mode(), err)
	}
	fi, _ := os.Stat(real)
	if fi.Mode().Perm() != 0o400 {
		t.Errorf("mode = %v; want the stricter 0400 kept", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(real); !strings.Contains(string(b), `"httpUrl": "http://127.0.0.1:4600/mcp"`) {
		t.Errorf("the link's target was not written:\n%s", b)
	}
}

func TestLineDiff(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"", "{\n}\n", "@@ -0,0 +1,2 @@\n+ {\n+ }\n"},
		{"a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nd\nE\nf\ng\nh\n", "@@ -2,7 +2,7 @@\n  b\n  c\n  d\n- e\n+ E\n  f\n  g\n  h\n"},
		{"a\nb\n", "a\nb\nc\n", "@@ -1,2 +1,3 @@\n  a\n  b\n+ c\n"},
	}
	for _, tt := range tests {
		if got := lineDiff(tt.a, tt.b, 3); got != tt.want {
			t.Errorf("lineDiff(%q, %q) =\n%s\nwant\n%s", tt.a, tt.b, got, tt.want)
		}
	}
}

// A client named on the command line gets its config even where it was not
// detected (no folder yet, not on PATH): the folder is created. Without a
// name, clients not found are skipped, and the output says how to name one.
func TestInstallNamedClientIntoAnAbsentFolder(t *testing.T) {
	ctx := context.Background()
	in, out := testInstaller(t)
	home := in.Host.Home

	if err := in.Run(ctx); err != nil {
		t.Fatalf("auto-detect in an empty home: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "name one to write its config anyway, e.g. `gridcity mcp --install claude-code`") {
		t.Errorf("auto-detect output does not say how to install an undetected client:\n%s", out)
	}
	if got := liveTokens(t, in.Store); len(got) != 0 {
		t.Errorf("auto-detect in an empty home minted %v", got)
	}

	for _, id := range clients.IDs() {
		c, err := clients.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		out.Reset()
		in.IDs = []string{id}
		if err := in.Run(ctx); err != nil {
			t.Fatalf("%s: %v\n%s", id, err, out)
		}
		path := c.Path(in.Host)
		if !strings.Contains(out.String(), c.Name+": not detected here") || !strings.Contains(out.String(), c.Name+": wrote "+in.Host.Tilde(path)) {
			t.Errorf("%s: output\n%s\nwant it to say the client was not detected and its file was written", id, out)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		tok, _ := c.CurrentToken(b)
		if tk, err := in.Store.TokenByHash(ctx, bearer.Hash(tok)); err != nil || tk.Name != id {
			t.Errorf("%s: the token in %s is %q (%v); want the live token %q", id, path, tk.Name, err, id)
		}
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || (filepath.Dir(path) != home && fi.Mode().Perm() != 0o700) {
			t.Errorf("%s: folder %s: %v %v; want it created 0700", id, filepath.Dir(path), fi.Mode().Perm(), err)
		}
	}
}
