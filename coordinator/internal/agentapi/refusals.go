package agentapi

import (
	"fmt"
	"sync"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func validateHello(h *gridcityv1.Hello) error {
	for _, f := range []struct {
		name, v string
		max     int
	}{{"agent_version", h.GetAgentVersion(), 64}, {"run_as", h.GetRunAs(), 64}, {"district", h.GetDistrict(), 128}} {
		if len(f.v) > f.max {
			return fmt.Errorf("%s is %d bytes; at most %d", f.name, len(f.v), f.max)
		}
	}
	if len(h.GetCapabilities()) > 32 {
		return fmt.Errorf("%d capabilities; at most 32", len(h.GetCapabilities()))
	}
	return nil
}

// refusalLogEvery is how often a server's refusals are logged: an agent that
// keeps sending a bad value reconnects with its backoff and is refused each
// time; one line a minute says so.
const refusalLogEvery = time.Minute

// refusals rate-limits the log of refused messages, per server.
type refusals struct {
	mu   sync.Mutex
	last map[string]refusalMark
}

type refusalMark struct {
	at    time.Time
	quiet int // refused since the last line
}

// due reports whether a refusal of name at now is to be logged, and how
// many went unlogged before it.
func (r *refusals) due(name string, now time.Time) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]refusalMark{}
	}
	m, seen := r.last[name]
	if seen && now.Sub(m.at) < refusalLogEvery {
		m.quiet++
		r.last[name] = m
		return 0, false
	}
	r.last[name] = refusalMark{at: now}
	return m.quiet, true
}
