// Package pki is the coordinator's certificate authority: it creates the CA
// on first start, issues the coordinator's gRPC server certificate, signs the
// agents' certificate requests at enrollment, and computes the CA pin that
// join lines carry. The CA's key is kept in the store sealed with the
// unseal key (package sealing), which the store never holds.
package pki

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// ServerName is the DNS name in the coordinator's server certificate.
const ServerName = gridcityv1.CoordinatorServerName

const (
	caBlobKey      = "ca.pem"
	caLifetime     = 10 * 365 * 24 * time.Hour
	serverLifetime = 365 * 24 * time.Hour
	agentLifetime  = 2 * 365 * 24 * time.Hour
	maxNameLen     = 63
)

// CA signs the coordinator's and the agents' certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// PEM block types of the stored CA. The key is stored sealed with the
// unseal key, bound to its certificate; an older gridcity stored it in the
// clear, and such a key is sealed at the next start.
const (
	certBlock      = "CERTIFICATE"
	clearKeyBlock  = "EC PRIVATE KEY"
	sealedKeyBlock = "GRIDCITY SEALED CA KEY"
	// sealPurpose is what the CA key is sealed for (the unseal key's
	// subkey); the certificate's DER is the associated data.
	sealPurpose = "ca key"
)

// Errors callers match with errors.Is to say what to do.
var (
	// ErrNoCA is a store no coordinator has served yet.
	ErrNoCA = errors.New("there is no CA in the store yet: start `gridcity serve` on this store first, which makes it")
	// ErrSealedWithAnotherKey is a stored CA key that does not open with
	// the unseal key given.
	ErrSealedWithAnotherKey = errors.New("the CA key in the store is sealed with another unseal key")
)

// CertStore is the part of the store the CA certificate is read from.
type CertStore interface {
	Blob(ctx context.Context, key string) ([]byte, error)
}

// Store is the part of the coordinator's store the CA is kept in.
type Store interface {
	CertStore
	// PutBlobIfAbsent returns the value stored after the call, so two
	// coordinators racing to create the CA end up with the same one.
	PutBlobIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error)
	// SwapBlob replaces a blob only if it still holds old
	// (store.ErrBlobChanged otherwise), so that two coordinators sealing
	// an older store's CA key at once write it once.
	SwapBlob(ctx context.Context, key string, old, value []byte) error
}

// LoadOrCreate returns the CA kept in the store, creating it the first
// time, its key sealed with unseal. A key an older gridcity stored in the
// clear is sealed in the store now, and the log says so.
func LoadOrCreate(ctx context.Context, st Store, unseal *sealing.Key, logger *slog.Logger) (*CA, error) {
	if unseal == nil {
		return nil, errors.New("load the CA: no unseal key")
	}
	blob, err := st.Blob(ctx, caBlobKey)
	if errors.Is(err, store.ErrNotFound) {
		fresh, err := newCABlob(unseal)
		if err != nil {
			return nil, err
		}
		// Another coordinator may have won the race; use whichever is stored.
		if blob, err = st.PutBlobIfAbsent(ctx, caBlobKey, fresh); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	for range 2 {
		stored, err := parseCABlob(blob)
		if err != nil {
			return nil, err
		}
		ca, err := stored.open(unseal)
		if err != nil || stored.clearKey == nil {
			return ca, err
		}
		// An older gridcity's CA: the key is sealed, and the clear one
		// goes, unless another coordinator did it first (then its blob is
		// read again: it must open with the same key).
		sealedBlob, err := caBlob(ca.cert.Raw, ca.key, unseal)
		if err != nil {
			return nil, err
		}
		err = st.SwapBlob(ctx, caBlobKey, blob, sealedBlob)
		if err == nil {
			logger.Warn("sealed the CA key in the store with the unseal key: an older gridcity kept it in the clear (backups taken before now still hold it in the clear)", "ca_pin", ca.Pin())
			return ca, nil
		}
		if !errors.Is(err, store.ErrBlobChanged) {
			return nil, fmt.Errorf("seal the CA key in the store: %w", err)
		}
		if blob, err = st.Blob(ctx, caBlobKey); err != nil {
			return nil, fmt.Errorf("read CA: %w", err)
		}
	}
	return nil, errors.New("seal the CA key in the store: the stored CA kept changing while it was being sealed; start again")
}

// LoadCertificate returns the CA certificate kept in the store, without
// its key: what a join line's pin needs. ErrNoCA when none is stored yet.
func LoadCertificate(ctx context.Context, st CertStore) (*x509.Certificate, error) {
	blob, err := st.Blob(ctx, caBlobKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoCA
	} else if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	stored, err := parseCABlob(blob)
	if err != nil {
		return nil, err
	}
	return stored.cert, nil
}

func newCABlob(unseal *sealing.Key) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "gridcity CA", Organization: []string{"gridcity"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	return caBlob(der, key, unseal)
}

// caBlob is the CA as stored: its certificate, and its key sealed with
// unseal and bound to the certificate (a sealed key moved beside another
// certificate does not open).
func caBlob(certDER []byte, key *ecdsa.PrivateKey, unseal *sealing.Key) ([]byte, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	defer clear(keyDER)
	sealed, err := unseal.Seal(sealPurpose, keyDER, certDER)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: certDER})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: sealedKeyBlock, Bytes: sealed})...), nil
}

// storedCA is the stored CA's blocks, read but not opened.
type storedCA struct {
	cert      *x509.Certificate
	sealedKey []byte
	clearKey  *ecdsa.PrivateKey
}

// parseCABlob reads the stored CA's blocks in any order, ignoring text and
// blocks of other types around them.
func parseCABlob(blob []byte) (storedCA, error) {
	var s storedCA
	for rest := blob; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		var err error
		switch b.Type {
		case certBlock:
			s.cert, err = x509.ParseCertificate(b.Bytes)
		case clearKeyBlock:
			s.clearKey, err = x509.ParseECPrivateKey(b.Bytes)
		case sealedKeyBlock:
			s.sealedKey = b.Bytes
		}
		if err != nil {
			return storedCA{}, fmt.Errorf("parse stored CA: %w", err)
		}
	}
	if s.cert == nil {
		return storedCA{}, errors.New("stored CA is incomplete: certificate missing")
	}
	return s, nil
}

// open is the CA with its key: the sealed one opened with unseal, or, in
// an older store, the clear one. A key that is not the certificate's is
// refused: it would issue certificates no agent verifies.
func (s storedCA) open(unseal *sealing.Key) (*CA, error) {
	key := s.clearKey
	if s.sealedKey != nil {
		der, err := unseal.Open(sealPurpose, s.sealedKey, s.cert.Raw)
		if errors.Is(err, sealing.ErrOpen) {
			return nil, fmt.Errorf("%w (or it was altered, or moved beside another certificate)", ErrSealedWithAnotherKey)
		} else if err != nil {
			return nil, fmt.Errorf("open the stored CA key: %w", err)
		}
		defer clear(der)
		if key, err = x509.ParseECPrivateKey(der); err != nil {
			return nil, fmt.Errorf("parse stored CA: %w", err)
		}
	}
	if key == nil {
		return nil, errors.New("stored CA is incomplete: key missing")
	}
	if !key.PublicKey.Equal(s.cert.PublicKey) {
		return nil, errors.New("stored CA is broken: its key is not its certificate's")
	}
	return &CA{cert: s.cert, key: key}, nil
}

// Cert is the CA certificate.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

// Pin is "sha256:" and the hex sha256 of the CA certificate's DER.
func (ca *CA) Pin() string { return Pin(ca.cert.Raw) }

// Pin formats the pin of a DER certificate.
func Pin(der []byte) string { return gridcityv1.PinOf(der) }

// Pool is a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ServerCertificate issues a fresh certificate for the coordinator's gRPC
// listener, valid for ServerName plus any extra names or addresses given.
// It is issued at every start, so it never expires under a running fleet.
func (ca *CA) ServerCertificate(extraNames ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: ServerName},
		DNSNames:     []string{ServerName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(serverLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	tmpl.DNSNames = append(tmpl.DNSNames, extraNames...)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issue server certificate: %w", err)
	}
	// The chain includes the CA so that an enrolling agent can find the
	// certificate its pin names.
	return tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key}, nil
}

// AgentCert is an agent's client certificate as issued.
type AgentCert struct {
	DER    []byte
	Serial string // as stored (SerialHex)
	// KeySHA256 is the SHA-256 of its public key (SubjectPublicKeyInfo):
	// what tells one agent's key from another's.
	KeySHA256 []byte
}

// SignAgent checks a certificate request and issues the agent's client
// certificate for name. It returns the DER and the hex serial.
func (ca *CA) SignAgent(csrDER []byte, name string) (AgentCert, error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return AgentCert{}, fmt.Errorf("certificate request is not valid DER PKCS#10: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return AgentCert{}, fmt.Errorf("certificate request signature: %w", err)
	}
	if err := ValidName(name); err != nil {
		return AgentCert{}, err
	}
	now := time.Now()
	serial := randomSerial()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"gridcity agent"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(agentLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return AgentCert{}, fmt.Errorf("issue agent certificate: %w", err)
	}
	key := sha256.Sum256(csr.RawSubjectPublicKeyInfo)
	return AgentCert{DER: der, Serial: SerialHex(serial), KeySHA256: key[:]}, nil
}

// SerialHex formats a certificate serial as stored.
func SerialHex(n *big.Int) string { return hex.EncodeToString(n.Bytes()) }

// ValidName checks a server name: 1–63 characters of letters, digits, '-',
// '_' and '.', starting with a letter or digit, so that it is safe in a
// certificate, a URL and a log line.
func ValidName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("server name %q must be 1 to %d characters", name, maxNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '-' || r == '_' || r == '.'))
		if !ok {
			return fmt.Errorf("server name %q has %q at position %d: use letters, digits, '-', '_' and '.', starting with a letter or digit", name, r, i+1)
		}
	}
	return nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS has no entropy; nothing sensible to do
	}
	return n.Add(n, big.NewInt(1))
}
