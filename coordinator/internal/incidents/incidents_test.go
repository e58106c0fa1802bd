package incidents

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// fleet is a small topology whose troubled targets the test sets:
// web → api → orders-db, api → cache, worker → cache.
type fleet struct {
	mu       sync.Mutex
	troubled map[string]graph.Target // id → status, reason and since
}

func newFleet() *fleet { return &fleet{troubled: map[string]graph.Target{}} }

func (f *fleet) fail(id, reason string, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.troubled[id] = graph.Target{Troubled: true, Status: "down", Reason: reason, Since: since}
}

func (f *fleet) recover(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.troubled, id)
}

func (f *fleet) report() (graph.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := map[string]string{"web": "server", "api": "server", "worker": "server", "orders-db": "postgres", "cache": "redis"}
	var targets []graph.Target
	for id, kind := range kinds {
		t := graph.Target{ID: id, Name: id, Kind: kind, Status: "ok"}
		if tr, ok := f.troubled[id]; ok {
			t.Troubled, t.Status, t.Reason, t.Since = true, tr.Status, tr.Reason, tr.Since
		}
		targets = append(targets, t)
	}
	links := []graph.Link{
		{From: "web", To: "api", Source: graph.SourceDeclared},
		{From: "api", To: "orders-db", Source: graph.SourceDeclared},
		{From: "api", To: "cache", Source: graph.SourceDiscovered},
		{From: "worker", To: "cache", Source: graph.SourceDeclared},
	}
	g, err := graph.New(targets, links, nil)
	if err != nil {
		return graph.Report{}, err
	}
	return g.Incidents(), nil
}

func openStore(t *testing.T, dir string) *store.SQLite {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func observe(t *testing.T, tr *Tracker, now time.Time) {
	t.Helper()
	if err := tr.Observe(context.Background(), now); err != nil {
		t.Fatal(err)
	}
}

func history(t *testing.T, tr *Tracker) []store.Incident {
	t.Helper()
	h, err := tr.History(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func TestOpenUpdateEnd(t *testing.T) {
	st := openStore(t, t.TempDir())
	f := newFleet()
	tr := New(st, f.report, nil)
	ctx := context.Background()

	observe(t, tr, t0)
	if h := history(t, tr); len(h) != 0 {
		t.Fatalf("a healthy fleet has incidents: %+v", h)
	}

	// The database fails; the report's since is when it became troubled.
	f.fail("orders-db", "dial tcp 10.0.4.20:5432: connect: connection refused", t0.Add(-30*time.Second))
	observe(t, tr, t0)
	since, ok := tr.Since("orders-db")
	if !ok || !since.Equal(t0.Add(-30*time.Second)) {
		t.Fatalf("Since(orders-db) = %v, %v; want the report's since", since, ok)
	}
	if _, ok := tr.Since("api"); ok {
		t.Fatal("api has an incident though it is healthy")
	}

	// The api suffers from it: no incident of its own, the database's
	// incident explains it and takes the new reason.
	f.fail("api", "500 from /health", t0.Add(20*time.Second))
	f.fail("orders-db", "dial tcp 10.0.4.20:5432: i/o timeout", t0.Add(-30*time.Second))
	observe(t, tr, t0.Add(time.Minute))
	if _, ok := tr.Since("api"); ok {
		t.Fatal("api, explained by the database, has an incident of its own")
	}
	open, err := st.OpenIncidents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].Target != "orders-db" || open[0].Kind != "postgres" || open[0].Reason != "dial tcp 10.0.4.20:5432: i/o timeout" ||
		!slices.Equal(open[0].Explains, []string{"api"}) || !open[0].StartedAt.Equal(t0.Add(-30*time.Second)) {
		t.Fatalf("open incidents %+v", open)
	}
	if got := tr.Open(); len(got) != 1 || got[0].ID != open[0].ID || !slices.Equal(got[0].Explains, []string{"api"}) {
		t.Fatalf("Open() = %+v", got)
	}

	// An unchanged report writes nothing.
	observe(t, tr, t0.Add(2*time.Minute))
	if h := history(t, tr); len(h) != 1 {
		t.Fatalf("history %+v; want one incident", h)
	}

	// Everything recovers: the incident ends.
	f.recover("orders-db")
	f.recover("api")
	observe(t, tr, t0.Add(3*time.Minute))
	if _, ok := tr.Since("orders-db"); ok {
		t.Fatal("orders-db still has an open incident")
	}
	h := history(t, tr)
	if len(h) != 1 || h[0].Open() || !h[0].EndedAt.Equal(t0.Add(3*time.Minute)) || !h[0].StartedAt.Equal(t0.Add(-30*time.Second)) {
		t.Fatalf("history %+v; want the incident ended at the last observation", h)
	}

	// It fails again, with a since from before the last end (a report that
	// kept an old since): the new incident starts no earlier than that end.
	f.fail("orders-db", "refused", t0)
	observe(t, tr, t0.Add(4*time.Minute))
	if since, ok := tr.Since("orders-db"); !ok || !since.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("Since(orders-db) = %v, %v; want the previous end", since, ok)
	}
	// Without a known since, the incident starts at the observation.
	f.fail("cache", "EOF", time.Time{})
	observe(t, tr, t0.Add(5*time.Minute))
	if since, ok := tr.Since("cache"); !ok || !since.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("Since(cache) = %v, %v; want the observation time", since, ok)
	}
}

func TestRestartKeepsTheStart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	f := newFleet()
	f.fail("orders-db", "refused", t0)
	f.fail("cache", "EOF", t0)
	tr := New(st, f.report, nil)
	observe(t, tr, t0.Add(time.Minute))
	st.Close()

	// The coordinator restarts: the probes start over, so the report's
	// since is new, and the cache recovered while it was down.
	st = openStore(t, dir)
	f.fail("orders-db", "refused", t0.Add(time.Hour))
	f.recover("cache")
	tr = New(st, f.report, nil)
	if err := tr.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if since, ok := tr.Since("orders-db"); !ok || !since.Equal(t0) {
		t.Fatalf("after Load, Since(orders-db) = %v, %v; want the original start %v", since, ok, t0)
	}
	observe(t, tr, t0.Add(time.Hour+time.Minute))
	if since, ok := tr.Since("orders-db"); !ok || !since.Equal(t0) {
		t.Fatalf("Since(orders-db) = %v, %v; want the original start %v", since, ok, t0)
	}
	if _, ok := tr.Since("cache"); ok {
		t.Fatal("the recovered cache still has an open incident")
	}
	h := history(t, tr)
	if len(h) != 2 {
		t.Fatalf("history %+v; want the two incidents, no new one", h)
	}
	for _, in := range h {
		switch in.Target {
		case "orders-db":
			if !in.Open() {
				t.Errorf("orders-db's incident ended: %+v", in)
			}
		case "cache":
			if !in.EndedAt.Equal(t0.Add(time.Hour + time.Minute)) {
				t.Errorf("cache's incident %+v; want it ended at the first observation after the restart", in)
			}
		}
	}

	// Observe without Load loads on its own: no duplicate incident.
	st.Close()
	st = openStore(t, dir)
	tr = New(st, f.report, nil)
	observe(t, tr, t0.Add(2*time.Hour))
	if since, ok := tr.Since("orders-db"); !ok || !since.Equal(t0) {
		t.Fatalf("without Load, Since(orders-db) = %v, %v; want %v", since, ok, t0)
	}
	if h := history(t, tr); len(h) != 2 {
		t.Fatalf("history %+v; want no new incident", h)
	}
}

// A target stops being explained while its root cause is still open
// (something between them recovered first): it gets the grace too.
func TestGraceWhenTheMiddleRecoversFirst(t *testing.T) {
	st := openStore(t, t.TempDir())
	f := newFleet()
	tr := New(st, f.report, nil)
	f.fail("orders-db", "refused", t0)
	f.fail("api", "500", t0)
	f.fail("web", "502", t0)
	observe(t, tr, t0)
	// The api recovers first; web is still failing, so for a moment it is a
	// root cause of its own, and the database is still down.
	f.recover("api")
	observe(t, tr, t0.Add(time.Second))
	if _, ok := tr.Since("web"); ok {
		t.Fatal("web opened an incident the moment the api between it and the database recovered")
	}
	f.recover("web")
	f.recover("orders-db")
	observe(t, tr, t0.Add(2*time.Second))
	observe(t, tr, t0.Add(time.Minute))
	if h := history(t, tr); len(h) != 1 || h[0].Target != "orders-db" || h[0].Open() {
		t.Fatalf("history %+v; want only the database's incident, ended", h)
	}
}

func TestRootCauseMoves(t *testing.T) {
	st := openStore(t, t.TempDir())
	f := newFleet()
	tr := New(st, f.report, nil)

	f.fail("orders-db", "refused", t0)
	f.fail("api", "500", t0)
	f.fail("web", "502", t0)
	observe(t, tr, t0)
	dbSince, _ := tr.Since("orders-db")

	// The database recovers but the cache fails: the api and web stay
	// troubled, now explained by the cache.
	f.recover("orders-db")
	f.fail("cache", "EOF", t0.Add(time.Minute))
	observe(t, tr, t0.Add(2*time.Minute))
	if _, ok := tr.Since("orders-db"); ok {
		t.Fatal("the recovered database still has an open incident")
	}
	if since, ok := tr.Since("cache"); !ok || !since.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Since(cache) = %v, %v", since, ok)
	}
	h := history(t, tr)
	if len(h) != 2 || h[0].Target != "cache" || !h[0].Open() || !slices.Equal(h[0].Explains, []string{"api", "web"}) ||
		h[1].Target != "orders-db" || h[1].Open() || !h[1].StartedAt.Equal(dbSince) || !h[1].EndedAt.Equal(t0.Add(2*time.Minute)) ||
		!slices.Equal(h[1].Explains, []string{"api", "web"}) {
		t.Fatalf("history %+v", h)
	}

	// The cache recovers, the api keeps failing on its own: it becomes the
	// root cause. For a grace period it may just be recovering later than
	// the cache (at its own next check), so no incident opens yet; after
	// it, one does, starting when the api became troubled (it had no
	// incident of its own before, so no earlier end holds it back).
	f.recover("cache")
	observe(t, tr, t0.Add(3*time.Minute))
	observe(t, tr, t0.Add(3*time.Minute+tr.Grace-time.Second))
	if open := tr.Open(); len(open) != 0 {
		t.Fatalf("an incident opened within the grace after the one explaining it ended: %+v", open)
	}
	observe(t, tr, t0.Add(3*time.Minute+tr.Grace))
	if since, ok := tr.Since("api"); !ok || !since.Equal(t0) {
		t.Fatalf("Since(api) = %v, %v; want when it became troubled", since, ok)
	}
	if open := tr.Open(); len(open) != 1 || open[0].Target != "api" || !slices.Equal(open[0].Explains, []string{"web"}) {
		t.Fatalf("Open() = %+v", open)
	}
}

// failing makes chosen writes fail.
type failing struct {
	Store
	mu        sync.Mutex
	failOpen  map[string]bool // by target
	failEnd   bool
	failWrite error
}

func (f *failing) OpenIncident(ctx context.Context, in store.Incident) (int64, error) {
	f.mu.Lock()
	bad := f.failOpen[in.Target]
	f.mu.Unlock()
	if bad {
		return 0, f.failWrite
	}
	return f.Store.OpenIncident(ctx, in)
}

func (f *failing) EndIncident(ctx context.Context, id int64, at time.Time) error {
	f.mu.Lock()
	bad := f.failEnd
	f.mu.Unlock()
	if bad {
		return f.failWrite
	}
	return f.Store.EndIncident(ctx, id, at)
}

func TestFailingWrites(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	boom := errors.New("disk I/O error")
	fs := &failing{Store: st, failOpen: map[string]bool{"orders-db": true}, failWrite: boom}
	f := newFleet()
	tr := New(fs, f.report, nil)

	// Two new root causes; the second write fails. The first is committed
	// and visible, the second is neither.
	f.fail("cache", "EOF", t0)
	f.fail("orders-db", "refused", t0)
	if err := tr.Observe(ctx, t0); !errors.Is(err, boom) {
		t.Fatalf("Observe = %v; want the store's error", err)
	}
	if _, ok := tr.Since("orders-db"); ok {
		t.Fatal("an incident whose write failed is open in the tracker")
	}
	if _, ok := tr.Since("cache"); !ok {
		t.Fatal("the incident written before the failure is missing")
	}
	if open, _ := st.OpenIncidents(ctx); len(open) != 1 || open[0].Target != "cache" {
		t.Fatalf("stored open incidents %+v; want only the cache", open)
	}

	// The store is back: the next Observe opens the missing one, and only it.
	fs.mu.Lock()
	fs.failOpen = nil
	fs.mu.Unlock()
	observe(t, tr, t0.Add(time.Minute))
	if since, ok := tr.Since("orders-db"); !ok || !since.Equal(t0) {
		t.Fatalf("Since(orders-db) = %v, %v", since, ok)
	}
	if h := history(t, tr); len(h) != 2 {
		t.Fatalf("history %+v; want two incidents", h)
	}

	// Ending fails: the incident stays open in the tracker and the store,
	// and ends at the next successful Observe.
	fs.mu.Lock()
	fs.failEnd = true
	fs.mu.Unlock()
	f.recover("cache")
	if err := tr.Observe(ctx, t0.Add(2*time.Minute)); !errors.Is(err, boom) {
		t.Fatalf("Observe = %v; want the store's error", err)
	}
	if _, ok := tr.Since("cache"); !ok {
		t.Fatal("an incident whose end failed was dropped")
	}
	fs.mu.Lock()
	fs.failEnd = false
	fs.mu.Unlock()
	observe(t, tr, t0.Add(3*time.Minute))
	if _, ok := tr.Since("cache"); ok {
		t.Fatal("the cache's incident did not end")
	}
	for _, in := range history(t, tr) {
		if in.Target == "cache" && !in.EndedAt.Equal(t0.Add(3*time.Minute)) {
			t.Fatalf("cache's incident %+v; want it ended at the successful observation", in)
		}
	}

	// A failing report changes nothing.
	tr2 := New(st, func() (graph.Report, error) { return graph.Report{}, errors.New("topology broken") }, nil)
	if err := tr2.Observe(ctx, t0.Add(4*time.Minute)); err == nil {
		t.Fatal("Observe with a failing report succeeded")
	}
	if open, _ := st.OpenIncidents(ctx); len(open) != 1 || open[0].Target != "orders-db" {
		t.Fatalf("stored open incidents %+v; want orders-db still open", open)
	}
}

func TestStaleTrackerReloads(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	f := newFleet()
	a := New(st, f.report, nil)
	b := New(st, f.report, nil)
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	f.fail("cache", "EOF", t0)
	observe(t, a, t0)
	// b loaded before a opened the incident: its write is refused, and it
	// reads the store again on the next Observe instead of failing forever.
	if err := b.Observe(ctx, t0.Add(time.Minute)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Observe = %v; want ErrExists", err)
	}
	observe(t, b, t0.Add(2*time.Minute))
	if since, ok := b.Since("cache"); !ok || !since.Equal(t0) {
		t.Fatalf("Since(cache) = %v, %v; want a's start", since, ok)
	}
}

func TestRunAndConcurrentSince(t *testing.T) {
	st := openStore(t, t.TempDir())
	f := newFleet()
	f.fail("cache", "EOF", t0)
	tr := New(st, f.report, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx, time.Millisecond, nil); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := tr.Since("cache"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run opened no incident")
		}
		_ = tr.Open()
		time.Sleep(time.Millisecond)
	}
	f.recover("cache")
	for {
		if _, ok := tr.Since("cache"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run ended no incident")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

// TestOneTrackerLeads: two replicas' trackers on one store, one leading.
// The follower answers with the incident the leader opened; when the lead
// moves, the new leader ends it; each incident is recorded once.
func TestOneTrackerLeads(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	f := newFleet()
	a, b := New(st, f.report, nil), New(st, f.report, nil)
	var aLeads atomic.Bool
	aLeads.Store(true)
	run := func(tr *Tracker, leads func() bool) func() {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { tr.Run(ctx, time.Millisecond, leads); close(done) }()
		return func() { cancel(); <-done }
	}
	stopA := run(a, aLeads.Load)
	defer stopA()
	stopB := run(b, func() bool { return !aLeads.Load() })
	defer stopB()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.fail("cache", "EOF", t0)
	waitFor("the follower never showed the leader's incident", func() bool { _, ok := b.Since("cache"); return ok })
	if since, _ := b.Since("cache"); !since.Equal(t0) {
		t.Fatalf("follower's Since(cache) = %v; want the leader's start %v", since, t0)
	}
	aLeads.Store(false) // the lead moves to b
	f.recover("cache")
	waitFor("the new leader never ended the incident", func() bool { _, ok := b.Since("cache"); return !ok })
	waitFor("the old leader, now following, still shows the incident open", func() bool { _, ok := a.Since("cache"); return !ok })
	hist, err := st.Incidents(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].EndedAt.IsZero() {
		t.Fatalf("history %+v; want one incident, ended", hist)
	}
}

// The lead moves right after an incident ended: the new leader did not see
// it end, but takes its grace from the store, so a target it explained and
// that is still failing for a moment (its own next check is to come) opens
// no incident of its own; one still failing after the grace does. A
// restart is the same.
func TestNewLeaderKeepsTheGraceOfAnEndedIncident(t *testing.T) {
	st := openStore(t, t.TempDir())
	f := newFleet()
	a := New(st, f.report, nil)
	f.fail("orders-db", "refused", t0)
	f.fail("api", "500", t0)
	f.fail("web", "502", t0)
	observe(t, a, t0)
	if _, ok := a.Since("orders-db"); !ok {
		t.Fatal("no incident on orders-db")
	}
	// The database recovers; a ends its incident and then loses the lead.
	f.recover("orders-db")
	observe(t, a, t0.Add(10*time.Second))

	// b leads now. The api and web have not been checked since.
	b := New(st, f.report, nil)
	if err := b.Follow(context.Background()); err != nil {
		t.Fatal(err)
	}
	observe(t, b, t0.Add(12*time.Second))
	if _, ok := b.Since("api"); ok {
		t.Fatal("the new leader opened an incident on the api a second after the incident that explained it ended")
	}
	f.recover("web")
	observe(t, b, t0.Add(20*time.Second))
	// The api is still failing past the grace: a trouble of its own.
	observe(t, b, t0.Add(10*time.Second+DefaultGrace))
	since, ok := b.Since("api")
	if !ok {
		t.Fatal("the api, still failing past the grace, opened no incident")
	}
	if !since.Equal(t0) {
		t.Fatalf("the api's incident starts %v; want when it became troubled (%v), as one leader throughout would say", since, t0)
	}
	h := history(t, b)
	if len(h) != 2 {
		t.Fatalf("history %+v; want the database's and the api's", h)
	}
}
