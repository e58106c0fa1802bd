package link

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestBackoffGrowsJitteredAndCapped(t *testing.T) {
	base, max := time.Second, time.Minute
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := Backoff(n, base, max)
			if d < want/2 || d > want {
				t.Fatalf("Backoff(%d) = %s; want within [%s, %s]", n, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("Backoff(%d) took only %d distinct values in 200 draws; want jitter", n, len(seen))
		}
	}
	if d := Backoff(1000, base, max); d < max/2 || d > max {
		t.Fatalf("Backoff(1000) = %s; want capped at %s", d, max)
	}
}

// TestSessionEnd: a refused state (InvalidArgument) is retried with a
// backoff that keeps growing however long the stream lasted, so that a
// value that stays bad never makes the agent spin.
func TestSessionEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		lasted time.Duration
		want   ending
	}{
		{"revoked", status.Error(codes.PermissionDenied, "revoked"), time.Hour, ending{permanent: true}},
		{"unknown certificate", status.Error(codes.Unauthenticated, "unknown"), 0, ending{permanent: true}},
		{"refused at once", status.Error(codes.InvalidArgument, "state.cpu.load1 = NaN"), time.Second, ending{refused: true}},
		{"refused after an hour", status.Error(codes.InvalidArgument, "state.cpu.load1 = NaN"), time.Hour, ending{refused: true}},
		{"cut after an hour", status.Error(codes.Unavailable, "gone"), time.Hour, ending{resetBackoff: true}},
		{"cut at once", errors.New("dial: refused"), time.Second, ending{}},
	} {
		if got := sessionEnd(c.err, c.lasted); got != c.want {
			t.Errorf("%s: sessionEnd = %+v; want %+v", c.name, got, c.want)
		}
	}
}
