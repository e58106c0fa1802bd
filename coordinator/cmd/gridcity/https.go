package main

// HTTPS by itself: the public listener of --public-url (the MCP endpoint
// and the app over TLS, with a certificate from ACME or from files read
// again when they change), and HTTPS on --http with --tls-cert alone, as
// before --public-url. Loopback stays plain HTTP.

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/frontdoor"
	"github.com/gridcity/gridcity/coordinator/internal/publicurl"
	"github.com/gridcity/gridcity/coordinator/internal/tlscert"
)

// publicFlags are serve's flags for the public listener.
type publicFlags struct {
	raw           string // --public-url as given
	httpsAddr     string
	acmeDirectory string
	acmeEmail     string
	acmeHTTP      string
}

func addPublicFlags(fs *flag.FlagSet, p *publicFlags) {
	fs.StringVar(&p.raw, "public-url", "", "https://HOST[:PORT] where clients elsewhere reach the MCP endpoint and the app: served over TLS on --https, with a certificate from ACME (default) or --tls-cert and --tls-key; --http stays as it is")
	fs.StringVar(&p.httpsAddr, "https", "", "address of the public listener (default: :PORT of --public-url, :443 without one)")
	fs.StringVar(&p.acmeDirectory, "acme-directory", "", "ACME directory URL the certificate for --public-url comes from (default: Let's Encrypt, "+tlscert.LetsEncrypt+")")
	fs.StringVar(&p.acmeEmail, "acme-email", "", "contact address given to the ACME CA for the account (optional: expiry and problem notices)")
	fs.StringVar(&p.acmeHTTP, "acme-http", "", "also answer the ACME HTTP-01 challenge on this plain-HTTP address, e.g. :80 (default: none; TLS-ALPN-01 is answered on the public listener itself)")
}

// acme reports whether the public listener's certificate comes from ACME.
func (o serveOptions) acme() bool { return !o.public.IsZero() && o.tlsCert == "" }

// httpTLS reports whether --http serves TLS: with --tls-cert and no
// --public-url (which takes the certificate for itself).
func (o serveOptions) httpTLS() bool { return o.tlsCert != "" && o.public.IsZero() }

// httpsAddr is where the public listener listens.
func (o serveOptions) httpsAddr() string {
	if o.pub.httpsAddr != "" {
		return o.pub.httpsAddr
	}
	return o.public.ListenAddr()
}

// checkPublic parses --public-url and refuses the combinations of the
// public listener's flags that cannot work.
func (o *serveOptions) checkPublic() error {
	p := o.pub
	if p.raw != "" {
		u, err := publicurl.Parse(p.raw)
		if err != nil {
			return err
		}
		o.public = u
	}
	acmeFlags := []flagValue{{"--acme-directory", p.acmeDirectory}, {"--acme-email", p.acmeEmail}, {"--acme-http", p.acmeHTTP}}
	if o.public.IsZero() {
		for _, f := range append([]flagValue{{"--https", p.httpsAddr}}, acmeFlags...) {
			if f.value != "" {
				return fmt.Errorf("%s is for the public listener: give --public-url https://HOST too", f.name)
			}
		}
		return nil
	}
	for _, f := range []flagValue{{"--https", p.httpsAddr}, {"--acme-http", p.acmeHTTP}} {
		if _, _, err := net.SplitHostPort(f.value); f.value != "" && err != nil {
			return fmt.Errorf("%s %q is not an address: use HOST:PORT or :PORT, e.g. :443", f.name, f.value)
		}
	}
	if o.tlsCert != "" {
		for _, f := range acmeFlags {
			if f.value != "" {
				return fmt.Errorf("%s and --tls-cert conflict: the public listener's certificate comes from ACME or from --tls-cert and --tls-key, not both", f.name)
			}
		}
		return nil
	}
	if o.public.IsIP() {
		return fmt.Errorf("--public-url %s names an IP address: ACME certificates here are for host names; give a name that resolves to this host, or --tls-cert and --tls-key", o.public)
	}
	if !validACMEName(o.public.Host()) {
		return fmt.Errorf("--public-url %s: a certificate from ACME needs a host name with a dot (coord.example.com); give one, or --tls-cert and --tls-key", o.public)
	}
	if d := p.acmeDirectory; d != "" {
		u, err := url.Parse(d)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--acme-directory %q: give the https URL of the CA's ACME directory, e.g. %s", d, tlscert.LetsEncrypt)
		}
	}
	if e := p.acmeEmail; e != "" {
		if a, err := mail.ParseAddress(e); err != nil || a.Address != e {
			return fmt.Errorf("--acme-email %q is not an email address: give one as user@example.com", e)
		}
	}
	return nil
}

// flagValue is a flag's name and the value it was given, for checks that
// name the first flag at fault, always the same one.
type flagValue struct{ name, value string }

// validACMEName is what autocert asks a handshake's server name for.
func validACMEName(host string) bool {
	for i := 1; i < len(host)-1; i++ {
		if host[i] == '.' {
			return true
		}
	}
	return false
}

// httpsListeners are the TLS parts of a running coordinator: the
// certificate sources and the public listener, with the HTTP-01 one when
// asked.
type httpsListeners struct {
	files *tlscert.Files // --tls-cert and --tls-key: the public listener's, else --http's
	acme  *tlscert.ACME  // the public listener's certificate, without --tls-cert

	publicLn net.Listener
	public   *http.Server
	acmeLn   net.Listener // --acme-http
	acmeSrv  *http.Server
}

// listenHTTPS loads the certificate files (failing now if they do not
// load), prepares ACME, and opens the public listener and the HTTP-01 one.
func (c *coordinator) listenHTTPS() error {
	o, h := c.o, &c.https
	if o.tlsCert != "" {
		var err error
		if h.files, err = tlscert.NewFiles(tlscert.FilesConfig{CertFile: o.tlsCert, KeyFile: o.tlsKey, Host: o.public.Host(), Logger: c.logger}); err != nil {
			return err
		}
	}
	if o.public.IsZero() {
		return nil
	}
	if o.acme() {
		var err error
		h.acme, err = tlscert.NewACME(tlscert.ACMEConfig{Host: o.public.Host(), Directory: cmp.Or(o.pub.acmeDirectory, tlscert.LetsEncrypt), Email: o.pub.acmeEmail,
			CacheDir: filepath.Join(o.data, "acme"), UserAgent: "gridcity/" + version, Logger: c.logger})
		if err != nil {
			return err
		}
		if o.public.Port() != "443" && o.pub.acmeHTTP == "" {
			c.logger.Warn("the ACME CA checks this host on port 443 (TLS-ALPN-01) whatever the public URL's port: forward port 443 to --https, or give --acme-http :80",
				"public_url", o.public.String(), "https", o.httpsAddr())
		}
	}
	var err error
	if h.publicLn, err = net.Listen("tcp", o.httpsAddr()); err != nil {
		return fmt.Errorf("listen for HTTPS (--public-url %s) on %s: %w", o.public, o.httpsAddr(), err)
	}
	c.closers = append(c.closers, func() { h.publicLn.Close() })
	if o.pub.acmeHTTP != "" {
		if h.acmeLn, err = net.Listen("tcp", o.pub.acmeHTTP); err != nil {
			return fmt.Errorf("listen for the ACME HTTP-01 challenge (--acme-http) on %s: %w", o.pub.acmeHTTP, err)
		}
		c.closers = append(c.closers, func() { h.acmeLn.Close() })
	}
	return nil
}

// addr is the public listener's address, "" without one.
func (h *httpsListeners) addr() string {
	if h.publicLn == nil {
		return ""
	}
	return h.publicLn.Addr().String()
}

// tlsConfig is a listener's TLS configuration: from ACME (with its
// TLS-ALPN-01 challenge) or from the files.
func (h *httpsListeners) tlsConfig() *tls.Config {
	if h.acme != nil {
		return h.acme.TLSConfig()
	}
	return &tls.Config{GetCertificate: h.files.GetCertificate, MinVersion: tls.VersionTLS12}
}

// buildHTTPS gives --http its certificate when it serves TLS, and makes the
// public listener's server over routes (the same as the loopback
// listener's, with the app's cookie Secure), behind the front door that
// holds every request to the public host and sets HSTS. Its requests live
// in baseCtx, as the loopback listener's do.
func (c *coordinator) buildHTTPS(baseCtx context.Context, routes http.Handler) {
	h := &c.https
	if c.o.httpTLS() {
		c.http.TLSConfig = h.tlsConfig()
	}
	if c.o.public.IsZero() {
		return
	}
	h.public = frontdoor.NewServer(routes, frontdoor.Config{BodyTimeout: c.o.bodyTimeout, Logger: c.logger, Public: c.o.public})
	h.public.BaseContext = func(net.Listener) context.Context { return baseCtx }
	h.public.TLSConfig = h.tlsConfig()
	if h.acmeLn != nil {
		h.acmeSrv = &http.Server{Handler: h.acme.HTTPHandler(c.o.public.String()), ReadHeaderTimeout: frontdoor.HeaderTimeout, IdleTimeout: time.Minute}
	}
}

// serveHTTPS serves the public listener (and the HTTP-01 one) until
// shutdown, and with ACME gets the certificate once the listener is
// up, so that a problem with it is in the log at start.
func (c *coordinator) serveHTTPS(ctx context.Context, wg *sync.WaitGroup, errs chan<- error) {
	h := &c.https
	if h.public == nil {
		return
	}
	cert := "--tls-cert " + c.o.tlsCert + " (read again when it changes)"
	if h.acme != nil {
		cert = "ACME, from " + cmp.Or(c.o.pub.acmeDirectory, tlscert.LetsEncrypt)
	}
	c.logger.Info("serving HTTPS", "public_url", c.o.public.String(), "https", h.publicLn.Addr().String(), "certificate", cert)
	wg.Go(func() {
		if err := h.public.ServeTLS(h.publicLn, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("HTTPS server (--public-url): %w", err)
		}
	})
	if h.acmeSrv != nil {
		wg.Go(func() {
			if err := h.acmeSrv.Serve(h.acmeLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("ACME HTTP-01 server (--acme-http): %w", err)
			}
		})
	}
	if h.acme != nil {
		wg.Go(func() { h.acme.Obtain(ctx) })
	}
}

// shutdown stops the public listener's servers.
func (h *httpsListeners) shutdown(ctx context.Context) {
	if h.public != nil {
		h.public.Shutdown(ctx)
	}
	if h.acmeSrv != nil {
		h.acmeSrv.Shutdown(ctx)
	}
}
