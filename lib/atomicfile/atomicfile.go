// Package atomicfile is the one way both binaries write a file that must
// survive a crash or a power cut: a temporary file in the same directory,
// fsync, rename over the old file, fsync of the directory. A crash at any
// point leaves the old file or the new one, never a mix or nothing.
//
// It also holds the rule for the directories such files live in (the
// coordinator's data directory, the agent's state directory): private to
// the user the binary runs as, whatever the umask (see PrivateDir).
//
// It lives in the lib module, which both binaries' modules require and
// neither owns, because both need the same guarantees; it imports nothing
// but the standard library.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces dir/name with data, mode 0600 whatever the umask and the
// old file's mode. dir is created (0700) when missing.
func Write(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return WriteMode(filepath.Join(dir, name), data, 0o600)
}

// WriteMode replaces path with data, with the given mode whatever the
// umask. It is for files that are not the binary's own (a user's client
// configuration keeps the mode its owner gave it); the binary's own state
// uses Write.
func WriteMode(path string, data []byte, mode fs.FileMode) error {
	p, err := Create(path, mode)
	if err != nil {
		return err
	}
	defer p.Discard()
	if _, err := p.Write(data); err != nil {
		return err
	}
	return p.Commit()
}

// Pending is the new content of a file, written to a temporary file beside
// it until Commit puts it in place. Between the writes and Commit the
// caller may still decide not to replace the file (Discard).
type Pending struct {
	tmp  *os.File
	path string
	done bool
}

// Create starts replacing path: a temporary file in its directory (so
// that the rename stays on one file system), with mode set explicitly so
// the umask cannot loosen or tighten it.
func Create(path string, mode fs.FileMode) (*Pending, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode.Perm()); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	return &Pending{tmp: tmp, path: path}, nil
}

// Write appends to the new content.
func (p *Pending) Write(b []byte) (int, error) {
	n, err := p.tmp.Write(b)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", p.tmp.Name(), err)
	}
	return n, nil
}

// Commit makes the new content durable and puts it in place of the old
// file: fsync, rename, and an fsync of the directory so that the rename
// itself survives a power cut. After an error the old file is untouched
// (or, if only the directory's fsync failed, the new one is in place but
// may not survive a power cut).
func (p *Pending) Commit() error {
	if p.done {
		return errors.New("atomicfile: Commit after Commit or Discard")
	}
	p.done = true
	defer os.Remove(p.tmp.Name()) // after the rename, a no-op
	if err := p.tmp.Sync(); err != nil {
		p.tmp.Close()
		return fmt.Errorf("sync %s: %w", p.tmp.Name(), err)
	}
	if err := p.tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p.tmp.Name(), err)
	}
	if err := os.Rename(p.tmp.Name(), p.path); err != nil {
		return fmt.Errorf("replace %s: %w", p.path, err)
	}
	return SyncDir(filepath.Dir(p.path))
}

// Discard drops the new content and leaves the old file as it was. It is
// a no-op after Commit, so it can be deferred.
func (p *Pending) Discard() {
	if p.done {
		return
	}
	p.done = true
	p.tmp.Close()
	os.Remove(p.tmp.Name())
}

// SyncDir fsyncs a directory, so that entries created or renamed in it
// (a new file, a rename, a backup beside a file) survive a power cut.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// PrivateDir makes sure dir is a directory only its owner can enter, and
// returns the mode it had when PrivateDir had to tighten it (0 when it was
// created or already private), for the caller to log: changing an
// operator's directory must not go unsaid. A missing directory is created
// 0700 whatever the umask. An existing one that group or others may enter
// is made 0700 when it belongs to the user running the binary; one that
// belongs to another user, or that others may write in (a shared place
// such as /tmp), is refused, with what to do instead: it is not this
// binary's to change. what names the directory in errors, as the flag's
// help does ("data directory").
func PrivateDir(dir, what string) (fs.FileMode, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return 0, fmt.Errorf("create %s %s: %w", what, dir, err)
		}
		// MkdirAll's mode is filtered by the umask; Chmod's is not.
		if err := os.Chmod(dir, 0o700); err != nil {
			return 0, fmt.Errorf("create %s %s: %w", what, dir, err)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s %s is not a directory: give a directory (it is created when missing)", what, dir)
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return 0, nil
	}
	if perm&0o002 != 0 || fi.Mode()&fs.ModeSticky != 0 {
		return 0, fmt.Errorf("%s %s has mode %04o: other users can write in it, so it is shared, and the keys kept there would not be private: give a directory of its own (created 0700 when missing), or run `chmod 700 %s` if it is one", what, dir, perm, dir)
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Geteuid() {
		return 0, fmt.Errorf("%s %s has mode %04o and belongs to uid %d, not to uid %d that runs this: run `chmod 700 %s` as its owner, or give a directory of its own", what, dir, perm, uid, os.Geteuid(), dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return 0, fmt.Errorf("%s %s has mode %04o and could not be made private (%w): run `chmod 700 %s`", what, dir, perm, err, dir)
	}
	return perm, nil
}
