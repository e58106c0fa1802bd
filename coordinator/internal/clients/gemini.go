package clients

import "path/filepath"

// gemini reads user settings from ~/.gemini/settings.json (both systems); a
// Streamable HTTP server is {"httpUrl", "headers"} under "mcpServers" ("url"
// would mean SSE). The file may hold comments.
// Checked against https://geminicli.com/docs/tools/mcp-server/
// ("Configuration Properties", "HTTP-based MCP Server with Custom Headers").
var gemini = Client{
	ID:      "gemini",
	Name:    "Gemini CLI",
	Doc:     "https://geminicli.com/docs/tools/mcp-server/",
	Binary:  "gemini",
	servers: "mcpServers",
	path:    func(h Host) string { return filepath.Join(h.Home, ".gemini", "settings.json") },
	dir:     func(h Host) string { return filepath.Join(h.Home, ".gemini") },
	entry: func(s Server, id string) Object {
		return Object{{"httpUrl", s.Endpoint}, {"headers", httpHeaders(s, id)}}
	},
	token:  []string{"headers", "Authorization"},
	prefix: "Bearer ",
	cli: func(s Server) string {
		return "gemini mcp add --scope user --transport http " +
			`--header "Authorization: Bearer ` + s.Token + `" --header "X-Agent-Client: gemini" ` + ServerName + " " + s.Endpoint
	},
}
