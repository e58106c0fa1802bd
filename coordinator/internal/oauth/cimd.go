package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// CIMDConfig is how Client ID Metadata Documents are fetched: the client
// id is an https URL, and the coordinator fetches it, so a client could
// make it fetch anything. Hence the bounds, no redirects, and no private
// address unless AllowPrivate.
type CIMDConfig struct {
	MaxBytes int64
	Timeout  time.Duration
	// CacheFor is how long a fetched document is used again.
	CacheFor time.Duration
	// AllowPrivate lets documents be fetched from loopback, private and
	// link-local addresses: for tests only.
	AllowPrivate bool
	// RootCAs verifies the documents' servers; nil means the system's.
	RootCAs *x509.CertPool
}

// DefaultCIMDConfig: 5 KB, 5 s, cached 5 minutes.
func DefaultCIMDConfig() CIMDConfig {
	return CIMDConfig{MaxBytes: 5 << 10, Timeout: 5 * time.Second, CacheFor: 5 * time.Minute}
}

type cimdFetcher struct {
	cfg    CIMDConfig
	client *http.Client
	mu     sync.Mutex
	cache  map[string]cachedClient
}

type cachedClient struct {
	c  store.OAuthClient
	at time.Time
}

func newCIMDFetcher(cfg CIMDConfig) *cimdFetcher {
	def := DefaultCIMDConfig()
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = def.MaxBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = def.CacheFor
	}
	// The address is checked after DNS has answered, on the very
	// connection made (Control runs on the socket about to connect), so
	// a name that resolves to a public address for a check and then to
	// 127.0.0.1 (DNS rebinding) cannot slip through.
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("client metadata address %q: %w", address, err)
		}
		if !cfg.AllowPrivate && !publicAddr(ap.Addr()) {
			return fmt.Errorf("client metadata document at %s: %w", ap.Addr(), errPrivate)
		}
		return nil
	}}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: cfg.Timeout,
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
		Proxy:               nil, // a proxy would connect for us, past the check
	}
	return &cimdFetcher{cfg: cfg, cache: map[string]cachedClient{},
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }}}
}

var (
	errPrivate  = errors.New("a loopback, private or link-local address may not serve client metadata")
	errRedirect = errors.New("client metadata documents are fetched without following redirects")
)

func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!netip.MustParsePrefix("100.64.0.0/10").Contains(a) && !netip.MustParsePrefix("fc00::/7").Contains(a)
}

// isCIMD says whether a client id is a Client ID Metadata Document URL.
func isCIMD(clientID string) bool { return strings.HasPrefix(clientID, "https://") }

// checkClientIDURL accepts an https URL with a path, no fragment, no
// credentials, no dot segments (draft-ietf-oauth-client-id-metadata-document §3).
func checkClientIDURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || len(raw) > maxRedirectURI:
		return fmt.Errorf("client id %q is not a URL of at most %d bytes", raw, maxRedirectURI)
	case u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("client id %q must be an https URL without credentials or fragment", raw)
	case u.Path == "" || u.Path == "/":
		return fmt.Errorf("client id %q must have a path", raw)
	case strings.Contains(u.Path, "/./") || strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/.") || strings.HasSuffix(u.Path, "/.."):
		return fmt.Errorf("client id %q must not have dot segments", raw)
	}
	return nil
}

// cached says whether the document at id is cached and fresh at now.
func (f *cimdFetcher) cached(id string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.cache[id]
	return ok && now.Sub(c.at) < f.cfg.CacheFor
}

// fetch returns the client a document URL describes.
func (f *cimdFetcher) fetch(ctx context.Context, id string, now time.Time) (store.OAuthClient, error) {
	f.mu.Lock()
	if c, ok := f.cache[id]; ok && now.Sub(c.at) < f.cfg.CacheFor {
		f.mu.Unlock()
		return c.c, nil
	}
	f.mu.Unlock()
	if err := checkClientIDURL(id); err != nil {
		return store.OAuthClient{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return store.OAuthClient{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata %s: %s", id, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata %s: %w", id, err)
	}
	if int64(len(body)) > f.cfg.MaxBytes {
		return store.OAuthClient{}, fmt.Errorf("client metadata %s is over %d bytes", id, f.cfg.MaxBytes)
	}
	c, err := parseCIMD(id, body)
	if err != nil {
		return c, err
	}
	c.CreatedAt = now
	f.mu.Lock()
	if len(f.cache) > 1000 {
		clear(f.cache)
	}
	f.cache[id] = cachedClient{c: c, at: now}
	f.mu.Unlock()
	return c, nil
}

// parseCIMD reads a Client ID Metadata Document fetched from id. No
// library parses these (oauthex has the registration metadata type,
// used here, but no checks of it); fuzzed in FuzzParseCIMD.
func parseCIMD(id string, body []byte) (store.OAuthClient, error) {
	var m struct {
		oauthex.ClientRegistrationMetadata
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return store.OAuthClient{}, fmt.Errorf("client metadata %s is not a JSON object: %w", id, err)
	}
	if m.ClientID != id {
		return store.OAuthClient{}, fmt.Errorf("client metadata %s names client_id %q; it must be its own URL", id, m.ClientID)
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "none"
	}
	name, err := checkClientMetadata(m.ClientName, m.RedirectURIs, m.TokenEndpointAuthMethod, m.GrantTypes, m.ResponseTypes)
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("client metadata %s: %w", id, err)
	}
	return store.OAuthClient{ID: id, Name: name, RedirectURIs: m.RedirectURIs, Registration: store.RegisteredCIMD}, nil
}
