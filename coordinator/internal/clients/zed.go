package clients

import "path/filepath"

// zed keeps servers under "context_servers" in settings.json, in
// $XDG_CONFIG_HOME/zed (~/.config/zed) on Linux and ~/.config/zed on macOS.
// Zed now reaches remote servers itself: {"url", "headers"} (with an
// Authorization header it skips its OAuth prompt), so no stdio bridge is
// needed. The file is JSON with comments. Checked against
// https://zed.dev/docs/ai/mcp ("As Custom Servers", remote-mcp-server) and
// the ContextServerSettingsContent::Http variant in Zed's settings crate.
var zed = Client{
	ID:      "zed",
	Name:    "Zed",
	Doc:     "https://zed.dev/docs/ai/mcp",
	servers: "context_servers",
	path:    func(h Host) string { return filepath.Join(zedDir(h), "settings.json") },
	dir:     zedDir,
	entry: func(s Server, id string) Object {
		return Object{{"url", s.Endpoint}, {"headers", httpHeaders(s, id)}}
	},
	token:  []string{"headers", "Authorization"},
	prefix: "Bearer ",
}

func zedDir(h Host) string {
	return filepath.Join(h.configHome(), "zed")
}
