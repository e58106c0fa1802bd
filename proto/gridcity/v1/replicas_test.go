package gridcityv1

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCheckReplicas(t *testing.T) {
	many := make([]string, MaxReplicas+1)
	for i := range many {
		many[i] = fmt.Sprintf("10.0.0.%d:4601", i+1)
	}
	for _, c := range []struct {
		addrs []string
		ok    bool
	}{
		{nil, true},
		{[]string{"10.0.0.1:4601", "coord-b.example:4601", "[2001:db8::1]:4601"}, true},
		{many[:MaxReplicas], true},
		{many, false},
		{[]string{"10.0.0.1"}, false},
		{[]string{":4601"}, false},
		{[]string{"0.0.0.0:4601"}, false},
		{[]string{"[::]:4601"}, false},
		{[]string{"10.0.0.1:0"}, false},
		{[]string{"10.0.0.1:65536"}, false},
		{[]string{"10.0.0.1:grpc"}, false},
		{[]string{strings.Repeat("a", 250) + ".x:4601"}, false},
		{[]string{"10.0.0.1:4601", "10.0.0.1:4601"}, false},
	} {
		err := CheckReplicas(&Replicas{GrpcAddresses: c.addrs})
		if (err == nil) != c.ok {
			t.Errorf("CheckReplicas(%.60q) = %v; want ok=%v", c.addrs, err, c.ok)
		}
	}
}

// TestReplicaOrderSpreadsAgents: every agent tries its enrollment address
// first and then every other coordinator once, in a turn of its own; the
// agents of one coordinator that dies spread over the survivors.
func TestReplicaOrderSpreadsAgents(t *testing.T) {
	known := []string{"b:4601", "a:4601", "c:4601", "b:4601"}
	firstAfterA := map[string]int{}
	for i := range 1000 {
		name := fmt.Sprintf("web-%d", i)
		order := ReplicaOrder("a:4601", known, name)
		if len(order) != 3 || order[0] != "a:4601" || !slices.Contains(order, "b:4601") || !slices.Contains(order, "c:4601") {
			t.Fatalf("%s's order %v; want a first, then b and c once each", name, order)
		}
		if again := ReplicaOrder("a:4601", known, name); !slices.Equal(again, order) {
			t.Fatalf("%s's order changed from %v to %v", name, order, again)
		}
		// From any address, the turn visits every other one before it comes back.
		seen := map[string]bool{}
		for at, n := "a:4601", 0; n < 3; n++ {
			at = NextReplica(order, at)
			seen[at] = true
		}
		if len(seen) != 3 {
			t.Fatalf("%s's turn from a visits %v; want all three", name, seen)
		}
		firstAfterA[NextReplica(order, "a:4601")]++
	}
	if b, c := firstAfterA["b:4601"], firstAfterA["c:4601"]; b < 400 || c < 400 {
		t.Fatalf("when a dies, %d agents go to b and %d to c; want them spread", b, c)
	}
	if got := NextReplica(ReplicaOrder("a:4601", nil, "web-1"), "a:4601"); got != "a:4601" {
		t.Fatalf("with no other coordinator, after a comes %s; want a", got)
	}
	if got := NextReplica([]string{"a:4601", "b:4601"}, "gone:4601"); got != "a:4601" {
		t.Fatalf("after an address no longer listed comes %s; want the first", got)
	}
}
