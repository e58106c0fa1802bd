package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func newViewFleet(t *testing.T, opts ...Option) *Fleet {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f, err := New(ctx, st, slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sameAsServers fails unless the view holds what Servers returns now.
func sameAsServers(t *testing.T, f *Fleet, v *View) {
	t.Helper()
	all := f.Servers()
	if len(all) != len(v.Servers()) {
		t.Fatalf("view has %d servers; Servers has %d", len(v.Servers()), len(all))
	}
	for i, want := range all {
		got := *v.Servers()[i]
		if !proto.Equal(got.State, want.State) || !proto.Equal(got.Hello, want.Hello) {
			t.Fatalf("view's %s state %v hello %v; Servers has %v, %v", got.Name, got.State, got.Hello, want.State, want.Hello)
		}
		got.State, got.Hello, want.State, want.Hello = nil, nil, nil, nil
		if got != want {
			t.Fatalf("view's server %d is %+v; Servers has %+v", i, got, want)
		}
	}
	if v.Shape() != f.ShapeVersion() {
		t.Fatalf("view's shape %d; the fleet's %d", v.Shape(), f.ShapeVersion())
	}
}

// TestViewIsCurrent: every kind of write is in the next view, at once, and
// a server nothing wrote to keeps its copy (the same pointer), which is
// what the read side may key its judgements on.
func TestViewIsCurrent(t *testing.T) {
	c := &clock{time.UnixMilli(1_750_000_000_000)} // a clock that stands still: changes must not be told by time
	f := newViewFleet(t, WithClock(c.now))
	streams := map[string]uint64{}
	for i := range 5 {
		name := fmt.Sprintf("web-%d", i)
		streams[name] = f.Connect(&gridcityv1.Hello{Name: name})
		f.Apply(name, streams[name], &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 1, Cpu: &gridcityv1.CPU{Cores: 2}})
	}
	v := f.View()
	sameAsServers(t, f, v)
	if again := f.View(); again != v {
		t.Fatal("a second view with nothing written is a new view; want the same")
	}
	for _, w := range []struct {
		what    string
		changed string
		write   func()
	}{
		{"a change of one section", "web-1", func() {
			f.Apply("web-1", streams["web-1"], &gridcityv1.StateUpdate{Memory: &gridcityv1.Memory{UsedPercent: 50}})
		}},
		{"the same section again", "web-1", func() {
			f.Apply("web-1", streams["web-1"], &gridcityv1.StateUpdate{Memory: &gridcityv1.Memory{UsedPercent: 60}})
		}},
		{"a full state", "web-2", func() {
			f.Apply("web-2", streams["web-2"], &gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 1, Cpu: &gridcityv1.CPU{Cores: 2}})
		}},
		{"a heartbeat", "web-3", func() { c.t = c.t.Add(time.Second); f.Touch("web-3", streams["web-3"]) }},
		{"a refused update", "web-4", func() { f.Refuse("web-4", "cpu is NaN") }},
		{"the next accepted update", "web-4", func() {
			f.Apply("web-4", streams["web-4"], &gridcityv1.StateUpdate{CollectedUnixMs: 2})
		}},
		{"a disconnect", "web-0", func() { f.Disconnect("web-0", streams["web-0"]) }},
		{"a reconnect", "web-0", func() { streams["web-0"] = f.Connect(&gridcityv1.Hello{Name: "web-0", District: "shop"}) }},
		{"a new server", "web-5", func() { f.Connect(&gridcityv1.Hello{Name: "web-5"}) }},
	} {
		w.write()
		next := f.View()
		sameAsServers(t, f, next)
		for _, s := range next.Servers() {
			before, _ := v.Server(s.Name)
			if kept, want := before == s, s.Name != w.changed; kept != want {
				t.Errorf("after %s, %s kept its copy: %v; want %v", w.what, s.Name, kept, want)
			}
		}
		if s, ok := next.Server(w.changed); !ok || s.Name != w.changed {
			t.Errorf("after %s, the view has no %s", w.what, w.changed)
		}
		v = next
	}
}

// TestViewSeesEverySection: a change of any field of the state, however
// it was made, makes the server's copy new. A field added to StateUpdate
// and not compared by sameShallow fails here.
func TestViewSeesEverySection(t *testing.T) {
	u := &gridcityv1.StateUpdate{}
	fields := u.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		now := proto.Clone(u).(*gridcityv1.StateUpdate)
		m := now.ProtoReflect()
		switch fd.Kind() {
		case protoreflect.MessageKind:
			m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		case protoreflect.BoolKind:
			m.Set(fd, protoreflect.ValueOfBool(true))
		case protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(1))
		default:
			t.Fatalf("field %s of kind %s: teach this test (and sameShallow) about it", fd.Name(), fd.Kind())
		}
		if sameShallow(shallowState(u), now) {
			t.Errorf("a change of %s is not seen", fd.Name())
		}
		if !sameShallow(shallowState(now), now) {
			t.Errorf("a copy of a state with %s set differs from it", fd.Name())
		}
	}
}

// TestViewGraceEnds: a server waited for after a restart shows as
// reconnecting in a view, and offline in the first view after the grace.
func TestViewGraceEnds(t *testing.T) {
	t0 := time.UnixMilli(1_750_000_000_000)
	c := &clock{t0}
	f, _ := restarted(t, c, map[string]time.Duration{"web-1": time.Second, "web-2": time.Second}, nil)
	if s, _ := f.View().Server("web-1"); !s.Reconnecting {
		t.Fatalf("web-1 = %+v during the grace; want reconnecting", s)
	}
	c.t = t0.Add(DefaultStartupGrace)
	v := f.View()
	sameAsServers(t, f, v)
	if s, _ := v.Server("web-1"); s.Reconnecting || s.Status() != StatusOffline {
		t.Fatalf("web-1 = %+v after the grace; want offline", s)
	}
}

// TestViewUnderWrites: views made while agents write are each a
// consistent copy (run with -race).
func TestViewUnderWrites(t *testing.T) {
	f := newViewFleet(t)
	const n = 50
	streams := make([]uint64, n)
	for i := range n {
		streams[i] = f.Connect(&gridcityv1.Hello{Name: fmt.Sprintf("s-%02d", i)})
	}
	var writer, readers sync.WaitGroup
	done := make(chan struct{})
	writer.Go(func() {
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			default:
			}
			i := k % n
			name := fmt.Sprintf("s-%02d", i)
			f.Apply(name, streams[i], &gridcityv1.StateUpdate{CollectedUnixMs: int64(k + 1), Cpu: &gridcityv1.CPU{Cores: uint32(k)}})
			if k%7 == 0 {
				f.Disconnect(name, streams[i])
				streams[i] = f.Connect(&gridcityv1.Hello{Name: name})
			}
		}
	})
	for range 4 {
		readers.Go(func() {
			for range 200 {
				v := f.View()
				if len(v.Servers()) != n {
					t.Errorf("a view of %d servers; want %d", len(v.Servers()), n)
				}
				for _, s := range v.Servers() {
					_ = s.State.GetCpu().GetCores() + uint32(len(s.Name))
				}
			}
		})
	}
	readers.Wait()
	close(done)
	writer.Wait()
	sameAsServers(t, f, f.View())
}
