package resources

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TestProbeFromAnAgentAnotherReplicaHolds: replica a's diagnose asks for a
// probe from web-1, whose stream replica b holds. a asks b through the
// store; b runs it through its stream and answers; a returns the agent's
// result as if it held the agent. An agent b cannot ask is an error that
// says so and names b; a holder that never answers is ErrNoAnswer saying
// it may have stopped. Every ask is forgotten once its asker is done.
func TestProbeFromAnAgentAnotherReplicaHolds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := map[string][]string{"db": {"web-1"}}
	a, aAgents, _ := newVantageProber(t, v)
	b, bAgents, _ := newVantageProber(t, v)
	aAgents.answer = func(server string, spec *gridcityv1.ProbeSpec) *gridcityv1.ProbeResult {
		t.Errorf("replica a asked %s's agent itself; b holds it", server)
		return nil
	}
	asked := make(chan *gridcityv1.ProbeSpec, 4)
	bAgents.answer = func(server string, spec *gridcityv1.ProbeSpec) *gridcityv1.ProbeResult {
		asked <- spec
		return &gridcityv1.ProbeResult{ProbeId: spec.GetId(), Status: "failed", Reason: "dial tcp 10.0.4.20:5432: connect: connection refused", LatencyUs: 700,
			Metrics: map[string]float64{"rtt_ms": 0.7}}
	}
	heldBy := map[string]string{"web-1": "b", "gone": "b", "web-9": "c"}
	a.Share(Shared{Store: st, Replica: "a", Asks: st, HeldBy: func(s string) string { return heldBy[s] }})
	b.Share(Shared{Store: st, Replica: "b", Asks: st, HeldBy: func(s string) string {
		if s == "web-1" || s == "gone" {
			return "" // b holds it
		}
		return heldBy[s]
	}})
	done := make(chan struct{})
	go func() { defer close(done); b.answerLoop(ctx) }()
	defer func() { cancel(); <-done }()

	c, err := a.ProbeFrom(ctx, "web-1", "tcp", "10.0.4.20:5432", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.From != "web-1" || c.Status != "failed" || !strings.Contains(c.Reason, "connection refused") || c.Latency != 700*time.Microsecond || c.Metrics["rtt_ms"] != 0.7 {
		t.Fatalf("a got %+v; want web-1's refusal as its agent sent it", c)
	}
	select {
	case spec := <-asked:
		if spec.GetEngine() != "tcp" || spec.GetTarget() != "10.0.4.20:5432" || spec.GetTimeoutSeconds() != 2 {
			t.Fatalf("b's agent was asked %v; want tcp to 10.0.4.20:5432 within 2 s", spec)
		}
	default:
		t.Fatal("b's agent was never asked")
	}

	// b cannot ask the agent: a is told why, and who said so.
	_, err = a.ProbeFrom(ctx, "gone", "tcp", "10.0.4.20:5432", time.Second)
	if err == nil || !strings.Contains(err.Error(), `server "gone" is not connected`) || !strings.Contains(err.Error(), "replica b") {
		t.Fatalf("a probe from an agent b cannot reach: %v; want b's reason, naming b", err)
	}

	// c never answers (it died): no answer, saying so, after the agent's timeout and the way back.
	start := time.Now()
	_, err = a.ProbeFrom(ctx, "web-9", "tcp", "10.0.4.20:5432", time.Second)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "replica c") || !strings.Contains(err.Error(), "may have stopped") {
		t.Fatalf("a probe through a replica that never answers: %v; want ErrNoAnswer naming c", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("gave up after %s; want the agent's timeout at least", took)
	}
	for _, r := range []string{"b", "c"} {
		if left, err := st.ProbeAsks(ctx, r); err != nil || len(left) != 0 {
			t.Fatalf("asks of %s left behind: %+v, %v; want every ask forgotten once its asker is done", r, left, err)
		}
	}
}

// A lone coordinator (no replicas) asks only its own agents.
func TestProbeFromWithoutReplicasAsksItsOwnAgent(t *testing.T) {
	p, agents, _ := newVantageProber(t, map[string][]string{})
	agents.answer = func(server string, spec *gridcityv1.ProbeSpec) *gridcityv1.ProbeResult {
		return &gridcityv1.ProbeResult{ProbeId: spec.GetId(), Status: "ok"}
	}
	c, err := p.ProbeFrom(context.Background(), "web-1", "tcp", "10.0.4.20:5432", time.Second)
	if err != nil || c.Status != "ok" || c.From != "web-1" {
		t.Fatalf("ProbeFrom = %+v, %v; want web-1's ok", c, err)
	}
}
