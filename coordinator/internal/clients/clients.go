// Package clients knows where each AI client (Claude Code, Claude Desktop,
// Cursor, VS Code, Windsurf, Zed, Gemini CLI) keeps its MCP servers on Linux
// and macOS, and in what shape, and writes the gridcity entry into that file
// while keeping every other byte of it.
//
// It does no I/O of its own: given a home directory, an OS, the endpoint and
// a token it returns paths and new file contents, so that golden tests cover
// every client on both systems from any machine. The command line reads and
// writes the files and mints the tokens.
package clients

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// ServerName is the entry's key in every client's list of servers.
const ServerName = "gridcity"

// Host is where the client's files are looked for.
type Host struct {
	Home string // the user's home directory
	OS   string // "linux" or "darwin"
	// ConfigHome is $XDG_CONFIG_HOME on Linux; empty means Home/.config.
	ConfigHome string
}

func (h Host) configHome() string {
	if h.OS == "linux" && h.ConfigHome != "" {
		return h.ConfigHome
	}
	return filepath.Join(h.Home, ".config")
}

// appSupport is macOS's per-user application directory.
func (h Host) appSupport() string {
	return filepath.Join(h.Home, "Library", "Application Support")
}

// Tilde writes path with the home directory as ~, for messages.
func (h Host) Tilde(path string) string {
	if rel, err := filepath.Rel(h.Home, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return path
}

// Server is what an entry points the client at.
type Server struct {
	Endpoint string // the coordinator's MCP URL
	Token    string // this client's bearer token
	// Command is the gridcity executable, for clients that start the stdio
	// bridge (`gridcity mcp --stdio`) rather than speak HTTP themselves.
	Command string
}

// Client is one AI client's MCP configuration.
type Client struct {
	ID   string // what `gridcity mcp --install` takes, the token's name and the X-Agent-Client value
	Name string // for people
	Doc  string // where the format and the location were checked

	// Binary, when set, also counts the client as installed when it is on
	// PATH (command-line clients that create their directory lazily).
	Binary string

	servers string              // the top-level key that maps names to servers
	path    func(h Host) string // the settings file
	dir     func(h Host) string // the directory whose presence means "installed"
	entry   func(s Server, id string) Object
	token   []string              // where in the entry the token is
	prefix  string                // what precedes the token there ("Bearer ")
	cli     func(s Server) string // the client's own command for the same, if it has one
}

// All returns every client, in the order they are listed to people.
func All() []Client {
	return []Client{claudeCode, claudeDesktop, cursor, vscode, windsurf, zed, gemini}
}

// IDs lists every client's ID.
func IDs() []string {
	var ids []string
	for _, c := range All() {
		ids = append(ids, c.ID)
	}
	return ids
}

// Lookup returns the client with that ID.
func Lookup(id string) (Client, error) {
	for _, c := range All() {
		if c.ID == id {
			return c, nil
		}
	}
	return Client{}, fmt.Errorf("unknown client %q; known clients: %s", id, strings.Join(IDs(), ", "))
}

// Path is the settings file the entry goes into.
func (c Client) Path(h Host) string { return c.path(h) }

// Installed reports whether the client is on this machine: its directory
// exists, or (for command-line clients) its binary is on PATH. When it is not,
// why says what was looked for, e.g. "no ~/.config/zed".
func (c Client) Installed(h Host, exists func(path string) bool, onPath func(name string) bool) (ok bool, why string) {
	dir := c.dir(h)
	if exists(dir) || exists(c.path(h)) {
		return true, ""
	}
	if c.Binary != "" {
		if onPath(c.Binary) {
			return true, ""
		}
		return false, fmt.Sprintf("no %s and no %s on PATH", h.Tilde(dir), c.Binary)
	}
	return false, "no " + h.Tilde(dir)
}

// Entry is the server entry the client gets, keys in the order its docs use.
func (c Client) Entry(s Server) Object { return c.entry(s, c.ID) }

// Snippet is the part of the settings file that holds the entry, to paste by
// hand.
func (c Client) Snippet(s Server) string {
	return render(nest([]string{c.servers, ServerName}, c.Entry(s)), "", "  ")
}

// Command is the client's own command that adds the same entry, or "".
func (c Client) Command(s Server) string {
	if c.cli == nil {
		return ""
	}
	return c.cli(s)
}

// CurrentToken returns the token in the file's gridcity entry, or "" when
// there is no entry or no token in it.
func (c Client) CurrentToken(text []byte) (string, error) {
	root, err := parseJSONC(text)
	if err != nil || root == nil {
		return "", err
	}
	n := root
	for _, key := range append([]string{c.servers, ServerName}, c.token...) {
		if n.kind != '{' {
			return "", nil
		}
		m := n.find(key)
		if m == nil {
			return "", nil
		}
		n = m.val
	}
	s, ok := n.value(text).(string)
	if !ok || !strings.HasPrefix(s, c.prefix) {
		return "", nil
	}
	return strings.TrimSpace(strings.TrimPrefix(s, c.prefix)), nil
}

// transportKeys are the keys that choose how a client reaches a server. An
// existing entry with one of them that the new entry does not have (a stdio
// entry where an HTTP one goes now, Windsurf's url where serverUrl goes) is
// replaced whole, so that the client cannot pick the stale transport.
var transportKeys = []string{"type", "url", "httpUrl", "serverUrl", "headers", "command", "args", "env", "cwd", "envFile", "source"}

// Apply returns the settings file with the gridcity entry set to s, and
// whether that changed anything. A text that does not parse, or where the
// list of servers is not an object, is an error and nothing is returned.
//
// An existing entry is updated key by key, so that keys the user added to it
// (Gemini's "trust", Windsurf's "disabled", extra headers) stay; it is
// replaced whole only when it has another transport's keys.
func (c Client) Apply(text []byte, s Server) ([]byte, bool, error) {
	root, err := parseJSONC(text)
	if err != nil {
		return nil, false, err
	}
	base := []string{c.servers, ServerName}
	want := c.Entry(s)
	var cur *node
	if root != nil && root.kind == '{' {
		if m := root.find(c.servers); m != nil && m.val.kind == '{' {
			if e := m.val.find(ServerName); e != nil {
				cur = e.val
			}
		}
	}
	if cur == nil || cur.kind != '{' || foreign(cur, want) {
		return setKey(text, base, want)
	}
	out, changed := text, false
	for _, leaf := range leaves(want, nil) {
		next, ch, err := setKey(out, append(slices.Clone(base), leaf.path...), leaf.value)
		var pe *PathError
		if errors.As(err, &pe) {
			// e.g. "headers" is a string: the entry is ours to rewrite.
			return setKey(text, base, want)
		}
		if err != nil {
			return nil, false, err
		}
		out, changed = next, changed || ch
	}
	return out, changed, nil
}

func foreign(cur *node, want Object) bool {
	for _, m := range cur.members {
		if !slices.Contains(transportKeys, m.key) {
			continue
		}
		if !slices.ContainsFunc(want, func(f Field) bool { return f.Key == m.key }) {
			return true
		}
	}
	return false
}

type leaf struct {
	path  []string
	value any
}

// leaves lists the entry's values down through nested objects; arrays and
// scalars are set whole.
func leaves(o Object, prefix []string) []leaf {
	var out []leaf
	for _, f := range o {
		p := append(slices.Clone(prefix), f.Key)
		if sub, ok := f.Value.(Object); ok {
			out = append(out, leaves(sub, p)...)
			continue
		}
		out = append(out, leaf{p, f.Value})
	}
	return out
}

// httpHeaders are the headers every HTTP entry carries: the token, and the
// client's name for approval cards and the audit.
func httpHeaders(s Server, id string) Object {
	return Object{{"Authorization", "Bearer " + s.Token}, {"X-Agent-Client", id}}
}
