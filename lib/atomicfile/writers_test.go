package atomicfile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// notState are the product files that may write or rename files without
// this package, each with the reason its files need not survive a power
// cut (or are made durable another way).
var notState = map[string]string{
	"lib/atomicfile/atomicfile.go":                      "the helper itself",
	"agent/internal/runner/askpass.go":                  "the askpass helper script, written again for every command that needs it",
	"agent/internal/cmdjournal/journal.go":              "moves a damaged journal aside; the fresh journal saved next (atomicfile) syncs the directory",
	"coordinator/harness/cmd/gridcity-bench/agents.go":  "benchmark output",
	"coordinator/harness/cmd/gridcity-bench/latency.go": "benchmark output",
	"coordinator/harness/cmd/gridcity-bench/measure.go": "benchmark output",
	"coordinator/harness/cmd/gridcity-bench/report.go":  "benchmark output",
	"coordinator/harness/cmd/gridcity-fleet/demo.go":    "the demo's config, written again by every demo run",
	"coordinator/harness/pgtest/pgtest.go":              "tests' throwaway PostgreSQL: its password file, gone with the test",
	"coordinator/harness/certtest/certtest.go":          "tests' certificates, in the test's temporary directory",
	"coordinator/harness/notifytest/smtp.go":            "tests' SMTP server: its CA certificate, in the test's temporary directory",
	"coordinator/harness/netlab/requirements.go":        "test fleet: a policy-rc.d while packages install",
	"coordinator/harness/netlab/services.go":            "test fleet: services' throwaway configs",
	"coordinator/harness/netlab/state.go":               "test fleet: what to clean up, lost with the namespaces on a power cut",
}

// TestStateWritesAreDurable finds every call that writes or replaces a file
// (os.WriteFile, os.Create, os.CreateTemp, os.Rename) in both binaries'
// product code: state that must survive a power cut goes through Write, so
// such a call anywhere else is a file saved without fsync, or one more
// copy of this package.
func TestStateWritesAreDurable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]bool{"WriteFile": true, "Create": true, "CreateTemp": true, "Rename": true}
	files := 0
	for _, module := range []string{"agent", "coordinator", "lib"} {
		err := filepath.WalkDir(filepath.Join(root, module), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "e2e" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || !writers[sel.Sel.Name] {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "os" {
					if _, ok := notState[rel]; !ok {
						t.Errorf("%s: os.%s: write state with atomicfile.Write (or WriteMode, Create for a user's file), which fsyncs the file and its directory; or list the file in notState with the reason it need not survive a power cut", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("found %d Go files under %s; want both modules' sources", files, root)
	}
}
