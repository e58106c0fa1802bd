// Package sealing is the coordinator's unseal key and what it protects: a
// 32-byte key kept outside the store (a file in the data directory for a
// lone coordinator, a file every replica is given for replicas on
// PostgreSQL), with which the CA's private key is sealed in the store and
// approvals and hand-offs are authenticated. Whoever reads or writes the
// store alone can neither open what it seals nor make an authenticator it
// accepts.
//
// Each use derives a subkey of its own from the key (HKDF-SHA256, the
// purpose as its info), so that what is sealed or authenticated for one
// purpose is never accepted for another.
package sealing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
)

// KeySize is the length of an unseal key in bytes.
const KeySize = 32

// Key is an unseal key. It never prints, logs or marshals its bytes: every
// fmt verb and slog show it as [unseal key].
type Key struct {
	b [KeySize]byte
}

// NewKey makes a random key.
func NewKey() (*Key, error) {
	k := &Key{}
	if _, err := rand.Read(k.b[:]); err != nil {
		return nil, fmt.Errorf("make an unseal key: %w", err)
	}
	return k, nil
}

// KeyFromBytes is the key of 32 bytes (for tests, and for ParseKey).
func KeyFromBytes(b []byte) (*Key, error) {
	if len(b) != KeySize {
		return nil, fmt.Errorf("an unseal key is %d bytes, not %d", KeySize, len(b))
	}
	k := &Key{}
	copy(k.b[:], b)
	return k, nil
}

// Format keeps the key's bytes out of every fmt verb (on a copy too,
// hence the value receiver).
func (Key) Format(f fmt.State, _ rune) { io.WriteString(f, "[unseal key]") }

// LogValue keeps the key's bytes out of every log.
func (Key) LogValue() slog.Value { return slog.StringValue("[unseal key]") }

// ErrOpen is a sealed value that does not open: it was sealed with another
// key, for another purpose or other associated data, or it was altered.
var ErrOpen = errors.New("it does not open with this unseal key (sealed with another key, or altered)")

// sealVersion leads every sealed value, so that a later format can be
// told from this one.
const sealVersion = 1

// subkey derives the key of one use (kind "seal" or "mac") and purpose.
func (k *Key) subkey(kind, purpose string) ([]byte, error) {
	if k == nil {
		return nil, errors.New("no unseal key")
	}
	return hkdf.Key(sha256.New, k.b[:], nil, "gridcity "+kind+" v1\x00"+purpose, KeySize)
}

func (k *Key) aead(purpose string) (cipher.AEAD, error) {
	sub, err := k.subkey("seal", purpose)
	if err != nil {
		return nil, err
	}
	defer clear(sub)
	block, err := aes.NewCipher(sub)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts and authenticates plaintext for purpose, bound to aad
// (which is not encrypted): AES-256-GCM under the purpose's subkey, with a
// random nonce. Open takes the same purpose and aad.
func (k *Key) Seal(purpose string, plaintext, aad []byte) ([]byte, error) {
	g, err := k.aead(purpose)
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", purpose, err)
	}
	out := make([]byte, 1+g.NonceSize(), 1+g.NonceSize()+len(plaintext)+g.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal %s: %w", purpose, err)
	}
	return g.Seal(out, out[1:], plaintext, aad), nil
}

// Open returns what Seal sealed for purpose and aad, or an error that is
// ErrOpen when it was sealed otherwise or altered.
func (k *Key) Open(purpose string, sealed, aad []byte) ([]byte, error) {
	g, err := k.aead(purpose)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", purpose, err)
	}
	if len(sealed) < 1+g.NonceSize()+g.Overhead() || sealed[0] != sealVersion {
		return nil, fmt.Errorf("open %s: %w", purpose, ErrOpen)
	}
	nonce, ct := sealed[1:1+g.NonceSize()], sealed[1+g.NonceSize():]
	pt, err := g.Open(nil, nonce, ct, aad)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", purpose, ErrOpen)
	}
	return pt, nil
}

// MAC is the authenticator of msg for purpose: HMAC-SHA256 under the
// purpose's subkey. It is nil without a key.
func (k *Key) MAC(purpose string, msg []byte) []byte {
	sub, err := k.subkey("mac", purpose)
	if err != nil {
		return nil
	}
	defer clear(sub)
	h := hmac.New(sha256.New, sub)
	h.Write(msg)
	return h.Sum(nil)
}

// Verify reports whether tag is msg's authenticator for purpose, in
// constant time. Without a key nothing verifies.
func (k *Key) Verify(purpose string, msg, tag []byte) bool {
	want := k.MAC(purpose, msg)
	return want != nil && hmac.Equal(want, tag)
}
