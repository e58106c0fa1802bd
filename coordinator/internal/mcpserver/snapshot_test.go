package mcpserver

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

var update = flag.Bool("update", false, "rewrite testdata/tools.json from the current tool list")

const snapshotFile = "testdata/tools.json"

// TestToolSnapshot compares what `gridcity mcp tools` writes with the
// committed snapshot, so that every change to a name, description, schema,
// annotation, tier, resource or prompt shows up in review.
func TestToolSnapshot(t *testing.T) {
	list, err := ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := list.Encode(&got); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(snapshotFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(snapshotFile, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(snapshotFile)
	if err != nil {
		t.Fatalf("%v; create it with: go test ./coordinator/internal/mcpserver -run TestToolSnapshot -update", err)
	}
	if d := firstDiff(string(want), got.String()); d != "" {
		t.Errorf("the tool list differs from %s; if the change is intended, review it and run\n"+
			"  go test ./coordinator/internal/mcpserver -run TestToolSnapshot -update\n%s", snapshotFile, d)
	}
}

// firstDiff shows the first differing line of two texts with some context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		if i < len(w) && i < len(g) && w[i] == g[i] {
			continue
		}
		var b strings.Builder
		for j := max(0, i-3); j < i; j++ {
			fmt.Fprintf(&b, "  %4d   %s\n", j+1, w[j])
		}
		for j := i; j < min(len(w), i+3); j++ {
			fmt.Fprintf(&b, "  %4d - %s\n", j+1, w[j])
		}
		for j := i; j < min(len(g), i+3); j++ {
			fmt.Fprintf(&b, "  %4d + %s\n", j+1, g[j])
		}
		return b.String()
	}
	return ""
}

// TestToolTiersPerScope holds every tool to its tier from both sides: the
// table in tools.go and what each scope's clients list. A tool without a
// tier, a tier its annotations contradict, or a gated tool a read token
// can see fails it.
func TestToolTiersPerScope(t *testing.T) {
	ctx := context.Background()
	table := map[string]tool{}
	for _, tl := range tools {
		if _, dup := table[tl.name]; dup {
			t.Errorf("tool %s is in the tools table twice", tl.name)
		}
		table[tl.name] = tl
		switch tl.tier {
		case TierReadOnly:
		case TierGated:
			if !tl.operate {
				t.Errorf("tool %s is gated but not reserved to operate tokens", tl.name)
			}
		default:
			t.Errorf("tool %s has no tier (got %q)", tl.name, tl.tier)
		}
	}
	list, err := ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, e := range list.Tools {
		served[e.Name] = true
		a := e.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("tool %s: annotations must set every hint explicitly, got %+v", e.Name, a)
			continue
		}
		if e.Title == "" || a.Title != e.Title {
			t.Errorf("tool %s: title %q and annotations.title %q must be set and agree", e.Name, e.Title, a.Title)
		}
		switch e.Tier {
		case TierReadOnly:
			if !a.ReadOnlyHint || *a.DestructiveHint {
				t.Errorf("tool %s is read-only but its annotations say readOnlyHint %v, destructiveHint %v", e.Name, a.ReadOnlyHint, *a.DestructiveHint)
			}
		case TierGated:
			if a.ReadOnlyHint || !*a.DestructiveHint || a.IdempotentHint {
				t.Errorf("tool %s is gated but its annotations say readOnlyHint %v, destructiveHint %v, idempotentHint %v", e.Name, a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint)
			}
		}
		wantRead := table[e.Name].offeredTo(store.ScopeRead)
		if got := slices.Contains(e.Scopes, store.ScopeRead); got != wantRead {
			t.Errorf("tool %s: read tokens list it: %v; want %v", e.Name, got, wantRead)
		}
		if e.Tier == TierGated && slices.Contains(e.Scopes, store.ScopeRead) {
			t.Errorf("tool %s is gated and read tokens see it", e.Name)
		}
	}
	for name := range table {
		if !served[name] {
			t.Errorf("tool %s is in the tools table but operate tokens do not see it", name)
		}
	}
	for _, r := range list.Resources {
		if r.URI == uriAudit && slices.Contains(r.Scopes, store.ScopeRead) {
			t.Errorf("read tokens see %s", uriAudit)
		}
	}
}
