package clients

import "path/filepath"

// windsurf reads ~/.codeium/windsurf/mcp_config.json (both systems); a remote
// HTTP server is {"serverUrl", "headers"} under "mcpServers" ("url" also
// works, but serverUrl is what its docs show).
// Checked against https://docs.windsurf.com/windsurf/cascade/mcp
// ("Remote HTTP MCPs").
var windsurf = Client{
	ID:      "windsurf",
	Name:    "Windsurf",
	Doc:     "https://docs.windsurf.com/windsurf/cascade/mcp",
	servers: "mcpServers",
	path:    func(h Host) string { return filepath.Join(h.Home, ".codeium", "windsurf", "mcp_config.json") },
	dir:     func(h Host) string { return filepath.Join(h.Home, ".codeium", "windsurf") },
	entry: func(s Server, id string) Object {
		return Object{{"serverUrl", s.Endpoint}, {"headers", httpHeaders(s, id)}}
	},
	token:  []string{"headers", "Authorization"},
	prefix: "Bearer ",
}
