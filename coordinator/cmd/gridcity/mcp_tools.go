package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
)

// cmdMCPTools writes every tool (with its tier), resource and prompt as
// JSON, built in process: no coordinator needs to run. The output is the
// snapshot kept in internal/mcpserver/testdata/tools.json.
func cmdMCPTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp tools takes no arguments, got %q", fs.Args())
	}
	list, err := mcpserver.ListTools(ctx)
	if err != nil {
		return err
	}
	return list.Encode(stdout)
}
