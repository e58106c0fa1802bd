//go:build unix

package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridcity/gridcity/lib/atomicfile/atomicfiletest"
)

// withUmask runs f under umask, the usual 022 of a login shell, which
// would make every file created with 0666 readable by everyone.
func withUmask(umask int, f func()) {
	old := syscall.Umask(umask)
	defer syscall.Umask(old)
	f()
}

// TestStoreFilesArePrivate opens a store in a data directory of mode 0755
// under umask 022 and writes until SQLite has its -wal and -shm files
// (they hold the CA key before a checkpoint moves it to the database):
// neither they nor anything else there may be readable by others, and the
// directory is made 0700. A second store opened beside it, as the CLI does
// while serve runs, tightens files an older gridcity left 0644.
func TestStoreFilesArePrivate(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	withUmask(0o022, func() {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := open(t, dir)
		if err := s.CreateToken(ctx, Token{Name: "t", Scope: ScopeRead, Hash: []byte("h"), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"gridcity.db", "gridcity.db-wal", "gridcity.db-shm"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Fatalf("%s: %v; the test wants SQLite's WAL files to exist", name, err)
			}
		}
		if loose := atomicfiletest.OpenToOthers(t, dir, 4); len(loose) != 0 {
			t.Errorf("readable by others after writes: %v; want every file 0600 and the directory 0700", loose)
		}

		for _, name := range []string{".", "gridcity.db", "gridcity.db-wal", "gridcity.db-shm"} {
			if err := os.Chmod(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		open(t, dir)
		if loose := atomicfiletest.OpenToOthers(t, dir, 4); len(loose) != 0 {
			t.Errorf("readable by others after opening a store an older version left open: %v; want them tightened", loose)
		}
	})
}

// TestStoreRefusesASharedDirectory: a data directory others may write in
// is not the store's to tighten; it is refused with what to do, before
// anything is written in it.
func TestStoreRefusesASharedDirectory(t *testing.T) {
	for _, mode := range []fs.FileMode{0o777, 0o777 | fs.ModeSticky, 0o733} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		withUmask(0o022, func() {
			s, err := OpenSQLite(context.Background(), dir)
			if err == nil {
				s.Close()
				t.Fatalf("mode %v: opened; want a refusal", mode)
			}
			if want := "give a directory of its own"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("mode %v: %v; want the directory named and %q", mode, err, want)
			}
		})
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("mode %v: %d files written in a refused directory; want none", mode, len(entries))
		}
	}
}
