package link

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/agent/internal/cmdjournal"
	"github.com/gridcity/gridcity/agent/internal/runner"
)

// Commands runs the commands the coordinator dispatches (each approved by a
// person there) at most once each: every id is journaled before anything
// runs, and an id seen before is refused.
type Commands struct {
	journal *cmdjournal.Journal
	runAs   string
	askpass string
	logger  *slog.Logger
	// out is shared with the client's sessions; whichever is connected
	// drains it.
	out chan *gridcityv1.AgentMessage

	mu      sync.Mutex
	running map[string]context.CancelFunc
}

// NewCommands returns a command executor journaling in j. askpass is the
// agent binary, used as sudo's askpass helper.
func NewCommands(j *cmdjournal.Journal, runAs, askpass string, logger *slog.Logger) *Commands {
	return &Commands{journal: j, runAs: runAs, askpass: askpass, logger: logger,
		out: make(chan *gridcityv1.AgentMessage, 1024), running: map[string]context.CancelFunc{}}
}

// Run starts an approved command. Commands outlive the stream that carried
// them: their end is journaled and reported on whichever stream is up.
func (c *Commands) Run(ctx context.Context, m *gridcityv1.RunCommand) {
	id := m.GetRequestId()
	if m.GetRunAs() != c.runAs {
		// The approver saw another user on the card (this agent's config
		// changed since): run nothing they did not approve.
		c.send(&gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_REFUSED,
			Reason: "approved to run as " + m.GetRunAs() + ", but this agent runs commands as " + c.runAs}, true)
		return
	}
	if err := c.journal.Accept(id); err != nil {
		reason := err.Error()
		if errors.Is(err, cmdjournal.ErrSeen) {
			reason = "this agent has received this command before; it never runs one twice"
		}
		c.logger.Warn("command refused", "request", id, "reason", reason)
		c.send(&gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_REFUSED, Reason: reason}, true)
		return
	}
	c.send(&gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_ACCEPTED}, true)
	// Only a CancelCommand ends it early, not the end of a stream.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.mu.Lock()
	c.running[id] = cancel
	c.mu.Unlock()
	c.logger.Info("running an approved command", "request", id, "timeout_s", m.GetTimeoutSeconds())
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.running, id)
			c.mu.Unlock()
			cancel()
		}()
		spec := runner.Spec{
			ID: id, Command: m.GetCommand(), Timeout: time.Duration(m.GetTimeoutSeconds()) * time.Second, RunAs: c.runAs,
			SudoPassword: m.GetSudoPassword(), AskpassPath: c.askpass, Log: c.logger,
			OnStart: func(pid int) {
				if err := c.journal.Started(id, pid); err != nil {
					c.logger.Error("journal start", "request", id, "err", err)
				}
				c.send(&gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_STARTED, AtUnixMs: time.Now().UnixMilli()}, true)
			},
		}
		if len(m.GetStdinSecret()) > 0 {
			spec.Stdin = m.GetStdinSecret()
		}
		res := runner.Run(rctx, spec, func(ch runner.Chunk) {
			// Never block the command on the stream: a chunk that finds
			// no room is dropped; the journal keeps the head and tail.
			c.send(&gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_OUTPUT,
				Stream: gridcityv1.CommandEvent_Stream(ch.Stream), Offset: ch.Offset, Data: ch.Data}, false)
		})
		if err := c.journal.Finished(id, res, res.StdoutKept, res.StderrKept); err != nil {
			c.logger.Error("journal finish", "request", id, "err", err)
		}
		ev := exitEvent(id, res)
		c.logger.Info("command ended", "request", id, "exit", res.ExitCode, "timed_out", res.TimedOut, "reason", ev.GetReason())
		c.send(ev, true)
	}()
}

func exitEvent(id string, res runner.Result) *gridcityv1.CommandEvent {
	ev := &gridcityv1.CommandEvent{RequestId: id, Kind: gridcityv1.CommandEvent_KIND_EXITED, AtUnixMs: time.Now().UnixMilli(),
		ExitCode: int32(res.ExitCode), TimedOut: res.TimedOut, DurationMs: res.Duration.Milliseconds(),
		StdoutTotal: res.StdoutTotal, StderrTotal: res.StderrTotal}
	switch {
	case res.Err != nil:
		ev.Reason = res.Err.Error()
	case res.Canceled:
		ev.Reason = "canceled by the coordinator"
	}
	return ev
}

// Cancel ends a running command early.
func (c *Commands) Cancel(m *gridcityv1.CancelCommand) {
	c.mu.Lock()
	cancel := c.running[m.GetRequestId()]
	c.mu.Unlock()
	if cancel != nil {
		c.logger.Info("command canceled", "request", m.GetRequestId(), "reason", m.GetReason())
		cancel()
	}
}

// Forget drops journal entries the coordinator has recorded.
func (c *Commands) Forget(ids []string) {
	if err := c.journal.Forget(ids...); err != nil {
		c.logger.Error("journal forget", "err", err)
	}
}

// Journal is what a new stream's hello reports: for every command the
// coordinator has not acknowledged, the steps it took (accepted, then
// started if its process started, each with its time) and last its
// present state with the result the agent still holds, so that the
// coordinator can audit the steps it did not hear while it was away.
func (c *Commands) Journal() []*gridcityv1.CommandEvent {
	var out []*gridcityv1.CommandEvent
	for _, e := range c.journal.Unacked() {
		step := func(k gridcityv1.CommandEvent_Kind, at time.Time) {
			ev := &gridcityv1.CommandEvent{RequestId: e.ID, Kind: k}
			if !at.IsZero() {
				ev.AtUnixMs = at.UnixMilli()
			}
			out = append(out, ev)
		}
		step(gridcityv1.CommandEvent_KIND_ACCEPTED, e.AcceptedAt)
		if !e.StartedAt.IsZero() {
			step(gridcityv1.CommandEvent_KIND_STARTED, e.StartedAt)
		}
		ev := &gridcityv1.CommandEvent{RequestId: e.ID, Reason: e.Reason}
		switch e.State {
		case cmdjournal.Exited:
			ev.Kind, ev.ExitCode, ev.TimedOut, ev.DurationMs = gridcityv1.CommandEvent_KIND_EXITED, int32(e.ExitCode), e.TimedOut, e.DurationMs
			ev.StdoutTotal, ev.StderrTotal, ev.StdoutKept, ev.StderrKept = e.StdoutTotal, e.StderrTotal, e.StdoutKept, e.StderrKept
			ev.AtUnixMs = e.FinishedAt.UnixMilli()
		case cmdjournal.Unknown:
			ev.Kind = gridcityv1.CommandEvent_KIND_UNKNOWN
		default: // accepted or started: the steps above are its state
			continue
		}
		out = append(out, ev)
	}
	return out
}

// send queues an event for the connected stream. Control events wait a
// little for room; output chunks never wait.
func (c *Commands) send(ev *gridcityv1.CommandEvent, wait bool) {
	m := &gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_CommandEvent{CommandEvent: ev}}
	if !wait {
		select {
		case c.out <- m:
		default:
		}
		return
	}
	select {
	case c.out <- m:
	case <-time.After(2 * time.Second):
		c.logger.Warn("no stream to report a command event on; the journal keeps it", "request", ev.GetRequestId(), "kind", ev.GetKind().String())
	}
}
