package resources

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/config"
)

// A resource is troubled only after failuresBeforeTroubled checks in a row,
// since its first failed one; a good check ends it.
func TestDampingAndSince(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens: every check fails with connection refused
	cfg, err := config.Parse(strings.NewReader("resources:\n  - {id: db, kind: database, engine: tcp, target: \""+addr+"\"}\nprobes: {interval: 1s, timeout: 500ms, failuresBeforeTroubled: 3}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p.now = func() time.Time { return clock }
	ctx := context.Background()

	p.CheckAll(ctx)
	first := clock
	for i := 0; i < 2; i++ {
		s, _ := p.State("db")
		if s.Troubled || s.Status != "failed" || !strings.Contains(s.Reason, "connection refused") {
			t.Fatalf("after %d failed checks: %+v", i+1, s)
		}
		clock = clock.Add(15 * time.Second)
		p.CheckAll(ctx)
	}
	s, _ := p.State("db")
	if !s.Troubled || s.Failures != 3 || !s.Since.Equal(first) {
		t.Fatalf("after 3 failed checks: troubled=%v failures=%d since=%s; want troubled since the first failure %s", s.Troubled, s.Failures, s.Since, first)
	}

	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err)
	}
	defer l2.Close()
	go func() {
		for {
			c, err := l2.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	clock = clock.Add(15 * time.Second)
	p.CheckAll(ctx)
	if s, _ := p.State("db"); s.Troubled || s.Status != "ok" || s.Failures != 0 || !s.Since.Equal(clock) {
		t.Fatalf("after a good check: %+v", s)
	}
}
