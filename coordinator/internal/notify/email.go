package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
)

// email sends through an SMTP relay. The connection is upgraded with
// STARTTLS, verified against the system's roots (and caFile); only a relay
// on loopback may be spoken to in plain text, and then never with
// credentials.
type email struct {
	addr, host string
	from       string
	to         []string
	user, pass string
	tls        *tls.Config
	now        func() time.Time
}

func newEmail(c config.Notifier, password string, opts Options) (*email, error) {
	host, _, err := net.SplitHostPort(c.SMTP)
	if err != nil {
		return nil, fmt.Errorf("smtp %q: %w", c.SMTP, err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile %s: %w", c.CAFile, err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s holds no PEM certificate; give the CA that signed the relay's certificate", c.CAFile)
		}
	}
	return &email{addr: c.SMTP, host: host, from: c.From, to: c.To, user: c.Username, pass: password,
		tls: &tls.Config{ServerName: host, RootCAs: roots, MinVersion: tls.VersionTLS12}, now: opts.Now}, nil
}

func (e *email) send(ctx context.Context, m *message) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return fmt.Errorf("connect to the SMTP relay %s: %w", e.addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return smtpError("greeting", err)
	}
	defer c.Close()
	if err := c.Hello("gridcity"); err != nil {
		return smtpError("EHLO", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(e.tls); err != nil {
			return fmt.Errorf("STARTTLS with %s: %w", e.addr, err)
		}
	} else if !loopback.Host(e.host) {
		return fmt.Errorf("the SMTP relay %s offers no STARTTLS; gridcity speaks plain text only to a relay on loopback", e.addr)
	} else if e.user != "" {
		return &refusal{msg: fmt.Sprintf("the SMTP relay %s offers no STARTTLS; the password is never sent in plain text (drop username/passwordFile for a local relay, or enable STARTTLS on it)", e.addr)}
	}
	if e.user != "" {
		if err := c.Auth(smtp.PlainAuth("", e.user, e.pass, e.host)); err != nil {
			return smtpError("AUTH", err)
		}
	}
	if err := c.Mail(e.from); err != nil {
		return smtpError("MAIL FROM", err)
	}
	for _, to := range e.to {
		if err := c.Rcpt(to); err != nil {
			return smtpError("RCPT TO "+to, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return smtpError("DATA", err)
	}
	if _, err := w.Write(e.compose(m)); err != nil {
		return smtpError("DATA", err)
	}
	if err := w.Close(); err != nil {
		return smtpError("end of DATA", err)
	}
	c.Quit()
	return nil
}

// smtpError makes a permanent (5xx) answer a refusal and keeps anything
// else worth another try.
func smtpError(step string, err error) error {
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return &refusal{msg: fmt.Sprintf("the SMTP relay refused %s: %d %s", step, te.Code, te.Msg)}
	}
	return fmt.Errorf("SMTP %s: %w", step, err)
}

// compose writes the mail: headers whose values cannot break a line (the
// subject is the message's title, already one line, and encoded when it
// is not ASCII) and a quoted-printable text body.
func (e *email) compose(m *message) []byte {
	var b bytes.Buffer
	hdr := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	hdr("From", "gridcity <"+e.from+">")
	hdr("To", strings.Join(e.to, ", "))
	hdr("Subject", mime.QEncoding.Encode("UTF-8", oneLine(m.title, maxTitle)))
	hdr("Date", e.now().Format(time.RFC1123Z))
	hdr("Message-ID", "<"+m.body.ID+"@gridcity>")
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", "text/plain; charset=utf-8")
	hdr("Content-Transfer-Encoding", "quoted-printable")
	hdr("Auto-Submitted", "auto-generated")
	hdr(EventHeader, m.event)
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(strings.ReplaceAll(m.text, "\n", "\r\n") + "\r\n"))
	qp.Close()
	return b.Bytes()
}
