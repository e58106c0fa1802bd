// Command gridcity is the coordinator: it serves the agents (gRPC), the MCP
// endpoint and the app (HTTP), and manages join lines, tokens and approvers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `gridcity — the coordinator of a gridcity fleet

Usage:
  gridcity serve    [--data DIR] [--store URL --unseal-key-file FILE] [--config FILE] [--http ADDR] [--grpc ADDR] [--advertise HOST:PORT] [--app-url URL] [--public-url https://HOST[:PORT]]
  gridcity join     [--data DIR] [--store URL] [--ttl DURATION] [--reusable] [--json]
  gridcity mcp      [--data DIR] [--store URL] [--json]                  # endpoint, token and a snippet per AI client
  gridcity mcp      --install [CLIENT …] [--print] [--scope read|operate]
  gridcity mcp      --stdio [--url URL] [--token T] [--client NAME]
  gridcity mcp      tools                                  # the tool list as JSON
  gridcity token    create NAME [--scope read|operate|metrics] [--json] | list [--json] | revoke NAME
  gridcity agents   list [--json] | revoke NAME
  gridcity approver add NAME | reset NAME | list             # prints a generated password once
  gridcity audit    [--data DIR] [--store URL] [--json] [--request ID]
  gridcity audit    verify [--data DIR] [--store URL] [--unseal-key-file FILE] [--json]   # recheck the hash chain; exit 1 names the first entry that fails
  gridcity version

Every flag also reads GRIDCITY_<FLAG> from the environment (--data: GRIDCITY_DATA).
--store postgres://USER:PASSWORD@HOST:PORT/DATABASE (or GRIDCITY_STORE) keeps the store in
PostgreSQL on serve, join, mcp, token, agents, approver and audit; without it the store is
SQLite in --data. Replicas on PostgreSQL are each given the same unseal key (--unseal-key-file,
or GRIDCITY_UNSEAL_KEY_FILE), which the store never holds.
`

func main() {
	mcpserver.Version = version // serverInfo.version, as /healthz and `gridcity version` say
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // the usage was asked for and printed
		}
		fmt.Fprintln(os.Stderr, "gridcity:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, stdout, stderr)
	case "join":
		return cmdJoin(ctx, rest, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, rest, stdout, stderr)
	case "token":
		return cmdToken(ctx, rest, stdout, stderr)
	case "agents":
		return cmdAgents(ctx, rest, stdout, stderr)
	case "audit":
		return cmdAudit(ctx, rest, stdout, stderr)
	case "approver":
		return cmdApprover(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "gridcity", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// newFlags returns a flag set whose flags also read GRIDCITY_<FLAG>, and
// whose usage starts with the command's synopsis.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gridcity "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		for _, line := range strings.Split(usage, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "gridcity "+name+" ") {
				fmt.Fprintln(stderr, "Usage:\n"+line)
			}
		}
		fmt.Fprintln(stderr, "\nFlags (each also read from GRIDCITY_<FLAG>):")
		fs.PrintDefaults()
	}
	return fs
}

// parse applies the environment, then the command line (which wins).
func parse(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := "GRIDCITY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment %s=%q: %w (see --%s in `gridcity %s --help`)", key, v, err, f.Name, strings.TrimPrefix(fs.Name(), "gridcity "))
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	return fs.Parse(args)
}

// interleaved lets flags follow positional arguments (token create NAME --scope read).
func interleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	pos := []string{}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/gridcity"
	}
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "gridcity")
	}
	return ".gridcity"
}

// openExisting opens the store of a coordinator that has run, refusing a
// directory without one rather than creating an empty store there.
func openExisting(ctx context.Context, data string) (*store.SQLite, error) {
	if _, err := os.Stat(filepath.Join(data, "gridcity.db")); err != nil {
		return nil, fmt.Errorf("no coordinator store in %s (%v): start `gridcity serve --data %s` first, or pass the --data of your coordinator (GRIDCITY_DATA also works)", data, errors.Unwrap(err), data)
	}
	return store.OpenSQLite(ctx, data)
}

func dataFlag(fs *flag.FlagSet) *string {
	return fs.String("data", defaultDataDir(), "data directory: the store, the CA, the local MCP token")
}

// storeFlags say where the store is: the PostgreSQL database of --store,
// else the SQLite file in --data. Every command that reads or writes the
// store takes both.
type storeFlags struct {
	data *string
	url  *string
}

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		data: fs.String("data", defaultDataDir(), "data directory: the SQLite store (unless --store), the coordinator's addresses, the local MCP token"),
		url:  fs.String("store", "", "postgres://USER:PASSWORD@HOST:PORT/DATABASE: keep the store in PostgreSQL instead of SQLite in --data (prefer GRIDCITY_STORE: command lines are visible to other users)"),
	}
}

// open opens the store for serve, creating it if needed.
func (f storeFlags) open(ctx context.Context) (store.Store, error) {
	st, err := store.Open(ctx, *f.url, *f.data)
	if err != nil && *f.url != "" {
		return nil, fmt.Errorf("--store (GRIDCITY_STORE): %w", err)
	}
	return st, err
}

// openExisting opens the store for a command beside serve: in SQLite only
// where a coordinator has run; a PostgreSQL database is named on purpose,
// so it is opened (and its schema made) as serve would.
func (f storeFlags) openExisting(ctx context.Context) (store.Store, error) {
	if *f.url == "" {
		return openExisting(ctx, *f.data)
	}
	return f.open(ctx)
}

// where names the store for logs, without a password.
func (f storeFlags) where() string {
	if *f.url != "" {
		return store.RedactURL(*f.url)
	}
	return filepath.Join(*f.data, "gridcity.db")
}

// logFormats are the forms --log-format takes: slog's text (key=value)
// and JSON, one event per line with the keys time, level and msg first.
const logFormats = "text or json"

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q (--log-level or GRIDCITY_LOG_LEVEL): use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q (--log-format or GRIDCITY_LOG_FORMAT): use %s", format, logFormats)
}
