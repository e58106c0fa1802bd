package notify

import (
	"fmt"
	"slices"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/security"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// recordingHub is a hub whose one notifier is never run: what was emitted
// stays in its queue for the test to read.
func recordingHub(t *testing.T) *Hub {
	t.Helper()
	h, err := New([]config.Notifier{{Name: "rec", Kind: "webhook", URL: "http://127.0.0.1:1/", SecretFile: keyFile(t, "k"), Queue: 1000}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// take empties a notifier's queue.
func take(n *notifier) []Event {
	var out []Event
	for e, ok := n.pop(); ok; e, ok = n.pop() {
		out = append(out, e)
	}
	return out
}

func emitted(h *Hub) []string {
	var out []string
	for _, e := range take(h.notifiers[0]) {
		out = append(out, e.Kind+" "+e.subject())
	}
	return out
}

// The watcher tells of an incident only once it has outlasted the grace,
// of its end only if it told of its start, and nothing while another
// replica leads; a replica that starts leading takes what was already
// past the grace as told, and tells its end.
func TestWatcherIncidents(t *testing.T) {
	h := recordingHub(t)
	var open []store.Incident
	leads := true
	w := &watcher{src: Sources{Incidents: func() []store.Incident { return open }, Leads: func() bool { return leads }, Grace: 20 * time.Second,
		AtRisk: func(string) int { return 4 }}}
	now := t0
	step := func(d time.Duration) []string { now = now.Add(d); w.look(h, now); return emitted(h) }
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: emitted %q; want %q", what, got, want)
		}
	}

	check("nothing open", step(0))
	flap := store.Incident{ID: 1, Target: "db", Kind: "database", Reason: "refused", StartedAt: now}
	open = []store.Incident{flap}
	check("just opened", step(2*time.Second))
	check("within the grace", step(15*time.Second))
	open = nil
	check("recovered within the grace: never told", step(2*time.Second))

	in := store.Incident{ID: 2, Target: "db", Kind: "database", Reason: "refused", StartedAt: now, Explains: []string{"api"}}
	open = []store.Incident{in}
	check("opened", step(2*time.Second))
	check("past the grace", step(21*time.Second), "incident.opened db")
	check("told once", step(2*time.Second))
	open = nil
	check("ended", step(2*time.Second), "incident.ended db")

	// Another replica leads: nothing; then this one takes over with one
	// old incident (told by the other) and one fresh.
	leads = false
	old := store.Incident{ID: 3, Target: "cache", Kind: "database", StartedAt: now.Add(-time.Hour)}
	open = []store.Incident{old}
	check("following", step(30*time.Second))
	fresh := store.Incident{ID: 4, Target: "queue", Kind: "database", StartedAt: now}
	open = append(open, fresh)
	leads = true
	check("takes over", step(2*time.Second))
	check("the fresh one past the grace", step(21*time.Second), "incident.opened queue")
	open = nil
	got := step(2 * time.Second)
	slices.Sort(got)
	check("both end", got, "incident.ended cache", "incident.ended queue")
}

func TestWatcherOffline(t *testing.T) {
	h := recordingHub(t)
	now := t0
	servers := []fleet.Server{
		{Name: "web-1", Online: true, LastSeen: now},
		{Name: "gone-long", LastSeen: now.Add(-time.Hour)},                                   // offline before this replica started
		{Name: "restarting", LastSeen: now.Add(-time.Hour), Reconnecting: true},              // startup grace: not offline
		{Name: "retired", LastSeen: now.Add(-time.Hour), RevokedAt: now.Add(-2 * time.Hour)}, // gone on purpose
	}
	w := &watcher{src: Sources{Servers: func() []fleet.Server { return servers }, Grace: 20 * time.Second}}
	step := func(d time.Duration) []string { now = now.Add(d); w.look(h, now); return emitted(h) }
	if got := step(0); len(got) != 0 {
		t.Fatalf("first look emitted %v; want nothing (what was offline before is not news)", got)
	}
	servers[0] = fleet.Server{Name: "web-1", LastSeen: now}
	if got := step(10 * time.Second); len(got) != 0 {
		t.Fatalf("within the grace: %v", got)
	}
	servers[0].Online = true // back within the grace
	step(5 * time.Second)
	servers[0] = fleet.Server{Name: "web-1", LastSeen: now}
	step(time.Second)
	if got := step(25 * time.Second); !slices.Equal(got, []string{"agent.offline web-1"}) {
		t.Fatalf("past the grace: %v; want web-1 offline", got)
	}
	if got := step(25 * time.Second); len(got) != 0 {
		t.Fatalf("told again: %v", got)
	}
	// The startup grace ends: the server that never came back is news.
	servers[2].Reconnecting = false
	if got := step(2 * time.Second); !slices.Equal(got, []string{"agent.offline restarting"}) {
		t.Fatalf("after the startup grace: %v", got)
	}
}

// A server gone offline opens an incident on itself at once: both are
// told at the same look, the incident first, so that a notifier that
// wants both tells the incident and keeps the offline quiet.
func TestWatcherOfflineServerAndItsIncidentAtOneLook(t *testing.T) {
	h := recordingHub(t)
	now := t0
	servers := []fleet.Server{{Name: "web-1", Online: true, LastSeen: now}}
	var open []store.Incident
	w := &watcher{src: Sources{Servers: func() []fleet.Server { return servers }, Incidents: func() []store.Incident { return open }, Grace: 20 * time.Second}}
	w.look(h, now)
	lastSeen := now.Add(time.Second)
	servers[0] = fleet.Server{Name: "web-1", LastSeen: lastSeen}
	var got []string
	for i := range 15 {
		now = now.Add(2 * time.Second)
		if i == 2 { // the tracker opens the incident a few seconds later, starting when the server was last heard from
			open = []store.Incident{{ID: 9, Target: "web-1", Kind: "server", Reason: "agent offline", StartedAt: lastSeen}}
		}
		w.look(h, now)
		if e := emitted(h); len(e) > 0 {
			got = append(got, fmt.Sprintf("%s: %v", now.Sub(lastSeen), e))
		}
	}
	if want := []string{"21s: [incident.opened web-1 agent.offline web-1]"}; !slices.Equal(got, want) {
		t.Fatalf("emitted %q; want %q", got, want)
	}
}

func TestWatcherAttacks(t *testing.T) {
	h := recordingHub(t)
	now := t0
	state := func(sources ...*gridcityv1.AuthSource) *gridcityv1.StateUpdate {
		return &gridcityv1.StateUpdate{Logins: &gridcityv1.Logins{Sources: sources}}
	}
	src := func(addr string, failures uint32) *gridcityv1.AuthSource {
		return &gridcityv1.AuthSource{Address: addr, Failures: failures, Users: []string{"root"}, FirstSeenUnix: t0.Add(-time.Minute).Unix(), LastSeenUnix: now.Unix()}
	}
	servers := []fleet.Server{{Name: "web-1", Online: true, State: state(src("198.51.100.1", 50))}}
	w := &watcher{src: Sources{Servers: func() []fleet.Server { return servers }, Attacks: security.DefaultOptions(), Grace: 20 * time.Second}}
	w.look(h, now)
	if got := emitted(h); len(got) != 0 {
		t.Fatalf("first look: %v; want the open attack taken as told", got)
	}
	servers[0].State = state(src("198.51.100.1", 60), src("203.0.113.7", 9), src("192.0.2.1", 2))
	now = now.Add(2 * time.Second)
	w.look(h, now)
	w.look(h, now.Add(time.Second))
	if got := emitted(h); !slices.Equal(got, []string{"attack.opened web-1"}) {
		t.Fatalf("emitted %v; want the new source once (two failures is no attack)", got)
	}
}

// Request maps the command service's changes to the contract's events,
// and takes only the fields a message may carry.
func TestRequestEvents(t *testing.T) {
	h := recordingHub(t)
	code := 1
	r := command.Request{ID: "r1", Server: "web-1", Command: "ls", Reason: "look", Client: "cursor", Token: "t", Risky: true, Status: command.StatusPending,
		Stdout: command.Output{Text: "OUT"}, Stderr: command.Output{Text: "ERR"}, ExitCode: &code}
	for _, c := range []struct {
		kind   command.EventKind
		status command.Status
		by     string
	}{
		{command.EventCreated, command.StatusPending, ""},
		{command.EventUpdated, command.StatusDispatched, "alice"},
		{command.EventDecided, command.StatusApproved, "alice"},
		{command.EventFinished, command.StatusDenied, "alice"},
		{command.EventFinished, command.StatusDenied, ""},
		{command.EventFinished, command.StatusCompleted, "alice"},
	} {
		r.Status, r.DecidedBy = c.status, c.by
		h.Request(c.kind, r)
	}
	var got []string
	for _, e := range take(h.notifiers[0]) {
		got = append(got, fmt.Sprintf("%s/%s/%s", e.Kind, e.Request.Status, e.Request.Decision))
		if e.Kind != RequestFinished && e.Request.ExitCode != nil {
			t.Errorf("%s carries an exit code", e.Kind)
		}
	}
	want := []string{"request.waiting/pending/", "request.decided/approved/approved", "request.decided/denied/denied", "request.decided/denied/expired", "request.finished/completed/"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v; want %v", got, want)
	}
}
