package e2e

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/certtest"
)

// certValidity is how long pebble's certificates last in this test: short,
// so that the coordinator renews one while the test watches (autocert
// renews a third of a certificate's lifetime before its end, give or take
// a tenth of that), and long enough for a renewal to finish well before
// the first certificate expires on a busy machine.
const certValidity = 30 * time.Second

// pebble is Let's Encrypt's ACME test server, running on loopback.
type pebble struct {
	dir    string         // its ACME directory URL
	trust  string         // file of the certificate its HTTPS listeners serve, for SSL_CERT_FILE
	issuer *x509.CertPool // the root it issues under
}

// startPebble builds pebble from the test-only module coordinator/e2e/pebble
// and runs it on loopback ports with a certificate of the test's: every
// challenge valid without being checked (PEBBLE_VA_ALWAYS_VALID, so that no
// DNS name or port 443 is needed), no random sleeps, no refused nonces, and
// certificates valid for certValidity.
func startPebble(t *testing.T) *pebble {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, "pebble")
	build := exec.Command("go", "build", "-o", exe, "github.com/letsencrypt/pebble/v2/cmd/pebble")
	build.Dir = "pebble"
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pebble in coordinator/e2e/pebble: %v\n%s", err, out)
	}
	cert, key := certtest.Write(t, "127.0.0.1", "localhost")
	acmeAddr, mgmtAddr := freePort(t), freePort(t)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress": acmeAddr, "managementListenAddress": mgmtAddr,
		"certificate": cert, "privateKey": key,
		"httpPort": 5002, "tlsPort": 5001, // where challenges would be checked; PEBBLE_VA_ALWAYS_VALID checks none
		"externalAccountBindingRequired": false,
		"retryAfter":                     map[string]int{"authz": 1, "order": 1},
		"keyAlgorithm":                   "ecdsa",
		"profiles": map[string]any{"default": map[string]any{
			"description": "short-lived, to see renewals", "validityPeriod": int(certValidity / time.Second),
		}},
	}}
	b, _ := json.Marshal(cfg)
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-config", cfgFile)
	cmd.Env = []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_WFE_NONCEREJECT=0"}
	startCmd(t, "pebble", cmd)

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certtest.Pool(t, cert)}}, Timeout: 5 * time.Second}
	p := &pebble{dir: "https://" + acmeAddr + "/dir", trust: cert, issuer: x509.NewCertPool()}
	eventually(t, 30*time.Second, "pebble's root certificate", func() error {
		res, err := hc.Get("https://" + mgmtAddr + "/roots/0")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || !p.issuer.AppendCertsFromPEM(b) {
			return fmt.Errorf("%d %q", res.StatusCode, b)
		}
		return nil
	})
	return p
}

// A coordinator with --public-url and no certificate of its own gets one
// from an ACME CA (pebble) at start, serves the MCP endpoint and the app
// over HTTPS with it, to the public host alone, with HSTS, and renews it
// before it expires; loopback stays plain HTTP. The public listener is on
// a loopback port of its own while the URL says 443, as behind a port
// forward; the test's client resolves coord.test to it.
func TestPublicURLOverACME(t *testing.T) {
	t.Parallel()
	const public = "https://coord.test"
	ca := startPebble(t)
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: freePort(t)}
	cmd := exec.Command(filepath.Join(bin, "gridcity"), "serve", "--data", c.data, "--http", c.http, "--grpc", c.grpc, "--advertise", c.grpc, "--log-level", "debug",
		"--public-url", public, "--https", "127.0.0.1:0", "--acme-directory", ca.dir, "--acme-email", "ops@coord.test")
	// Go reads its roots from SSL_CERT_FILE: the coordinator trusts pebble's
	// ACME endpoint as it would trust Let's Encrypt's, with no flag of its own.
	cmd.Env = []string{"SSL_CERT_FILE=" + ca.trust}
	c.p = startCmd(t, "coordinator", cmd)
	c.waitHealthy()
	var info struct{ PublicURL, HTTPS string }
	b, err := os.ReadFile(filepath.Join(c.data, "coordinator.json"))
	if err != nil || json.Unmarshal(b, &info) != nil || info.PublicURL != public || info.HTTPS == "" {
		t.Fatalf("coordinator.json %s (%v); want publicURL %s and the public listener's address", b, err, public)
	}
	client := certtest.Client(t, ca.issuer, info.HTTPS)

	// The first certificate, obtained at start.
	var first *x509.Certificate
	eventually(t, 60*time.Second, "a certificate from pebble", func() error {
		leaf, err := servedCert(ca.issuer, info.HTTPS, "coord.test")
		first = leaf
		return err
	})
	t.Logf("first certificate: serial %X, valid until %s", first.SerialNumber, first.NotAfter.Format(time.RFC3339))

	t.Run("served", func(t *testing.T) {
		for _, tt := range []struct {
			path, host string
			want       int
		}{
			{"/healthz", "", 200},
			{"/", "", 200},
			{"/mcp", "", 401},
			{"/metrics", "", 401},
			{"/healthz", "evil.example", 421},
			{"/healthz", "127.0.0.1", 421},
		} {
			req, _ := http.NewRequest("GET", public+tt.path, nil)
			if tt.host != "" {
				req.Host = tt.host
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", tt.path, err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Errorf("GET %s%s (Host %q): %d %q; want %d", public, tt.path, tt.host, res.StatusCode, body, tt.want)
			}
			if hsts := res.Header.Get("Strict-Transport-Security"); hsts != "max-age=31536000" {
				t.Errorf("GET %s: Strict-Transport-Security %q; want max-age=31536000", tt.path, hsts)
			}
			if tt.want == 421 && !strings.Contains(string(body), "serves "+public+" only") {
				t.Errorf("GET %s with Host %s: %q; want it to say which host this listener serves", tt.path, tt.host, body)
			}
		}
		res, err := http.Get("http://" + c.http + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.TLS != nil || res.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("GET /healthz on --http: %d, TLS %v, HSTS %q; want 200 over plain HTTP, without HSTS", res.StatusCode, res.TLS != nil, res.Header.Get("Strict-Transport-Security"))
		}
		// The account and the certificate are kept for the next start, so
		// that a restart does not ask the CA again.
		if fi, err := os.Stat(filepath.Join(c.data, "acme")); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("DATA/acme: %v, %v; want a private directory (0700)", fi.Mode(), err)
		}
		// (autocert writes the certificate just after it first serves it)
		eventually(t, 10*time.Second, "the account key and the certificate in DATA/acme, mode 0600", func() error {
			for _, name := range []string{"acme_account+key", "coord.test"} {
				if fi, err := os.Stat(filepath.Join(c.data, "acme", name)); err != nil || fi.Mode().Perm() != 0o600 {
					entries, _ := os.ReadDir(filepath.Join(c.data, "acme"))
					return fmt.Errorf("%s: %v; DATA/acme holds %v", name, cmp.Or(err, fmt.Errorf("mode %v", fi.Mode())), entries)
				}
			}
			return nil
		})
	})

	t.Run("MCP", func(t *testing.T) {
		out, err := run(t, "gridcity", "mcp", "--data", c.data, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Endpoint, Token string }
		if json.Unmarshal([]byte(out), &m); m.Endpoint != public+"/mcp" {
			t.Fatalf("gridcity mcp --json: %s; want the endpoint %s/mcp", out, public)
		}
		hc := &http.Client{Transport: bearerOver{token: m.Token, next: client.Transport}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-acme", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: m.Endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "run_command" }) {
			t.Errorf("tools/list over %s: %d tools, no run_command; want the operate token's tools", m.Endpoint, len(tools.Tools))
		}
	})

	t.Run("renewed before expiry", func(t *testing.T) {
		var renewed *x509.Certificate
		eventually(t, time.Until(first.NotAfter), "a renewed certificate before the first expires", func() error {
			leaf, err := servedCert(ca.issuer, info.HTTPS, "coord.test")
			if err != nil {
				return err
			}
			if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
				return fmt.Errorf("still serial %X", leaf.SerialNumber)
			}
			renewed = leaf
			return nil
		})
		if now := time.Now(); !now.Before(first.NotAfter) || !renewed.NotAfter.After(first.NotAfter) {
			t.Errorf("renewed at %s: serial %X until %s; want it before %s, the first's end, and lasting longer", now.Format(time.RFC3339), renewed.SerialNumber, renewed.NotAfter, first.NotAfter)
		}
		t.Logf("renewed %s before the first certificate's end: serial %X, valid until %s", time.Until(first.NotAfter).Round(time.Second), renewed.SerialNumber, renewed.NotAfter.Format(time.RFC3339))
		// New connections get it (those open keep the certificate they
		// began with), and the log says so.
		client.CloseIdleConnections()
		res, err := client.Get(public + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.TLS == nil || res.TLS.PeerCertificates[0].SerialNumber.Cmp(first.SerialNumber) == 0 {
			t.Errorf("GET /healthz after the renewal: %d over a certificate of serial %X; want 200 over the renewed one", res.StatusCode, res.TLS.PeerCertificates[0].SerialNumber)
		}
		if log := c.p.out.String(); !strings.Contains(log, "serving a renewed certificate from ACME") {
			t.Errorf("the coordinator's log does not say it renewed the certificate")
		}
	})
}

// servedCert connects to addr as a client of host that trusts roots, and
// returns the certificate the listener served.
func servedCert(roots *x509.CertPool, addr, host string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{ServerName: host, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// bearerOver sends the token with every request, over next.
type bearerOver struct {
	token string
	next  http.RoundTripper
}

func (b bearerOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
