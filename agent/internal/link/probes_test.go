package link

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

func nextResult(t *testing.T, p *Probes, within time.Duration) *gridcityv1.ProbeResult {
	t.Helper()
	select {
	case m := <-p.out:
		return m.GetProbeResult()
	case <-time.After(within):
		t.Fatalf("no probe result within %s", within)
		return nil
	}
}

func TestProbesRunAssignedChecksAndFollowTheirTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	p := NewProbes(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer p.Stop()

	p.Set(ctx, []*gridcityv1.ProbeSpec{
		{Id: "db", ResourceId: "orders-db", Engine: "tcp", Target: addr, IntervalSeconds: 5, TimeoutSeconds: 2},
		{Id: "bad", ResourceId: "x", Engine: "telnet", Target: addr},
		{Id: "", ResourceId: "y", Engine: "tcp", Target: addr},
	})
	if got := p.Assigned(); len(got) != 1 || got[0] != "db" {
		t.Fatalf("assigned %v; want only db (the unknown engine and the empty id refused)", got)
	}
	r := nextResult(t, p, 3*time.Second)
	if r.GetProbeId() != "db" || r.GetResourceId() != "orders-db" || r.GetStatus() != "ok" || r.GetReason() != "" || r.GetCheckedUnixMs() == 0 {
		t.Fatalf("first result %v; want db ok", r)
	}

	// The target goes away: a changed spec restarts at once and reports the real error.
	ln.Close()
	p.Set(ctx, []*gridcityv1.ProbeSpec{{Id: "db", ResourceId: "orders-db", Engine: "tcp", Target: addr, IntervalSeconds: 6, TimeoutSeconds: 2}})
	r = nextResult(t, p, 3*time.Second)
	if r.GetStatus() != "failed" || !strings.Contains(r.GetReason(), "connection refused") {
		t.Fatalf("after the listener closed: %v; want failed with connection refused", r)
	}

	// Unassigned: nothing more arrives.
	p.Set(ctx, nil)
	if got := p.Assigned(); len(got) != 0 {
		t.Fatalf("assigned %v after an empty set", got)
	}
	select {
	case m := <-p.out:
		t.Fatalf("a result after the probe was dropped: %v", m)
	case <-time.After(200 * time.Millisecond):
	}

	// On demand, and a refused spec still answers so that nobody waits in vain.
	p.RunOnce(ctx, &gridcityv1.ProbeSpec{Id: "now-1", ResourceId: "orders-db", Engine: "tcp", Target: addr, TimeoutSeconds: 1})
	if r := nextResult(t, p, 3*time.Second); r.GetProbeId() != "now-1" || r.GetStatus() != "failed" {
		t.Fatalf("RunOnce: %v", r)
	}
	p.RunOnce(ctx, &gridcityv1.ProbeSpec{Id: "now-2", Engine: "gopher", Target: addr})
	if r := nextResult(t, p, time.Second); r.GetProbeId() != "now-2" || r.GetStatus() != "failed" || !strings.Contains(r.GetReason(), "unknown engine") {
		t.Fatalf("RunOnce of an unknown engine: %v", r)
	}
}

func TestProbeTimingIsClamped(t *testing.T) {
	for _, c := range []struct {
		interval, timeout uint32
		wantI, wantT      time.Duration
	}{
		{0, 0, MinProbeInterval, MinProbeInterval},
		{1, 30, MinProbeInterval, MinProbeInterval},
		{60, 0, time.Minute, 5 * time.Second},
		{600, 3600, 10 * time.Minute, MaxProbeTimeout},
	} {
		i, to := timing(&gridcityv1.ProbeSpec{IntervalSeconds: c.interval, TimeoutSeconds: c.timeout})
		if i != c.wantI || to != c.wantT {
			t.Errorf("timing(%d, %d) = %s, %s; want %s, %s", c.interval, c.timeout, i, to, c.wantI, c.wantT)
		}
	}
}

func TestProbesBoundTheirCount(t *testing.T) {
	p := NewProbes(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer p.Stop()
	var specs []*gridcityv1.ProbeSpec
	for i := range MaxProbes + 10 {
		// Port 9 on loopback: refused at once, nothing waits.
		specs = append(specs, &gridcityv1.ProbeSpec{Id: "p" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + time.Duration(i).String(), Engine: "tcp", Target: "127.0.0.1:9", IntervalSeconds: 3600})
	}
	p.Set(ctx, specs)
	if n := len(p.Assigned()); n != MaxProbes {
		t.Fatalf("%d probes running; want the bound %d", n, MaxProbes)
	}
}
