package link

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// lossyCoordinator records each enrollment's key and, for the first
// `lose` of them, answers Unavailable as if the answer had been lost after
// the enrollment was recorded. It then issues a certificate only to the
// key it recorded first, as the coordinator does for an agent asking again
// with a one-time token.
type lossyCoordinator struct {
	gridcityv1.UnimplementedAgentServiceServer
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey

	mu   sync.Mutex
	lose int
	keys [][]byte // the SHA-256 of each request's public key
}

func (c *lossyCoordinator) Enroll(_ context.Context, req *gridcityv1.EnrollRequest) (*gridcityv1.EnrollResponse, error) {
	csr, err := x509.ParseCertificateRequest(req.GetCsrDer())
	if err != nil || csr.CheckSignature() != nil {
		return nil, status.Error(codes.InvalidArgument, "bad request")
	}
	sum := sha256.Sum256(csr.RawSubjectPublicKeyInfo)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append(c.keys, sum[:])
	if len(c.keys) <= c.lose {
		return nil, status.Error(codes.Unavailable, "the answer was lost")
	}
	if !bytes.Equal(c.keys[0], sum[:]) {
		return nil, status.Error(codes.Unauthenticated, "join token already used")
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(len(c.keys))), Subject: pkix.Name{CommonName: req.GetName()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.caCert, csr.PublicKey, c.caKey)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &gridcityv1.EnrollResponse{CertificateDer: der, CaDer: c.caCert.Raw, ServerName: gridcityv1.CoordinatorServerName}, nil
}

// startLossy serves a lossyCoordinator over TLS on loopback and returns it
// with a join line for it.
func startLossy(t *testing.T, lose int) (*lossyCoordinator, gridcityv1.JoinLine) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{gridcityv1.CoordinatorServerName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER, caDER}, PrivateKey: srvKey}}})
	gs := grpc.NewServer(grpc.Creds(creds))
	c := &lossyCoordinator{caCert: caCert, caKey: caKey, lose: lose}
	gridcityv1.RegisterAgentServiceServer(gs, c)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return c, gridcityv1.JoinLine{Coordinator: lis.Addr().String(), Token: "tok", CAPin: gridcityv1.PinOf(caDER)}
}

// An enrollment whose answer is lost is asked again with the same key, in
// the same process and after a restart of it (the key is kept in the state
// directory until the enrollment is saved, then removed).
func TestEnrollAsksAgainWithTheSameKey(t *testing.T) {
	ctx := context.Background()
	c, jl := startLossy(t, 2)
	dir := t.TempDir()

	// A run that gives up after one try, as a process that is stopped.
	_, err := EnrollRetrying(ctx, dir, jl, "web-1", "test", 1, slog.New(slog.DiscardHandler))
	var retry *RetryableError
	if !errors.As(err, &retry) {
		t.Fatalf("first run: %v; want a retryable error", err)
	}
	fi, err := os.Stat(filepath.Join(dir, enrollKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("enrollment key after a failed try: %v, %v; want it kept, mode 0600", fi, err)
	}
	// The next run retries (one more lost answer) and enrolls.
	id, err := EnrollRetrying(ctx, dir, jl, "web-1", "test", 3, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.keys) != 3 || !bytes.Equal(c.keys[0], c.keys[1]) || !bytes.Equal(c.keys[1], c.keys[2]) {
		t.Fatalf("keys asked with %x; want the same one three times", c.keys)
	}
	blk, _ := pem.Decode([]byte(id.CertPEM))
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo); !bytes.Equal(sum[:], c.keys[0]) {
		t.Fatal("the saved identity's certificate is not for the key asked with")
	}
	if _, err := os.Stat(filepath.Join(dir, enrollKeyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("enrollment key after enrolling: %v; want it removed", err)
	}
	if _, err := LoadIdentity(dir); err != nil {
		t.Fatalf("load the saved identity: %v", err)
	}
}

// A damaged enrollment key is replaced, not fatal.
func TestDamagedEnrollKeyIsReplaced(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, enrollKeyFile), []byte("-----BEGIN EC PRIVATE KEY-----\nnot a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k1, err := enrollKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := enrollKey(dir)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("second read: %v; want the replacement key kept", err)
	}
}

// A refusal leaves the state directory as it was: no key, and no
// directory when there was none.
func TestRefusedEnrollmentLeavesNothing(t *testing.T) {
	c, jl := startLossy(t, 0)
	c.keys = [][]byte{[]byte("another agent's key")}
	dir := filepath.Join(t.TempDir(), "state")
	_, err := Enroll(context.Background(), dir, jl, "web-1", "test")
	var retry *RetryableError
	if err == nil || errors.As(err, &retry) {
		t.Fatalf("got %v; want a refusal", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("state directory after a refusal: %v; want none", err)
	}
}
