// Package link is the agent's side of the coordinator connection: enrollment
// with a join line, the identity it yields, and the one long-lived stream
// with its reconnect policy.
package link

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gridcity/gridcity/lib/atomicfile"
	"github.com/gridcity/gridcity/lib/enroll"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// identityFile holds everything enrollment yields, in one file so that it is
// written whole or not at all.
const identityFile = "identity.json"

// ErrNotEnrolled means the state directory holds no identity yet.
var ErrNotEnrolled = errors.New("not enrolled")

// Identity is an enrolled agent's credentials.
type Identity struct {
	Name        string `json:"name"`
	Coordinator string `json:"coordinator"`
	CAPin       string `json:"caPin"`
	// JoinTokenHash (sha256, hex) says which join line this identity came
	// from, so that the same line is not enrolled twice and a new one is.
	JoinTokenHash string    `json:"joinTokenHash"`
	EnrolledAt    time.Time `json:"enrolledAt"`
	CertPEM       string    `json:"certPEM"`
	KeyPEM        string    `json:"keyPEM"`
	CAPEM         string    `json:"caPEM"`
}

// LoadIdentity reads the identity from the state directory.
func LoadIdentity(dir string) (*Identity, error) {
	b, err := os.ReadFile(filepath.Join(dir, identityFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotEnrolled
	}
	if err != nil {
		return nil, fmt.Errorf("read agent identity: %w", err)
	}
	var id Identity
	if err := json.Unmarshal(b, &id); err != nil {
		return nil, fmt.Errorf("agent identity %s is damaged (%v): enroll again with a new join line", filepath.Join(dir, identityFile), err)
	}
	if _, err := id.tlsConfig(); err != nil {
		return nil, fmt.Errorf("agent identity %s is unusable (%v): enroll again with a new join line", filepath.Join(dir, identityFile), err)
	}
	return &id, nil
}

// save replaces the identity durably: a power cut right after enrolling
// must not leave an empty identity.json beside a certificate the
// coordinator has already issued.
func (id *Identity) save(dir string) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(dir, identityFile, b)
}

// tlsConfig is the mTLS configuration for the stream: our certificate, and
// the coordinator verified against the pinned CA and its fixed name.
func (id *Identity) tlsConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair([]byte(id.CertPEM), []byte(id.KeyPEM))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(id.CAPEM)) {
		return nil, errors.New("no CA certificate")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   gridcityv1.CoordinatorServerName,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// TokenHash identifies a join token without keeping it.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// RetryableError is an enrollment that failed for a reason that may pass:
// the coordinator unreachable, starting, busy, or unable to record it.
// Refusals (token unknown, used or expired, name taken, a CA that does not
// match the pin) are not retryable: the operator has to act.
type RetryableError struct{ Err error }

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// EnrollRetrying is Enroll, tried again after a retryable failure with the
// reconnect backoff (1 s doubling to a minute, jittered, so that a fleet
// enrolling together spreads out), at most attempts times (0: until ctx
// ends). Each failure is logged with the wait before the next try.
func EnrollRetrying(ctx context.Context, dir string, jl gridcityv1.JoinLine, name, version string, attempts int, logger *slog.Logger) (*Identity, error) {
	for n := 0; ; n++ {
		id, err := Enroll(ctx, dir, jl, name, version)
		var retry *RetryableError
		if err == nil || !errors.As(err, &retry) || (attempts > 0 && n+1 >= attempts) {
			return id, err
		}
		d := Backoff(n, time.Second, time.Minute)
		logger.Warn("enrollment failed; retrying", "coordinator", jl.Coordinator, "err", err, "in", d.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(d):
		}
	}
}

// Enroll trades the join line's token for a certificate and saves the
// identity in dir. Until it has, the key it asks with is kept in dir (see
// enrollKeyFile); a refusal removes it again, and dir if Enroll made it.
func Enroll(ctx context.Context, dir string, jl gridcityv1.JoinLine, name, version string) (*Identity, error) {
	ca, err := enroll.FetchPinnedCA(ctx, jl.Coordinator, jl.CAPin)
	var unreachable *enroll.UnreachableError
	if errors.As(err, &unreachable) {
		return nil, &RetryableError{Err: err}
	}
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(dir)
	madeDir := errors.Is(statErr, fs.ErrNotExist)
	key, err := enrollKey(dir)
	if err != nil {
		return nil, err
	}
	cert, err := enroll.RequestCertificate(ctx, jl, ca, key, name, version)
	if s, ok := status.FromError(err); err != nil && ok && s.Code() != codes.OK {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown, codes.Canceled:
			// The coordinator is starting, stopping, busy or could not
			// record it: the same request can succeed later.
			return nil, &RetryableError{Err: fmt.Errorf("enrollment with %s did not go through: %s", jl.Coordinator, s.Message())}
		}
		// Refused: nothing was recorded for this key, so it is of no more
		// use, and the state directory is left as it was found.
		os.Remove(filepath.Join(dir, enrollKeyFile))
		if madeDir {
			os.Remove(dir) // only if empty
		}
		return nil, fmt.Errorf("enrollment refused by %s: %s", jl.Coordinator, s.Message())
	}
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	id := &Identity{
		Name: name, Coordinator: jl.Coordinator, CAPin: jl.CAPin, EnrolledAt: time.Now().UTC(), JoinTokenHash: TokenHash(jl.Token),
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})),
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
		CAPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})),
	}
	if err := id.save(dir); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, enrollKeyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("enrolled, but the enrollment key could not be removed: %w", err)
	}
	return id, nil
}

// enrollKeyFile keeps the key of an enrollment that has not finished, so
// that asking again — a retry, or the agent started again — asks with the
// same key. The coordinator recognizes it and answers again: the first
// answer may have been lost after the coordinator recorded the enrollment,
// and a one-time token would otherwise be spent on nothing.
const enrollKeyFile = "enroll-key.pem"

// enrollKey returns the key kept in dir for an unfinished enrollment, or a
// new one, written there (0600, durably) before it is used.
func enrollKey(dir string) (*ecdsa.PrivateKey, error) {
	path := filepath.Join(dir, enrollKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		if blk, _ := pem.Decode(b); blk != nil && blk.Type == "EC PRIVATE KEY" {
			if key, err := x509.ParseECPrivateKey(blk.Bytes); err == nil {
				return key, nil
			}
		}
		// Damaged (a disk error): a new key is as good, the coordinator
		// just cannot tell this is the same agent asking again.
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(dir, enrollKeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
		return nil, fmt.Errorf("keep the enrollment key in %s: %w", dir, err)
	}
	return key, nil
}
