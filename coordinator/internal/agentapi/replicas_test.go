package agentapi

import (
	"slices"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// TestReplicasToldOnConnectAndOnChange: an agent hears the live
// coordinators' addresses when its stream opens (after its settings) and
// again whenever they change, not when they are set unchanged; a list an
// agent could not dial is refused and the previous one stays.
func TestReplicasToldOnConnectAndOnChange(t *testing.T) {
	h := newHarness(t, nil)
	first := []string{"10.0.0.1:4601", "10.0.0.2:4601"}
	if err := h.api.SetReplicas(first); err != nil {
		t.Fatal(err)
	}
	s := connect(t, h.dial(h.mustEnroll("web-1")))
	s.Send(hello("web-1"))
	if m, err := s.Recv(); err != nil || m.GetSettings() == nil {
		t.Fatalf("got %v, %v; want settings first", m, err)
	}
	wantReplicas := func(want []string) {
		t.Helper()
		m, err := s.Recv()
		if err != nil || m.GetReplicas() == nil || !slices.Equal(m.GetReplicas().GetGrpcAddresses(), want) {
			t.Fatalf("got %v, %v; want the replicas %v", m, err, want)
		}
	}
	wantReplicas(first)

	if err := h.api.SetReplicas(first); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"10.0.0.3"}, {"0.0.0.0:4601"}, {"10.0.0.1:4601", "10.0.0.1:4601"}} {
		if err := h.api.SetReplicas(bad); err == nil {
			t.Fatalf("SetReplicas(%q) = nil; want it refused", bad)
		}
	}
	// Neither the same list nor a refused one reached the agent: the next
	// message is the answer to its heartbeat.
	s.Send(&gridcityv1.AgentMessage{Body: &gridcityv1.AgentMessage_Heartbeat{Heartbeat: &gridcityv1.Heartbeat{}}})
	if m, err := s.Recv(); err != nil || m.GetHeartbeat() == nil {
		t.Fatalf("got %v, %v; want the heartbeat's answer, no replica list", m, err)
	}

	second := []string{"10.0.0.2:4601", "10.0.0.3:4601"}
	if err := h.api.SetReplicas(second); err != nil {
		t.Fatal(err)
	}
	wantReplicas(second)
}
