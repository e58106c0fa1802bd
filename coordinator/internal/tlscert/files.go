// Package tlscert gives a TLS listener of the coordinator its certificate
// without a restart: from a certificate and key file that are read again
// when they change (Files), or from an ACME CA that it is obtained from and
// renewed with, by golang.org/x/crypto/acme/autocert (ACME). Either is a
// tls.Config's GetCertificate.
package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultCheckEvery is how often, at most, Files looks at its files for a
// change: a handshake costs two stat calls this often, and a renewed pair
// is served within this long of being written.
const DefaultCheckEvery = 5 * time.Second

// Files serves the pair of a certificate file (PEM, the leaf first, then
// its chain) and a key file, and reads them again when either changes
// (its modification time or size), so that a renewal by certbot or an
// operator takes effect without a restart. A new pair that does not load
// (half written, a key that does not match, a name that is not Host's) is
// logged and the old one kept, until the files change again.
type Files struct {
	certFile, keyFile string
	host              string
	every             time.Duration
	logger            *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   stamp     // of the files cert was loaded from
	tried   stamp     // of the last files that failed to load
	checked time.Time // when the files were last looked at
}

// FilesConfig says which files Files serves and how it checks them.
type FilesConfig struct {
	CertFile, KeyFile string
	// Host, when set, is a name the certificate must be valid for (the
	// public URL's host): a pair that does not name it is refused.
	Host string
	// CheckEvery is how often, at most, the files are looked at; 0 means
	// DefaultCheckEvery, a negative value on every handshake (tests).
	CheckEvery time.Duration
	// Logger receives the reloads and the refused pairs; nil discards them.
	Logger *slog.Logger
}

// stamp tells one version of the two files from another.
type stamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// NewFiles loads the pair, failing if it does not load now: a coordinator
// does not start on a certificate it cannot serve.
func NewFiles(cfg FilesConfig) (*Files, error) {
	f := &Files{certFile: cfg.CertFile, keyFile: cfg.KeyFile, host: cfg.Host, every: cfg.CheckEvery, logger: cfg.Logger}
	if f.every == 0 {
		f.every = DefaultCheckEvery
	}
	if f.logger == nil {
		f.logger = slog.New(slog.DiscardHandler)
	}
	st, err := f.stat()
	if err != nil {
		return nil, err
	}
	cert, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cert, f.stamp, f.checked = cert, st, time.Now()
	warnExpiry(f.logger, cert.Leaf, f.certFile)
	return f, nil
}

// GetCertificate is tls.Config's hook: the pair as it is on disk, read
// again when the files have changed since the last look (at most every
// CheckEvery).
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); f.every < 0 || now.Sub(f.checked) >= f.every {
		f.checked = now
		f.reload()
	}
	return f.cert, nil
}

// reload reads the files again if they changed, keeping the pair served
// when the new one does not load. Called with mu held.
func (f *Files) reload() {
	st, err := f.stat()
	if err != nil {
		if st != f.tried {
			f.tried = st
			f.logger.Error("cannot read the TLS certificate files; still serving the certificate loaded before", "err", err)
		}
		return
	}
	if st == f.stamp || st == f.tried {
		return
	}
	cert, err := f.load()
	if err != nil {
		f.tried = st
		f.logger.Error("the TLS certificate files changed but do not load; still serving the certificate loaded before, until they change again",
			"err", err, "serving_serial", serial(f.cert.Leaf), "serving_not_after", f.cert.Leaf.NotAfter)
		return
	}
	f.cert, f.stamp, f.tried = cert, st, stamp{}
	f.logger.Info("reloaded the TLS certificate", "file", f.certFile, "serial", serial(cert.Leaf), "names", names(cert.Leaf), "not_after", cert.Leaf.NotAfter)
	warnExpiry(f.logger, cert.Leaf, f.certFile)
}

func (f *Files) stat() (stamp, error) {
	c, err := os.Stat(f.certFile)
	if err != nil {
		return stamp{}, fmt.Errorf("TLS certificate file: %w", err)
	}
	k, err := os.Stat(f.keyFile)
	if err != nil {
		return stamp{certMod: c.ModTime(), certSize: c.Size()}, fmt.Errorf("TLS key file: %w", err)
	}
	return stamp{certMod: c.ModTime(), certSize: c.Size(), keyMod: k.ModTime(), keySize: k.Size()}, nil
}

// load reads and checks the pair.
func (f *Files) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", f.certFile, f.keyFile, err)
	}
	if cert.Leaf == nil { // set by LoadX509KeyPair since Go 1.23; parse it if a GODEBUG turned that off
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("TLS certificate %s: %w", f.certFile, err)
		}
	}
	if f.host != "" {
		if err := cert.Leaf.VerifyHostname(f.host); err != nil {
			return nil, fmt.Errorf("TLS certificate %s is for %s, not %s: clients would refuse it; give a certificate for the --public-url host", f.certFile, names(cert.Leaf), f.host)
		}
	}
	return &cert, nil
}

// warnExpiry says when a certificate being served has expired, or will
// within a week: clients are about to refuse it.
func warnExpiry(logger *slog.Logger, leaf *x509.Certificate, file string) {
	switch left := time.Until(leaf.NotAfter); {
	case left <= 0:
		logger.Warn("the TLS certificate has expired: clients refuse it; renew it, and the new files are served within seconds", "file", file, "not_after", leaf.NotAfter)
	case left < 7*24*time.Hour:
		logger.Warn("the TLS certificate expires within a week: renew it, and the new files are served within seconds", "file", file, "not_after", leaf.NotAfter)
	}
}

func serial(leaf *x509.Certificate) string {
	if leaf == nil {
		return ""
	}
	return fmt.Sprintf("%X", leaf.SerialNumber)
}

func names(leaf *x509.Certificate) string {
	n := append([]string{}, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		n = append(n, ip.String())
	}
	if len(n) == 0 && leaf.Subject.CommonName != "" {
		n = append(n, leaf.Subject.CommonName)
	}
	if len(n) == 0 {
		return "no name"
	}
	return strings.Join(n, ", ")
}
