package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// maxSecret bounds a secret file: a key, a token, a password or a URL.
const maxSecret = 8 << 10

// secret reads a credential from the file or the environment variable the
// config names (one of them, or neither when it is optional). Errors name
// the field and say what to do, never the value.
func secret(fileKey, file, envKey, env string, getenv func(string) string) (string, error) {
	switch {
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w; create it holding only the secret, readable by the gridcity user alone (chmod 600)", fileKey, file, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", fileKey, file, err)
		}
		if len(b) > maxSecret {
			return "", fmt.Errorf("%s %s is larger than %d bytes; it should hold only the secret", fileKey, file, maxSecret)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("%s %s is empty; write the secret into it", fileKey, file)
		}
		return s, nil
	case env != "":
		s := strings.TrimSpace(getenv(env))
		if s == "" {
			return "", fmt.Errorf("%s: the environment variable %s is not set or empty; set it in the coordinator's environment (e.g. the systemd unit's Environment= or EnvironmentFile=)", envKey, env)
		}
		return s, nil
	}
	return "", nil
}

func newSender(c config.Notifier, opts Options) (sender, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	client := &http.Client{
		// A receiver's redirect is not followed: it could carry the
		// message (and a bearer token) somewhere the config never named.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	switch c.Kind {
	case "webhook":
		key, err := secret("secretFile", c.SecretFile, "secretEnv", c.SecretEnv, getenv)
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, errors.New("a webhook is signed: set secretFile: or secretEnv:")
		}
		return &webhook{url: c.URL, key: []byte(key), client: client, now: opts.Now}, nil
	case "slack":
		u, err := secret("urlFile", c.URLFile, "urlEnv", c.URLEnv, getenv)
		if err != nil {
			return nil, err
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			// The value is a credential: not repeated in the message.
			return nil, errors.New("the Slack webhook URL read from urlFile/urlEnv is not an http(s) address; write the whole incoming webhook URL (https://hooks.slack.com/services/…)")
		}
		return &slack{url: u, client: client}, nil
	case "ntfy":
		tok, err := secret("tokenFile", c.TokenFile, "tokenEnv", c.TokenEnv, getenv)
		if err != nil {
			return nil, err
		}
		return &ntfy{url: c.URL, token: tok, client: client}, nil
	case "email":
		pw, err := secret("passwordFile", c.PasswordFile, "passwordEnv", c.PasswordEnv, getenv)
		if err != nil {
			return nil, err
		}
		return newEmail(c, pw, opts)
	}
	return nil, fmt.Errorf("unknown kind %q", c.Kind)
}

// post sends body and judges the answer: 2xx delivered; 408, 425, 429 and
// 5xx worth another try; any other status a refusal. The error never
// holds the URL, which may be a credential (Slack's).
func post(ctx context.Context, client *http.Client, u string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return &refusal{msg: "cannot make the request: the URL is malformed"}
	}
	req.Header = header
	req.Header.Set("User-Agent", "gridcity-notify")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooEarly || c == http.StatusTooManyRequests || c >= 500:
		return fmt.Errorf("the receiver answered %s", resp.Status)
	default:
		return &refusal{msg: "the receiver answered " + resp.Status}
	}
}

// Webhook headers.
const (
	SignatureHeader = "X-Gridcity-Signature"
	TimestampHeader = "X-Gridcity-Timestamp"
	EventHeader     = "X-Gridcity-Event"
	DeliveryHeader  = "X-Gridcity-Delivery"
)

// Sign is the X-Gridcity-Signature of body under key: "sha256=" and the
// hex of HMAC-SHA256(key, body).
func Sign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether sig is body's signature under key, in constant
// time: what a receiver written in Go does.
func Verify(key, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(key, body)), []byte(sig))
}

type webhook struct {
	url    string
	key    []byte
	client *http.Client
	now    func() time.Time
}

func (w *webhook) send(ctx context.Context, m *message) error {
	p := m.body
	p.At = w.now().UTC()
	body, err := json.Marshal(p)
	if err != nil {
		return &refusal{msg: fmt.Sprintf("encode the message: %v", err)}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(SignatureHeader, Sign(w.key, body))
	h.Set(TimestampHeader, strconv.FormatInt(p.At.Unix(), 10))
	h.Set(EventHeader, m.event)
	h.Set(DeliveryHeader, p.ID)
	return post(ctx, w.client, w.url, body, h)
}

// slack posts to an incoming webhook: {"text", "blocks"}. Slack shows the
// blocks; Mattermost and Rocket.Chat, which take the same URL shape, show
// the text.
type slack struct {
	url    string
	client *http.Client
}

// slackEscape escapes what Slack's mrkdwn reads as markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (s *slack) send(ctx context.Context, m *message) error {
	text := slackEscape.Replace(m.title)
	if m.link != "" {
		text = "<" + m.link + "|" + text + ">"
	}
	detail := slackEscape.Replace(strings.TrimSuffix(m.text, m.link))
	blocks := []map[string]any{
		{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "*" + text + "*"}},
	}
	if strings.TrimSpace(detail) != "" {
		blocks = append(blocks, map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": detail}})
	}
	body, err := json.Marshal(map[string]any{"text": text + "\n" + detail, "blocks": blocks})
	if err != nil {
		return &refusal{msg: fmt.Sprintf("encode the message: %v", err)}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return post(ctx, s.client, s.url, body, h)
}

// ntfy publishes to a topic: the text as the body, the rest as headers.
type ntfy struct {
	url, token string
	client     *http.Client
}

func (n *ntfy) send(ctx context.Context, m *message) error {
	h := http.Header{}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Title", headerText(m.title))
	h.Set("Priority", strconv.Itoa(m.priority))
	if len(m.tags) > 0 {
		h.Set("Tags", strings.Join(m.tags, ","))
	}
	if m.link != "" {
		h.Set("Click", m.link)
	}
	if n.token != "" {
		h.Set("Authorization", "Bearer "+n.token)
	}
	return post(ctx, n.client, n.url, []byte(m.text), h)
}

// headerText makes a header value of text: as it is when it is plain
// ASCII, else RFC 2047 encoded, which ntfy decodes.
func headerText(s string) string {
	if ascii(s) {
		return s
	}
	return mime.BEncoding.Encode("UTF-8", s)
}
