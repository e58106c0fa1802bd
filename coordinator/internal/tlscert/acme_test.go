package tlscert

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/acme/autocert"
)

// The ACME cache is a private directory of private files, written whole;
// autocert's keys are file names and nothing else.
func TestACMECache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acme")
	if _, err := NewACME(ACMEConfig{Host: "coord.test", CacheDir: dir}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache directory: %v, %v; want it made 0700", fi.Mode(), err)
	}
	ctx := context.Background()
	c := dirCache(dir)
	if _, err := c.Get(ctx, "coord.test"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Fatalf("Get of a missing key: %v; want autocert.ErrCacheMiss", err)
	}
	if err := c.Put(ctx, "coord.test", []byte("pem")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "coord.test")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cached file: %v, %v; want 0600", fi.Mode(), err)
	}
	if b, err := c.Get(ctx, "coord.test"); err != nil || string(b) != "pem" {
		t.Fatalf("Get: %q, %v; want what was put", b, err)
	}
	for range 2 {
		if err := c.Delete(ctx, "coord.test"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := c.Get(ctx, "coord.test"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Fatalf("Get after Delete: %v; want autocert.ErrCacheMiss", err)
	}
	for _, key := range []string{"", ".", "..", "../x", "a/b", `a\b`} {
		if err := c.Put(ctx, key, []byte("x")); err == nil {
			t.Errorf("Put(%q): no error; want the key refused", key)
		}
		if _, err := c.Get(ctx, key); err == nil || errors.Is(err, autocert.ErrCacheMiss) {
			t.Errorf("Get(%q): %v; want the key refused", key, err)
		}
	}
}

// A cache directory others may enter is made private, and the change
// logged.
func TestACMECacheMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acme")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	var log logBuffer
	if _, err := NewACME(ACMEConfig{Host: "coord.test", CacheDir: dir, Logger: log.logger()}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory %v; want 0700", fi.Mode().Perm())
	}
	if want := "made the ACME cache directory private"; !strings.Contains(log.String(), want) {
		t.Errorf("log %q; want %q", log.String(), want)
	}
}

// The HTTP-01 listener (--acme-http) answers challenges for the host alone
// and sends everything else to the public URL, path and query kept.
func TestACMEHTTPHandler(t *testing.T) {
	a, err := NewACME(ACMEConfig{Host: "coord.test", CacheDir: filepath.Join(t.TempDir(), "acme")})
	if err != nil {
		t.Fatal(err)
	}
	h := a.HTTPHandler("https://coord.test:8443")
	for _, tt := range []struct {
		method, target, host string
		code                 int
		location             string
	}{
		{"GET", "/app?x=1", "coord.test", http.StatusMovedPermanently, "https://coord.test:8443/app?x=1"},
		{"HEAD", "/", "anything.example", http.StatusMovedPermanently, "https://coord.test:8443/"},
		{"POST", "/mcp", "coord.test", http.StatusBadRequest, ""},
		{"GET", "/.well-known/acme-challenge/token", "evil.example", http.StatusForbidden, ""},
		{"GET", "/.well-known/acme-challenge/token", "coord.test", http.StatusNotFound, ""}, // no challenge under way
	} {
		r := httptest.NewRequest(tt.method, "http://"+tt.host+tt.target, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.code || w.Header().Get("Location") != tt.location {
			t.Errorf("%s %s (Host %s): %d, Location %q; want %d, %q", tt.method, tt.target, tt.host, w.Code, w.Header().Get("Location"), tt.code, tt.location)
		}
	}
}
