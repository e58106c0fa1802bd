package e2e

// The incident report against a real Redis and a real nginx (Debian's redis-server and nginx),
// both started by the test on loopback ports of their own: nginx balances a small app in the
// test whose answers depend on Redis.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridcity/gridcity/lib/probe"
)

// sessions (a real Redis) ← shop-api (an app that PINGs it on every request) ← shop-lb (a
// real nginx in front of the app) ← web-1 (a server whose agent stays online and probes the
// load balancer it uses). Stop Redis: sessions is the one root cause, explaining shop-api and
// shop-lb, with web-1 at risk; the load balancer's check ran on web-1 and it lists its backend
// as troubled. Start Redis again: the incident ends and stays in the history with its end.
func TestIncidentRootCauseWithRealRedisAndNginx(t *testing.T) {
	t.Parallel()
	redis := startRedis(t)

	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := probe.Run(r.Context(), probe.Spec{Engine: "redis", Target: redis.addr, Timeout: 300 * time.Millisecond})
		if !res.OK {
			http.Error(w, "sessions: "+res.Reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})}
	go app.Serve(appLn)
	t.Cleanup(func() { app.Close() })
	lb := startNginx(t, appLn.Addr().String())

	c := startCoordinatorWithConfig(t, fmt.Sprintf(`resources:
  - {id: sessions, kind: database, engine: redis, target: %q}
  - {id: shop-api, kind: probe, engine: http, target: "http://%s/"}
  - {id: shop-lb, kind: load_balancer, engine: http, target: "http://%s/"}
links:
  - {from: shop-lb, to: shop-api}
  - {from: shop-api, to: sessions}
  - {from: web-1, to: shop-lb}
probes: {interval: 1s, timeout: 500ms, failuresBeforeTroubled: 2}
`, redis.addr, appLn.Addr(), lb))
	tok := c.token()
	startAgent(t, c, "web-1", t.TempDir(), c.joinLine())
	c.waitStatus(tok, "web-1", "online", 20*time.Second)
	cs, err := c.mcpClient(tok, "e2e-services")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	// All healthy, and the load balancer is checked from web-1, the server that uses it.
	eventually(t, 20*time.Second, "all healthy, shop-lb checked from web-1", func() error {
		var rep incidentReport
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if len(rep.Troubled) != 0 || rep.Healthy != rep.Total || rep.Total != 4 {
			return fmt.Errorf("report %+v", rep)
		}
		var rs resourceList
		if err := callTool(cs, "list_resources", nil, &rs); err != nil {
			return err
		}
		for _, id := range []string{"sessions", "shop-api", "shop-lb"} {
			if r := rs.get(id); r.Status != "ok" {
				return fmt.Errorf("%s: %+v", id, r)
			}
		}
		if from := rs.get("shop-lb").CheckedFrom; from != "web-1" {
			return fmt.Errorf("shop-lb checked from %q; want web-1", from)
		}
		if from := rs.get("sessions").CheckedFrom; from != "coordinator" {
			return fmt.Errorf("sessions checked from %q; want the coordinator (no server uses it directly)", from)
		}
		return nil
	})

	stopped := time.Now()
	redis.stop()
	var rep incidentReport
	eventually(t, 30*time.Second, "sessions the root cause", func() error {
		rep = incidentReport{}
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if len(rep.RootCauses) != 1 || rep.RootCauses[0].ID != "sessions" {
			return fmt.Errorf("root causes %+v; want sessions alone", rep.RootCauses)
		}
		rc := rep.RootCauses[0]
		if !strings.Contains(rc.Reason, "connection refused") || !strings.Contains(rc.Reason, redis.addr) {
			return fmt.Errorf("sessions reason %q; want the real refusal naming %s", rc.Reason, redis.addr)
		}
		if ex := slices.Sorted(slices.Values(rc.Explains)); !slices.Equal(ex, []string{"shop-api", "shop-lb"}) || !slices.Equal(rc.AtRisk, []string{"web-1"}) {
			return fmt.Errorf("sessions explains %v, at risk %v; want shop-api and shop-lb explained, web-1 at risk", rc.Explains, rc.AtRisk)
		}
		return nil
	})
	t.Logf("sessions named the root cause %s after Redis stopped", time.Since(stopped).Round(100*time.Millisecond))
	for _, tr := range rep.Troubled {
		if tr.ID != "sessions" && tr.RootCause != "sessions" {
			t.Errorf("%s's root cause is %q; want sessions", tr.ID, tr.RootCause)
		}
		if tr.ID == "shop-lb" && !strings.Contains(tr.Reason, "503") {
			t.Errorf("shop-lb reason %q; want the 503 nginx passes on", tr.Reason)
		}
	}
	var rs struct {
		Resources []struct {
			ID, CheckedFrom string
			Backends        []struct {
				ID       string
				Troubled bool
			}
			Checks []struct{ From, Status string }
		}
	}
	if err := callTool(cs, "list_resources", nil, &rs); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Resources {
		if r.ID != "shop-lb" {
			continue
		}
		if len(r.Backends) != 1 || r.Backends[0].ID != "shop-api" || !r.Backends[0].Troubled {
			t.Errorf("shop-lb backends %+v; want shop-api, troubled", r.Backends)
		}
		if r.CheckedFrom != "web-1" || !slices.ContainsFunc(r.Checks, func(c struct{ From, Status string }) bool { return c.From == "web-1" && c.Status == "failed" }) {
			t.Errorf("shop-lb checked from %q, checks %+v; want a failed check from web-1", r.CheckedFrom, r.Checks)
		}
	}

	restarted := time.Now()
	redis.start()
	eventually(t, 30*time.Second, "the incident ends", func() error {
		var rep struct {
			RootCauses []struct{ ID string }
			Troubled   []struct{ ID string }
			Recent     []struct{ Target, StartedAt, EndedAt string }
		}
		if err := callTool(cs, "incident_report", nil, &rep); err != nil {
			return err
		}
		if len(rep.RootCauses) != 0 || len(rep.Troubled) != 0 {
			return fmt.Errorf("still troubled: %+v", rep.Troubled)
		}
		if len(rep.Recent) == 0 || rep.Recent[0].Target != "sessions" || rep.Recent[0].EndedAt == "" {
			return fmt.Errorf("history %+v; want the sessions incident, ended", rep.Recent)
		}
		return nil
	})
	t.Logf("all healthy %s after Redis started again", time.Since(restarted).Round(100*time.Millisecond))
}

// daemon is a server process the test stops and starts again (SIGINT stops Redis, nginx and
// PostgreSQL cleanly and fast); it is stopped when the test ends.
type daemon struct {
	t     *testing.T
	name  string
	cmd   func() *exec.Cmd
	ready probe.Spec
	run   *exec.Cmd
	out   *syncBuffer
	done  chan struct{}
}

func startDaemon(t *testing.T, name string, cmd func() *exec.Cmd, ready probe.Spec) *daemon {
	t.Helper()
	d := &daemon{t: t, name: name, cmd: cmd, ready: ready}
	t.Cleanup(d.stop)
	d.start()
	return d
}

// start starts the process and waits until it answers its ready probe.
func (d *daemon) start() {
	d.t.Helper()
	d.run = d.cmd()
	d.out = &syncBuffer{}
	d.run.Stdout, d.run.Stderr = d.out, d.out
	if err := d.run.Start(); err != nil {
		d.t.Fatalf("start %s: %v", d.name, err)
	}
	done := make(chan struct{})
	d.done = done
	run, out, t := d.run, d.out, d.t
	go func() { run.Wait(); close(done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- output of %s ----\n%s", d.name, out.String())
		}
	})
	eventually(d.t, 30*time.Second, d.name+" answers", func() error {
		select {
		case <-done:
			return fmt.Errorf("%s exited: %s", d.name, out.String())
		default:
		}
		if r := probe.Run(context.Background(), d.ready); !r.OK {
			return fmt.Errorf("%s", r.Reason)
		}
		return nil
	})
}

// stop interrupts the process and waits until it has exited.
func (d *daemon) stop() {
	if d.run == nil {
		return
	}
	select {
	case <-d.done:
		return
	default:
	}
	d.run.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.run.Process.Kill()
		<-d.done
	}
}

// serviceBinary finds a server binary from a Debian package; without it the test is skipped,
// except in CI, which must install it.
func serviceBinary(t *testing.T, bin, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	if p := "/usr/sbin/" + bin; fileExists(p) {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must install %s (Debian package %s)", bin, pkg)
	}
	t.Skipf("%s not found: apt-get install %s", bin, pkg)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

type redisServer struct {
	*daemon
	addr string
}

// startRedis runs redis-server on a free loopback port without persistence.
func startRedis(t *testing.T) *redisServer {
	bin := serviceBinary(t, "redis-server", "redis-server")
	dir := t.TempDir()
	addr := freePort(t)
	host, port, _ := net.SplitHostPort(addr)
	d := startDaemon(t, "redis-server", func() *exec.Cmd {
		return exec.Command(bin, "--port", port, "--bind", host, "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no", "--protected-mode", "no")
	}, probe.Spec{Engine: "redis", Target: addr, Timeout: time.Second})
	return &redisServer{daemon: d, addr: addr}
}

// startNginx runs nginx on a free loopback port as a load balancer in front of backend and
// returns its address.
func startNginx(t *testing.T, backend string) string {
	bin := serviceBinary(t, "nginx", "nginx")
	dir := t.TempDir()
	addr := freePort(t)
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr warn;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	upstream shop { server %[3]s max_fails=0; }
	server {
		listen %[2]s;
		location / { proxy_pass http://shop; proxy_connect_timeout 1s; proxy_read_timeout 2s; }
	}
}
`, dir, addr, backend)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, "nginx", func() *exec.Cmd { return exec.Command(bin, "-p", dir, "-c", confFile, "-e", "stderr") },
		probe.Spec{Engine: "http", Target: "http://" + addr + "/", Timeout: time.Second})
	return addr
}
