package replicas

import (
	"sync"
	"time"
)

// Liveness says from which heartbeat on a replica counts live, as seen by
// one replica that reads the heartbeats from the store. Normally that is
// the last For (three heartbeat intervals). While the store cannot be
// reached no replica can beat, so when it answers again every heartbeat
// in it is as old as the outage: a replica that was live when the outage
// began then counts live until it has had For to beat again, rather than
// every replica, this one included, reading as dead for a moment and its
// servers as offline. A replica that died during the outage is known dead
// For after the store is back.
type Liveness struct {
	For time.Duration

	mu sync.Mutex
	// lastRead is the last time the store answered; down says it has
	// failed since; after an outage, the grace lasts until graceUntil
	// for the replicas live at graceFrom.
	lastRead              time.Time
	down                  bool
	graceFrom, graceUntil time.Time
}

// NewLiveness counts a replica live for d after its last heartbeat.
func NewLiveness(d time.Duration) *Liveness { return &Liveness{For: d} }

// Since is the oldest heartbeat that counts live at now.
func (l *Liveness) Since(now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := now
	switch {
	case l.down && !l.lastRead.IsZero():
		from = l.lastRead
	case now.Before(l.graceUntil):
		from = l.graceFrom
	}
	if from.After(now) {
		from = now
	}
	return from.Add(-l.For)
}

// Read records whether the store answered a read at now.
func (l *Liveness) Read(now time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ok {
		l.down = true
		return
	}
	if l.down {
		l.down, l.graceFrom, l.graceUntil = false, l.lastRead, now.Add(l.For)
	}
	l.lastRead = now
}
