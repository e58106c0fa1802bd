package notifytest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mail is one message the SMTP server accepted.
type Mail struct {
	From string
	To   []string
	Data string // headers and body, as sent (dot-stuffing undone)
	TLS  bool   // it came after STARTTLS
	User string // who authenticated ("" none)
}

// SMTP is a small SMTP server on 127.0.0.1 that offers STARTTLS with a
// certificate from a CA of its own (CAFile, for the notifier's caFile),
// accepts AUTH PLAIN only inside TLS, and refuses mail before STARTTLS
// unless Plain is set.
type SMTP struct {
	Addr   string
	CAFile string

	user, pass string
	cert       tls.Certificate
	mu         sync.Mutex
	mails      []Mail
	modes      []Mode
	plain      bool // no STARTTLS offered; mail taken in plain text
	auths      int  // AUTH commands seen, in TLS or not
	more       chan struct{}
}

// StartSMTP starts a server that wants user and pass (none when user is
// ""); without starttls it offers no STARTTLS (a local relay) and takes
// mail in plain text.
func StartSMTP(t testing.TB, user, pass string, starttls bool) *SMTP {
	t.Helper()
	caFile, cert := testCert(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SMTP{Addr: l.Addr().String(), CAFile: caFile, user: user, pass: pass, cert: cert, more: make(chan struct{}, 1), plain: !starttls}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.session(c) })
		}
	})
	return s
}

// Script sets how the next sessions end: Fail answers 451 to MAIL FROM
// (try again later), Refuse 550, Hang stops answering after the greeting.
func (s *SMTP) Script(modes ...Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modes = append(s.modes, modes...)
}

// Mails returns what was accepted so far.
func (s *SMTP) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Auths is how many AUTH commands arrived (a password sent).
func (s *SMTP) Auths() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auths
}

// Wait waits until f holds for the mails, or within passes.
func (s *SMTP) Wait(within time.Duration, f func([]Mail) bool) ([]Mail, bool) {
	return wait(within, s.more, s.Mails, f)
}

func (s *SMTP) session(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	s.mu.Lock()
	mode := OK
	if len(s.modes) > 0 {
		mode, s.modes = s.modes[0], s.modes[1:]
	}
	s.mu.Unlock()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	say := func(line string) { w.WriteString(line + "\r\n"); w.Flush() }
	say("220 127.0.0.1 test SMTP")
	if mode == Hang {
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}
	var m Mail
	inTLS := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch {
		case verb == "EHLO" || verb == "HELO":
			if inTLS {
				say("250-127.0.0.1")
				say("250 AUTH PLAIN")
			} else if s.plain {
				say("250-127.0.0.1")
				say("250 AUTH PLAIN")
			} else {
				say("250-127.0.0.1")
				say("250 STARTTLS")
			}
		case verb == "STARTTLS" && !inTLS && !s.plain:
			say("220 go ahead")
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12})
			if err := tc.Handshake(); err != nil {
				return
			}
			c, inTLS = tc, true
			r, w = bufio.NewReader(tc), bufio.NewWriter(tc)
			m.TLS = true
		case verb == "AUTH":
			s.mu.Lock()
			s.auths++
			s.mu.Unlock()
			f := strings.Fields(line)
			b, _ := base64.StdEncoding.DecodeString(f[len(f)-1])
			parts := strings.Split(string(b), "\x00")
			if !inTLS || len(parts) != 3 || parts[1] != s.user || parts[2] != s.pass {
				say("535 authentication failed")
				continue
			}
			m.User = parts[1]
			say("235 ok")
		case verb == "MAIL":
			switch {
			case !inTLS && !s.plain:
				say("530 must issue STARTTLS first")
			case s.user != "" && m.User == "":
				say("530 authentication required")
			case mode == Fail:
				say("451 try again later")
			case mode == Refuse:
				say("550 no")
			default:
				m.From = addr(line)
				say("250 ok")
			}
		case verb == "RCPT":
			m.To = append(m.To, addr(line))
			say("250 ok")
		case verb == "DATA":
			say("354 go ahead")
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data = data.String()
			s.mu.Lock()
			s.mails = append(s.mails, m)
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
			say("250 queued")
			m = Mail{TLS: m.TLS, User: m.User}
		case verb == "QUIT":
			say("221 bye")
			return
		case verb == "RSET" || verb == "NOOP":
			say("250 ok")
		default:
			say("502 not implemented")
		}
	}
}

func addr(line string) string {
	if i, j := strings.IndexByte(line, '<'), strings.IndexByte(line, '>'); i >= 0 && j > i {
		return line[i+1 : j]
	}
	return ""
}

// testCert makes a CA and a certificate for 127.0.0.1 and localhost signed
// by it, and writes the CA to a file.
func testCert(t testing.TB) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "notifytest CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "smtp-ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
