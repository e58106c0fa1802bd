// Package pki is the coordinator's certificate authority: it creates the CA
// on first start, issues the coordinator's gRPC server certificate, signs the
// agents' certificate requests at enrollment, and computes the CA pin that
// join lines carry.
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
	"math/big"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

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

// Store is the part of the coordinator's store the CA is kept in.
type Store interface {
	Blob(ctx context.Context, key string) ([]byte, error)
	// PutBlobIfAbsent returns the value stored after the call, so two
	// coordinators racing to create the CA end up with the same one.
	PutBlobIfAbsent(ctx context.Context, key string, value []byte) ([]byte, error)
}

// LoadOrCreate returns the CA kept in the store, creating it the first time.
func LoadOrCreate(ctx context.Context, st Store) (*CA, error) {
	blob, err := st.Blob(ctx, caBlobKey)
	if errors.Is(err, store.ErrNotFound) {
		fresh, err := newCABlob()
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
	return parseCABlob(blob)
}

func newCABlob() ([]byte, error) {
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
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...), nil
}

func parseCABlob(blob []byte) (*CA, error) {
	ca := &CA{}
	for rest := blob; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		var err error
		switch b.Type {
		case "CERTIFICATE":
			ca.cert, err = x509.ParseCertificate(b.Bytes)
		case "EC PRIVATE KEY":
			ca.key, err = x509.ParseECPrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("parse stored CA: %w", err)
		}
	}
	if ca.cert == nil || ca.key == nil {
		return nil, errors.New("stored CA is incomplete: certificate or key missing")
	}
	return ca, nil
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
