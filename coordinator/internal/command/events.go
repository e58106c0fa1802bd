package command

import (
	"context"
	"fmt"
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
	r, err := s.Get(ctx, ev.GetRequestId())
	if err != nil || r.Server != server {
		s.logger.Warn("command event for a request this coordinator does not know on that server", "server", server, "request", ev.GetRequestId(), "kind", ev.GetKind().String())
		return nil
	}
	if r.Status != StatusDispatched && r.Status != StatusRunning {
		// Only what was sent can be reported on; anything else is a late
		// event (after a reconnect) or an agent speaking out of turn.
		if !r.Status.Terminal() {
			s.logger.Warn("command event for a request that was not dispatched; ignored", "server", server, "request", r.ID, "status", r.Status, "kind", ev.GetKind().String())
		}
		return nil
	}
	out := s.outputs[r.ID]
	if out == nil {
		out = &outputs{}
		s.outputs[r.ID] = out
	}
	actor := "agent:" + server
	switch ev.GetKind() {
	case gridcityv1.CommandEvent_KIND_ACCEPTED:
		return s.audit(ctx, r.ID, "accepted", actor, nil)
	case gridcityv1.CommandEvent_KIND_STARTED:
		if r.Status == StatusRunning {
			return nil // reported again after a reconnect
		}
		// The coordinator's clock, not the agent's, times the sweep.
		r.Status, r.StartedAt = StatusRunning, s.cfg.Now().UTC()
		if err := s.audit(ctx, r.ID, "started", actor, nil); err != nil {
			return err
		}
		if err := s.save(ctx, r); err != nil {
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
		return s.finish(ctx, r, ev, out)
	case gridcityv1.CommandEvent_KIND_REFUSED:
		if r.Status == StatusRunning {
			// A refusal of a repeat cannot undo the run in progress.
			s.logger.Warn("agent refused a request it is running; ignored", "server", server, "request", r.ID, "reason", ev.GetReason())
			return nil
		}
		delete(s.outputs, r.ID)
		s.fail(ctx, r, "the agent refused it: "+ev.GetReason())
	case gridcityv1.CommandEvent_KIND_UNKNOWN:
		s.finishUnknown(ctx, r, ev.GetReason())
	}
	return nil
}

func (s *Service) finish(ctx context.Context, r Request, ev *gridcityv1.CommandEvent, out *outputs) error {
	code := int(ev.GetExitCode())
	r.ExitCode = &code
	r.FinishedAt = atOr(ev.GetAtUnixMs(), s.cfg.Now())
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
	if err := s.audit(ctx, r.ID, "finished", "agent:"+r.Server, map[string]any{
		"status": r.Status, "exitCode": code, "durationMs": r.DurationMs, "detail": r.Detail,
		"stdout": out.stdout.kept(ev.GetStdoutTotal()), "stderr": out.stderr.kept(ev.GetStderrTotal()),
	}); err != nil {
		return err // not acknowledged: the agent reports it again from its journal
	}
	if err := s.save(ctx, r); err != nil {
		return err
	}
	delete(s.outputs, r.ID)
	s.publish(EventFinished, r)
	return nil
}

// Reconnected settles the commands dispatched to server with what its
// agent reports after a (re)connect, and returns the request ids the agent
// may forget. A dispatched command the agent does not know never reached
// it: it failed, and is not sent again.
//
// helloAt is when the agent's hello arrived: a command dispatched after
// that went to the new stream (or the dying old one) and is not judged by
// this journal.
func (s *Service) Reconnected(ctx context.Context, server string, helloAt time.Time, journal []*gridcityv1.CommandEvent) []string {
	reported := map[string]bool{}
	var forget []string
	for _, ev := range journal {
		reported[ev.GetRequestId()] = true
		switch ev.GetKind() {
		case gridcityv1.CommandEvent_KIND_EXITED, gridcityv1.CommandEvent_KIND_UNKNOWN, gridcityv1.CommandEvent_KIND_REFUSED:
			if err := s.HandleEvent(ctx, server, ev); err != nil {
				s.logger.Error("record a command's end from the agent's journal; it will be reported again", "request", ev.GetRequestId(), "err", err)
				continue
			}
			if r, err := s.Get(ctx, ev.GetRequestId()); err != nil || r.Status.Terminal() {
				forget = append(forget, ev.GetRequestId())
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
		if r.Server != server || reported[r.ID] || !r.DispatchedAt.Before(helloAt) {
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

func atOr(ms int64, now time.Time) time.Time {
	if ms > 0 {
		return time.UnixMilli(ms).UTC()
	}
	return now.UTC()
}
