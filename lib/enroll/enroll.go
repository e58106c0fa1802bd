// Package enroll is the enrollment client, one for gridcity-agent and for
// the agents the coordinator's benchmarks and tests simulate: the pinned CA
// fetch and the exchange of a join token and a CSR for a client
// certificate. Where the key is kept, and which failures are worth a retry,
// is the caller's.
package enroll

import (
	"context"
	"crypto"
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

// UnreachableError is a coordinator that could not be reached for the CA
// fetch: the network, or the coordinator not listening yet. It may pass.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// FetchPinnedCA returns the coordinator's CA certificate, proven by the pin.
//
// The agent does not yet trust any CA, so it asks for the coordinator's
// chain with a handshake that is bound to fail verification (an empty root
// pool). The failure carries the certificates the coordinator presented;
// the one whose sha256 is the pin is the CA. Verification is never skipped:
// the connection is closed, and every later connection verifies the
// coordinator against that CA.
func FetchPinnedCA(ctx context.Context, addr, pin string) (*x509.Certificate, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: &tls.Config{
		RootCAs:    x509.NewCertPool(),
		ServerName: gridcityv1.CoordinatorServerName,
		MinVersion: tls.VersionTLS13,
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return nil, fmt.Errorf("coordinator %s: handshake succeeded without a trusted CA, which cannot happen; refusing", addr)
	}
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		return nil, &UnreachableError{Err: fmt.Errorf("cannot reach the coordinator at %s: %w", addr, err)}
	}
	var seen []string
	for _, c := range verr.UnverifiedCertificates {
		p := gridcityv1.PinOf(c.Raw)
		if p == pin && c.IsCA {
			return c, nil
		}
		seen = append(seen, p)
	}
	return nil, fmt.Errorf("the coordinator at %s presented no CA matching the join line's pin %s (it presented %v): the join line belongs to another coordinator, or something between you intercepts the connection", addr, pin, seen)
}

// RequestCertificate asks the coordinator of jl, verified against ca, for a
// client certificate for key under name, with the join line's token, and
// checks that ca vouches for the answer. An error of the Enroll call is
// returned as gRPC made it (its status says whether it was refused).
func RequestCertificate(ctx context.Context, jl gridcityv1.JoinLine, ca *x509.Certificate, key crypto.Signer, name, version string) (*x509.Certificate, error) {
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	conn, err := grpc.NewClient(jl.Coordinator, grpc.WithTransportCredentials(credentials.NewTLS(
		&tls.Config{RootCAs: pool, ServerName: gridcityv1.CoordinatorServerName, MinVersion: tls.VersionTLS13})))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", jl.Coordinator, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := gridcityv1.NewAgentServiceClient(conn).Enroll(ctx, &gridcityv1.EnrollRequest{JoinToken: jl.Token, Name: name, CsrDer: csr, AgentVersion: version})
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(resp.GetCertificateDer())
	if err != nil {
		return nil, fmt.Errorf("coordinator returned an unreadable certificate: %w", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("coordinator returned a certificate its own CA does not vouch for: %w", err)
	}
	return cert, nil
}
