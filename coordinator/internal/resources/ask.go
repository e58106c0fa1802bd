package resources

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gridcity/gridcity/lib/probe"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// On-demand probes across replicas. diagnose asks the agents of the
// servers that use a target to try it now. With several replicas, the
// agent's stream may be on another replica: this one then writes an ask
// to the store for that replica, which runs the probe through its stream
// and writes the answer back. Notifications (Notified) wake both sides at
// once; each also re-reads the store, so a lost notification only delays.

// AskStore is what asking another replica for a probe needs of the store.
type AskStore interface {
	AskProbe(ctx context.Context, a store.ProbeAsk) error
	ProbeAsks(ctx context.Context, replica string) ([]store.ProbeAsk, error)
	AnswerProbe(ctx context.Context, a store.ProbeAsk) error
	ProbeAnswer(ctx context.Context, id string) (store.ProbeAsk, error)
	ForgetProbeAsk(ctx context.Context, id string) error
}

// Timing and bounds of asks.
const (
	// askReread is how often an asker re-reads its ask while it waits,
	// and answerReread how often every replica looks for asks of its own,
	// in case a notification was lost.
	askReread    = 500 * time.Millisecond
	answerReread = 2 * time.Second
	// askLate is how long past its timeout an ask is still run: its
	// asker waits the timeout and 5 s for the way there and back.
	askLate = 5 * time.Second
	// maxAnswering bounds the asks a replica runs at once; the rest wait
	// for the next round.
	maxAnswering = 64
)

// asks is the state of both sides on one replica.
type asks struct {
	mu        sync.Mutex
	answers   map[string]chan struct{} // this replica's open asks, by id
	answering map[string]bool          // asks of this replica being run
	wake      chan struct{}            // an ask for this replica was written
}

func newAsks() *asks {
	return &asks{answers: map[string]chan struct{}{}, answering: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Notified takes a notification on store.ProbesChannel: an ask for this
// replica, an answer to one of its asks, or "" (the listener reconnected,
// and notifications may have been lost: everything is read again).
func (p *Prober) Notified(payload string) {
	s := p.sharedAsks()
	if s == nil {
		return
	}
	a := p.asks
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case payload == "" || payload == "ask:"+s.Replica:
		select {
		case a.wake <- struct{}{}:
		default:
		}
		if payload != "" {
			return
		}
		for _, w := range a.answers {
			signal(w)
		}
	default:
		if id, ok := strings.CutPrefix(payload, "answer:"); ok && a.answers[id] != nil {
			signal(a.answers[id])
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sharedAsks is the sharing config when asks go through the store; nil
// for a lone coordinator.
func (p *Prober) sharedAsks() *Shared {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shared == nil || p.shared.Asks == nil || p.shared.HeldBy == nil {
		return nil
	}
	return p.shared
}

// holder is the other replica holding server's stream, or "" when this
// replica holds it (or no replica does, or there are no replicas).
func (p *Prober) holder(server string) (*Shared, string) {
	s := p.sharedAsks()
	if s == nil {
		return nil, ""
	}
	if h := s.HeldBy(server); h != "" && h != s.Replica {
		return s, h
	}
	return nil, ""
}

func probeID() string {
	var b [8]byte
	rand.Read(b[:])
	return "now-" + hex.EncodeToString(b[:])
}

// askHolder asks replica holder, through the store, for a probe from
// server's agent and waits for its answer as long as a local one.
func (p *Prober) askHolder(ctx context.Context, s *Shared, holder, server, engine, target string, timeout time.Duration) (Check, error) {
	secs := max(timeout/time.Second, 1)
	ask := store.ProbeAsk{ID: probeID(), Server: server, Replica: holder, Engine: engine, Target: target, Timeout: secs * time.Second, AskedAt: p.now().UTC()}
	w := make(chan struct{}, 1)
	a := p.asks
	a.mu.Lock()
	a.answers[ask.ID] = w
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.answers, ask.ID)
		a.mu.Unlock()
		// Answered or not, the ask is done with; a failure here leaves it
		// to the next ask's clean-up (store.ProbeAsksKept).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		s.Asks.ForgetProbeAsk(fctx, ask.ID)
	}()
	via := "the coordinator holding its stream (replica " + holder + ")"
	if err := s.Asks.AskProbe(ctx, ask); err != nil {
		return Check{}, fmt.Errorf("%s could not be asked through the store: %w", via, err)
	}
	wait := time.NewTimer(ask.Timeout + askLate)
	defer wait.Stop()
	reread := time.NewTicker(askReread)
	defer reread.Stop()
	for {
		select {
		case <-w:
		case <-reread.C:
		case <-wait.C:
			return Check{}, fmt.Errorf("%w (asked through %s, which gave no answer: it may have stopped)", ErrNoAnswer, via)
		case <-ctx.Done():
			return Check{}, ctx.Err()
		}
		got, err := s.Asks.ProbeAnswer(ctx, ask.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return Check{}, fmt.Errorf("the ask to %s was lost from the store", via)
		case err != nil || !got.Answered:
			continue // the store is down for a moment, or no answer yet
		case got.Status == "unanswered":
			return Check{}, fmt.Errorf("asked through %s: %s", via, got.Reason)
		}
		return Check{From: server, Status: got.Status, Reason: got.Reason, Latency: got.Latency, CheckedAt: p.now().UTC(), Metrics: got.Metrics}, nil
	}
}

// answerLoop runs the asks other replicas write for this one until ctx
// ends: at each notification, and every answerReread in case one was lost.
func (p *Prober) answerLoop(ctx context.Context) {
	s := p.sharedAsks()
	if s == nil {
		return
	}
	t := time.NewTicker(answerReread)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		p.answerAsks(ctx, s, &wg)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.asks.wake:
		}
	}
}

// answerAsks starts a goroutine for each new ask of this replica, and
// forgets asks whose askers have given up.
func (p *Prober) answerAsks(ctx context.Context, s *Shared, wg *sync.WaitGroup) {
	list, err := s.Asks.ProbeAsks(ctx, s.Replica)
	if err != nil {
		return // the asker waits; the next round reads again
	}
	now := p.now()
	a := p.asks
	for _, ask := range list {
		a.mu.Lock()
		busy, full := a.answering[ask.ID], len(a.answering) >= maxAnswering
		if !busy && !full {
			a.answering[ask.ID] = true
		}
		a.mu.Unlock()
		switch {
		case busy:
			continue
		case now.Sub(ask.AskedAt) > ask.Timeout+askLate:
			s.Asks.ForgetProbeAsk(ctx, ask.ID) // its asker no longer waits
			a.mu.Lock()
			delete(a.answering, ask.ID)
			a.mu.Unlock()
			continue
		case full:
			return
		}
		wg.Go(func() {
			defer func() {
				a.mu.Lock()
				delete(a.answering, ask.ID)
				a.mu.Unlock()
			}()
			p.answer(ctx, s, ask)
		})
	}
}

// answer runs one ask through this replica's stream to the agent and
// writes the result.
func (p *Prober) answer(ctx context.Context, s *Shared, ask store.ProbeAsk) {
	pctx, cancel := context.WithTimeout(ctx, ask.Timeout+askLate)
	c, err := p.probeLocal(pctx, ask.Server, ask.Engine, ask.Target, ask.Timeout)
	cancel()
	if ctx.Err() != nil {
		return
	}
	ans := ask
	if err != nil {
		ans.Status, ans.Reason = "unanswered", probe.Clean(err.Error())
	} else {
		ans.Status, ans.Reason, ans.Latency, ans.Metrics = c.Status, c.Reason, c.Latency, c.Metrics
	}
	if err := s.Asks.AnswerProbe(ctx, ans); err != nil && !errors.Is(err, store.ErrNotFound) {
		p.logger.Warn("answer another replica's probe ask; it will say the agent gave no answer", "ask", ask.ID, "server", ask.Server, "err", err)
	}
}
