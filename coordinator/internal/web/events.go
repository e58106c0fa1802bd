package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// maxStreamsPerSession bounds the event streams one login may hold open
// (a tab each), so a runaway page cannot pin the coordinator's memory.
const maxStreamsPerSession = 8

// streams knows each session's open event streams, so that logging out
// ends them at once rather than at their next heartbeat.
type streams struct {
	mu        sync.Mutex
	bySession map[string]map[chan struct{}]struct{}
	// why holds, for a closed done channel, why its session ended.
	why map[chan struct{}]string
}

func newStreams() *streams {
	return &streams{bySession: map[string]map[chan struct{}]struct{}{}, why: map[chan struct{}]string{}}
}

// reason returns why a closed done channel's session ended.
func (s *streams) reason(done chan struct{}) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.why[done]; r != "" {
		return r
	}
	return "logged out"
}

// add registers a stream; done is closed when the session ends. ok is
// false when the session already has too many streams.
func (s *streams) add(session []byte) (done chan struct{}, remove func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(session)
	set := s.bySession[key]
	if len(set) >= maxStreamsPerSession {
		return nil, nil, false
	}
	if set == nil {
		set = map[chan struct{}]struct{}{}
		s.bySession[key] = set
	}
	done = make(chan struct{})
	set[done] = struct{}{}
	return done, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.why, done)
		if _, open := set[done]; open {
			delete(set, done)
			if len(set) == 0 {
				delete(s.bySession, key)
			}
		}
	}, true
}

// end closes every stream of a session, telling each page why.
func (s *streams) end(session []byte, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := string(session)
	for done := range s.bySession[key] {
		s.why[done] = reason
		close(done)
	}
	delete(s.bySession, key)
}

// snapshot is the first event of every stream: the pending requests as they
// are now, so that a page that (re)connects starts from the truth without a
// window between listing and subscribing. Now lets the page correct its
// countdowns for a clock that differs from the coordinator's.
type snapshot struct {
	Now      time.Time     `json:"now"`
	Requests []requestView `json:"requests"`
}

// events serves the live list as server-sent events: "pending" (snapshot),
// then "created", "decided", "updated" and "finished" with the request,
// "fleet" when the map may have changed, and "end" when the session ends. Comments every heartbeat keep it open.
func (a *app) events(w http.ResponseWriter, r *http.Request, se store.Session) {
	done, remove, ok := a.streams.add(se.Hash)
	if !ok {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("this login already has %d live streams open; close some of the app's tabs", maxStreamsPerSession))
		return
	}
	defer remove()
	// Subscribe before listing: an event in between arrives twice at
	// worst, which the page handles, instead of not at all.
	ch, unsubscribe := a.svc.Subscribe()
	defer unsubscribe()
	var version string
	if a.cfg.Views != nil {
		version = a.cfg.Views.Version()
	}
	pending, err := a.svc.Pending(r.Context())
	if err != nil {
		a.serviceError(w, r, "listing pending requests", err)
		return
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	w.WriteHeader(http.StatusOK)

	// send writes one event (or a comment when name is "") and flushes it.
	// A write deadline drops a client that stopped reading.
	send := func(name string, v any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(2*a.cfg.heartbeat + 10*time.Second)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		var err error
		if name == "" {
			_, err = fmt.Fprint(w, ": ping\n\n")
		} else {
			data, merr := json.Marshal(v)
			if merr != nil {
				a.log.Error("encoding an app event failed", "event", name, "err", merr)
				return false
			}
			// json.Marshal escapes newlines, so the data is one line.
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		}
		if err == nil {
			err = rc.Flush()
		}
		return err == nil
	}
	end := func(reason string) { send("end", map[string]string{"reason": reason}) }

	// A page that lost its stream retries after 3 s on its own; the page
	// adds its own backoff on top when retries keep failing.
	if _, err := fmt.Fprint(w, "retry: 3000\n\n"); err != nil {
		return
	}
	for _, req := range pending {
		a.svc.MarkShown(r.Context(), req.ID, se.Approver)
	}
	if !send("pending", snapshot{Now: a.cfg.Now(), Requests: viewsOf(pending)}) {
		return
	}

	beat := time.NewTicker(a.cfg.heartbeat)
	defer beat.Stop()
	// The fleet's pages follow the fleet: "fleet" tells them that what the
	// map draws may have changed (a server came or went, a resource's
	// status moved), and they read /api/fleet again. The version was read
	// before the stream opened, so a change since is told.
	var fleetTick <-chan time.Time
	if a.cfg.Views != nil {
		t := time.NewTicker(a.cfg.fleetEvery)
		defer t.Stop()
		fleetTick = t.C
	}
	expiry := time.NewTimer(se.ExpiresAt.Sub(a.cfg.Now()))
	defer expiry.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-done:
			end(a.streams.reason(done))
			return
		case <-expiry.C:
			end("the session expired; log in again")
			return
		case <-beat.C:
			// The session may have been ended elsewhere (a password change
			// ends them all) or expired on an injected clock.
			if _, code, msg := a.session(r); code != 0 {
				end(msg)
				return
			}
			if !send("", nil) {
				return
			}
		case <-fleetTick:
			if v := a.cfg.Views.Version(); v != version {
				version = v
				if !send("fleet", map[string]string{"version": v}) {
					return
				}
			}
		case ev, open := <-ch:
			if !open {
				// The service dropped this subscriber (it fell behind or is
				// shutting down); the page reconnects and gets a snapshot.
				return
			}
			if ev.Kind == command.EventCreated {
				a.svc.MarkShown(r.Context(), ev.Request.ID, se.Approver)
			}
			if !send(string(ev.Kind), viewOf(ev.Request)) {
				return
			}
		}
	}
}
