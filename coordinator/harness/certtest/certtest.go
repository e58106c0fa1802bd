// Package certtest makes self-signed TLS certificates for tests (a
// certificate and key in PEM, for the names and IP addresses given, that a
// client trusts by putting the certificate itself in its roots), and the
// HTTPS client of a test that reaches a listener by a name no DNS knows.
//
// It is harness, for tests only: no product binary may import it
// (deps_test.go in coordinator/cmd/gridcity checks).
package certtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Pair is a certificate and its key, in PEM.
type Pair struct{ Cert, Key []byte }

// New makes a self-signed certificate with the serial number given, valid
// from an hour ago for 90 days, for names: host names, or IP addresses.
func New(t testing.TB, serial int64, names ...string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(90 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}
}

// Write makes a certificate as New does and writes it and its key to
// cert.pem and key.pem in a new temporary directory, returning the files.
func Write(t testing.TB, names ...string) (certFile, keyFile string) {
	t.Helper()
	p := New(t, 1, names...)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for file, b := range map[string][]byte{certFile: p.Cert, keyFile: p.Key} {
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// Pool is a certificate pool of the PEM certificates in files.
func Pool(t testing.TB, files ...string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !pool.AppendCertsFromPEM(b) {
			t.Fatalf("no certificate in %s", f)
		}
	}
	return pool
}

// Client is an HTTPS client that trusts roots and reaches every host at
// addr, as a client elsewhere whose DNS names a test's listener would:
// the URL's host is the TLS server name and the Host header, addr where
// the connection goes.
func Client(t testing.TB, roots *x509.CertPool, addr string) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}
