package store

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// TestPostgresMigratesOnceWhenStartedTogether: coordinators starting at
// the same moment on a new database all open it; the schema is built
// once (each migration recorded once), under the advisory lock.
func TestPostgresMigratesOnceWhenStartedTogether(t *testing.T) {
	u := pgtest.Database(t)
	ctx := context.Background()
	const n = 6
	stores := make([]*Postgres, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = OpenPostgres(ctx, u)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("coordinator %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var rows, version int
	if err := stores[0].pool.QueryRow(ctx, `SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != len(pgMigrations) || version != len(pgMigrations) {
		t.Fatalf("schema_version holds %d rows up to %d; want each of the %d migrations once", rows, version, len(pgMigrations))
	}
}

// TestPostgresRefusesANewerSchema: a database migrated by a newer
// gridcity is not touched by an older one.
func TestPostgresRefusesANewerSchema(t *testing.T) {
	u := pgtest.Database(t)
	s := openPostgres(t, u)
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO schema_version(version) VALUES ($1)`, len(pgMigrations)+1); err != nil {
		t.Fatal(err)
	}
	_, err := OpenPostgres(context.Background(), u)
	if err == nil || !strings.Contains(err.Error(), "newer than this gridcity") || !strings.Contains(err.Error(), "upgrade gridcity") {
		t.Fatalf("open a newer schema: %v; want a refusal saying to upgrade", err)
	}
}

// TestPostgresErrorsSayWhatToDoWithoutThePassword: a URL that cannot be
// read, a wrong password, a port where nothing listens and a database
// that does not exist each give an error that names the place and what to
// check, and none shows the password.
func TestPostgresErrorsSayWhatToDoWithoutThePassword(t *testing.T) {
	good, err := url.Parse(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := good.User.Password()
	// A port nobody listens on: one the test holds, closed to connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	with := func(f func(u *url.URL)) string {
		u := *good
		f(&u)
		return u.String()
	}
	const secret = "s3cret-Pa55"
	for _, tt := range []struct {
		name, url string
		want      []string
		secrets   []string
	}{
		{"not a postgres URL", "mysql://root:" + secret + "@db/x", []string{"not a PostgreSQL URL", "postgres://USER:PASSWORD@HOST:PORT/DATABASE"}, []string{secret}},
		{"bad port", "postgres://gridcity:" + secret + "@db:port/x", []string{"cannot be read", "postgres://USER:PASSWORD@HOST:PORT/DATABASE"}, []string{secret}},
		{"wrong password", with(func(u *url.URL) { u.User = url.UserPassword("postgres", secret) }), []string{"cannot reach the PostgreSQL store", "password", `user "postgres"`}, []string{secret}},
		{"nothing listens", with(func(u *url.URL) { u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(closedPort)) }), []string{"cannot reach the PostgreSQL store", "check that PostgreSQL runs there"}, []string{pw}},
		{"no such database", with(func(u *url.URL) { u.Path = "/nowhere" }), []string{"cannot reach the PostgreSQL store", `database "nowhere"`, "the database exists"}, []string{pw}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := OpenPostgres(ctx, tt.url)
			if err == nil {
				s.Close()
				t.Fatal("opened; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q; want it to say %q", err, w)
				}
			}
			for _, sec := range tt.secrets {
				if strings.Contains(err.Error(), sec) {
					t.Errorf("error %q shows the password", err)
				}
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"postgres://gc:pw@db:5432/gridcity", "postgres://gc:xxxxx@db:5432/gridcity"},
		{"postgres://gc@db/gridcity", "postgres://gc@db/gridcity"},
		{"postgres://gc:p%40ss@db:port/x", "postgres://gc:xxxxx@db:port/x"},
		{"postgresql://gc:a@b@db:5432/x", "postgresql://gc:xxxxx@db:5432/x"},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// TestPostgresSortsNamesByTheirBytes: on a database whose locale sorts
// "a" before "B" (ICU's en-US, as many operators' are), the lists come in
// SQLite's order, by bytes, as they do from the embedded store.
func TestPostgresSortsNamesByTheirBytes(t *testing.T) {
	s := openPostgres(t, pgtest.DatabaseWith(t, "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"))
	ctx := context.Background()
	var probe string
	if err := s.pool.QueryRow(ctx, `SELECT string_agg(x, ',' ORDER BY x) FROM (VALUES ('a'), ('B')) v(x)`).Scan(&probe); err != nil || probe != "a,B" {
		t.Fatalf("the database sorts %q (%v); the test wants a locale that puts a before B", probe, err)
	}
	names := []string{"a-web", "B-web", "_db", "Z"}
	want := "B-web,Z,_db,a-web" // by bytes
	now := time.Now()
	for _, n := range names {
		if err := s.CreateJoinToken(ctx, JoinToken{Hash: []byte(n), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Enroll(ctx, []byte(n), now, Agent{Name: n, Serial: n, EnrolledAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveServers(ctx, []ServerRecord{{Name: n, State: []byte{1}, Hello: []byte{1}, LastSeen: now}}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateToken(ctx, Token{Name: n, Scope: ScopeRead, Hash: []byte(n), CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateApprover(ctx, Approver{Name: n, PasswordHash: "h", CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveRequestAudited(ctx, RequestRecord{ID: n, Server: n, Status: "pending", CreatedAt: now, Body: []byte("{}")}, step(n, "requested", "{}")); err != nil {
			t.Fatal(err)
		}
		p := MetricPoint{Server: "web-1", Metric: "disk:/" + n, At: now}
		p.Add(1)
		if err := s.AppendMetrics(ctx, []MetricPoint{p}, now, DefaultMetricRetention); err != nil {
			t.Fatal(err)
		}
	}
	join := func(f func(i int) string, n int) string {
		var out []string
		for i := range n {
			out = append(out, f(i))
		}
		return strings.Join(out, ",")
	}
	agents, _ := s.Agents(ctx)
	servers, _ := s.Servers(ctx)
	tokens, _ := s.Tokens(ctx)
	approvers, _ := s.Approvers(ctx)
	requests, _ := s.Requests(ctx, -1)
	metrics, _ := s.MetricHistory(ctx, "web-1", MetricStep, now.Add(-time.Hour), 0)
	for what, got := range map[string]string{
		"agents":    join(func(i int) string { return agents[i].Name }, len(agents)),
		"servers":   join(func(i int) string { return servers[i].Name }, len(servers)),
		"tokens":    join(func(i int) string { return tokens[i].Name }, len(tokens)),
		"approvers": join(func(i int) string { return approvers[i].Name }, len(approvers)),
		"metrics":   strings.ReplaceAll(join(func(i int) string { return metrics[i].Metric }, len(metrics)), "disk:/", ""),
	} {
		if got != want {
			t.Errorf("%s in the order %s; want %s", what, got, want)
		}
	}
	// Newest first, and among requests of the same moment by id, descending.
	if got := join(func(i int) string { return requests[i].ID }, len(requests)); got != "a-web,_db,Z,B-web" {
		t.Errorf("requests in the order %s; want a-web,_db,Z,B-web", got)
	}
}
