package sealing

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testKey(t testing.TB, fill byte) *Key {
	t.Helper()
	k, err := KeyFromBytes(bytes.Repeat([]byte{fill}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// What is sealed opens with the same key, purpose and associated data,
// and with nothing else; altering a byte is noticed.
func TestSealOpens(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	sealed, err := k.Seal("ca key", []byte("the secret"), []byte("the cert"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("the secret")) {
		t.Fatal("the plaintext is in the sealed value")
	}
	got, err := k.Open("ca key", sealed, []byte("the cert"))
	if err != nil || string(got) != "the secret" {
		t.Fatalf("open: %q, %v; want the secret", got, err)
	}
	again, _ := k.Seal("ca key", []byte("the secret"), []byte("the cert"))
	if bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal; want a fresh nonce each")
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for name, open := range map[string]func() ([]byte, error){
		"another key":     func() ([]byte, error) { return other.Open("ca key", sealed, []byte("the cert")) },
		"another purpose": func() ([]byte, error) { return k.Open("approval", sealed, []byte("the cert")) },
		"another aad":     func() ([]byte, error) { return k.Open("ca key", sealed, []byte("another cert")) },
		"altered":         func() ([]byte, error) { return k.Open("ca key", tampered, []byte("the cert")) },
		"cut short":       func() ([]byte, error) { return k.Open("ca key", sealed[:20], []byte("the cert")) },
		"empty":           func() ([]byte, error) { return k.Open("ca key", nil, []byte("the cert")) },
		"no key":          func() ([]byte, error) { return (*Key)(nil).Open("ca key", sealed, []byte("the cert")) },
	} {
		if pt, err := open(); err == nil || pt != nil {
			t.Errorf("%s: opened %q; want an error", name, pt)
		} else if name != "no key" && !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v; want ErrOpen", name, err)
		}
	}
}

// An authenticator verifies for its key, purpose and message only.
func TestMACVerifies(t *testing.T) {
	k, other := testKey(t, 1), testKey(t, 2)
	tag := k.MAC("approval", []byte("msg"))
	if len(tag) != 32 {
		t.Fatalf("tag of %d bytes; want 32", len(tag))
	}
	if !k.Verify("approval", []byte("msg"), tag) {
		t.Fatal("the authenticator does not verify")
	}
	for name, ok := range map[string]bool{
		"another key":     other.Verify("approval", []byte("msg"), tag),
		"another purpose": k.Verify("ca key", []byte("msg"), tag),
		"another message": k.Verify("approval", []byte("msh"), tag),
		"cut short":       k.Verify("approval", []byte("msg"), tag[:16]),
		"no tag":          k.Verify("approval", []byte("msg"), nil),
		"no key":          (*Key)(nil).Verify("approval", []byte("msg"), tag),
	} {
		if ok {
			t.Errorf("%s: verified; want refused", name)
		}
	}
	if (*Key)(nil).MAC("approval", []byte("msg")) != nil {
		t.Error("an authenticator without a key; want nil")
	}
}

// The key's bytes never show in fmt or slog output.
func TestKeyNeverPrints(t *testing.T) {
	k := testKey(t, 0xab)
	hexKey := hex.EncodeToString(k.b[:])
	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
		fmt.Fprintf(&out, verb+"\n", k)
		fmt.Fprintf(&out, verb+"\n", *k)
	}
	slog.New(slog.NewTextHandler(&out, nil)).Info("k", "key", k)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("k", "key", k)
	s := strings.ToLower(out.String())
	for _, leak := range []string{hexKey, "abab", "171 171", "\\xab"} {
		if strings.Contains(s, leak) {
			t.Fatalf("the key shows as %q in:\n%s", leak, s)
		}
	}
}

func TestParseKey(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	for _, tt := range []struct {
		name, in, err string
	}{
		{"hex", good, ""},
		{"upper case and newline", strings.ToUpper(good) + "\n", ""},
		{"surrounded by whitespace", " \t" + good + "\r\n\n", ""},
		{"empty", "", "holds 0 characters"},
		{"short", good[:62], "holds 62 characters"},
		{"long", good + "00", "holds 66 characters"},
		{"not hex", good[:10] + "g" + good[11:], "character 11 is not a hex digit"},
		{"space inside", good[:32] + " " + good[33:], "character 33 is not a hex digit"},
		{"raw bytes", string(bytes.Repeat([]byte{0xff}, 32)), "holds 32 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey([]byte(tt.in))
			if tt.err == "" {
				if err != nil || hex.EncodeToString(k.b[:]) != good {
					t.Fatalf("ParseKey: %v; want the key %s", err, good)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "openssl rand -hex 32") {
				t.Fatalf("ParseKey: %v; want an error saying %q and how to make a key", err, tt.err)
			}
		})
	}
}

// FuzzParseKey: no input panics; a key is read only from 64 hex digits
// (whitespace around them aside) and is what they say; an error never
// quotes the file.
func FuzzParseKey(f *testing.F) {
	f.Add([]byte(strings.Repeat("ab", 32)))
	f.Add([]byte(" " + strings.Repeat("AB", 32) + "\n"))
	f.Add([]byte(strings.Repeat("ab", 31) + "zz"))
	f.Add([]byte("secret-secret-secret"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKey(b)
		trimmed := bytes.TrimSpace(b)
		if err != nil {
			if len(trimmed) >= 8 && strings.Contains(err.Error(), string(trimmed)) {
				t.Fatalf("the error quotes the file: %v", err)
			}
			return
		}
		want, derr := hex.DecodeString(string(trimmed))
		if derr != nil || len(want) != KeySize || !bytes.Equal(k.b[:], want) {
			t.Fatalf("ParseKey(%q) = %x; want the %d bytes the hex says", b, k.b, KeySize)
		}
	})
}

func writeKeyFile(t *testing.T, content string, mode os.FileMode) string {
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

func TestReadFile(t *testing.T) {
	good := strings.Repeat("5a", 32) + "\n"
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		err     string
	}{
		{"0600", good, 0o600, ""},
		{"0400", good, 0o400, ""},
		{"readable by the group", good, 0o640, "has mode 0640: other users may read or change it; run `chmod 600"},
		{"readable by all", good, 0o644, "has mode 0644"},
		{"writable by the group", good, 0o620, "has mode 0620"},
		{"wrong length", strings.Repeat("5a", 16), 0o600, "holds 32 characters; an unseal key is 64 hex digits"},
		{"not hex", strings.Repeat("zz", 32), 0o600, "character 1 is not a hex digit"},
		{"too big", strings.Repeat(" ", maxFile+1), 0o600, "is over 4096 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeKeyFile(t, tt.content, tt.mode)
			k, err := ReadFile(path)
			if tt.err == "" {
				if err != nil || k.b[0] != 0x5a {
					t.Fatalf("ReadFile: %v; want the key", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("ReadFile: %v; want an error naming %s and saying %q", err, path, tt.err)
			}
		})
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Errorf("a missing file: %v; want what to give", err)
	}
	if _, err := ReadFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v; want refused", err)
	}
}

// A lone coordinator's key is made once, private, and read again after.
func TestInDirMakesTheKeyOnce(t *testing.T) {
	dir := t.TempDir()
	k1, created, err := InDir(dir)
	if err != nil || !created {
		t.Fatalf("first: created %v, %v; want a new key", created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v; want mode 0600", fi, err)
	}
	k2, created, err := InDir(dir)
	if err != nil || created || k2.b != k1.b {
		t.Fatalf("second: created %v, %v, same key %v; want the first key read back", created, err, k2.b == k1.b)
	}
	os.Chmod(filepath.Join(dir, FileName), 0o644)
	if _, _, err := InDir(dir); err == nil || !strings.Contains(err.Error(), "has mode 0644") {
		t.Fatalf("a key file readable by others: %v; want refused", err)
	}
	os.WriteFile(filepath.Join(dir, FileName), []byte("short\n"), 0o600)
	os.Chmod(filepath.Join(dir, FileName), 0o600)
	if _, _, err := InDir(dir); err == nil || !strings.Contains(err.Error(), "holds 5 characters") {
		t.Fatalf("a broken key file: %v; want refused, not replaced", err)
	}
}
