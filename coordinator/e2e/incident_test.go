package e2e

// The incident report against a real PostgreSQL (Debian's postgresql package), started by the
// test on a free loopback port in a temporary directory, and a small app in the test whose
// /health really talks to it.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/lib/probe"
)

// orders-db (a real PostgreSQL) ← app-health (an HTTP health check that connects to it) ← web-1
// (a server whose agent stays online). Stop the database: incident_report names it the only
// root cause, explaining app-health, with web-1 at risk. Start it again: the incident ends.
func TestIncidentRootCauseWithRealPostgres(t *testing.T) {
	t.Parallel()
	pg := startIncidentPostgres(t)

	// The app: /health makes a real PostgreSQL startup exchange with the database and
	// answers 503 with the error when it fails.
	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		res := probe.Run(r.Context(), probe.Spec{Engine: "postgres", Target: pg.addr, Timeout: 300 * time.Millisecond})
		if !res.OK {
			http.Error(w, "orders-db: "+res.Reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})}
	go app.Serve(appLn)
	t.Cleanup(func() { app.Close() })
	appAddr := appLn.Addr().String()

	c := startCoordinatorWithConfig(t, fmt.Sprintf(`districts:
  - id: shop
    members: [orders-db, app-health, web-1]
resources:
  - id: orders-db
    kind: database
    engine: postgres
    target: %s
    interval: 1s
    timeout: 500ms
  - id: app-health
    kind: probe
    engine: http
    target: http://%s/health
    interval: 1s
    timeout: 500ms
links:
  - {from: app-health, to: orders-db}
  - {from: web-1, to: app-health}
probes: {interval: 1s, timeout: 500ms, failuresBeforeTroubled: 2}
`, pg.addr, appAddr))
	tok := c.token()
	startAgent(t, c, "web-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "web-1", "online", 20*time.Second)

	cs, err := c.mcpClient(tok, "e2e-incident")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	// Everything healthy once both resources have been checked.
	eventually(t, 15*time.Second, "no incident while everything runs", func() error {
		var rep incidentReport
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if len(rep.RootCauses) != 0 || len(rep.Troubled) != 0 || rep.Healthy != rep.Total || rep.Total < 3 {
			return fmt.Errorf("report %+v", rep)
		}
		var rs resourceList
		if err := callTool(cs, "list_resources", nil, &rs); err != nil {
			return err
		}
		for _, id := range []string{"orders-db", "app-health"} {
			if r := rs.get(id); r.Status != "ok" || r.Troubled {
				return fmt.Errorf("%s: %+v", id, r)
			}
		}
		return nil
	})

	// The database stops.
	stopped := time.Now()
	pg.stop()
	var rep incidentReport
	eventually(t, 10*time.Second, "orders-db the root cause", func() error {
		rep = incidentReport{}
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if len(rep.RootCauses) != 1 || rep.RootCauses[0].ID != "orders-db" {
			return fmt.Errorf("root causes %+v; want orders-db alone", rep.RootCauses)
		}
		rc := rep.RootCauses[0]
		if !strings.Contains(rc.Reason, "connection refused") || !strings.Contains(rc.Reason, pg.addr) {
			return fmt.Errorf("orders-db reason %q; want the real refusal naming %s", rc.Reason, pg.addr)
		}
		if !slices.Contains(rc.Explains, "app-health") || !slices.Contains(rc.AtRisk, "web-1") {
			return fmt.Errorf("orders-db explains %v, at risk %v; want app-health explained, web-1 at risk", rc.Explains, rc.AtRisk)
		}
		troubled := map[string]string{}
		for _, tr := range rep.Troubled {
			troubled[tr.ID] = tr.RootCause
		}
		if troubled["app-health"] != "orders-db" {
			return fmt.Errorf("troubled %+v; want app-health with root cause orders-db", rep.Troubled)
		}
		return nil
	})
	t.Logf("orders-db named the root cause %s after PostgreSQL stopped", time.Since(stopped).Round(100*time.Millisecond))
	rc := rep.RootCauses[0]
	if rc.Kind != "database" || rc.Since == "" || slices.Contains(rc.Explains, "web-1") || slices.Contains(rc.AtRisk, "app-health") {
		t.Errorf("root cause %+v; want kind database, a since, app-health only explained and web-1 only at risk", rc)
	}
	for _, tr := range rep.Troubled {
		if tr.ID == "web-1" {
			t.Errorf("web-1 is troubled (%+v) though its agent is online", tr)
		}
		if tr.ID == "app-health" && !strings.Contains(tr.Reason, "503") {
			t.Errorf("app-health reason %q; want the 503 the app answers", tr.Reason)
		}
	}

	var rs resourceList
	if err := callTool(cs, "list_resources", nil, &rs); err != nil {
		t.Fatal(err)
	}
	if db := rs.get("orders-db"); db.Status != "failed" || !db.Troubled || db.Reason != rc.Reason {
		t.Errorf("list_resources orders-db %+v; want failed, troubled, reason %q", db, rc.Reason)
	}

	var topo topologyView
	if err := callTool(cs, "get_topology", map[string]any{"target": "orders-db"}, &topo); err != nil {
		t.Fatal(err)
	}
	if br := slices.Sorted(slices.Values(topo.BlastRadius)); !slices.Equal(br, []string{"app-health", "web-1"}) || !slices.Equal(topo.UsedBy, []string{"app-health"}) {
		t.Errorf("get_topology orders-db %+v; want used by app-health, blast radius app-health and web-1", topo)
	}

	// The database comes back: the incident ends.
	restarted := time.Now()
	pg.start()
	eventually(t, 10*time.Second, "the incident ends", func() error {
		var rep incidentReport
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if len(rep.RootCauses) != 0 {
			return fmt.Errorf("root causes %+v", rep.RootCauses)
		}
		return nil
	})
	t.Logf("incident over %s after PostgreSQL started again", time.Since(restarted).Round(100*time.Millisecond))
}

type incidentReport struct {
	Healthy, Total int
	RootCauses     []struct {
		ID, Name, Kind, Status, Reason, Since string
		Explains, AtRisk                      []string
	}
	Troubled []struct{ ID, Name, Kind, Status, Reason, Since, RootCause string }
}

type resourceView struct {
	ID, Kind, Engine, Target, Status, Reason, CheckedFrom string
	Troubled                                              bool
}

type resourceList struct{ Resources []resourceView }

func (l resourceList) get(id string) resourceView {
	for _, r := range l.Resources {
		if r.ID == id {
			return r
		}
	}
	return resourceView{ID: id, Status: "not listed"}
}

type topologyView struct {
	Target, Kind              string
	Uses, UsedBy, BlastRadius []string
}

// callTool calls a tool and decodes its structured result into out.
func callTool(cs *mcp.ClientSession, name string, args map[string]any, out any) error {
	if args == nil {
		args = map[string]any{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		return fmt.Errorf("%s error: %s", name, b)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// incidentPostgres is a PostgreSQL server in a temporary directory, on a loopback port,
// that the test stops and starts.
type incidentPostgres struct {
	*daemon
	addr string
}

// startIncidentPostgres runs initdb and starts the server; it is stopped when the test ends.
// Without PostgreSQL the test is skipped, except in CI, which must install it.
func startIncidentPostgres(t *testing.T) *incidentPostgres {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(m) > 0 {
			initdb, err = m[len(m)-1], nil
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must install postgresql: initdb not found")
		}
		t.Skip("initdb not found: apt-get install postgresql")
	}
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	if _, err := os.Stat(postgres); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must install postgresql: postgres beside %s: %v", initdb, err)
		}
		t.Skipf("postgres not beside %s: apt-get install postgresql", initdb)
	}

	uid, gid := os.Getuid(), os.Getgid()
	as := func(*exec.Cmd) {}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root without a postgres user to run the server as: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		as = func(cmd *exec.Cmd) {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		}
	}
	// t.TempDir's parent is private to root; the server's user needs its own directory.
	dir, err := os.MkdirTemp("", "gridcity-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth", "trust", "--no-sync", "--no-instructions")
	as(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	addr := freePort(t)
	host, port, _ := net.SplitHostPort(addr)
	d := startDaemon(t, "postgres", func() *exec.Cmd {
		cmd := exec.Command(postgres, "-D", data, "-p", port, "-c", "listen_addresses="+host,
			"-c", "unix_socket_directories="+dir, "-c", "fsync=off", "-c", "logging_collector=off")
		as(cmd)
		return cmd
	}, probe.Spec{Engine: "postgres", Target: addr, Timeout: time.Second})
	return &incidentPostgres{daemon: d, addr: addr}
}
