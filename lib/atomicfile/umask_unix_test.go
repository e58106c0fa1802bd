//go:build unix

package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode fs.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		umask   int
		wantWas fs.FileMode
		wantErr string // "": the directory ends 0700
	}{
		{name: "missing, umask 0", dir: filepath.Join(base, "a", "b"), umask: 0},
		{name: "missing, umask 0277", dir: filepath.Join(base, "c"), umask: 0o277},
		{name: "private", dir: mk("private", 0o700), umask: 0o022},
		{name: "from mkdir", dir: mk("open", 0o755), umask: 0o022, wantWas: 0o755},
		{name: "group", dir: mk("group", 0o710), umask: 0o022, wantWas: 0o710},
		{name: "world-writable", dir: mk("shared", 0o777), umask: 0o022, wantErr: "give a directory of its own"},
		{name: "sticky like /tmp", dir: mk("tmp", 0o777|fs.ModeSticky), umask: 0o022, wantErr: "give a directory of its own"},
		{name: "a file", dir: file, umask: 0o022, wantErr: "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := syscall.Umask(tt.umask)
			was, err := PrivateDir(tt.dir, "state directory")
			syscall.Umask(old)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "state directory "+tt.dir) {
					t.Fatalf("got %v; want an error naming the state directory %s and saying %q", err, tt.dir, tt.wantErr)
				}
				return
			}
			if err != nil || was != tt.wantWas {
				t.Fatalf("got %v, %v; want %v, nil", was, err, tt.wantWas)
			}
			if fi, err := os.Stat(tt.dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("after PrivateDir: %v, %v; want mode 0700", fi.Mode(), err)
			}
		})
	}
}

// TestPrivateDirOfAnotherUser: a directory that belongs to someone else is
// not ours to change (only root can try).
func TestPrivateDirOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := PrivateDir(dir, "data directory")
	if err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Fatalf("got %v; want a refusal naming the owner and the fix", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode changed to %v; want it left alone", fi.Mode().Perm())
	}
}
