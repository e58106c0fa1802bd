package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gridcity/gridcity/coordinator/internal/loopback"
)

// NotifyEvents are the events a notifier may ask for (events: […]); an
// empty list asks for all of them.
var NotifyEvents = []string{"request.waiting", "request.decided", "request.finished", "incident.opened", "incident.ended", "attack.opened", "agent.offline"}

// NotifyKinds are the notifiers gridcity can send to.
var NotifyKinds = []string{"webhook", "slack", "ntfy", "email"}

// Delivery defaults and bounds of a notifier.
const (
	DefaultNotifyTimeout     = 10 * time.Second
	DefaultNotifyDropAfter   = 15 * time.Minute
	DefaultNotifyMinInterval = 5 * time.Minute
	DefaultNotifyGroupWait   = 10 * time.Second
	DefaultNotifyQueue       = 256
	MaxNotifyDropAfter       = 24 * time.Hour
	MaxNotifyQueue           = 100_000
)

// Notifier is one place people are told about approval cards, incidents,
// attacks and servers gone offline (notify: in the config). Secrets (the
// webhook's signing key, the ntfy token, the SMTP password, a Slack URL,
// which holds its own key) are never written in the config: only the
// file or environment variable that holds them.
type Notifier struct {
	Name string
	Kind string // webhook | slack | ntfy | email
	// URL receives the webhook, or is the ntfy topic's URL. A Slack URL
	// is read from URLFile or URLEnv instead: it is a credential.
	URL             string
	URLFile, URLEnv string
	SecretFile      string // webhook: the HMAC-SHA256 key
	SecretEnv       string
	TokenFile       string // ntfy: an access token, sent as Authorization: Bearer
	TokenEnv        string
	SMTP            string // email: host:port of the relay (STARTTLS unless it is on loopback)
	From            string
	To              []string
	Username        string
	PasswordFile    string
	PasswordEnv     string
	CAFile          string // email: a CA to trust for the relay's certificate beside the system's
	Events          []string
	Districts       []string // empty: every district
	Timeout         time.Duration
	DropAfter       time.Duration
	MinInterval     time.Duration
	GroupWait       time.Duration
	Queue           int
	Line            int            // line in the file; 0 when not from a file
	set             map[string]int // keys given, with their lines
}

// Has reports whether the file gave key for this notifier.
func (n Notifier) Has(key string) bool { _, ok := n.set[key]; return ok }

var notifyKeys = []string{"name", "kind", "url", "urlFile", "urlEnv", "secretFile", "secretEnv", "tokenFile", "tokenEnv",
	"smtp", "from", "to", "username", "passwordFile", "passwordEnv", "caFile", "events", "districts",
	"timeout", "dropAfter", "minInterval", "groupWait", "queue",
	// Refused with their own message: a secret in the config.
	"secret", "token", "password"}

// literalSecrets are keys someone might write a secret under, and where it goes instead.
var literalSecrets = map[string]string{"secret": "secretFile", "token": "tokenFile", "password": "passwordFile"}

func (d *decoder) notifier(n *yaml.Node, i int) (Notifier, bool) {
	p := fmt.Sprintf("notify[%d]", i)
	n = d.item(n, "a notifier")
	if n == nil {
		return Notifier{}, false
	}
	x := Notifier{Line: n.Line, set: map[string]int{}, Timeout: DefaultNotifyTimeout, DropAfter: DefaultNotifyDropAfter,
		MinInterval: DefaultNotifyMinInterval, GroupWait: DefaultNotifyGroupWait, Queue: DefaultNotifyQueue}
	strs := map[string]*string{"name": &x.Name, "kind": &x.Kind, "url": &x.URL, "urlFile": &x.URLFile, "urlEnv": &x.URLEnv,
		"secretFile": &x.SecretFile, "secretEnv": &x.SecretEnv, "tokenFile": &x.TokenFile, "tokenEnv": &x.TokenEnv,
		"smtp": &x.SMTP, "from": &x.From, "username": &x.Username, "passwordFile": &x.PasswordFile, "passwordEnv": &x.PasswordEnv, "caFile": &x.CAFile}
	durs := map[string]*time.Duration{"timeout": &x.Timeout, "dropAfter": &x.DropAfter, "minInterval": &x.MinInterval, "groupWait": &x.GroupWait}
	d.mapping(n, "a notifier", notifyKeys, func(key string, v *yaml.Node) {
		x.set[key] = d.node(v).Line
		switch {
		case literalSecrets[key] != "":
			// The value is not read, so that it is in no message either.
			d.problem(d.node(v).Line, "a notifier: %s: the config holds no secrets; put it in a file readable only by gridcity and name it with %s: (or name an environment variable with %s:)",
				key, literalSecrets[key], strings.TrimSuffix(literalSecrets[key], "File")+"Env")
		case strs[key] != nil:
			d.str(v, p+"."+key, key, strs[key])
		case durs[key] != nil:
			d.duration(v, p+"."+key, key, durs[key])
		case key == "queue":
			d.integer(v, p+".queue", "queue", &x.Queue)
		case key == "to":
			d.strs(v, p+".to", "to", &x.To)
		case key == "events":
			d.strs(v, p+".events", "events", &x.Events)
		case key == "districts":
			d.strs(v, p+".districts", "districts", &x.Districts)
		}
	})
	return x, true
}

func (v *validator) notifiers() {
	c := v.c
	seen := map[string]int{}
	for i, n := range c.Notify {
		p := fmt.Sprintf("notify[%d]", i)
		at := func(key string) int { return c.line(p+"."+key, n.Line) }
		who := v.ident(at("name"), n.Line, "notifier", "name", n.Name, seen)
		switch {
		case n.Kind == "":
			v.problem(at("kind"), "%s has no kind; set kind: to one of %s", who, strings.Join(NotifyKinds, ", "))
		case !contains(NotifyKinds, n.Kind):
			v.problem(at("kind"), "%s: unknown kind %q%s; known kinds: %s", who, n.Kind, didYouMean(n.Kind, NotifyKinds), strings.Join(NotifyKinds, ", "))
		}
		for j, e := range n.Events {
			if !contains(NotifyEvents, e) {
				v.problem(c.line(fmt.Sprintf("%s.events[%d]", p, j), at("events")), "%s: unknown event %q%s; events: %s", who, e, didYouMean(e, NotifyEvents), strings.Join(NotifyEvents, ", "))
			}
		}
		for j, dist := range n.Districts {
			if !safeID(dist) {
				v.problem(c.line(fmt.Sprintf("%s.districts[%d]", p, j), at("districts")), "%s: district %q: a district id uses only %s", who, dist, idChars)
			}
		}
		v.notifyTiming(n, who, at)
		v.notifyKind(n, who, at)
	}
}

func (v *validator) notifyTiming(n Notifier, who string, at func(string) int) {
	if n.Timeout < 100*time.Millisecond || n.Timeout > time.Minute {
		v.problem(at("timeout"), "%s: timeout %s is out of range; give each attempt 100ms to 1m (the default is %s)", who, n.Timeout, DefaultNotifyTimeout)
	}
	if n.DropAfter < n.Timeout || n.DropAfter > MaxNotifyDropAfter {
		v.problem(at("dropAfter"), "%s: dropAfter %s is out of range; keep trying for at least one timeout (%s) and at most %s (the default is %s)", who, n.DropAfter, n.Timeout, MaxNotifyDropAfter, DefaultNotifyDropAfter)
	}
	if n.MinInterval < 0 {
		v.problem(at("minInterval"), "%s: minInterval %s is negative; use 0 to tell every time, or a duration like 5m", who, n.MinInterval)
	}
	if n.GroupWait < 0 || n.GroupWait > 5*time.Minute {
		v.problem(at("groupWait"), "%s: groupWait %s is out of range; use 0 (no grouping) to 5m (the default is %s)", who, n.GroupWait, DefaultNotifyGroupWait)
	}
	if n.Queue < 1 || n.Queue > MaxNotifyQueue {
		v.problem(at("queue"), "%s: queue %d is out of range; keep 1 to %d events waiting (the default is %d)", who, n.Queue, MaxNotifyQueue, DefaultNotifyQueue)
	}
}

// notifyKind checks what each kind needs, and refuses what it does not use:
// a key given for nothing is most likely a mistake.
func (v *validator) notifyKind(n Notifier, who string, at func(string) int) {
	uses := map[string][]string{
		"webhook": {"url", "secretFile", "secretEnv"},
		"slack":   {"urlFile", "urlEnv"},
		"ntfy":    {"url", "tokenFile", "tokenEnv"},
		"email":   {"smtp", "from", "to", "username", "passwordFile", "passwordEnv", "caFile"},
	}[n.Kind]
	if uses == nil {
		return
	}
	for _, key := range []string{"url", "urlFile", "urlEnv", "secretFile", "secretEnv", "tokenFile", "tokenEnv", "smtp", "from", "to", "username", "passwordFile", "passwordEnv", "caFile"} {
		if n.Has(key) && !contains(uses, key) {
			v.problem(at(key), "%s: a %s notifier has no %s; its keys are %s", who, n.Kind, key, strings.Join(uses, ", "))
		}
	}
	v.oneOf(n, who, at, "secretFile", "secretEnv")
	v.oneOf(n, who, at, "tokenFile", "tokenEnv")
	v.oneOf(n, who, at, "passwordFile", "passwordEnv")
	v.oneOf(n, who, at, "urlFile", "urlEnv")
	switch n.Kind {
	case "webhook":
		v.notifyURL(n, who, at)
		if n.SecretFile == "" && n.SecretEnv == "" {
			v.problem(at("name"), "%s: a webhook is signed; set secretFile: to a file holding the key (e.g. openssl rand -hex 32 > /etc/gridcity/%s.key; chmod 600 it), or secretEnv: to an environment variable holding it", who, n.Name)
		}
	case "slack":
		if n.Has("url") {
			v.problem(at("url"), "%s: a Slack (or Mattermost, Rocket.Chat) webhook URL holds its own key; put it in a file and set urlFile:, or name an environment variable with urlEnv:", who)
		} else if n.URLFile == "" && n.URLEnv == "" {
			v.problem(at("name"), "%s: set urlFile: to a file holding the incoming webhook's URL, or urlEnv: to an environment variable holding it", who)
		}
	case "ntfy":
		if v.notifyURL(n, who, at) && (n.TokenFile != "" || n.TokenEnv != "") {
			if u, _ := url.Parse(n.URL); u.Scheme == "http" && !loopback.Host(u.Host) {
				v.problem(at("url"), "%s: the token would cross the network in plain text; use an https:// URL, or no token", who)
			}
		}
	case "email":
		v.notifyEmail(n, who, at)
	}
}

// oneOf refuses a secret named two ways.
func (v *validator) oneOf(n Notifier, who string, at func(string) int, a, b string) {
	if n.Has(a) && n.Has(b) {
		v.problem(at(b), "%s: %s and %s name the same secret; keep one", who, a, b)
	}
}

// notifyURL checks a webhook's or ntfy topic's URL and reports whether it is good.
func (v *validator) notifyURL(n Notifier, who string, at func(string) int) bool {
	if n.URL == "" {
		v.problem(at("name"), "%s has no url; set url: to the http:// or https:// address that receives it", who)
		return false
	}
	u, err := url.Parse(n.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.problem(at("url"), "%s: url %q is not an http:// or https:// address", who, n.URL)
		return false
	}
	if u.User != nil {
		v.problem(at("url"), "%s: url carries a user or password; the config holds no secrets (a webhook is signed with secretFile:, ntfy takes tokenFile:)", who)
		return false
	}
	return true
}

func (v *validator) notifyEmail(n Notifier, who string, at func(string) int) {
	host, port, err := net.SplitHostPort(n.SMTP)
	switch {
	case n.SMTP == "":
		v.problem(at("name"), "%s has no smtp; set smtp: to the relay's host:port (587 for STARTTLS submission)", who)
	case err != nil || host == "" || port == "":
		v.problem(at("smtp"), "%s: smtp %q is not host:port; write e.g. smtp.example.com:587", who, n.SMTP)
	}
	if !mailAddress(n.From) {
		v.problem(at("from"), "%s: from %q is not a mail address; write e.g. gridcity@example.com", who, n.From)
	}
	if len(n.To) == 0 {
		v.problem(at("name"), "%s has no recipients; set to: [someone@example.com]", who)
	}
	for _, to := range n.To {
		if !mailAddress(to) {
			v.problem(at("to"), "%s: to %q is not a mail address", who, to)
		}
	}
	hasPassword := n.PasswordFile != "" || n.PasswordEnv != ""
	switch {
	case n.Username != "" && !hasPassword:
		v.problem(at("username"), "%s: username %q without a password; set passwordFile: (or passwordEnv:)", who, n.Username)
	case n.Username == "" && hasPassword:
		v.problem(at("name"), "%s: a password without a username; set username:", who)
	}
}

// mailAddress is a plain addr-spec: one @, no spaces, no angle brackets
// or line breaks (which would let a value write headers of its own).
func mailAddress(s string) bool {
	at := strings.LastIndexByte(s, '@')
	return at > 0 && at < len(s)-1 && !strings.ContainsAny(s, " \t\r\n<>,;\"")
}
