package probe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/down", http.StatusFound) })
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 32<<10)
		for { // a body that never ends must not hold the probe
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		path   string
		ok     bool
		status float64
		reason string
	}{
		{"/ok", true, 200, ""},
		{"/missing", true, 404, ""},
		{"/down", false, 503, "HTTP 503 Service Unavailable"},
		{"/hop", false, 503, "HTTP 503 Service Unavailable"},
		{"/loop", true, 302, ""}, // redirects stop after 3: the answer is the last redirect
		{"/endless", true, 200, ""},
	}
	for _, tt := range tests {
		start := time.Now()
		r := Run(context.Background(), Spec{Engine: "http", Target: srv.URL + tt.path, Timeout: 2 * time.Second})
		if r.OK != tt.ok || r.Metrics["status_code"] != tt.status || r.Reason != tt.reason {
			t.Errorf("http %s: %+v; want OK %v, status_code %v, reason %q", tt.path, r, tt.ok, tt.status, tt.reason)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("http %s took %s; want well under the timeout", tt.path, el)
		}
	}
	// Without a scheme, the engine's own is used.
	r := Run(context.Background(), Spec{Engine: "http", Target: strings.TrimPrefix(srv.URL, "http://") + "/ok", Timeout: time.Second})
	if !r.OK {
		t.Errorf("http without a scheme: %+v; want OK", r)
	}
}

// selfSigned makes a CA-flagged certificate for 127.0.0.1, usable as its own root.
func selfSigned(t *testing.T, notBefore, notAfter time.Time) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "gridcity probe test"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}

// trust makes the probe verify against pool instead of the system roots for one test.
func trust(t *testing.T, certs ...*x509.Certificate) {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	old := rootCAs
	rootCAs = pool
	t.Cleanup(func() { rootCAs = old })
}

func tlsServer(t *testing.T, cert tls.Certificate) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPS(t *testing.T) {
	now := time.Now()
	good, goodLeaf := selfSigned(t, now.Add(-time.Hour), now.Add(30*24*time.Hour))
	expired, expiredLeaf := selfSigned(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	goodSrv, expiredSrv := tlsServer(t, good), tlsServer(t, expired)

	// System roots do not know a test certificate: a failed probe with Go's own text.
	r := Run(context.Background(), Spec{Engine: "https", Target: goodSrv.URL, Timeout: 2 * time.Second})
	if r.OK || !strings.Contains(r.Reason, "x509: certificate signed by unknown authority") {
		t.Errorf("https with an untrusted certificate: %+v; want a failure saying x509: certificate signed by unknown authority", r)
	}

	trust(t, goodLeaf, expiredLeaf)
	r = Run(context.Background(), Spec{Engine: "https", Target: goodSrv.URL, Timeout: 2 * time.Second})
	if !r.OK || !r.TLSNotAfter.Equal(goodLeaf.NotAfter) || r.Metrics["days_left"] < 29.9 || r.Metrics["days_left"] > 30 {
		t.Errorf("https with a trusted certificate: %+v; want OK, TLSNotAfter %s, days_left about 30", r, goodLeaf.NotAfter)
	}

	// An expired certificate fails verification, and its date is still reported.
	r = Run(context.Background(), Spec{Engine: "https", Target: expiredSrv.URL, Timeout: 2 * time.Second})
	if r.OK || !strings.Contains(r.Reason, "expired") || !r.TLSNotAfter.Equal(expiredLeaf.NotAfter) {
		t.Errorf("https with an expired certificate: %+v; want a failure saying expired, with TLSNotAfter %s", r, expiredLeaf.NotAfter)
	}

	// The https engine refuses a plain-http URL rather than silently skipping TLS.
	r = Run(context.Background(), Spec{Engine: "https", Target: "http://127.0.0.1:1/", Timeout: time.Second})
	if r.OK || !strings.Contains(r.Reason, "https URL") {
		t.Errorf("https engine with an http URL: %+v; want a failure asking for an https URL", r)
	}
}

func TestS3(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			t.Errorf("s3 probe sent %s; want HEAD", r.Method)
		}
		switch r.URL.Path {
		case "/public":
		case "/private":
			w.WriteHeader(http.StatusForbidden)
		case "/elsewhere":
			w.Header().Set("X-Amz-Bucket-Region", "eu-west-3")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/broken":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	tests := []struct {
		bucket string
		ok     bool
		reason string
	}{
		{"public", true, ""},
		{"private", true, ""},
		{"elsewhere", true, ""},
		{"gone", false, "bucket not found (HTTP 404 Not Found)"},
		{"broken", false, "HTTP 500 Internal Server Error"},
	}
	for _, tt := range tests {
		r := Run(context.Background(), Spec{Engine: "s3", Target: srv.URL + "/" + tt.bucket, Timeout: 2 * time.Second})
		if r.OK != tt.ok || r.Reason != tt.reason {
			t.Errorf("s3 %s: %+v; want OK %v, reason %q", tt.bucket, r, tt.ok, tt.reason)
		}
	}
}

// writeKeyPair writes cert and its key as PEM files in dir.
func writeKeyPair(t *testing.T, dir string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A failing health check's own words (text or JSON) join the reason; an
// HTML error page does not.
func TestHTTPReasonKeepsTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			http.Error(w, "orders-db: dial tcp 10.0.4.20:5432: connect: connection refused\n\x1b[31m", http.StatusServiceUnavailable)
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html><body>bad gateway</body></html>")
		}
	}))
	defer srv.Close()
	res := Run(context.Background(), Spec{Engine: "http", Target: srv.URL + "/text", Timeout: 2 * time.Second})
	if res.OK || res.Reason != "HTTP 503 Service Unavailable: orders-db: dial tcp 10.0.4.20:5432: connect: connection refused  [31m" {
		t.Fatalf("got %q", res.Reason)
	}
	res = Run(context.Background(), Spec{Engine: "http", Target: srv.URL + "/html", Timeout: 2 * time.Second})
	if res.Reason != "HTTP 502 Bad Gateway" {
		t.Fatalf("got %q", res.Reason)
	}
}
