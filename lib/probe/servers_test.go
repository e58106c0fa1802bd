package probe

// Tests against real servers from Debian's packages (postgresql, redis-server, nginx), each
// started by the test on a free loopback port in a temporary directory, so that no system
// service is needed or touched.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// need finds a server binary; when it is missing the test is skipped, except in CI, which
// must install it.
func need(t *testing.T, bin, pkg string, dirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	for _, pattern := range dirs {
		if m, _ := filepath.Glob(filepath.Join(pattern, bin)); len(m) > 0 {
			return m[len(m)-1]
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must install %s (Debian package %s)", bin, pkg)
	}
	t.Skipf("%s not found: apt-get install %s", bin, pkg)
	return ""
}

// freeAddr is a loopback address free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	return closedPort(t)
}

// start runs cmd until the test ends, then stops it with SIGINT (a fast, clean shutdown for
// postgres, redis and nginx alike).
func start(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), out.String())
		}
	})
}

// waitOK probes until the server answers, for at most 30 s.
func waitOK(t *testing.T, s Spec) Result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := Run(context.Background(), s)
		if r.OK || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// asPostgres runs cmd as the postgres user when the test runs as root (initdb and postgres
// refuse root), and returns that user's uid and gid for the files it must own.
func asPostgres(t *testing.T, cmd *exec.Cmd) (int, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid()
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("running as root without a postgres user to run the server as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if cmd != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	return uid, gid
}

func TestPostgresServer(t *testing.T) {
	initdb := need(t, "initdb", "postgresql", "/usr/lib/postgresql/*/bin")
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		initdb = real
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	if _, err := os.Stat(postgres); err != nil {
		t.Fatalf("postgres beside %s: %v", initdb, err)
	}

	// t.TempDir's parent is private to root; the server's user needs its own directory.
	dir, err := os.MkdirTemp("", "gridcity-probe-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	uid, gid := asPostgres(t, nil)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte("not-the-probe's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(pwfile, uid, gid)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--pwfile", pwfile, "--auth", "scram-sha-256", "--no-sync", "--no-instructions")
	asPostgres(t, cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}

	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	cmd = exec.Command(postgres, "-D", data, "-p", port, "-c", "listen_addresses="+host,
		"-c", "unix_socket_directories="+dir, "-c", "fsync=off", "-c", "logging_collector=off")
	asPostgres(t, cmd)
	start(t, cmd)
	spec := Spec{Engine: "postgres", Target: addr, Timeout: 2 * time.Second}

	// Password authentication: the server asks for SCRAM (10) before anything else.
	r := waitOK(t, spec)
	if !r.OK || r.Metrics["auth_required"] != 1 || r.Metrics["auth_method"] != 10 {
		t.Fatalf("postgres with scram-sha-256: %+v; want OK, auth_required 1, auth_method 10", r)
	}

	// Trust: the server says AuthenticationOk first (and only then refuses the unknown role).
	setHBA := func(method string) {
		hba := fmt.Sprintf("host all all 127.0.0.1/32 %s\nhost all all ::1/128 %s\n", method, method)
		if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(syscall.SIGHUP)
	}
	setHBA("trust")
	r = waitFor(t, spec, func(r Result) bool { _, auth := r.Metrics["auth_method"]; return auth && r.Metrics["auth_method"] == 0 })
	if !r.OK || r.Metrics["auth_required"] != 0 {
		t.Errorf("postgres with trust: %+v; want OK, auth_required 0", r)
	}

	// Reject: an ErrorResponse (28000) that still shows a running server.
	setHBA("reject")
	r = waitFor(t, spec, func(r Result) bool { _, auth := r.Metrics["auth_method"]; return !auth })
	if !r.OK || r.Metrics["auth_required"] != 1 {
		t.Errorf("postgres rejecting by pg_hba.conf: %+v; want OK, auth_required 1", r)
	}

	// Stopped: the real refusal text.
	cmd.Process.Signal(syscall.SIGINT)
	r = waitFor(t, spec, func(r Result) bool { return !r.OK })
	if !strings.Contains(r.Reason, "connection refused") && !strings.Contains(r.Reason, "shutting down") {
		t.Errorf("postgres stopped: %+v; want connection refused or shutting down", r)
	}
}

// waitFor probes until done says so, for at most 20 s, and returns the last result.
func waitFor(t *testing.T, s Spec, done func(Result) bool) Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := Run(context.Background(), s)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: still %+v after 20 s", s.Engine, s.Target, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
func TestRedisServer(t *testing.T) {
	bin := need(t, "redis-server", "redis-server")
	dir := t.TempDir()
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	start(t, exec.Command(bin, "--port", port, "--bind", host, "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "no"))
	spec := Spec{Engine: "redis", Target: addr, Timeout: 2 * time.Second}
	r := waitOK(t, spec)
	if !r.OK || r.Metrics["auth_required"] != 0 {
		t.Fatalf("redis without a password: %+v; want OK, auth_required 0", r)
	}

	// A password: PING answers NOAUTH, which still shows a running server.
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(c, "*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$11\r\nrequirepass\r\n$6\r\nsecret\r\n")
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	c.Close()
	if string(buf[:n]) != "+OK\r\n" {
		t.Fatalf("CONFIG SET requirepass: %q; want +OK", buf[:n])
	}
	r = Run(context.Background(), spec)
	if !r.OK || r.Metrics["auth_required"] != 1 {
		t.Errorf("redis with a password: %+v; want OK, auth_required 1", r)
	}
}

func TestNginxServer(t *testing.T) {
	bin := need(t, "nginx", "nginx", "/usr/sbin")
	dir := t.TempDir()
	cert, leaf := selfSigned(t, time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour))
	certFile, keyFile := writeKeyPair(t, dir, cert)
	trust(t, leaf)
	plain, secure := freeAddr(t), freeAddr(t)
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
	server {
		listen %[2]s;
		listen %[3]s ssl;
		ssl_certificate %[4]s;
		ssl_certificate_key %[5]s;
		location = /ok { return 200 "ok\n"; }
		location = /down { return 503; }
		location = /moved { return 301 /ok; }
	}
}
`, dir, plain, secure, certFile, keyFile)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, exec.Command(bin, "-p", dir, "-c", confFile, "-e", "stderr"))

	r := waitOK(t, Spec{Engine: "http", Target: "http://" + plain + "/ok", Timeout: 2 * time.Second})
	if !r.OK || r.Metrics["status_code"] != 200 {
		t.Fatalf("nginx /ok: %+v; want OK, status_code 200", r)
	}
	tests := []struct {
		engine, url string
		ok          bool
		status      float64
		reason      string
	}{
		{"http", "http://" + plain + "/down", false, 503, "HTTP 503 Service Unavailable"},
		{"http", "http://" + plain + "/moved", true, 200, ""},
		{"https", "https://" + secure + "/ok", true, 200, ""},
		{"https", "https://" + secure + "/down", false, 503, "HTTP 503 Service Unavailable"},
	}
	for _, tt := range tests {
		r := Run(context.Background(), Spec{Engine: tt.engine, Target: tt.url, Timeout: 2 * time.Second})
		if r.OK != tt.ok || r.Metrics["status_code"] != tt.status || r.Reason != tt.reason {
			t.Errorf("nginx %s: %+v; want OK %v, status_code %v, reason %q", tt.url, r, tt.ok, tt.status, tt.reason)
		}
		if tt.engine == "https" && (!r.TLSNotAfter.Equal(leaf.NotAfter) || r.Metrics["days_left"] < 89.9) {
			t.Errorf("nginx %s: TLSNotAfter %s, days_left %v; want %s, about 90", tt.url, r.TLSNotAfter, r.Metrics["days_left"], leaf.NotAfter)
		}
	}
}
