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
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `gridcity — the coordinator of a gridcity fleet

Usage:
  gridcity serve    [--data DIR] [--http ADDR] [--grpc ADDR] [--advertise HOST:PORT]
  gridcity join     [--data DIR] [--ttl DURATION] [--reusable] [--json]
  gridcity mcp      [--data DIR] [--json]
  gridcity token    create NAME [--scope read|operate] [--json] | list | revoke NAME
  gridcity agents   list | revoke NAME
  gridcity version

Every flag also reads GRIDCITY_<FLAG> from the environment (--data: GRIDCITY_DATA).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gridcity:", err)
		}
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

// newFlags returns a flag set whose flags also read GRIDCITY_<FLAG>.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gridcity "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse applies the environment, then the command line (which wins).
func parse(fs *flag.FlagSet, args []string) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		key := "GRIDCITY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", key, v, err)
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

func dataFlag(fs *flag.FlagSet) *string {
	return fs.String("data", defaultDataDir(), "data directory: the store, the CA, the local MCP token")
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
