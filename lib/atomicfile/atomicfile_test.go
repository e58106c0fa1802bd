package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeWithMode0600(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	for _, data := range []string{"first, and longer", "second"} {
		if err := Write(dir, "f.json", []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f.json"))
		if err != nil || string(got) != data {
			t.Fatalf("read back %q, %v; want %q", got, err, data)
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, "f.json"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v; want 0600", fi.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestDiscardLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	p, err := Create(path, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	p.Discard()
	p.Discard() // twice is harmless, as a deferred Discard after an explicit one
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("after Discard the file holds %q; want %q", got, "old")
	}
	if err := p.Commit(); err == nil {
		t.Error("Commit after Discard succeeded; want an error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries after Discard; want only the old file", len(entries))
	}
}
