package store

import (
	"context"
	"testing"
	"time"
)

// TestReplicas: a replica registers with its first heartbeat, is listed
// while its heartbeat is recent, keeps its start across beats, and is
// gone once it stops cleanly or has been silent long enough to forget.
func TestReplicas(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
		ids := func(rs []Replica, err error) []string {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		a := Replica{ID: "a", GRPC: "10.0.0.1:4601", HTTP: "10.0.0.1:4600", StartedAt: t0, HeartbeatAt: t0}
		b := Replica{ID: "b", GRPC: "10.0.0.2:4601", HTTP: "10.0.0.2:4600", StartedAt: t0.Add(time.Second), HeartbeatAt: t0.Add(time.Second)}
		for _, r := range []Replica{b, a} {
			if err := s.HeartbeatReplica(ctx, r, time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := ids(s.Replicas(ctx, t0)); len(got) != 2 || got[0] != "a" || got[1] != "b" {
			t.Fatalf("live replicas %v; want [a b], first started first", got)
		}

		// a beats again with a new address (restarted elsewhere behind the
		// same id): the address follows, the start stays.
		a2 := a
		a2.GRPC, a2.StartedAt, a2.HeartbeatAt = "10.0.0.9:4601", t0.Add(10*time.Second), t0.Add(10*time.Second)
		if err := s.HeartbeatReplica(ctx, a2, time.Time{}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Replicas(ctx, t0.Add(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 {
			t.Fatalf("replicas beating since t0+5s: %+v; want a alone (b is silent)", rs)
		}
		if r := rs[0]; r.ID != "a" || r.GRPC != "10.0.0.9:4601" || r.HTTP != "10.0.0.1:4600" || !r.StartedAt.Equal(t0) || !r.HeartbeatAt.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("got %+v; want a at its new address, started at %s, beating at t0+10s", r, t0)
		}

		// b, silent, is forgotten by a's next beat when it is older than the bound.
		if err := s.HeartbeatReplica(ctx, a2, t0.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := ids(s.Replicas(ctx, time.Time{})); len(got) != 1 || got[0] != "a" {
			t.Fatalf("all replicas after forgetting the silent ones: %v; want [a]", got)
		}

		if err := s.RemoveReplica(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveReplica(ctx, "a"); err != nil {
			t.Fatalf("removing a replica twice: %v; want no error", err)
		}
		if got := ids(s.Replicas(ctx, time.Time{})); len(got) != 0 {
			t.Fatalf("replicas after a clean stop: %v; want none", got)
		}

		for _, bad := range []Replica{{GRPC: "x:1", HeartbeatAt: t0}, {ID: "c", HeartbeatAt: t0}, {ID: "c", GRPC: "x:1"}} {
			if err := s.HeartbeatReplica(ctx, bad, time.Time{}); err == nil {
				t.Errorf("HeartbeatReplica(%+v) = nil; want an error saying what is missing", bad)
			}
		}
	})
}
