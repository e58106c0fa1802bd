package fleetview

import (
	"context"
	"maps"
	"strings"

	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// RunbooksOutput is list_runbooks' result.
type RunbooksOutput struct {
	Note          string        `json:"note,omitempty" jsonschema:"why the answer is empty when a person can fix it (e.g. no config is loaded), and how"`
	Runbooks      []RunbookView `json:"runbooks" jsonschema:"in the config's order, as many as fit"`
	RunbooksCount int           `json:"runbooksCount" jsonschema:"how many runbooks there are, however many are listed"`
	NextAfter     string        `json:"nextAfter,omitempty" jsonschema:"set when runbooks was cut short: pass it as after for the next ones"`
}

// RunbooksInput is list_runbooks' input.
type RunbooksInput struct {
	After string `json:"after,omitempty" jsonschema:"continue the list after this runbook: the answer's nextAfter"`
}

type RunbookView struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Command     string            `json:"command" jsonschema:"what to pass to run_command (a person still approves it)"`
	ReadOnly    bool              `json:"readOnly" jsonschema:"true when the command only reads"`
	Match       map[string]string `json:"match" jsonschema:"which targets it applies to, e.g. {engine: postgres}"`
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

// orEmptyMap is {} rather than null for no match.
func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Runbooks answers list_runbooks.
func (m *Model) Runbooks(ctx context.Context, in RunbooksInput) (RunbooksOutput, error) {
	d := m.d
	rbs := d.Topology.Config().Runbooks
	out := RunbooksOutput{Runbooks: []RunbookView{}, RunbooksCount: len(rbs), Note: noConfigNote(d, "runbooks")}
	names := make([]string, len(rbs))
	for i, r := range rbs {
		names[i] = r.Name
	}
	from, err := afterKey(names, in.After, "runbooks")
	if err != nil {
		return RunbooksOutput{}, err
	}
	out.Runbooks = fill(rbs[from:], func(r config.Runbook) RunbookView {
		return RunbookView{Name: r.Name, Description: r.Description, Command: r.Command, ReadOnly: r.ReadOnly, Match: maps.Clone(orEmptyMap(r.Match))}
	}, BudgetFor(in.After != "")-JSONSize(out)-300)
	if n := len(out.Runbooks); n > 0 && from+n < len(rbs) {
		out.NextAfter = names[from+n-1]
	}
	return out, nil
}

// Runbook names the runbooks whose command is exactly command (see
// runbookOf).
func (m *Model) Runbook(command string) string { return runbookOf(m.d, command) }
