package store

import (
	"context"
	"testing"
	"time"
)

// TestStreamLeases: a replica leases the streams it holds, another takes
// one over, a release by the old holder leaves the new one's lease alone,
// and readers see what changed since a time, releases included.
func TestStreamLeases(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
		leases := func(since time.Time) map[string]StreamLease {
			t.Helper()
			ls, err := s.StreamLeases(ctx, since)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]StreamLease{}
			for _, l := range ls {
				out[l.Server] = l
			}
			return out
		}
		if err := s.SaveStreamLeases(ctx, "a", []StreamLease{{Server: "web1", Since: t0}, {Server: "db1", Since: t0}}, nil, t0); err != nil {
			t.Fatal(err)
		}
		got := leases(time.Time{})
		if l := got["web1"]; len(got) != 2 || l.Replica != "a" || !l.Since.Equal(t0) || !l.ChangedAt.Equal(t0) {
			t.Fatalf("leases %+v; want web1 and db1 held by a since t0", got)
		}

		// web1's agent moves to b; a notices later and releases both.
		t1 := t0.Add(10 * time.Second)
		if err := s.SaveStreamLeases(ctx, "b", []StreamLease{{Server: "web1", Since: t1}}, nil, t1); err != nil {
			t.Fatal(err)
		}
		t2 := t1.Add(5 * time.Second)
		if err := s.SaveStreamLeases(ctx, "a", nil, []string{"web1", "db1"}, t2); err != nil {
			t.Fatal(err)
		}
		got = leases(t1)
		if l := got["web1"]; l.Replica != "b" || !l.Since.Equal(t1) || !l.ChangedAt.Equal(t1) {
			t.Fatalf("web1 %+v; want held by b since t1: a's release must not drop b's lease", l)
		}
		if l, ok := got["db1"]; !ok || l.Replica != "" || !l.ChangedAt.Equal(t2) {
			t.Fatalf("db1 %+v (listed %v); want released at t2 and listed as changed", l, ok)
		}
		if got := leases(t2); len(got) != 1 {
			t.Fatalf("leases changed since t2: %+v; want db1 alone", got)
		}

		if err := s.SaveStreamLeases(ctx, "", []StreamLease{{Server: "x", Since: t0}}, nil, t0); err == nil {
			t.Fatal("a lease without a replica id was saved; want an error")
		}
		if err := s.SaveStreamLeases(ctx, "a", []StreamLease{{Since: t0}}, nil, t0); err == nil {
			t.Fatal("a lease without a server name was saved; want an error")
		}
	})
}

// TestServersSeenSince: only the servers last seen at or after the time
// are read, so that a replica reloading the others' servers reads what
// changed, not the whole fleet.
func TestServersSeenSince(t *testing.T) {
	eachEngine(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
		if err := s.SaveServers(ctx, []ServerRecord{
			{Name: "old", State: []byte{1}, Hello: []byte{2}, LastSeen: t0},
			{Name: "new", State: []byte{3}, Hello: []byte{4}, LastSeen: t0.Add(time.Minute)},
		}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.ServersSeenSince(ctx, t0.Add(time.Second), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Name != "new" || string(rs[0].State) != "\x03" || string(rs[0].Hello) != "\x04" || !rs[0].LastSeen.Equal(t0.Add(time.Minute)) {
			t.Fatalf("servers seen since t0+1s: %+v; want new alone, as saved", rs)
		}
		if rs, err := s.ServersSeenSince(ctx, t0, nil); err != nil || len(rs) != 2 {
			t.Fatalf("servers seen since t0: %d, %v; want both", len(rs), err)
		}
		// Only the servers wanted are read whole; wanted is told each one's name and time.
		told := map[string]time.Time{}
		rs, err = s.ServersSeenSince(ctx, t0, func(name string, last time.Time) bool {
			told[name] = last
			return name == "old"
		})
		if err != nil || len(rs) != 1 || rs[0].Name != "old" || string(rs[0].State) != "\x01" || string(rs[0].Hello) != "\x02" || !rs[0].LastSeen.Equal(t0) {
			t.Fatalf("servers wanted: %+v, %v; want old alone, as saved", rs, err)
		}
		if len(told) != 2 || !told["old"].Equal(t0) || !told["new"].Equal(t0.Add(time.Minute)) {
			t.Fatalf("wanted was told %v; want both servers with their times", told)
		}
		if rs, err := s.ServersSeenSince(ctx, t0, func(string, time.Time) bool { return false }); err != nil || len(rs) != 0 {
			t.Fatalf("none wanted: %+v, %v; want none", rs, err)
		}
	})
}
