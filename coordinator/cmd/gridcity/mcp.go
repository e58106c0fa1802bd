package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
)

func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", stderr)
	data := dataFlag(fs)
	asJSON := fs.Bool("json", false, `print {"endpoint","token","headers"}`)
	if err := parse(fs, args); err != nil {
		return err
	}
	info, err := readRuntime(*data)
	if err != nil {
		return err
	}
	st, err := openExisting(ctx, *data)
	if err != nil {
		return err
	}
	defer st.Close()
	tok, _, err := ensureLocalToken(ctx, st, *data)
	if err != nil {
		return err
	}
	scheme := "http"
	if info.TLS {
		scheme = "https"
	}
	endpoint := scheme + "://" + info.HTTP + "/mcp"
	headers := map[string]string{"Authorization": "Bearer " + tok}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(map[string]any{"endpoint": endpoint, "token": tok, "headers": headers})
	}
	fmt.Fprintf(stdout, `MCP endpoint:  %s   (Streamable HTTP)
Token:         %s
Headers:       Authorization: Bearer %s
               X-Agent-Client: <your client's name>   (optional; names the client in the log and the audit)

Claude Code:
  claude mcp add --transport http gridcity %s --header "Authorization: Bearer %s" --header "X-Agent-Client: claude-code"
`, endpoint, tok, tok, endpoint, tok)
	return nil
}
