package runner

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyCommandPathImportsRunner keeps the approved-command runner out of
// reach of everything but the command path: a collector that could call
// Run would be one edit away from running something nobody approved.
// Collectors start their read-only queries through hostquery instead. The
// same walk checks that os/exec stays in these two packages, so that every
// process the agent starts is in one of two places to review.
func TestOnlyCommandPathImportsRunner(t *testing.T) {
	const module = "github.com/gridcity/gridcity/agent/"
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The command path: main wires it, link receives approved commands,
	// cmdjournal records their results.
	commandPath := []string{"cmd/gridcity-agent", "internal/link", "internal/cmdjournal"}
	runnerImporters := append(commandPath, "internal/runner")
	execImporters := []string{"internal/hostquery", "internal/runner"}

	var seenRunner, seenExec []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == module+"internal/runner":
				seenRunner = append(seenRunner, rel)
				if !slices.Contains(runnerImporters, dir) {
					t.Errorf("%s imports agent/internal/runner; only the command path (%s) may: run read-only queries through agent/internal/hostquery", rel, strings.Join(commandPath, ", "))
				}
			case p == "os/exec" && !strings.HasSuffix(path, "_test.go"):
				seenExec = append(seenExec, rel)
				if !slices.Contains(execImporters, dir) {
					t.Errorf("%s imports os/exec; only %s start processes", rel, strings.Join(execImporters, " and "))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have found the known importers, or it looked in the
	// wrong place and proved nothing.
	if len(seenRunner) == 0 || len(seenExec) == 0 {
		t.Fatalf("walked %s and found runner imported by %v and os/exec by %v; want both found", root, seenRunner, seenExec)
	}
}
