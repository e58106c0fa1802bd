package command

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// stream collects one output stream of a running command from the agent's
// chunks: the head for the result, up to AuditBytes for the audit, and the
// newest TailBytes. The agent forwards the first AuditBytes and then only
// its tail, so offsets may jump; only contiguous bytes extend the audit copy.
type stream struct {
	audit []byte // contiguous from offset 0, at most AuditBytes
	tail  []byte // the newest bytes seen, at most TailBytes
	total uint64
}

func (st *stream) add(off uint64, data []byte) {
	if off == uint64(len(st.audit)) && len(st.audit) < AuditBytes {
		n := min(len(data), AuditBytes-len(st.audit))
		st.audit = append(st.audit, data[:n]...)
	}
	st.tail = append(st.tail, data...)
	if len(st.tail) > TailBytes {
		st.tail = append([]byte(nil), st.tail[len(st.tail)-TailBytes:]...)
	}
	st.total = max(st.total, off+uint64(len(data)))
}

// result trims the stream for the AI: whole when it fits in head + tail,
// else the first HeadBytes and the last TailBytes with the count between.
func (st *stream) result(total uint64) Output {
	total = max(total, st.total)
	if total <= HeadBytes+TailBytes && uint64(len(st.audit)) == total {
		return Output{Text: text(st.audit)}
	}
	head := st.audit[:min(len(st.audit), HeadBytes)]
	tail := st.tail
	if uint64(len(head)+len(tail)) > total { // overlap when little was left out
		tail = tail[uint64(len(head)+len(tail))-total:]
	}
	omitted := int64(total) - int64(len(head)) - int64(len(tail))
	return Output{Text: text(head) + fmt.Sprintf("\n[… %d bytes left out …]\n", omitted) + text(tail), Omitted: omitted}
}

// kept is what the audit keeps of the stream: whole up to AuditBytes.
func (st *stream) kept(total uint64) string {
	total = max(total, st.total)
	if uint64(len(st.audit)) >= total {
		return text(st.audit)
	}
	return text(st.audit) + fmt.Sprintf("\n[… %d more bytes not kept …]\n", total-uint64(len(st.audit)))
}

func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

type outputs struct {
	stdout, stderr stream
}

// HandleEvent applies a command event from the agent on server. An error
// means the step could not be recorded: the agent must keep it and report
// it again, so it is not acknowledged.
func (s *Service) HandleEvent(ctx context.Context, server string, ev *gridcityv1.CommandEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reportable(ctx, server, ev)
	if !ok {
		return nil
	}
	return s.apply(ctx, r, ev, nil)
}

// reportable loads the request ev reports on, if the agent on server may
// report on it now: only what was sent to it and has not ended. Called
// with s.mu held.
func (s *Service) reportable(ctx context.Context, server string, ev *gridcityv1.CommandEvent) (Request, bool) {
	r, err := s.Get(ctx, ev.GetRequestId())
	if err != nil || r.Server != server {
		s.logger.Warn("command event for a request this coordinator does not know on that server", "server", server, "request", ev.GetRequestId(), "kind", ev.GetKind().String())
		return r, false
	}
	if r.Status != StatusDispatched && r.Status != StatusRunning {
		// Only what was sent can be reported on; anything else is a late
		// event (after a reconnect) or an agent speaking out of turn.
		if !r.Status.Terminal() {
			s.logger.Warn("command event for a request that was not dispatched; ignored", "server", server, "request", r.ID, "status", r.Status, "kind", ev.GetKind().String())
		}
		return r, false
	}
	return r, true
}

// apply records ev for r. missed are steps the agent's journal reports
// and the audit lacks (see Reconnected); they are committed with the
// change ev makes, or alone when it makes none. Called with s.mu held.
func (s *Service) apply(ctx context.Context, r Request, ev *gridcityv1.CommandEvent, missed []step) error {
	out := s.outputs[r.ID]
	if out == nil {
		out = &outputs{}
		s.outputs[r.ID] = out
	}
	actor := "agent:" + r.Server
	switch ev.GetKind() {
	case gridcityv1.CommandEvent_KIND_ACCEPTED:
		if len(missed) > 0 {
			return s.commit(ctx, r.Status, r, missed...)
		}
		return s.audit(ctx, r.ID, step{name: "accepted", actor: actor})
	case gridcityv1.CommandEvent_KIND_STARTED:
		if r.Status == StatusRunning { // reported again after a reconnect
			if len(missed) > 0 {
				return s.commit(ctx, r.Status, r, missed...)
			}
			return nil
		}
		// The coordinator's clock, not the agent's, times the sweep.
		from := r.Status
		r.Status, r.StartedAt = StatusRunning, s.cfg.Now().UTC()
		steps := missed
		if !slices.ContainsFunc(steps, func(st step) bool { return st.name == "started" }) {
			steps = append(steps, step{name: "started", actor: actor})
		}
		if err := s.commit(ctx, from, r, steps...); err != nil {
			return err
		}
		s.publish(EventUpdated, r)
	case gridcityv1.CommandEvent_KIND_OUTPUT:
		if ev.GetStream() == gridcityv1.CommandEvent_STREAM_STDERR {
			out.stderr.add(ev.GetOffset(), ev.GetData())
		} else {
			out.stdout.add(ev.GetOffset(), ev.GetData())
		}
	case gridcityv1.CommandEvent_KIND_EXITED:
		if len(ev.GetStdoutKept()) > 0 || len(ev.GetStderrKept()) > 0 {
			// A result from the agent's journal: its trimmed output.
			out = &outputs{}
			out.stdout.add(0, ev.GetStdoutKept())
			out.stderr.add(0, ev.GetStderrKept())
		}
		return s.finish(ctx, r, ev, out, missed)
	case gridcityv1.CommandEvent_KIND_REFUSED:
		if r.Status == StatusRunning {
			// A refusal of a repeat cannot undo the run in progress.
			s.logger.Warn("agent refused a request it is running; ignored", "server", r.Server, "request", r.ID, "reason", ev.GetReason())
			return nil
		}
		delete(s.outputs, r.ID)
		s.fail(ctx, r, "the agent refused it: "+ev.GetReason(), missed...)
	case gridcityv1.CommandEvent_KIND_UNKNOWN:
		s.finishUnknown(ctx, r, ev.GetReason(), missed...)
	}
	return nil
}

func (s *Service) finish(ctx context.Context, r Request, ev *gridcityv1.CommandEvent, out *outputs, missed []step) error {
	from := r.Status
	code := int(ev.GetExitCode())
	r.ExitCode = &code
	r.FinishedAt = s.cfg.Now().UTC()
	if at, ok := s.agentTime(r, ev.GetAtUnixMs()); ok {
		r.FinishedAt = at
	}
	r.DurationMs = ev.GetDurationMs()
	r.Stdout = out.stdout.result(ev.GetStdoutTotal())
	r.Stderr = out.stderr.result(ev.GetStderrTotal())
	r.Status = StatusCompleted
	if ev.GetTimedOut() {
		r.Status = StatusTimedOut
		r.Detail = fmt.Sprintf("killed with its whole process group after %d s", r.TimeoutSeconds)
	}
	if ev.GetReason() != "" {
		r.Status, r.Detail = StatusFailed, ev.GetReason()
	}
	finished := step{name: "finished", actor: "agent:" + r.Server, detail: map[string]any{
		"status": r.Status, "exitCode": code, "durationMs": r.DurationMs, "detail": r.Detail,
		"stdout": out.stdout.kept(ev.GetStdoutTotal()), "stderr": out.stderr.kept(ev.GetStderrTotal()),
	}}
	if err := s.commit(ctx, from, r, append(missed, finished)...); err != nil {
		return err // not acknowledged: the agent reports it again from its journal
	}
	delete(s.outputs, r.ID)
	s.publish(EventFinished, r)
	return nil
}

// ClockSkew is how far an agent's clock may be off the coordinator's for
// the times it reports to be taken as they are.
const ClockSkew = time.Minute

// agentTime is a time the agent reports for r, if it is plausible: after
// r was dispatched and not after now, each give or take ClockSkew.
func (s *Service) agentTime(r Request, ms int64) (time.Time, bool) {
	if ms <= 0 || r.DispatchedAt.IsZero() {
		return time.Time{}, false
	}
	at := time.UnixMilli(ms).UTC()
	if at.Before(r.DispatchedAt.Add(-ClockSkew)) || at.After(s.cfg.Now().Add(ClockSkew)) {
		return time.Time{}, false
	}
	return at, true
}

// journalStep is an audit row for a step the agent's journal reports (it
// accepted or started the command) while the coordinator was not there
// to hear it, at the agent's time when that is plausible, else now with
// the time reported kept in the detail.
func (s *Service) journalStep(r Request, name string, ms int64) step {
	st := step{name: name, actor: "agent:" + r.Server, detail: map[string]any{"fromJournal": true}}
	if at, ok := s.agentTime(r, ms); ok {
		st.at = at
	} else {
		st.detail = map[string]any{"fromJournal": true, "reportedAtUnixMs": ms, "timeNote": "the agent's time is missing or implausible; recorded at the coordinator's"}
	}
	return st
}

// Reconnected settles the commands dispatched to server with what its
// agent reports after a (re)connect, and returns the request ids the agent
// may forget. A dispatched command the agent does not know never reached
// it: it failed, and is not sent again.
//
// The journal holds, for each command, the steps the agent took in order
// (accepted, started, with their times) ending with its present state.
// Steps the audit lacks (the coordinator was down or the stream broke
// when they happened) are recorded with the change the last one makes.
//
// helloAt is when the agent's hello arrived: a command dispatched after
// that went to the new stream (or the dying old one) and is not judged by
// this journal.
func (s *Service) Reconnected(ctx context.Context, server string, helloAt time.Time, journal []*gridcityv1.CommandEvent) []string {
	byID := map[string][]*gridcityv1.CommandEvent{}
	var ids []string
	for _, ev := range journal {
		id := ev.GetRequestId()
		if byID[id] == nil {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], ev)
	}
	var forget []string
	for _, id := range ids {
		evs := byID[id]
		if err := s.fromJournal(ctx, server, evs); err != nil {
			s.logger.Error("record a command's steps from the agent's journal; it will be reported again", "request", id, "err", err)
			continue
		}
		switch evs[len(evs)-1].GetKind() {
		case gridcityv1.CommandEvent_KIND_EXITED, gridcityv1.CommandEvent_KIND_UNKNOWN, gridcityv1.CommandEvent_KIND_REFUSED:
			if r, err := s.Get(ctx, id); err != nil || r.Status.Terminal() {
				forget = append(forget, id)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.list(ctx, 10000, string(StatusDispatched), string(StatusRunning))
	if err != nil {
		s.logger.Error("list dispatched requests", "err", err)
		return forget
	}
	for _, r := range rs {
		if r.Server != server || byID[r.ID] != nil || !r.DispatchedAt.Before(helloAt) {
			continue
		}
		if r.Status == StatusRunning {
			s.finishUnknown(ctx, r, "the agent came back without this command in its journal; it started, and its end is unknown")
			continue
		}
		delete(s.outputs, r.ID)
		s.fail(ctx, r, "the agent never received it (it reconnected without it in its journal); it did not run and is not sent again; ask again")
	}
	return forget
}

// fromJournal applies what the journal reports of one command: its last
// event is its state, and the accepted and started events before it are
// steps the audit may lack.
func (s *Service) fromJournal(ctx context.Context, server string, evs []*gridcityv1.CommandEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := evs[len(evs)-1]
	r, ok := s.reportable(ctx, server, last)
	if !ok {
		return nil
	}
	entries, err := s.store.Audit(ctx, r.ID, 1000)
	if err != nil {
		return err
	}
	audited := map[string]bool{}
	for _, e := range entries {
		audited[e.Step] = true
	}
	var missed []step
	for _, ev := range evs {
		name := ""
		switch ev.GetKind() {
		case gridcityv1.CommandEvent_KIND_ACCEPTED:
			name = "accepted"
		case gridcityv1.CommandEvent_KIND_STARTED:
			if last.GetKind() != gridcityv1.CommandEvent_KIND_ACCEPTED { // not started if it is only accepted
				name = "started"
			}
		}
		if name != "" && !audited[name] {
			audited[name] = true
			missed = append(missed, s.journalStep(r, name, ev.GetAtUnixMs()))
		}
	}
	return s.apply(ctx, r, last, missed)
}
