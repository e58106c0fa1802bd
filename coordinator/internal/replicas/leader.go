package replicas

import (
	"log/slog"
	"sync"
)

// Leader says whether this replica does the fleet's judgement: probing
// from the coordinator, opening and ending incidents, forgetting old
// metric history. Replicas sharing a PostgreSQL store elect one (see
// store.Postgres.Lead); a lone coordinator always leads. The others follow:
// they read the incidents the leader records, and the checks every
// replica's agents make, from the store. A lone coordinator has none.
type Leader struct {
	logger *slog.Logger

	mu      sync.Mutex
	leading bool
	changed chan struct{} // closed and replaced at every change
}

// NewLeader returns a leader that does not lead until Set(true).
func NewLeader(logger *slog.Logger) *Leader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Leader{logger: logger, changed: make(chan struct{})}
}

// Set records whether this replica leads now (the election's callback).
func (l *Leader) Set(leading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leading == leading {
		return
	}
	l.leading = leading
	close(l.changed)
	l.changed = make(chan struct{})
	if leading {
		l.logger.Info("this replica leads: it probes from the coordinator and records incidents for the fleet")
	} else {
		l.logger.Info("this replica follows: another replica probes from the coordinator and records incidents")
	}
}

// Leads says whether this replica leads now.
func (l *Leader) Leads() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// Changed returns a channel that is closed at the next change.
func (l *Leader) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}
