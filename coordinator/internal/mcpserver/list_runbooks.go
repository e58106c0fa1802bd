package mcpserver

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RunbooksOutput is list_runbooks' result.
type RunbooksOutput struct {
	Note     string        `json:"note,omitempty" jsonschema:"set when the answer is empty for a reason a person can fix, e.g. no coordinator config is loaded, and how to fix it"`
	Runbooks []RunbookView `json:"runbooks"`
}

type RunbookView struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Command     string            `json:"command" jsonschema:"what to pass to run_command (a person still approves it)"`
	ReadOnly    bool              `json:"readOnly" jsonschema:"true when the command only reads"`
	Match       map[string]string `json:"match" jsonschema:"which targets it applies to, e.g. {engine: postgres}"`
}

func addListRunbooks(s *mcp.Server, d Deps) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "list_runbooks",
		Title: "List runbooks",
		Description: "List the operators' runbooks from the coordinator's config: name, description, the command, whether it only reads, and which targets it matches. " +
			"Prefer a runbook's command over one of your own; run it with run_command, where a person approves it.",
		Annotations:  readOnly("List runbooks"),
		OutputSchema: outputSchema[RunbooksOutput](),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ NoInput) (*mcp.CallToolResult, RunbooksOutput, error) {
		out := RunbooksOutput{Runbooks: []RunbookView{}, Note: noConfigNote(d, "runbooks")}
		for _, r := range d.Topology.Config().Runbooks {
			m := map[string]string{}
			for k, v := range r.Match {
				m[k] = v
			}
			out.Runbooks = append(out.Runbooks, RunbookView{Name: r.Name, Description: r.Description, Command: r.Command, ReadOnly: r.ReadOnly, Match: m})
		}
		return nil, out, nil
	})
}

// runbookOf names the runbooks whose command is exactly command, so that the
// approval card and the history say that the operators wrote it; "" when
// the command is the AI's own.
func runbookOf(d Deps, command string) string {
	if d.Topology == nil {
		return ""
	}
	var names []string
	for _, r := range d.Topology.Config().Runbooks {
		if r.Command == command {
			names = append(names, r.Name)
		}
	}
	return strings.Join(names, ", ")
}
