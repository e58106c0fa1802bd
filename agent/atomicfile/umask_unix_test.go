//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestModeWhateverTheUmask writes under a permissive and a strict umask:
// the mode asked for is the mode the file gets, and an old file's looser
// mode does not survive the replacement.
func TestModeWhateverTheUmask(t *testing.T) {
	for _, umask := range []int{0o000, 0o022, 0o077} {
		old := syscall.Umask(umask)
		dir := filepath.Join(t.TempDir(), "new")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		loose := filepath.Join(dir, "state.json")
		if err := os.WriteFile(loose, []byte("old"), 0o666); err != nil {
			t.Fatal(err)
		}
		errs := []error{
			Write(dir, "state.json", []byte("{}")),
			WriteMode(filepath.Join(dir, "user.json"), []byte("{}"), 0o640),
			Write(filepath.Join(dir, "created"), "state.json", []byte("{}")),
		}
		syscall.Umask(old)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for name, want := range map[string]fs.FileMode{"state.json": 0o600, "user.json": 0o640, "created": fs.ModeDir | 0o700, "created/state.json": 0o600} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() & (fs.ModeDir | fs.ModePerm); got != want {
				t.Errorf("umask %04o: %s has mode %v; want %v", umask, name, got, want)
			}
		}
	}
}
