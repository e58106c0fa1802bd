package store

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestProbeChecks: a replica records its vantage points' checks, another
// reads them back whole; an older check never overwrites a newer one (the
// replica an agent left writing late), checks no one renews are forgotten,
// and a bad check is refused by name while the good ones are kept.
func TestProbeChecks(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
		failed := ProbeCheck{Resource: "db", From: "web1", Replica: "a", Status: "failed", Troubled: true, Failures: 3,
			FirstFail: t0.Add(-20 * time.Second), Reason: "connect: connection refused", Latency: 1500 * time.Microsecond,
			CheckedAt: t0, Metrics: map[string]float64{"connections": 12}, TLSNotAfter: t0.Add(48 * time.Hour)}
		ok := ProbeCheck{Resource: "db", From: "coordinator", Replica: "a", Status: "ok", CheckedAt: t0}
		if err := s.PutProbeChecks(ctx, []ProbeCheck{failed, ok}, t0); err != nil {
			t.Fatal(err)
		}
		got, err := s.ProbeChecks(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].From != "coordinator" || got[1].From != "web1" {
			t.Fatalf("checks %+v; want coordinator's and web1's, by vantage point", got)
		}
		c := got[1]
		if c.Resource != "db" || c.Replica != "a" || c.Status != "failed" || !c.Troubled || c.Failures != 3 || !c.FirstFail.Equal(failed.FirstFail) ||
			c.Reason != failed.Reason || c.Latency != failed.Latency || !c.CheckedAt.Equal(t0) || c.Metrics["connections"] != 12 || !c.TLSNotAfter.Equal(failed.TLSNotAfter) {
			t.Fatalf("read back %+v; want %+v", c, failed)
		}
		if got[0].Metrics == nil || len(got[0].Metrics) != 0 || got[0].Troubled || !got[0].FirstFail.IsZero() {
			t.Fatalf("the ok check read back as %+v; want no metrics, not troubled, no first failure", got[0])
		}

		// web1's agent moved to replica b, which checked later; a's late write loses.
		newer := failed
		newer.Replica, newer.Failures, newer.CheckedAt = "b", 4, t0.Add(10*time.Second)
		if err := s.PutProbeChecks(ctx, []ProbeCheck{newer}, newer.CheckedAt); err != nil {
			t.Fatal(err)
		}
		late := failed
		late.Failures, late.CheckedAt = 9, t0.Add(5*time.Second)
		if err := s.PutProbeChecks(ctx, []ProbeCheck{late}, late.CheckedAt); err != nil {
			t.Fatal(err)
		}
		got, err = s.ProbeChecks(ctx, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Replica != "b" || got[0].Failures != 4 {
			t.Fatalf("checks since t0+1s %+v; want web1's from b with 4 failures: an older check must not win", got)
		}

		// Bad checks are named and skipped; the good one in the same call is written.
		bad := []ProbeCheck{
			{Resource: "db", From: "web2", Status: "maybe", CheckedAt: t0},
			{Resource: "db", From: "web3", Status: "ok", CheckedAt: t0, Metrics: map[string]float64{"x": math.NaN()}},
			{Resource: "db", From: "web4", Status: "failed", CheckedAt: t0, Reason: "nul\x00inside"},
			{Resource: "db", From: "web5", Status: "ok"},
		}
		good := ProbeCheck{Resource: "db", From: "web6", Status: "ok", CheckedAt: t0.Add(11 * time.Second)}
		err = s.PutProbeChecks(ctx, append(bad, good), good.CheckedAt)
		for _, want := range []string{`"web2"`, `"web3"`, `"web4"`, `"web5"`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("bad checks gave %v; want an error naming %s", err, want)
			}
		}
		if got, _ := s.ProbeChecks(ctx, good.CheckedAt); len(got) != 1 || got[0].From != "web6" {
			t.Fatalf("after a mixed write %+v; want web6's check kept", got)
		}

		// An hour on, a write forgets what no one renewed.
		later := good
		later.CheckedAt = t0.Add(ProbeChecksKept + time.Minute)
		if err := s.PutProbeChecks(ctx, []ProbeCheck{later}, later.CheckedAt); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.ProbeChecks(ctx, time.Time{}); len(got) != 1 || got[0].From != "web6" {
			t.Fatalf("an hour on %+v; want web6's renewed check alone", got)
		}
	})
}
