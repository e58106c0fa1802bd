package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/clientinstall"
	"github.com/gridcity/gridcity/coordinator/internal/clients"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func cmdMCPInstall(ctx context.Context, st store.Store, endpoint string, opts clientinstall.Options, stdout io.Writer) error {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		return fmt.Errorf("mcp --install knows the clients' files on Linux and macOS only, not %s; `gridcity mcp` prints snippets to paste", runtime.GOOS)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("mcp --install: find the home directory: %w", err)
	}
	host := clients.Host{Home: home, OS: runtime.GOOS}
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		host.ConfigHome = x
	}
	in := &clientinstall.Installer{
		Store: st, Host: host, Endpoint: endpoint, Command: executable(), Options: opts, Out: stdout, Now: time.Now,
		Mint: func(ctx context.Context, name string, scope store.Scope) (string, error) {
			return createToken(ctx, st, name, scope)
		},
		Exists: func(p string) bool { _, err := os.Stat(p); return err == nil },
		OnPath: func(name string) bool { _, err := exec.LookPath(name); return err == nil },
	}
	return in.Run(ctx)
}

// executable is the path clients that start the stdio bridge run.
func executable() string {
	p, err := os.Executable()
	if err != nil {
		return "gridcity"
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}

// mcpEndpoint is the URL clients use: the public URL's /mcp when the
// coordinator has one (it works from this machine and from anywhere else),
// else the local endpoint.
func mcpEndpoint(info runtimeInfo) string {
	if info.PublicURL != "" {
		return info.PublicURL + "/mcp"
	}
	return localEndpoint(info)
}

// localEndpoint is the URL of --http's endpoint from this machine: a
// coordinator that listens on every address (0.0.0.0, [::]) is reached on
// loopback.
func localEndpoint(info runtimeInfo) string {
	scheme := "http"
	if info.TLS {
		scheme = "https"
	}
	addr := info.HTTP
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return scheme + "://" + addr + "/mcp"
}

// printSnippets is the part of `gridcity mcp` that shows each client's entry,
// for pasting by hand, with the local token.
func printSnippets(w io.Writer, endpoint, token string) {
	srv := clients.Server{Endpoint: endpoint, Token: token, Command: executable()}
	home, _ := os.UserHomeDir()
	host := clients.Host{Home: home, OS: runtime.GOOS}
	if x := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		host.ConfigHome = x
	}
	fmt.Fprintln(w, "\nEach client's entry, to paste by hand (`gridcity mcp --install` writes them, with a token per client):")
	for _, c := range clients.All() {
		where := ""
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			where = " — " + host.Tilde(c.Path(host))
		}
		fmt.Fprintf(w, "\n%s%s:\n", c.Name, where)
		if cmd := c.Command(srv); cmd != "" {
			fmt.Fprintf(w, "  %s\n  or\n", cmd)
		}
		for _, l := range strings.Split(c.Snippet(srv), "\n") {
			fmt.Fprintln(w, "  "+l)
		}
	}
}

// installFlags are --install, --print and --scope of `gridcity mcp`.
type installFlags struct {
	install, print *bool
	scope          *string
}

func addInstallFlags(fs *flag.FlagSet) installFlags {
	return installFlags{
		install: fs.Bool("install", false, "write the gridcity entry into the settings of the AI clients named ("+strings.Join(clients.IDs(), " ")+"; none: every one installed here), each with a token of its own"),
		print:   fs.Bool("print", false, "with --install: show what would change in each file; write nothing, create no token"),
		scope:   fs.String("scope", "", "with --install: scope of the new tokens, read or operate (default operate; a token kept from an earlier install keeps its scope unless this is given)"),
	}
}

func (f installFlags) wanted() bool { return *f.install || *f.print }

// run takes the client names after --install (flags may follow them) and
// installs.
func (f installFlags) run(ctx context.Context, fs *flag.FlagSet, st store.Store, endpoint string, stdout io.Writer) error {
	var ids []string
	for rest := fs.Args(); len(rest) > 0; rest = fs.Args() {
		ids = append(ids, rest[0])
		if err := fs.Parse(rest[1:]); err != nil {
			return err
		}
	}
	opts := clientinstall.Options{IDs: ids, Print: *f.print, Scope: store.Scope(*f.scope)}
	if opts.Scope != "" && opts.Scope != store.ScopeRead && opts.Scope != store.ScopeOperate {
		return fmt.Errorf("--scope %q: use read or operate", *f.scope)
	}
	return cmdMCPInstall(ctx, st, endpoint, opts, stdout)
}
