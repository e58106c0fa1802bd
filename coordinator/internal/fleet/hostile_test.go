package fleet

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// TestBadStoredRowsAreRepairedAtLoad plants what a coordinator that did not
// check its agents could have left in SQLite: a server whose state holds
// NaN. Loading drops it with a log line, keeps the rest of that server's
// state, and the next flush writes every other server's state and samples;
// a NaN that reaches the fleet costs only its own server's sample. (The
// old metric rows of +Inf are left behind by the store's migration to
// buckets; see store.TestMetricSamplesBecomeBuckets.)
func TestBadStoredRowsAreRepairedAtLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	good, _ := proto.Marshal(&gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(5)}})
	if err := st.SaveServers(ctx, []store.ServerRecord{{Name: "bad", State: good, Hello: []byte{}}, {Name: "good", State: good, Hello: []byte{}}}); err != nil {
		t.Fatal(err)
	}
	bad, _ := proto.Marshal(&gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 2, Load1: math.NaN()},
		Host: &gridcityv1.HostInfo{Os: "debian"}})
	db, err := sql.Open("sqlite", filepath.Join(dir, "gridcity.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE servers SET state = ? WHERE name = 'bad'`, bad); err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	f, err := New(ctx, st, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := f.Server("bad")
	if srv.State.GetCpu() != nil || srv.State.GetHost().GetOs() != "debian" {
		t.Errorf("bad server's state after load: cpu %v, host %v; want cpu dropped, host kept", srv.State.GetCpu(), srv.State.GetHost())
	}
	for _, want := range []string{"state.cpu.load1 = NaN"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log %q does not say %q", log.String(), want)
		}
	}

	// A NaN that reaches the fleet (the agent API refuses it; this is the
	// fleet's own guard) costs its own sample, not the others'.
	f.Apply("good", f.Connect(&gridcityv1.Hello{Name: "good"}), &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(42)}})
	f.Apply("bad", f.Connect(&gridcityv1.Hello{Name: "bad"}), &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 2, BusyPercent: proto.Float64(math.NaN())}})
	err = f.FlushAll(ctx)
	if !errors.Is(err, store.ErrNotFinite) || !strings.Contains(err.Error(), "metric sample of bad") {
		t.Errorf("Flush = %v; want it to name bad's sample as not a number", err)
	}
	if m := history(t, st, "good"); m["cpu"] != "1 42 42 42" {
		t.Errorf("good's metrics after the flush: %+v; want its new sample at 42", m)
	}
	recs, _ := st.Servers(ctx)
	for _, r := range recs {
		var u gridcityv1.StateUpdate
		proto.Unmarshal(r.State, &u)
		if r.Name == "good" && u.GetCpu().GetBusyPercent() != 42 {
			t.Errorf("good's saved state: %v; want busy 42", u.GetCpu())
		}
	}
}
