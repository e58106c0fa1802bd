//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// writeUnsealKey writes a key file of the given content and mode.
func writeUnsealKey(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "unseal.key")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func keyHex(fill string) string { return strings.Repeat(fill, 32) + "\n" }

// caPin is the pin of the CA serve left in the SQLite store of data.
func caPin(t *testing.T, data string) string {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := pki.LoadCertificate(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return pki.Pin(c.Raw)
}

// A lone coordinator makes its unseal key at its first start, says so,
// and uses it again at every start after; the CA stays the same. Lost, it
// is made anew, and the start stops saying the CA was sealed with another
// one and what to put back.
func TestServeMakesItsUnsealKeyOnce(t *testing.T) {
	data := t.TempDir()
	log, err := serveUntilReady(t, data)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(data, "unseal.key")
	first, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "made the unseal key") || strings.Contains(log, strings.TrimSpace(string(first))) {
		t.Fatalf("the first start's log does not say the key was made, or shows it:\n%s", log)
	}
	pin := caPin(t, data)
	log, err = serveUntilReady(t, data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(keyFile)
	if string(again) != string(first) || strings.Contains(log, "made the unseal key") || caPin(t, data) != pin {
		t.Fatalf("the second start made another key or CA (same key %v, pin %s, was %s):\n%s", string(again) == string(first), caPin(t, data), pin, log)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	_, err = serveUntilReady(t, data)
	if !errors.Is(err, pki.ErrSealedWithAnotherKey) || !strings.Contains(err.Error(), "was missing and a new one was made: put back the "+keyFile) {
		t.Fatalf("serve after unseal.key was lost: %v; want the CA refused, saying to put the key back", err)
	}
}

// --unseal-key-file is read with the rules of a credential: owner-only,
// 64 hex digits; a bad one stops the start saying what is wrong and what
// to do. Given to a lone coordinator, it is used instead of DATA/unseal.key.
func TestServeUnsealKeyFile(t *testing.T) {
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"readable by others", keyHex("ab"), 0o644, "has mode 0644: other users may read or change it; run `chmod 600"},
		{"wrong length", "abcd\n", 0o600, "holds 4 characters; an unseal key is 64 hex digits (32 bytes): make one with: openssl rand -hex 32 > FILE; chmod 600 FILE"},
		{"not hex", keyHex("zz"), 0o600, "character 1 is not a hex digit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeUnsealKey(t, tt.content, tt.mode)
			_, err := serveUntilReady(t, t.TempDir(), "--unseal-key-file", path)
			if err == nil || !strings.Contains(err.Error(), "--unseal-key-file (GRIDCITY_UNSEAL_KEY_FILE): unseal key file "+path) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve: %v; want --unseal-key-file named, and %q", err, tt.want)
			}
		})
	}
	data := t.TempDir()
	path := writeUnsealKey(t, keyHex("5a"), 0o400)
	t.Setenv("GRIDCITY_UNSEAL_KEY_FILE", path)
	if _, err := serveUntilReady(t, data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(data, "unseal.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DATA/unseal.key beside --unseal-key-file: %v; want none", err)
	}
	t.Setenv("GRIDCITY_UNSEAL_KEY_FILE", writeUnsealKey(t, keyHex("5b"), 0o600))
	if _, err := serveUntilReady(t, data); !errors.Is(err, pki.ErrSealedWithAnotherKey) || !strings.Contains(err.Error(), "give the --unseal-key-file it was sealed with") {
		t.Fatalf("serve with another key file: %v; want the CA refused", err)
	}
}

// A replica on PostgreSQL is refused without the unseal key, told exactly
// what to give; with it, it starts, and a replica given another key is
// refused, told to give the key the others use.
func TestReplicaNeedsTheUnsealKey(t *testing.T) {
	url := pgtest.Database(t)
	_, err := serveUntilReady(t, t.TempDir(), "--store", url)
	const want = "replicas on PostgreSQL need the same unseal key: give --unseal-key-file FILE (or GRIDCITY_UNSEAL_KEY_FILE) on every replica; make one with: openssl rand -hex 32 > FILE; chmod 600 FILE"
	if err == nil || err.Error() != want {
		t.Fatalf("a replica without the key: %v; want %q", err, want)
	}
	key := writeUnsealKey(t, keyHex("c3"), 0o600)
	if _, err := serveUntilReady(t, t.TempDir(), "--store", url, "--unseal-key-file", key); err != nil {
		t.Fatal(err)
	}
	if _, err := serveUntilReady(t, t.TempDir(), "--store", url, "--unseal-key-file", key); err != nil {
		t.Fatalf("a second replica with the same key: %v", err)
	}
	_, err = serveUntilReady(t, t.TempDir(), "--store", url, "--unseal-key-file", writeUnsealKey(t, keyHex("c4"), 0o600))
	if !errors.Is(err, pki.ErrSealedWithAnotherKey) || !strings.Contains(err.Error(), "the CA key in the store is sealed with another unseal key") || !strings.Contains(err.Error(), "give the unseal key the other replicas use") {
		t.Fatalf("a replica with another key: %v; want the CA refused, saying what to give", err)
	}
	_, err = serveUntilReady(t, t.TempDir(), "--store", url, "--unseal-key-file", writeUnsealKey(t, keyHex("c3"), 0o640))
	if err == nil || !strings.Contains(err.Error(), "has mode 0640") {
		t.Fatalf("a replica with a key file others may read: %v; want refused", err)
	}
}
