package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "tools" {
		return cmdMCPTools(ctx, args[1:], stdout, stderr) // mcp_tools.go
	}
	if stdioRequested(args) {
		return cmdMCPStdio(ctx, args, stdout, stderr) // mcp_stdio.go
	}
	fs := newFlags("mcp", stderr)
	sf := addStoreFlags(fs)
	data := sf.data
	asJSON := fs.Bool("json", false, `print {"endpoint","token","headers"}`)
	inst := addInstallFlags(fs) // mcp_install.go
	if err := parse(fs, args); err != nil {
		return err
	}
	info, err := readRuntime(*data)
	if err != nil {
		return err
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if inst.wanted() {
		return inst.run(ctx, fs, st, mcpEndpoint(info), stdout)
	}
	tok, _, err := ensureLocalToken(ctx, st, *data)
	if err != nil {
		return err
	}
	endpoint := mcpEndpoint(info)
	headers := map[string]string{"Authorization": "Bearer " + tok}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(map[string]any{"endpoint": endpoint, "token": tok, "headers": headers})
	}
	fmt.Fprintf(stdout, "MCP endpoint:  %s   (Streamable HTTP)\n", endpoint)
	if local := localEndpoint(info); local != endpoint {
		fmt.Fprintf(stdout, "On this host:  %s\n", local)
	}
	fmt.Fprintf(stdout, `Token:         %s
Headers:       Authorization: Bearer %s
               X-Agent-Client: <your client's name>   (optional; names the client in the log and the audit)
`, tok, tok)
	printSnippets(stdout, endpoint, tok) // mcp_install.go
	return nil
}
