package clients

import "path/filepath"

// cursor reads global servers from ~/.cursor/mcp.json (both systems); a
// remote server is {"url", "headers"} under "mcpServers".
// Checked against https://cursor.com/docs/context/mcp ("Using mcp.json",
// remote servers with headers).
var cursor = Client{
	ID:      "cursor",
	Name:    "Cursor",
	Doc:     "https://cursor.com/docs/context/mcp",
	servers: "mcpServers",
	path:    func(h Host) string { return filepath.Join(h.Home, ".cursor", "mcp.json") },
	dir:     func(h Host) string { return filepath.Join(h.Home, ".cursor") },
	entry: func(s Server, id string) Object {
		return Object{{"url", s.Endpoint}, {"headers", httpHeaders(s, id)}}
	},
	token:  []string{"headers", "Authorization"},
	prefix: "Bearer ",
}
