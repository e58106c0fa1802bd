package clients

import "path/filepath"

// claudeCode keeps user-scope servers (every project) in the top-level
// "mcpServers" of ~/.claude.json, the file where `claude mcp add --scope user`
// writes them; an HTTP server is {"type": "http", "url", "headers"}.
// Checked against https://code.claude.com/docs/en/mcp (scopes, "Add a remote
// HTTP server", --header). The same file holds Claude Code's own state, which
// it rewrites while it runs: the edit touches only the entry.
var claudeCode = Client{
	ID:      "claude-code",
	Name:    "Claude Code",
	Doc:     "https://code.claude.com/docs/en/mcp",
	Binary:  "claude",
	servers: "mcpServers",
	path:    func(h Host) string { return filepath.Join(h.Home, ".claude.json") },
	dir:     func(h Host) string { return filepath.Join(h.Home, ".claude") },
	entry: func(s Server, id string) Object {
		return Object{{"type", "http"}, {"url", s.Endpoint}, {"headers", httpHeaders(s, id)}}
	},
	token:  []string{"headers", "Authorization"},
	prefix: "Bearer ",
	cli: func(s Server) string {
		return "claude mcp add --scope user --transport http " + ServerName + " " + s.Endpoint +
			` --header "Authorization: Bearer ` + s.Token + `" --header "X-Agent-Client: claude-code"`
	},
}
