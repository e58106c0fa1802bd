package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/gridcity/gridcity/lib/deptest"
)

// The house rules of the coordinator as tests, from what `go list` says the
// binary links and what the type checker says its packages use (after
// tailscale's cmd/tailscaled/deps_test.go).

const storePkg = deptest.Module + "coordinator/internal/store"

// faces are the packages that show the fleet (the MCP tools, the app, and
// the read model they share once it exists): each takes the store it is
// given, through an interface of the few methods it calls, declared where
// it is used. Which store that is (SQLite or PostgreSQL) is serve's choice.
var faces = []string{"mcpserver", "web", "fleetview"}

// TestNoHarnessInCoordinator: the coordinator binary links no test,
// benchmark or demo code.
func TestNoHarnessInCoordinator(t *testing.T) {
	deptest.NoHarness(t, storePkg)
}

// TestFacesDoNotKnowTheConcreteStore: no face names a concrete store type
// (a type of package store that implements store.Store), calls a function
// of package store that opens one, or holds a value of such a type got any
// other way.
func TestFacesDoNotKnowTheConcreteStore(t *testing.T) {
	var patterns []string
	for _, f := range faces {
		dir := filepath.Join("..", "..", "internal", f)
		if _, err := os.Stat(dir); err == nil || f == "mcpserver" || f == "web" {
			patterns = append(patterns, deptest.Module+"coordinator/internal/"+f)
		}
	}
	pkgs := deptest.List(t, deptest.Options{Export: true}, append([]string{storePkg}, patterns...)...)
	exports := map[string]string{}
	byPath := map[string]*deptest.Package{}
	for _, p := range pkgs {
		if p.Error != nil {
			t.Fatalf("%s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath], byPath[p.ImportPath] = p.Export, p
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	store, err := imp.Import(storePkg)
	if err != nil {
		t.Fatal(err)
	}
	forbidden := concreteStore(t, store)

	for _, path := range patterns {
		p := byPath[path]
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}
		if _, err := (&types.Config{Importer: imp}).Check(path, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", path, err)
		}
		var found []finding
		for id, obj := range info.Uses {
			if why, ok := forbidden[obj]; ok {
				found = append(found, finding{fset.Position(id.Pos()), "store." + obj.Name() + ", " + why})
			}
		}
		for e, tv := range info.Types {
			if named := concreteNamed(tv.Type, forbidden); named != nil && tv.IsValue() {
				found = append(found, finding{fset.Position(e.Pos()), "a value of type " + types.TypeString(tv.Type, (*types.Package).Name) + ", " + forbidden[named.Obj()]})
			}
		}
		sort.Slice(found, func(i, j int) bool {
			a, b := found[i].pos, found[j].pos
			return a.Filename < b.Filename || a.Filename == b.Filename && a.Offset < b.Offset
		})
		root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
		for _, f := range found {
			if r, err := filepath.Rel(root, f.pos.Filename); err == nil {
				f.pos.Filename = filepath.ToSlash(r)
			}
			t.Errorf("%s: %s uses %s: take the store through an interface of the methods it calls, declared in %[2]s", f.pos, filepath.Base(path), f.what)
		}
	}
}

// finding is a use of the concrete store in a face.
type finding struct {
	pos  token.Position
	what string
}

// concreteStore is what a face must not use from package store: its types
// that implement store.Store (SQLite, Postgres …) and its functions that
// return one of them or a store.Store (Open, OpenSQLite, OpenPostgres …),
// each with why.
func concreteStore(t *testing.T, store *types.Package) map[types.Object]string {
	t.Helper()
	iface, ok := store.Scope().Lookup("Store").Type().Underlying().(*types.Interface)
	if !ok {
		t.Fatal("store.Store is not an interface")
	}
	forbidden := map[types.Object]string{}
	for _, name := range store.Scope().Names() {
		obj := store.Scope().Lookup(name)
		if tn, ok := obj.(*types.TypeName); ok && obj.Exported() && !types.IsInterface(tn.Type()) &&
			(types.Implements(tn.Type(), iface) || types.Implements(types.NewPointer(tn.Type()), iface)) {
			forbidden[obj] = "a concrete store"
		}
	}
	for _, name := range store.Scope().Names() {
		fn, ok := store.Scope().Lookup(name).(*types.Func)
		if !ok || !fn.Exported() {
			continue
		}
		res := fn.Type().(*types.Signature).Results()
		for i := range res.Len() {
			if concreteNamed(res.At(i).Type(), forbidden) != nil || types.Identical(res.At(i).Type(), store.Scope().Lookup("Store").Type()) {
				forbidden[fn] = "which opens a store"
			}
		}
	}
	// Both stores and their constructors, or the rule checks less than it
	// says.
	var names []string
	for obj := range forbidden {
		names = append(names, obj.Name())
	}
	sort.Strings(names)
	for _, want := range []string{"Open", "OpenPostgres", "OpenSQLite", "Postgres", "SQLite"} {
		if !slices.Contains(names, want) {
			t.Fatalf("the concrete stores and their constructors found in package store are %v; want %s among them", names, want)
		}
	}
	return forbidden
}

// concreteNamed is the concrete store type that t is, or points to.
func concreteNamed(t types.Type, forbidden map[types.Object]string) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		if _, bad := forbidden[n.Obj()]; bad {
			return n
		}
	}
	return nil
}
