package sealing

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gridcity/gridcity/lib/atomicfile"
)

// FileName is the unseal key's file in a lone coordinator's data directory.
const FileName = "unseal.key"

// MakeOne says how to make a key file, for errors.
const MakeOne = "make one with: openssl rand -hex 32 > FILE; chmod 600 FILE"

// maxFile bounds what is read of a key file: 64 hex digits and whitespace.
const maxFile = 4 << 10

// ParseKey reads a key file's contents: 64 hex digits, whitespace around
// them ignored. Its errors never quote the contents.
func ParseKey(b []byte) (*Key, error) {
	s := bytes.TrimSpace(b)
	if len(s) != 2*KeySize {
		return nil, fmt.Errorf("it holds %d characters; an unseal key is %d hex digits (%d bytes): %s", len(s), 2*KeySize, KeySize, MakeOne)
	}
	for i, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return nil, fmt.Errorf("character %d is not a hex digit; an unseal key is %d hex digits (%d bytes): %s", i+1, 2*KeySize, KeySize, MakeOne)
		}
	}
	var raw [KeySize]byte
	defer clear(raw[:])
	if _, err := hex.Decode(raw[:], s); err != nil {
		return nil, fmt.Errorf("not hex: %s", MakeOne) // not reached: every character was checked
	}
	return KeyFromBytes(raw[:])
}

// ReadFile reads the key in the file at path, which must be a regular file
// that only its owner may read or write (mode 0600 or 0400).
func ReadFile(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("unseal key file %s does not exist: give the file every replica of this store is given, or %s", path, MakeOne)
		}
		return nil, fmt.Errorf("unseal key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("unseal key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("unseal key file %s is not a regular file: give a file holding the key (%s)", path, MakeOne)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("unseal key file %s has mode %04o: other users may read or change it; run `chmod 600 %s` (and make it belong to the user that runs gridcity)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	defer clear(b)
	if err != nil {
		return nil, fmt.Errorf("read unseal key file %s: %w", path, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("unseal key file %s is over %d bytes; an unseal key is %d hex digits: %s", path, maxFile, 2*KeySize, MakeOne)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("unseal key file %s: %w", path, err)
	}
	return k, nil
}

// InDir returns the key in dir/unseal.key, making it (a new random key,
// mode 0600) when the file is missing; created says it was made. dir is
// a lone coordinator's data directory, already private.
func InDir(dir string) (k *Key, created bool, err error) {
	path := filepath.Join(dir, FileName)
	if _, err := os.Lstat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		k, err := ReadFile(path)
		return k, false, err
	}
	if k, err = NewKey(); err != nil {
		return nil, false, err
	}
	text := []byte(hex.EncodeToString(k.b[:]) + "\n")
	defer clear(text)
	if err := atomicfile.Write(dir, FileName, text); err != nil {
		return nil, false, fmt.Errorf("write the unseal key: %w", err)
	}
	return k, true, nil
}
