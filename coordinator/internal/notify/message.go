package notify

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// message is what every kind of notifier sends of one or more events of
// one kind: a title, a few lines of plain text, a link into the app, and
// the JSON a webhook receives.
type message struct {
	event    string
	title    string
	text     string
	link     string
	priority int // ntfy's 1 (min) to 5 (urgent)
	tags     []string
	body     payload
}

// payload is a webhook's JSON body (docs/notifications.md, "A webhook"). At is
// set at each attempt, when the body is signed, so that a receiver can
// refuse an old body sent again; OccurredAt is when the event happened.
type payload struct {
	ID         string    `json:"id"`
	Event      string    `json:"event"`
	At         time.Time `json:"at"`
	OccurredAt time.Time `json:"occurredAt"`
	Server     string    `json:"server,omitempty"`
	District   string    `json:"district,omitempty"`
	Districts  []string  `json:"districts,omitempty"`
	RequestID  string    `json:"requestId,omitempty"`
	Request    *Request  `json:"request,omitempty"`
	Incident   *Incident `json:"incident,omitempty"`
	Attack     *Attack   `json:"attack,omitempty"`
	Offline    *Offline  `json:"offline,omitempty"`
	Link       string    `json:"link,omitempty"`
	Title      string    `json:"title,omitempty"`
	Text       string    `json:"text,omitempty"`
	// A grouped message: how many events, and each of them.
	Count  int       `json:"count,omitempty"`
	Events []payload `json:"events,omitempty"`
}

// Bounds on what a message repeats of the fleet's and the AI's text.
const (
	maxLine    = 300 // a command, a reason, a note
	maxTitle   = 150
	maxListed  = 20 // names listed before "and N more"
	maxGrouped = 30 // events a grouped message details
)

// build makes the message for events, all of one kind.
func build(events []Event, appURL string) *message {
	if len(events) == 1 {
		return single(events[0], appURL)
	}
	e0 := events[0]
	m := &message{event: e0.Kind, priority: 3}
	var subjects, lines []string
	for i, e := range events {
		one := single(e, appURL)
		m.priority = max(m.priority, one.priority)
		for _, t := range one.tags {
			if !contains(m.tags, t) {
				m.tags = append(m.tags, t)
			}
		}
		subjects = append(subjects, e.subject())
		if i < maxGrouped {
			lines = append(lines, "• "+one.title)
			one.body.Title, one.body.Text = "", ""
			m.body.Events = append(m.body.Events, one.body)
		}
	}
	if len(events) > maxGrouped {
		lines = append(lines, fmt.Sprintf("… and %d more", len(events)-maxGrouped))
	}
	what := map[string]string{IncidentOpened: "incidents opened", IncidentEnded: "incidents ended", AttackOpened: "attacks opened",
		AgentOffline: "servers offline", RequestWaiting: "approvals waiting", RequestDecided: "requests decided", RequestFinished: "requests finished"}[e0.Kind]
	m.title = oneLine(fmt.Sprintf("%d %s: %s", len(events), what, list(subjects)), maxTitle)
	m.link = pageLink(appURL, e0)
	m.text = strings.Join(lines, "\n")
	if m.link != "" {
		m.text += "\n" + m.link
	}
	m.body = payload{ID: newID(), Event: e0.Kind, OccurredAt: e0.At, Link: m.link, Title: m.title, Text: m.text,
		Count: len(events), Events: m.body.Events, Districts: unionDistricts(events)}
	if len(m.body.Districts) == 1 {
		m.body.District = m.body.Districts[0]
	}
	return m
}

func single(e Event, appURL string) *message {
	m := &message{event: e.Kind, priority: 3, link: pageLink(appURL, e)}
	p := payload{ID: e.ID, Event: e.Kind, OccurredAt: e.At, Districts: e.districts}
	if len(e.districts) > 0 {
		p.District = e.districts[0]
	}
	var lines []string
	add := func(label, value string) {
		if value != "" {
			lines = append(lines, label+": "+oneLine(value, maxLine))
		}
	}
	switch {
	case e.Request != nil:
		r := e.Request
		p.Server, p.RequestID, p.Request = r.Server, r.ID, r
		switch e.Kind {
		case RequestWaiting:
			m.title = "Approval waiting on " + r.Server
			m.priority, m.tags = 4, []string{"hourglass"}
			if r.Risky {
				m.title = "Risky command waiting on " + r.Server
				m.priority, m.tags = 5, []string{"warning", "hourglass"}
			}
		case RequestDecided:
			m.title = map[string]string{"approved": "Approved", "denied": "Denied", "expired": "Expired unanswered"}[r.Decision] + " on " + r.Server
			if r.DecidedBy != "" {
				m.title += " by " + r.DecidedBy
			}
			m.tags = []string{map[bool]string{true: "white_check_mark", false: "no_entry_sign"}[r.Decision == "approved"]}
		case RequestFinished:
			m.title = strings.ReplaceAll(r.Status, "_", " ") + " on " + r.Server
			if r.ExitCode != nil {
				m.title += fmt.Sprintf(": exit %d", *r.ExitCode)
			}
			m.title = strings.ToUpper(m.title[:1]) + m.title[1:]
			m.tags = []string{map[bool]string{true: "heavy_check_mark", false: "x"}[r.Status == "completed" && r.ExitCode != nil && *r.ExitCode == 0]}
		}
		add("Command", r.Command)
		add("Reason", r.Reason)
		asker := r.Client
		if r.Token != "" {
			asker += " (token " + r.Token + ")"
		}
		add("Asked by", strings.TrimSpace(asker))
		if r.Risky {
			lines = append(lines, "Marked risky by the AI")
		}
		if e.Kind == RequestWaiting && !r.ExpiresAt.IsZero() {
			add("Denied unless decided by", r.ExpiresAt.UTC().Format("15:04:05 MST"))
		}
		add("Note", r.Note)
		if r.DurationMs > 0 {
			add("Took", (time.Duration(r.DurationMs) * time.Millisecond).Round(time.Millisecond).String())
		}
		add("Detail", r.Detail)
	case e.Incident != nil:
		in := e.Incident
		p.Incident, p.Server = in, ""
		if in.Kind == "server" {
			p.Server = in.Target
		}
		if e.Kind == IncidentOpened {
			m.title = fmt.Sprintf("Incident on %s: %s", in.Target, in.Reason)
			m.priority, m.tags = 4, []string{"rotating_light"}
		} else {
			m.title = fmt.Sprintf("Incident ended: %s", in.Target)
			if !in.EndedAt.IsZero() {
				m.title += " after " + in.EndedAt.Sub(in.StartedAt).Round(time.Second).String()
			}
			m.tags = []string{"white_check_mark"}
		}
		add("Root cause", in.Target+" ("+in.Kind+")")
		add("Reason", in.Reason)
		add("Since", in.StartedAt.UTC().Format(time.RFC3339))
		if len(in.Explains) > 0 {
			add(fmt.Sprintf("Explains %d", len(in.Explains)), list(in.Explains))
		}
		if in.AtRisk > 0 {
			add("At risk", fmt.Sprintf("%d healthy targets use it", in.AtRisk))
		}
	case e.Attack != nil:
		a := e.Attack
		p.Attack, p.Server = a, a.Server
		what := map[string]string{"ssh_brute_force": "SSH brute force", "ssh_login_after_failures": "SSH login after failures"}[a.Kind]
		if what == "" {
			what = a.Kind
		}
		m.title = fmt.Sprintf("%s on %s from %s (%d)", what, a.Server, a.Source, a.Count)
		m.priority, m.tags = 4, []string{"no_entry"}
		if a.Kind == "ssh_login_after_failures" {
			m.priority = 5
		}
		add("Users tried", list(a.Users))
		add("First seen", a.FirstSeen.UTC().Format(time.RFC3339))
		if a.Blocked {
			lines = append(lines, "Already blocked")
		}
		add("What to do", a.Advice)
	case e.Offline != nil:
		o := e.Offline
		p.Offline, p.Server = o, o.Server
		m.title = fmt.Sprintf("%s offline since %s", o.Server, o.LastSeen.UTC().Format("15:04 MST"))
		m.priority, m.tags = 4, []string{"electric_plug"}
		add("Last heard from", o.LastSeen.UTC().Format(time.RFC3339))
	}
	m.title = oneLine(m.title, maxTitle)
	if m.link != "" {
		lines = append(lines, m.link)
	}
	m.text = strings.Join(lines, "\n")
	p.Link, p.Title, p.Text = m.link, m.title, m.text
	m.body = p
	return m
}

// pageLink is where the app shows the event: the card of a request, a
// server's page, the incidents or the security page.
func pageLink(appURL string, e Event) string {
	if appURL == "" {
		return ""
	}
	switch {
	case e.Request != nil:
		return appURL + "#requests/" + url.PathEscape(e.Request.ID)
	case e.Incident != nil:
		return appURL + "#incidents"
	case e.Attack != nil:
		return appURL + "#security"
	case e.Offline != nil:
		return appURL + "#servers/" + url.PathEscape(e.Offline.Server)
	}
	return appURL
}

// list names the first few of names and counts the rest.
func list(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxListed)
}

// oneLine makes text from the fleet or the AI safe for a title or a line:
// no line breaks or control characters (which could forge header lines
// or further lines of a message), at most n runes.
func oneLine(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	count := 0
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			r = ' '
		}
		if count == n {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}

func unionDistricts(events []Event) []string {
	var out []string
	for _, e := range events {
		for _, d := range e.districts {
			if !contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ascii reports whether s is printable ASCII, as HTTP header values should be.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return utf8.ValidString(s)
}
