package clients

import "path/filepath"

// claudeDesktop reads claude_desktop_config.json from
// ~/Library/Application Support/Claude on macOS (~/.config/Claude where Linux
// builds run). Its file takes only local (stdio) servers: {"command", "args",
// "env"}; remote servers are added as connectors in its settings and are
// reached from Anthropic's cloud, which cannot reach a coordinator on
// 127.0.0.1. So it runs `gridcity mcp --stdio`, which bridges to the endpoint
// named in GRIDCITY_URL with GRIDCITY_TOKEN, and names itself GRIDCITY_CLIENT.
// Checked against https://modelcontextprotocol.io/docs/develop/connect-local-servers
// and https://support.claude.com/en/articles/10949351 (local MCP servers).
var claudeDesktop = Client{
	ID:      "claude-desktop",
	Name:    "Claude Desktop",
	Doc:     "https://modelcontextprotocol.io/docs/develop/connect-local-servers",
	servers: "mcpServers",
	path:    func(h Host) string { return filepath.Join(claudeDesktopDir(h), "claude_desktop_config.json") },
	dir:     claudeDesktopDir,
	entry: func(s Server, id string) Object {
		return Object{
			{"command", s.Command},
			{"args", []string{"mcp", "--stdio"}},
			{"env", Object{{"GRIDCITY_URL", s.Endpoint}, {"GRIDCITY_TOKEN", s.Token}, {"GRIDCITY_CLIENT", id}}},
		}
	},
	token: []string{"env", "GRIDCITY_TOKEN"},
}

func claudeDesktopDir(h Host) string {
	if h.OS == "darwin" {
		return filepath.Join(h.appSupport(), "Claude")
	}
	return filepath.Join(h.configHome(), "Claude")
}
