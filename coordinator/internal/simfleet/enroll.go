package simfleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// FetchPinnedCA is link.FetchPinnedCA (agent/internal/link, which this
// module cannot import): a handshake bound to fail
// verification (an empty root pool) yields the certificates the
// coordinator presents; the CA among them whose sha256 is the pin is the
// one to trust.
func FetchPinnedCA(ctx context.Context, addr, pin string) (*x509.Certificate, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{
		RootCAs:    x509.NewCertPool(),
		ServerName: gridcityv1.CoordinatorServerName,
		MinVersion: tls.VersionTLS13,
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return nil, fmt.Errorf("coordinator %s: handshake succeeded without a trusted CA", addr)
	}
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		return nil, fmt.Errorf("reach the coordinator at %s: %w", addr, err)
	}
	for _, c := range verr.UnverifiedCertificates {
		if c.IsCA && gridcityv1.PinOf(c.Raw) == pin {
			return c, nil
		}
	}
	return nil, fmt.Errorf("the coordinator at %s presented no CA matching the pin %s", addr, pin)
}

// Enroll is link.Enroll without the state directory, for simulated and
// test agents: the pinned CA fetch, a new key, a CSR and the Enroll call.
// It returns the agent's client certificate with its key, and the CA.
func Enroll(ctx context.Context, jl gridcityv1.JoinLine, name, version string) (tls.Certificate, *x509.Certificate, error) {
	ca, err := FetchPinnedCA(ctx, jl.Coordinator, jl.CAPin)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	conn, err := grpc.NewClient(jl.Coordinator, grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: pool, ServerName: gridcityv1.CoordinatorServerName, MinVersion: tls.VersionTLS13})))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("connect to %s: %w", jl.Coordinator, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := gridcityv1.NewAgentServiceClient(conn).Enroll(ctx, &gridcityv1.EnrollRequest{JoinToken: jl.Token, Name: name, CsrDer: csr, AgentVersion: version})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("enroll %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(resp.GetCertificateDer())
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("enroll %s: unreadable certificate: %w", name, err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("enroll %s: the CA does not vouch for the certificate: %w", name, err)
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, ca, nil
}
