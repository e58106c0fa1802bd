package main

// gridcity mcp --stdio: flags and wiring of the stdio bridge
// (internal/stdiobridge), and where it finds the coordinator and a token
// when neither is given: the data directory, as `gridcity mcp` does.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
	"github.com/gridcity/gridcity/coordinator/internal/stdiobridge"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// stdioRequested reports whether `gridcity mcp` was asked for the bridge,
// on the command line or with GRIDCITY_STDIO.
func stdioRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--stdio", "-stdio", "--stdio=true", "-stdio=true", "--stdio=1", "-stdio=1":
			return true
		}
	}
	v := strings.ToLower(os.Getenv("GRIDCITY_STDIO"))
	return v == "1" || v == "true"
}

func cmdMCPStdio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", stderr)
	data := dataFlag(fs)
	fs.Bool("stdio", false, "serve MCP on stdin and stdout, bridged to the coordinator (this mode)")
	endpoint := fs.String("url", "", "the coordinator's MCP endpoint (default: from the data directory's coordinator.json, else "+stdiobridge.DefaultEndpoint+")")
	token := fs.String("token", "", "MCP token (default: the data directory's local token); prefer GRIDCITY_TOKEN: command lines are visible to other users")
	client := fs.String("client", "", "the client's name, sent as X-Agent-Client: shown on approval cards and in the audit log (default: the name the stdio client gives itself, then \"stdio\")")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error (the log goes to stderr)")
	logFormat := fs.String("log-format", "text", "text (key=value) or json, one event per line")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp --stdio takes no arguments, got %q", fs.Args())
	}
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	dir := *data
	offline, err := mcpserver.Offered(ctx, store.ScopeOperate)
	if err != nil {
		return fmt.Errorf("build the tool list: %w", err)
	}
	b, err := stdiobridge.New(ctx, stdiobridge.Config{
		Endpoint: *endpoint, Token: *token, Client: *client, Version: version,
		FindEndpoint: func() string { return dataDirEndpoint(dir) },
		FindToken:    func(ctx context.Context) (string, string, error) { return dataDirToken(ctx, dir) },
		Instructions: mcpserver.Instructions, Offline: stdiobridge.Listing(offline), Recover: mcpserver.RecoverPanics(logger),
	}, logger)
	if err != nil {
		return err
	}
	// Only MCP messages may reach stdout: anything else printed there (a
	// stray fmt.Print here or in a library) would corrupt the stream, so the
	// process's os.Stdout is stderr from now on.
	if f, ok := stdout.(*os.File); ok && f == os.Stdout {
		os.Stdout = os.Stderr
	}
	return b.Serve(ctx, os.Stdin, stdout)
}

// dataDirEndpoint is the local endpoint of the coordinator that last ran
// with this data directory, or "" when none has: the bridge runs on the
// coordinator's host, where loopback needs no name to resolve and no
// certificate.
func dataDirEndpoint(data string) string {
	info, err := readRuntime(data)
	if err != nil || info.HTTP == "" {
		return ""
	}
	return localEndpoint(info) // mcp_install.go
}

// dataDirToken is the data directory's local token (created when missing
// or revoked), and the file it is kept in.
func dataDirToken(ctx context.Context, data string) (string, string, error) {
	from := filepath.Join(data, localTokenFile)
	st, err := openExisting(ctx, data)
	if err != nil {
		return "", from, fmt.Errorf("no MCP token: set GRIDCITY_TOKEN (and GRIDCITY_URL) to what `gridcity mcp` prints on the coordinator's host, or GRIDCITY_DATA to its data directory (%v)", err)
	}
	defer st.Close()
	tok, _, err := ensureLocalToken(ctx, st, data)
	if err != nil {
		return "", from, fmt.Errorf("no MCP token: reading the local token in %s failed (%v); set GRIDCITY_TOKEN instead", data, err)
	}
	return tok, from, nil
}
