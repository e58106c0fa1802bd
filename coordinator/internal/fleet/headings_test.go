package fleet

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Headings agree with Servers on name, status and declared district,
// including servers remembered by the store from before a restart: a
// listing filters on the one and shows the other.
func TestHeadingsAgreeWithServers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	st, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(ctx, st, logger)
	if err != nil {
		t.Fatal(err)
	}
	f.Connect(&gridcityv1.Hello{Name: "db-1", District: "shop"})
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f, err = New(ctx, st, logger) // db-1 is remembered, reconnecting (it was connected at the stop)
	if err != nil {
		t.Fatal(err)
	}
	f.Connect(&gridcityv1.Hello{Name: "web-2", District: "shop"})
	id := f.Connect(&gridcityv1.Hello{Name: "web-1"})
	f.Apply("web-1", id, &gridcityv1.StateUpdate{Full: true, Cpu: &gridcityv1.CPU{Cores: 2}})
	gone := f.Connect(&gridcityv1.Hello{Name: "api-1", District: "api"})
	f.Disconnect("api-1", gone)

	want := []Heading{{Name: "api-1", District: "api"}, {Name: "db-1", Reconnecting: true, District: "shop"}, {Name: "web-1", Online: true}, {Name: "web-2", Online: true, District: "shop"}}
	got := f.Headings()
	if !slices.Equal(got, want) {
		t.Fatalf("headings %+v; want %+v", got, want)
	}
	for i, s := range f.Servers() {
		h := got[i]
		if h.Name != s.Name || h.Status() != s.Status() || h.District != s.Hello.GetDistrict() {
			t.Errorf("heading %s %s %q; Servers says %s %s %q", h.Name, h.Status(), h.District, s.Name, s.Status(), s.Hello.GetDistrict())
		}
	}
}
