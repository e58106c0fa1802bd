package tlscert

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/certtest"
)

// files is a certificate and key file that a test replaces; each write
// gets a modification time of its own, a second after the one before, so
// that no file system's time resolution hides a change.
type files struct {
	t         *testing.T
	cert, key string
	mod       time.Time
}

func newFiles(t *testing.T) *files {
	dir := t.TempDir()
	return &files{t: t, cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), mod: time.Now().Add(-time.Hour)}
}

func (f *files) write(name string, b []byte) {
	f.t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		f.t.Fatal(err)
	}
	f.mod = f.mod.Add(time.Second)
	if err := os.Chtimes(name, f.mod, f.mod); err != nil {
		f.t.Fatal(err)
	}
}

func (f *files) put(p certtest.Pair) {
	f.write(f.cert, p.Cert)
	f.write(f.key, p.Key)
}

// logBuffer is a log a test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func servedSerial(t *testing.T, f *Files) int64 {
	t.Helper()
	c, err := f.GetCertificate(&tls.ClientHelloInfo{ServerName: "coord.test"})
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.SerialNumber.Int64()
}

// Replaced files are served from the next look; a replacement that does
// not load (a broken file, a key of another certificate, half of a pair
// written) is logged and the old pair kept until the files change again.
func TestFilesReload(t *testing.T) {
	var log logBuffer
	fs := newFiles(t)
	fs.put(certtest.New(t, 1, "coord.test"))
	f, err := NewFiles(FilesConfig{CertFile: fs.cert, KeyFile: fs.key, Host: "coord.test", CheckEvery: -1, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, f); got != 1 {
		t.Fatalf("serial %d served; want 1", got)
	}

	two := certtest.New(t, 2, "coord.test")
	fs.put(two)
	if got := servedSerial(t, f); got != 2 {
		t.Fatalf("after replacing the files: serial %d served; want 2", got)
	}
	if !strings.Contains(log.String(), "reloaded the TLS certificate") {
		t.Errorf("log %q; want it to say the certificate was reloaded", log.String())
	}

	three, four := certtest.New(t, 3, "coord.test"), certtest.New(t, 4, "coord.test")
	for _, step := range []struct {
		what string
		do   func()
		want string
	}{
		{"a broken certificate file", func() { fs.write(fs.cert, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n")) }, "do not load"},
		{"a new certificate before its key", func() { fs.write(fs.cert, three.Cert) }, "private key does not match public key"},
		{"a certificate for another host", func() { fs.put(certtest.New(t, 5, "other.test")) }, "is for other.test, not coord.test"},
		{"a missing key file", func() { os.Remove(fs.key) }, "TLS key file"},
	} {
		before := len(log.String())
		step.do()
		for range 3 { // logged once, however many handshakes look
			if got := servedSerial(t, f); got != 2 {
				t.Fatalf("after %s: serial %d served; want 2, the pair that loaded", step.what, got)
			}
		}
		logged := log.String()[before:]
		if !strings.Contains(logged, step.want) || strings.Count(logged, "level=ERROR") != 1 {
			t.Errorf("after %s: logged %q; want one error saying %q", step.what, logged, step.want)
		}
	}
	fs.put(four)
	if got := servedSerial(t, f); got != 4 {
		t.Fatalf("after a good pair again: serial %d served; want 4", got)
	}
}

// The files are looked at no more often than CheckEvery: a handshake
// costs no system call in between.
func TestFilesCheckedAtMostEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newFiles(t)
		fs.put(certtest.New(t, 1, "coord.test"))
		f, err := NewFiles(FilesConfig{CertFile: fs.cert, KeyFile: fs.key, CheckEvery: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		fs.put(certtest.New(t, 2, "coord.test"))
		time.Sleep(4 * time.Second)
		if got := servedSerial(t, f); got != 1 {
			t.Fatalf("4 s after the start: serial %d served; want 1 (not looked at yet)", got)
		}
		time.Sleep(time.Second)
		if got := servedSerial(t, f); got != 2 {
			t.Fatalf("5 s after the start: serial %d served; want 2", got)
		}
	})
}

// A coordinator does not start on files it cannot serve.
func TestNewFilesRefuses(t *testing.T) {
	fs := newFiles(t)
	good := certtest.New(t, 1, "coord.test")
	for _, tt := range []struct {
		what       string
		cert, key  []byte
		host, want string
	}{
		{"no files", nil, nil, "", "no such file"},
		{"a broken certificate", []byte("junk"), good.Key, "", "load TLS certificate"},
		{"a key of another certificate", good.Cert, certtest.New(t, 2, "coord.test").Key, "", "private key does not match"},
		{"a certificate for another host", good.Cert, good.Key, "other.test", "is for coord.test, not other.test"},
	} {
		os.Remove(fs.cert)
		os.Remove(fs.key)
		if tt.cert != nil {
			fs.write(fs.cert, tt.cert)
			fs.write(fs.key, tt.key)
		}
		_, err := NewFiles(FilesConfig{CertFile: fs.cert, KeyFile: fs.key, Host: tt.host})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want an error saying %q", tt.what, err, tt.want)
		}
	}
}
