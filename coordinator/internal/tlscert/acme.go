package tlscert

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/gridcity/gridcity/lib/atomicfile"
)

// LetsEncrypt is the ACME directory used when none is given: Let's
// Encrypt's production CA.
const LetsEncrypt = acme.LetsEncryptURL

// ACMEConfig says where a certificate comes from over ACME.
type ACMEConfig struct {
	// Host is the one name a certificate is asked for (the public URL's
	// host): a handshake for any other name gets none, so that a client
	// cannot make the coordinator ask the CA for names of its choosing.
	Host string
	// Directory is the CA's ACME directory URL; "" means LetsEncrypt.
	Directory string
	// Email is the contact the CA is given for the account (optional).
	Email string
	// CacheDir keeps the account key and the certificates across restarts
	// (DATA/acme), so that a restart does not ask the CA again.
	CacheDir string
	// UserAgent names the client to the CA.
	UserAgent string
	// Logger receives what happens; nil discards it.
	Logger *slog.Logger
}

// ACME obtains the certificate of one host name from an ACME CA and renews
// it before it expires (autocert renews a third of the certificate's
// lifetime before its end, 30 days at most: day 60 of Let's Encrypt's 90).
// The CA checks that this host answers for the name with the TLS-ALPN-01
// challenge, which the TLS listener itself answers (tls.Config from
// TLSConfig), so that no other port is needed, as long as the CA reaches
// the listener on port 443 of the name; HTTP-01 on port 80 is used too
// when HTTPHandler is served.
type ACME struct {
	m      *autocert.Manager
	host   string
	dir    string
	logger *slog.Logger

	mu     sync.Mutex
	served string // serial of the certificate last served, to log a new one once
}

// NewACME prepares the manager; nothing is asked of the CA until the first
// handshake or Obtain. The cache directory is created private (0700).
func NewACME(cfg ACMEConfig) (*ACME, error) {
	if cfg.Host == "" {
		return nil, errors.New("acme: no host name")
	}
	if cfg.Directory == "" {
		cfg.Directory = LetsEncrypt
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if was, err := atomicfile.PrivateDir(cfg.CacheDir, "ACME cache directory"); err != nil {
		return nil, err
	} else if was != 0 {
		cfg.Logger.Warn("made the ACME cache directory private (0700): it holds the account key and the certificate's key", "dir", cfg.CacheDir, "was", fmt.Sprintf("%04o", was))
	}
	a := &ACME{host: cfg.Host, dir: cfg.Directory, logger: cfg.Logger}
	a.m = &autocert.Manager{
		Prompt: func(tos string) bool {
			cfg.Logger.Info("accepting the ACME CA's terms of service for the account", "directory", cfg.Directory, "terms", tos)
			return true
		},
		Cache:      dirCache(cfg.CacheDir),
		HostPolicy: autocert.HostWhitelist(cfg.Host),
		Client:     &acme.Client{DirectoryURL: cfg.Directory, UserAgent: cfg.UserAgent},
		Email:      cfg.Email,
	}
	return a, nil
}

// TLSConfig is the listener's TLS configuration: the certificate, HTTP/2,
// and the TLS-ALPN-01 challenge answered on the same port.
func (a *ACME) TLSConfig() *tls.Config {
	c := a.m.TLSConfig()
	c.GetCertificate = a.GetCertificate
	c.MinVersion = tls.VersionTLS12
	return c
}

// GetCertificate is autocert's, logging the first handshake that gets a
// certificate it has not served before (the first one, and each renewal).
func (a *ACME) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, err := a.m.GetCertificate(hello)
	if err != nil || cert == nil || cert.Leaf == nil || hello.ServerName == "" || len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acme.ALPNProto {
		return cert, err
	}
	s := serial(cert.Leaf)
	a.mu.Lock()
	first, changed := a.served == "", a.served != s
	a.served = s
	a.mu.Unlock()
	if changed {
		msg := "serving a renewed certificate from ACME"
		if first {
			msg = "serving the certificate from ACME"
		}
		a.logger.Info(msg, "host", a.host, "serial", s, "issuer", cert.Leaf.Issuer.String(), "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// Obtain gets the certificate now (from the cache, else from the CA), so
// that a problem shows in the log at start rather than at a client's first
// handshake. The listener must be serving already: the CA's check reaches
// it. A failure is only logged: the next handshake tries again.
func (a *ACME) Obtain(ctx context.Context) {
	a.logger.Info("getting the TLS certificate over ACME", "host", a.host, "directory", a.dir)
	done := make(chan error, 1)
	go func() {
		// What a current browser offers, so that autocert picks its
		// ECDSA certificate (it keeps an RSA one for clients without).
		_, err := a.GetCertificate(&tls.ClientHelloInfo{
			ServerName:        a.host,
			CipherSuites:      []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
			SupportedCurves:   []tls.CurveID{tls.CurveP256},
			SignatureSchemes:  []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
			SupportedVersions: []uint16{tls.VersionTLS13, tls.VersionTLS12},
		})
		done <- err
	}()
	select {
	case <-ctx.Done():
	case err := <-done:
		if err != nil {
			a.logger.Error("could not get the TLS certificate over ACME; the next HTTPS connection tries again", "host", a.host, "directory", a.dir, "err", err,
				"check", "the name resolves to this host, and port 443 of it reaches the public listener (or --acme-http serves port 80)")
		}
	}
}

// HTTPHandler answers the HTTP-01 challenge on a plain-HTTP listener (port
// 80), and sends every other request to the public URL. Calling it makes
// the CA's HTTP-01 challenge an option besides TLS-ALPN-01.
func (a *ACME) HTTPHandler(publicURL string) http.Handler {
	return a.m.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "use "+publicURL, http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, publicURL+r.URL.RequestURI(), http.StatusMovedPermanently)
	}))
}

// dirCache is autocert's cache in a private directory, each entry written
// as every file of the coordinator's that must survive a power cut is
// (lib/atomicfile): autocert's own DirCache does not sync, and a lost
// account key or certificate means asking the CA again, within its rate
// limits.
type dirCache string

func (d dirCache) path(key string) (string, error) {
	if key == "" || key == "." || key == ".." || strings.ContainsAny(key, `/\`) {
		return "", fmt.Errorf("acme cache: key %q is not a file name", key)
	}
	return filepath.Join(string(d), key), nil
}

func (d dirCache) Get(_ context.Context, key string) ([]byte, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, autocert.ErrCacheMiss
	}
	return b, err
}

func (d dirCache) Put(_ context.Context, key string, data []byte) error {
	if _, err := d.path(key); err != nil {
		return err
	}
	return atomicfile.Write(string(d), key, data)
}

func (d dirCache) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
