package fleet

import (
	"context"
	"io"
	"log/slog"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func TestStateSurvivesRestartAndStaleStreamsAreIgnored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := New(ctx, st, logger)
	old := f.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"})
	cur := f.Connect(&gridcityv1.Hello{Name: "web-1", District: "shop"}) // reconnect before the old stream ended
	f.Apply("web-1", cur, &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 8, BusyPercent: 10}, Host: &gridcityv1.HostInfo{Os: "debian"}})
	f.Apply("web-1", old, &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 1}})
	f.Disconnect("web-1", old)
	if s, _ := f.Server("web-1"); !s.Online || s.State.GetCpu().GetCores() != 8 {
		t.Fatalf("got online=%v cores=%d; want the current stream's view: online, 8", s.Online, s.State.GetCpu().GetCores())
	}
	f.Apply("web-1", cur, &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 8, BusyPercent: 55}})
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st2, _ := store.OpenSQLite(ctx, dir)
	defer st2.Close()
	f2, err := New(ctx, st2, logger)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f2.Server("web-1")
	if !ok || s.Online || s.State.GetCpu().GetBusyPercent() != 55 || s.State.GetHost().GetOs() != "debian" || s.Hello.GetDistrict() != "shop" {
		t.Fatalf("after restart got %+v; want web-1 offline with its merged state", s)
	}
	if m, _ := st2.Metrics(ctx, "web-1", 10); len(m) != 1 || m[0].CPUPercent != 55 {
		t.Fatalf("metrics %+v; want one sample at 55%%", m)
	}
}
