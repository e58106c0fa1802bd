package graph

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// build makes a graph from link specs "a>b" (a uses b); every id named is a
// target, the ones in down are troubled.
func build(t testing.TB, links []string, down ...string) *Graph {
	t.Helper()
	isDown := map[string]bool{}
	for _, id := range down {
		isDown[id] = true
	}
	seen := map[string]bool{}
	var targets []Target
	add := func(id string) {
		if seen[id] {
			return
		}
		seen[id] = true
		tg := Target{ID: id, Name: id, Kind: "probe", Status: "healthy"}
		if isDown[id] {
			tg.Troubled, tg.Status, tg.Reason = true, "offline", "connection refused"
		}
		targets = append(targets, tg)
	}
	var ls []Link
	for _, spec := range links {
		from, to, ok := strings.Cut(spec, ">")
		if !ok {
			add(spec) // a lone target
			continue
		}
		add(from)
		add(to)
		ls = append(ls, Link{From: from, To: to, Source: SourceDeclared})
	}
	for _, id := range down {
		add(id)
	}
	g, err := New(targets, ls, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestTopology(t *testing.T) {
	// site → lb → web → api → db, plus a worker on api and a cycle a ⇄ b on db.
	g := build(t, []string{"site>lb", "lb>web", "web>api", "api>db", "worker>api", "a>b", "b>a", "b>db", "web>cache"})
	tests := []struct {
		id                   string
		uses, usedBy, radius []string
	}{
		{"db", []string{}, []string{"api", "b"}, []string{"a", "api", "b", "lb", "site", "web", "worker"}},
		{"api", []string{"db"}, []string{"web", "worker"}, []string{"lb", "site", "web", "worker"}},
		{"web", []string{"api", "cache"}, []string{"lb"}, []string{"lb", "site"}},
		{"site", []string{"lb"}, []string{}, []string{}},
		{"a", []string{"b"}, []string{"b"}, []string{"b"}},
	}
	for _, tt := range tests {
		if got := g.Uses(tt.id); !reflect.DeepEqual(got, tt.uses) {
			t.Errorf("Uses(%s) = %v; want %v", tt.id, got, tt.uses)
		}
		if got := g.UsedBy(tt.id); !reflect.DeepEqual(got, tt.usedBy) {
			t.Errorf("UsedBy(%s) = %v; want %v", tt.id, got, tt.usedBy)
		}
		if got := g.BlastRadius(tt.id); !reflect.DeepEqual(got, tt.radius) {
			t.Errorf("BlastRadius(%s) = %v; want %v", tt.id, got, tt.radius)
		}
	}
	if got := g.BlastRadius("nope"); got != nil {
		t.Errorf("BlastRadius(nope) = %v; want nil", got)
	}
}

func TestNewRefuses(t *testing.T) {
	targets := []Target{{ID: "api"}, {ID: "db"}}
	tests := []struct {
		name      string
		targets   []Target
		links     []Link
		districts []District
		want      []string // substrings of the error
	}{
		{"unknown link ends", targets, []Link{{From: "api", To: "orders-db", Source: SourceDeclared}, {From: "ghost", To: "db", Source: SourceDiscovered}}, nil,
			[]string{"unknown targets: ghost, orders-db"}},
		{"unknown district member", targets, nil, []District{{ID: "shop", Members: []string{"api", "web-9"}}},
			[]string{"unknown targets: web-9"}},
		{"duplicate target", []Target{{ID: "api"}, {ID: "api"}}, nil, nil, []string{`target id "api" is used twice`}},
		{"empty target id", []Target{{Name: "x"}}, nil, nil, []string{`target "x" has no id`}},
		{"self use", targets, []Link{{From: "api", To: "api", Source: SourceDeclared}}, nil, []string{"api → api: a target cannot use itself"}},
		{"bad source", targets, []Link{{From: "api", To: "db", Source: "guessed"}}, nil, []string{`source "guessed"`}},
		{"duplicate district", targets, nil, []District{{ID: "shop"}, {ID: "shop"}}, []string{`district id "shop" is used twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := New(tt.targets, tt.links, tt.districts)
			if err == nil {
				t.Fatalf("New = %v, nil; want an error", g)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestLinksAndDistricts(t *testing.T) {
	targets := []Target{{ID: "web"}, {ID: "api"}, {ID: "db"}}
	links := []Link{
		{From: "web", To: "api", Source: SourceDiscovered},
		{From: "api", To: "db", Source: SourceDiscovered},
		{From: "api", To: "db", Source: SourceDeclared},
		{From: "web", To: "api", Source: SourceDiscovered},
		{From: "web", To: "db", Source: SourceDeclared},
		{From: "web", To: "db", Source: SourceDiscovered},
	}
	g, err := New(targets, links, []District{{ID: "shop", Name: "Shop", Members: []string{"web", "db", "api", "db"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantLinks := []Link{{From: "api", To: "db", Source: SourceDeclared}, {From: "web", To: "api", Source: SourceDiscovered}, {From: "web", To: "db", Source: SourceDeclared}}
	if got := g.Links(); !reflect.DeepEqual(got, wantLinks) {
		t.Errorf("Links() = %v; want %v", got, wantLinks)
	}
	wantDistricts := []District{{ID: "shop", Name: "Shop", Members: []string{"api", "db", "web"}}}
	if got := g.Districts(); !reflect.DeepEqual(got, wantDistricts) {
		t.Errorf("Districts() = %v; want %v", got, wantDistricts)
	}
	if got := g.Uses("api"); !reflect.DeepEqual(got, []string{"db"}) {
		t.Errorf("Uses(api) = %v; want [db]", got)
	}
	if got := g.UsedBy("db"); !reflect.DeepEqual(got, []string{"api", "web"}) {
		t.Errorf("UsedBy(db) = %v; want [api web]", got)
	}
}

// summary is a report reduced to what the table tests compare.
type summary struct {
	healthy, total int
	roots          map[string]rootSummary
	troubled       map[string]string // id → RootCause
}

type rootSummary struct {
	explains, atRisk, cycle string
}

func summarize(r Report) summary {
	s := summary{healthy: r.Healthy, total: r.Total, roots: map[string]rootSummary{}, troubled: map[string]string{}}
	for _, c := range r.RootCauses {
		s.roots[c.ID] = rootSummary{strings.Join(c.Explains, " "), strings.Join(c.AtRisk, " "), strings.Join(c.Cycle, " ")}
	}
	for _, t := range r.Troubled {
		s.troubled[t.ID] = t.RootCause
	}
	return s
}

func TestIncidents(t *testing.T) {
	chain := []string{"site>lb", "lb>web", "web>api", "api>db"}
	tests := []struct {
		name     string
		links    []string
		down     []string
		roots    map[string]rootSummary
		troubled map[string]string
	}{
		{
			name:  "chain, only the database down",
			links: chain, down: []string{"db"},
			roots:    map[string]rootSummary{"db": {atRisk: "api lb site web"}},
			troubled: map[string]string{"db": "db"},
		},
		{
			name:  "chain, everything down",
			links: chain, down: []string{"db", "api", "web", "lb", "site"},
			roots:    map[string]rootSummary{"db": {explains: "api lb site web"}},
			troubled: map[string]string{"db": "db", "api": "db", "web": "db", "lb": "db", "site": "db"},
		},
		{
			name:  "chain, database and api down, the rest still answering",
			links: chain, down: []string{"db", "api"},
			roots:    map[string]rootSummary{"db": {explains: "api", atRisk: "lb site web"}},
			troubled: map[string]string{"db": "db", "api": "db"},
		},
		{
			name: "troubled target above a healthy one is its own root",
			// web is down, api (which it uses) is fine, db under api is down:
			// blame does not cross the healthy api.
			links: chain, down: []string{"web", "db"},
			roots: map[string]rootSummary{
				"web": {atRisk: "lb site"},
				"db":  {atRisk: "api lb site"},
			},
			troubled: map[string]string{"web": "web", "db": "db"},
		},
		{
			name: "diamond over one root",
			// app uses cache and db, both use disk.
			links: []string{"app>cache", "app>db", "cache>disk", "db>disk"},
			down:  []string{"app", "cache", "db", "disk"},
			roots: map[string]rootSummary{"disk": {explains: "app cache db"}},
			troubled: map[string]string{
				"app": "disk", "cache": "disk", "db": "disk", "disk": "disk",
			},
		},
		{
			name: "diamond over two roots: the nearer one is named",
			// app → cache (down), app → svc (down) → db (down): cache is one
			// link away, db two.
			links: []string{"app>cache", "app>svc", "svc>db", "edge>app"},
			down:  []string{"app", "cache", "svc", "db"},
			roots: map[string]rootSummary{
				"cache": {explains: "app", atRisk: "edge"},
				"db":    {explains: "app svc", atRisk: "edge"},
			},
			troubled: map[string]string{"app": "cache", "cache": "cache", "svc": "db", "db": "db"},
		},
		{
			name:  "diamond over two roots at the same distance: the smaller id",
			links: []string{"app>s3", "app>pg"},
			down:  []string{"app", "s3", "pg"},
			roots: map[string]rootSummary{
				"pg": {explains: "app"},
				"s3": {explains: "app"},
			},
			troubled: map[string]string{"app": "pg", "pg": "pg", "s3": "s3"},
		},
		{
			name:  "two independent roots",
			links: []string{"shop>orders-db", "blog>blog-db", "reader>blog"},
			down:  []string{"orders-db", "blog-db", "shop"},
			roots: map[string]rootSummary{
				"orders-db": {explains: "shop"},
				"blog-db":   {atRisk: "blog reader"},
			},
			troubled: map[string]string{"orders-db": "orders-db", "blog-db": "blog-db", "shop": "orders-db"},
		},
		{
			name: "cycle of troubled targets",
			// a ⇄ b ⇄ c all down, x uses a and is down, y uses c and is fine.
			links: []string{"a>b", "b>c", "c>a", "x>a", "y>c"},
			down:  []string{"a", "b", "c", "x"},
			roots: map[string]rootSummary{"a": {explains: "b c x", atRisk: "y", cycle: "b c"}},
			troubled: map[string]string{
				"a": "a", "b": "a", "c": "a", "x": "a",
			},
		},
		{
			name:  "cycle with a troubled dependency outside it",
			links: []string{"a>b", "b>a", "b>db", "web>a"},
			down:  []string{"a", "b", "db", "web"},
			roots: map[string]rootSummary{"db": {explains: "a b web"}},
			troubled: map[string]string{
				"a": "db", "b": "db", "db": "db", "web": "db",
			},
		},
		{
			name: "cycle through a healthy member is no troubled cycle",
			// a → b → c → a with b healthy: a's only dependency is healthy.
			links:    []string{"a>b", "b>c", "c>a"},
			down:     []string{"a", "c"},
			roots:    map[string]rootSummary{"a": {explains: "c", atRisk: "b"}},
			troubled: map[string]string{"a": "a", "c": "a"},
		},
		{
			name:     "nothing troubled",
			links:    chain,
			roots:    map[string]rootSummary{},
			troubled: map[string]string{},
		},
		{
			name:     "a lone troubled target",
			links:    []string{"lonely", "site>lb"},
			down:     []string{"lonely"},
			roots:    map[string]rootSummary{"lonely": {}},
			troubled: map[string]string{"lonely": "lonely"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, tt.links, tt.down...)
			rep := g.Incidents()
			got := summarize(rep)
			want := summary{
				healthy: len(g.Targets()) - len(tt.down), total: len(g.Targets()),
				roots: tt.roots, troubled: tt.troubled,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v;\nwant %+v", got, want)
			}
			checkReport(t, g, rep)
		})
	}
}

func TestCycleRootIsTroubledLongest(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	targets := []Target{
		{ID: "a", Troubled: true, Since: t0.Add(2 * time.Minute)},
		{ID: "b", Troubled: true, Since: t0},
		{ID: "c", Troubled: true}, // unknown since: counts as latest
		{ID: "d", Troubled: true, Since: t0},
	}
	links := []Link{{"a", "b", SourceDeclared}, {"b", "c", SourceDeclared}, {"c", "d", SourceDeclared}, {"d", "a", SourceDiscovered}}
	g, err := New(targets, links, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := g.Incidents()
	if len(rep.RootCauses) != 1 || rep.RootCauses[0].ID != "b" {
		t.Fatalf("root causes %+v; want only b (troubled longest, ties to the smaller id)", rep.RootCauses)
	}
	if got, want := rep.RootCauses[0].Cycle, []string{"a", "c", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("cycle %v; want %v", got, want)
	}
	if !rep.RootCauses[0].Since.Equal(t0) {
		t.Errorf("since %v; want %v", rep.RootCauses[0].Since, t0)
	}
}

func TestTroubledKeepsItsOwnWords(t *testing.T) {
	g := build(t, []string{"api>db"}, "db")
	rep := g.Incidents()
	want := Troubled{
		Target:     Target{ID: "db", Name: "db", Kind: "probe", Troubled: true, Status: "offline", Reason: "connection refused"},
		RootCause:  "db",
		RootCauses: []string{"db"},
	}
	if len(rep.Troubled) != 1 || !reflect.DeepEqual(rep.Troubled[0], want) {
		t.Errorf("troubled %+v; want [%+v]", rep.Troubled, want)
	}
}

// TestDeepChain makes sure nothing recurses per link.
func TestDeepChain(t *testing.T) {
	const depth = 20000
	targets := make([]Target, depth)
	links := make([]Link, 0, depth)
	for i := range targets {
		targets[i] = Target{ID: id(i), Troubled: true}
		if i > 0 {
			links = append(links, Link{From: id(i), To: id(i - 1), Source: SourceDeclared})
		}
	}
	links = append(links, Link{From: id(0), To: id(depth - 1), Source: SourceDeclared}) // and close it into one big cycle
	g, err := New(targets, links, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := g.Incidents()
	if len(rep.RootCauses) != 1 || len(rep.RootCauses[0].Explains) != depth-1 {
		t.Fatalf("got %d root causes; want 1 explaining %d", len(rep.RootCauses), depth-1)
	}
	if n := len(g.BlastRadius(id(0))); n != depth-1 {
		t.Errorf("blast radius of the bottom has %d targets; want %d", n, depth-1)
	}
}
