// Package atomicfiletest helps tests check the promise of package
// atomicfile that a binary's files are private, in both modules. It is a
// test helper: no product binary may import it (the deps tests of both
// commands check).
package atomicfiletest

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
)

// OpenToOthers walks dir and returns every entry (dir included) that group
// or others may read, write or enter, as "PATH MODE". It fails the test
// when dir holds fewer than min entries, so that a walk of the wrong place
// proves nothing.
func OpenToOthers(t testing.TB, dir string, min int) []string {
	t.Helper()
	var open []string
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n++
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			open = append(open, fmt.Sprintf("%s %04o", path, fi.Mode().Perm()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < min {
		t.Fatalf("found %d entries in %s; want at least %d", n, dir, min)
	}
	return open
}
