// Package deptest reads what a binary links from `go list -deps`, for the
// house rules that each command's deps_test.go writes as tests (after
// tailscale's tstest/deptest): no harness in a product binary, and the
// rules of each binary's own packages.
//
// It is a test helper: no product binary may import it. It lives in the lib
// module, not under coordinator/harness, because the agent's tests use it
// too and the agent module must not require the coordinator's.
package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
)

// Module is the import path prefix of every gridcity module.
const Module = "github.com/gridcity/gridcity/"

// GOOSes are the systems the binaries are listed for: linux, which the
// packages ship, and darwin, which builds the files behind !linux (the
// agent does not build for windows).
var GOOSes = []string{"linux", "darwin"}

// ReleaseTags are the build tags of `make build`.
const ReleaseTags = "grpcnotrace"

// Package is the part of `go list -json` the rules read.
type Package struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
	Imports    []string
	Export     string // with Options.Export
	Standard   bool
	Error      *struct{ Err string }
}

// Options say how to list.
type Options struct {
	GOOS   string // empty: this machine's
	Tags   string // -tags
	Export bool   // -export: compile, and say where each package's export data is
}

// List runs `go list -e -deps -json` on patterns in the test's directory
// (so in its module) with cgo off, as the binaries are built, and returns
// the packages in go list's order: every package after its imports.
func List(t testing.TB, opts Options, patterns ...string) []*Package {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the dependencies with: %v", err)
	}
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Dir,Name,GoFiles,Imports,Export,Standard,Error"}
	if opts.Tags != "" {
		args = append(args, "-tags", opts.Tags)
	}
	if opts.Export {
		args = append(args, "-export")
	}
	cmd := exec.Command(goBin, append(args, patterns...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if opts.GOOS != "" {
		cmd.Env = append(cmd.Env, "GOOS="+opts.GOOS)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
	}
	var pkgs []*Package
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(Package)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// IsHarness reports whether the import path is test, benchmark or demo
// code of ours: under coordinator/harness, or a package whose name ends
// in "test" (atomicfiletest, notifytest, pgtest, deptest …).
func IsHarness(importPath string) bool {
	if !strings.HasPrefix(importPath, Module) {
		return false
	}
	return strings.HasPrefix(importPath+"/", Module+"coordinator/harness/") || strings.HasSuffix(path.Base(importPath), "test")
}

// Chain is how from reaches to through the imports in pkgs, shortest
// first: "from → a → b → to", or "" when it does not.
func Chain(pkgs []*Package, from, to string) string {
	byPath := make(map[string]*Package, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	prev := map[string]string{from: ""}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		p := byPath[queue[0]]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p.ImportPath
			if imp == to {
				chain := []string{to}
				for at := p.ImportPath; at != ""; at = prev[at] {
					chain = append(chain, at)
				}
				for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
					chain[i], chain[j] = chain[j], chain[i]
				}
				return strings.Join(chain, " → ")
			}
			queue = append(queue, imp)
		}
	}
	return ""
}

// NoHarness fails the test when the main package in the test's directory
// links harness code (IsHarness) on any of GOOSes, built as `make build`
// builds it. want is a package of ours the binary must link, so that a
// listing gone wrong cannot pass for a clean one.
func NoHarness(t *testing.T, want string) {
	t.Helper()
	for _, goos := range GOOSes {
		pkgs := List(t, Options{GOOS: goos, Tags: ReleaseTags}, ".")
		main := pkgs[len(pkgs)-1]
		if main.Name != "main" {
			t.Fatalf("GOOS=%s: go list . ends with %s (package %s); want the command's main package", goos, main.ImportPath, main.Name)
		}
		found := false
		for _, p := range pkgs {
			if p.Error != nil {
				t.Errorf("GOOS=%s: %s: %s", goos, p.ImportPath, p.Error.Err)
			}
			found = found || p.ImportPath == want
			if IsHarness(p.ImportPath) {
				t.Errorf("GOOS=%s: %s links %s, which is test, benchmark or demo code (coordinator/harness/…, or a package named …test): %s",
					goos, path.Base(main.Dir), p.ImportPath, Chain(pkgs, main.ImportPath, p.ImportPath))
			}
		}
		if !found {
			t.Errorf("GOOS=%s: the dependencies of %s (%d packages) do not include %s; the listing proves nothing", goos, main.ImportPath, len(pkgs), want)
		}
	}
}
