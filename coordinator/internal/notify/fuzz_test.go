package notify

import (
	"encoding/json"
	"mime"
	"net/mail"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Text from the AI (a command, a reason) and from the fleet (server
// names, reasons, users tried) goes into titles, headers and bodies: no
// value may break out of its line, forge a mail header or an HTTP header,
// or make a body that is not JSON.
func FuzzMessage(f *testing.F) {
	f.Add("web-1", "systemctl restart nginx", "nginx is down", "ok")
	f.Add("web-1\r\nBcc: x@evil", "echo \"\x00\"\n.\r\n", "\u2028reason\u2029", "é\xff")
	f.Add(strings.Repeat("ä", 400), "<!here> *bold* `code` &amp;", "=?UTF-8?q?x?=", "\r\n\r\nbody")
	f.Fuzz(func(t *testing.T, server, cmd, reason, note string) {
		e := &email{from: "g@example.com", to: []string{"ops@example.com"}, now: func() time.Time { return t0 }}
		req := Event{ID: "x", Kind: RequestWaiting, At: t0, Request: &Request{ID: "r1", Server: server, Command: cmd, Reason: reason, Note: note, Client: note}}
		in := Event{ID: "y", Kind: IncidentOpened, At: t0, Incident: &Incident{ID: 1, Target: server, Reason: reason, Explains: []string{cmd, note}}}
		for _, events := range [][]Event{{req}, {in}, {in, in}} {
			m := build(events, "https://g.example.com/")
			if strings.ContainsFunc(m.title, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) || !utf8.ValidString(m.title) {
				t.Fatalf("title %q breaks its line", m.title)
			}
			if utf8.RuneCountInString(m.title) > maxTitle+1 {
				t.Fatalf("title of %d runes", utf8.RuneCountInString(m.title))
			}
			if h := headerText(m.title); strings.ContainsAny(h, "\r\n\x00") || !ascii(h) {
				t.Fatalf("ntfy Title %q is no header value", h)
			}
			msg, err := mail.ReadMessage(strings.NewReader(string(e.compose(m))))
			if err != nil {
				t.Fatalf("mail does not parse: %v", err)
			}
			if len(msg.Header) != 10 || msg.Header.Get("Bcc") != "" || msg.Header.Get("To") != "ops@example.com" {
				t.Fatalf("mail headers %v", msg.Header)
			}
			subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
			if err != nil || strings.ContainsAny(subject, "\r\n") {
				t.Fatalf("subject %q: %v", subject, err)
			}
			var p map[string]any
			m.body.At = t0
			b, err := json.Marshal(m.body)
			if err != nil || json.Unmarshal(b, &p) != nil {
				t.Fatalf("webhook body %s: %v", b, err)
			}
		}
	})
}
