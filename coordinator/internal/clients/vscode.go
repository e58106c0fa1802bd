package clients

import "path/filepath"

// vscode keeps user servers in mcp.json in the default profile's User
// directory (~/.config/Code/User on Linux, ~/Library/Application
// Support/Code/User on macOS), under "servers" (not "mcpServers"): an HTTP
// server is {"type": "http", "url", "headers"}. The file is JSON with
// comments. Checked against
// https://code.visualstudio.com/docs/copilot/reference/mcp-configuration.
var vscode = Client{
	ID:      "vscode",
	Name:    "VS Code",
	Doc:     "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
	servers: "servers",
	path:    func(h Host) string { return filepath.Join(vscodeDir(h), "mcp.json") },
	dir:     vscodeDir,
	entry:   vscodeEntry,
	token:   []string{"headers", "Authorization"},
	prefix:  "Bearer ",
	cli: func(s Server) string {
		// `code --add-mcp` writes the same entry into the user profile.
		b, _ := marshal(append(Object{{"name", ServerName}}, vscodeEntry(s, "vscode")...))
		return "code --add-mcp '" + string(b) + "'"
	},
}

func vscodeDir(h Host) string {
	if h.OS == "darwin" {
		return filepath.Join(h.appSupport(), "Code", "User")
	}
	return filepath.Join(h.configHome(), "Code", "User")
}

func vscodeEntry(s Server, id string) Object {
	return Object{{"type", "http"}, {"url", s.Endpoint}, {"headers", httpHeaders(s, id)}}
}
