package simfleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/gridcity/gridcity/lib/enroll"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// Enroll enrolls a simulated or test agent with gridcity-agent's own
// enrollment client (enroll.FetchPinnedCA and RequestCertificate),
// without a state directory: a new key each time. It returns the agent's
// client certificate with its key, and the CA.
func Enroll(ctx context.Context, jl gridcityv1.JoinLine, name, version string) (tls.Certificate, *x509.Certificate, error) {
	ca, err := enroll.FetchPinnedCA(ctx, jl.Coordinator, jl.CAPin)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := enroll.RequestCertificate(ctx, jl, ca, key, name, version)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("enroll %s: %w", name, err)
	}
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, ca, nil
}
