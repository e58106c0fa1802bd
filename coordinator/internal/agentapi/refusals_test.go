package agentapi

import (
	"math"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestBadStateRefusedEarlierStateStays: a state with NaN ends the stream
// with InvalidArgument naming the field; the fleet keeps the good state it
// had, and so does a probe result with a NaN metric.
func TestBadStateRefusedEarlierStateStays(t *testing.T) {
	h := newHarness(t, nil)
	cert := h.mustEnroll("web-1")
	open := func() grpc.BidiStreamingClient[gridcityv1.AgentMessage, gridcityv1.CoordinatorMessage] {
		s := connect(t, h.dial(cert))
		if err := s.Send(hello("web-1")); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Recv(); err != nil || m.GetSettings() == nil {
			t.Fatalf("got %v, %v; want settings first", m, err)
		}
		return s
	}
	s := open()
	good := &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: time.Now().UnixMilli(), Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(12.5), Load1: 0.5}}
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: good}})
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 4, BusyPercent: proto.Float64(50), Load1: math.NaN()}}}})
	_, err := s.Recv()
	wantCode(t, err, codes.InvalidArgument, "state update from web-1 refused, nothing of it was applied: state.cpu.load1 = NaN: not a number")
	srv, _ := h.fleet.Server("web-1")
	if got := srv.State.GetCpu(); got.GetBusyPercent() != 12.5 || got.GetLoad1() != 0.5 {
		t.Errorf("cpu = %v; want the earlier good state (12.5 %%, load 0.5)", got)
	}
	if !strings.Contains(srv.Refused, "state.cpu.load1 = NaN") || srv.RefusedAt.IsZero() {
		t.Errorf("refused = %q at %v; want the fleet to say why", srv.Refused, srv.RefusedAt)
	}

	// The next good update clears the refusal.
	s = open()
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_State{State: good}})
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{}}})
	if m, err := s.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("got %v, %v; want a heartbeat answer", m, err)
	}
	if srv, _ := h.fleet.Server("web-1"); srv.Refused != "" {
		t.Errorf("refused = %q after a good update; want it cleared", srv.Refused)
	}

	s = open()
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_ProbeResult{ProbeResult: &gridcityv1.ProbeResult{ProbeId: "x", Metrics: map[string]float64{"days_left": math.Inf(1)}}}})
	_, err = s.Recv()
	wantCode(t, err, codes.InvalidArgument, `probe result from web-1 refused, nothing of it was applied: probeResult.metrics["days_left"] = +Inf`)
}

func TestRefusalsLogOncePerMinute(t *testing.T) {
	var r refusals
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	if _, ok := r.due("web-1", t0); !ok {
		t.Fatal("first refusal not logged")
	}
	for i := range 5 {
		if _, ok := r.due("web-1", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("refusal %d within the minute logged again", i)
		}
	}
	if _, ok := r.due("db-1", t0); !ok {
		t.Error("another server's first refusal not logged")
	}
	if n, ok := r.due("web-1", t0.Add(time.Minute)); !ok || n != 5 {
		t.Errorf("after a minute: due = %d, %v; want 5 unlogged, true", n, ok)
	}
}
