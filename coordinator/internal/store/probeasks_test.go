package store

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestProbeAsks: replica a asks replica b for a probe from web1; b lists
// its unanswered asks (not a's, not answered ones), answers once (a
// second answer, or one to a forgotten ask, is ErrNotFound), and a reads
// the answer whole. Bad asks and answers are refused with what is wrong
// and write nothing; asks no one forgot are dropped after ProbeAsksKept.
func TestProbeAsks(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
		ask := ProbeAsk{ID: "now-1", Server: "web1", Replica: "b", Engine: "tcp", Target: "10.0.0.5:5432", Timeout: 3 * time.Second, AskedAt: t0}
		if err := s.AskProbe(ctx, ask); err != nil {
			t.Fatal(err)
		}
		other := ask
		other.ID, other.Replica, other.AskedAt = "now-2", "c", t0.Add(time.Second)
		if err := s.AskProbe(ctx, other); err != nil {
			t.Fatal(err)
		}
		if err := s.AskProbe(ctx, ask); err == nil {
			t.Fatal("the same ask id written twice; want it refused")
		}
		got, err := s.ProbeAsks(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != "now-1" || got[0].Server != "web1" || got[0].Engine != "tcp" || got[0].Target != ask.Target ||
			got[0].Timeout != 3*time.Second || !got[0].AskedAt.Equal(t0) || got[0].Answered {
			t.Fatalf("b's asks %+v; want now-1 alone, unanswered, as asked", got)
		}

		answer := ask
		answer.Status, answer.Reason, answer.Latency, answer.Metrics = "failed", "dial tcp 10.0.0.5:5432: connect: connection refused", 1500*time.Microsecond, map[string]float64{"rtt": 1.5}
		if err := s.AnswerProbe(ctx, answer); err != nil {
			t.Fatal(err)
		}
		if err := s.AnswerProbe(ctx, answer); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a second answer: %v; want ErrNotFound", err)
		}
		if got, err := s.ProbeAsks(ctx, "b"); err != nil || len(got) != 0 {
			t.Fatalf("b's unanswered asks after its answer: %+v, %v; want none", got, err)
		}
		a, err := s.ProbeAnswer(ctx, "now-1")
		if err != nil {
			t.Fatal(err)
		}
		if !a.Answered || a.Status != "failed" || a.Reason != answer.Reason || a.Latency != answer.Latency || a.Metrics["rtt"] != 1.5 {
			t.Fatalf("the answer read back as %+v; want %+v", a, answer)
		}
		if err := s.ForgetProbeAsk(ctx, "now-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ProbeAnswer(ctx, "now-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a forgotten ask read: %v; want ErrNotFound", err)
		}
		if err := s.AnswerProbe(ctx, answer); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an answer to a forgotten ask (its asker gave up): %v; want ErrNotFound", err)
		}

		// Refused, with the reason, and nothing written.
		for _, c := range []struct {
			name string
			ask  ProbeAsk
			want string
		}{
			{"no target", ProbeAsk{ID: "x", Server: "web1", Replica: "b", Engine: "tcp", Timeout: time.Second, AskedAt: t0}, "needs an id"},
			{"no timeout", ProbeAsk{ID: "x", Server: "web1", Replica: "b", Engine: "tcp", Target: "t", AskedAt: t0}, "needs a timeout"},
			{"NUL", ProbeAsk{ID: "x", Server: "web\x001", Replica: "b", Engine: "tcp", Target: "t", Timeout: time.Second, AskedAt: t0}, "not valid UTF-8"},
		} {
			if err := s.AskProbe(ctx, c.ask); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v; want it refused (%q)", c.name, err, c.want)
			}
		}
		for _, c := range []struct {
			name string
			edit func(*ProbeAsk)
			want string
		}{
			{"status", func(a *ProbeAsk) { a.Status = "maybe" }, "not ok, failed or unanswered"},
			{"reason", func(a *ProbeAsk) { a.Reason = "\xff" }, "reason is not valid"},
			{"metric", func(a *ProbeAsk) { a.Metrics = map[string]float64{"rtt": math.NaN()} }, "not a finite number"},
			{"metrics", func(a *ProbeAsk) {
				a.Metrics = map[string]float64{}
				for i := range maxProbeCheckMetrics + 1 {
					a.Metrics[strings.Repeat("m", i+1)] = 1
				}
			}, "more than"},
		} {
			bad := other
			bad.Status = "ok"
			c.edit(&bad)
			if err := s.AnswerProbe(ctx, bad); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("answer with a bad %s: %v; want it refused (%q)", c.name, err, c.want)
			}
		}
		if got, err := s.ProbeAsks(ctx, "c"); err != nil || len(got) != 1 || got[0].Answered {
			t.Fatalf("c's asks after bad answers: %+v, %v; want now-2, still unanswered", got, err)
		}

		// An ask its asker never forgot goes with the next ask after ProbeAsksKept.
		late := ask
		late.ID, late.AskedAt = "now-3", other.AskedAt.Add(ProbeAsksKept+time.Second)
		if err := s.AskProbe(ctx, late); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ProbeAnswer(ctx, "now-2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an ask older than ProbeAsksKept: %v; want it forgotten", err)
		}
	})
}

// Asks and answers are announced on PostgreSQL once they commit.
func TestPostgresNotifiesProbeAsks(t *testing.T) {
	s := openPostgres(t, pgtest.Database(t))
	next := listenTo(t, s, ProbesChannel)
	ctx := context.Background()
	ask := ProbeAsk{ID: "now-1", Server: "web1", Replica: "b", Engine: "tcp", Target: "t:1", Timeout: time.Second, AskedAt: time.Now()}
	if err := s.AskProbe(ctx, ask); err != nil {
		t.Fatal(err)
	}
	if p := next("asked"); p != "ask:b" {
		t.Fatalf("notified %q; want ask:b", p)
	}
	ask.Status = "ok"
	if err := s.AnswerProbe(ctx, ask); err != nil {
		t.Fatal(err)
	}
	if p := next("answered"); p != "answer:now-1" {
		t.Fatalf("notified %q; want answer:now-1", p)
	}
}
