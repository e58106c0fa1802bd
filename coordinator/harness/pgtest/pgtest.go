// Package pgtest runs a throwaway PostgreSQL server for tests, as users
// meet it: Debian's initdb and postgres, a temporary data directory, a
// loopback port of its own, password authentication over TCP. One server
// serves a test binary (started on first use, stopped by Run); each test
// gets a database of its own, made with CREATE DATABASE, which is quick.
//
// When PostgreSQL is not installed a test that needs it is skipped, except
// in CI (CI=true), where it fails: CI installs it (.ci/run).
//
// It is harness, for tests only: no product binary may import it
// (deps_test.go in coordinator/cmd/gridcity checks).
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
)

// Server is a running PostgreSQL.
type Server struct {
	dir      string
	port     int
	password string
	postgres string
	cred     *syscall.Credential
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *tail
	n        atomic.Int64
	// halted: Halt stopped it and Resume has not started it again.
	halted atomic.Bool
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Run runs the tests and stops the shared server if one was started; a
// package's TestMain calls os.Exit(pgtest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	return code
}

// Database returns the URL of a new, empty database on the shared server
// (started on first use), dropped when the test ends. It skips the test
// when PostgreSQL is not installed, unless CI=true.
func Database(t testing.TB) string {
	t.Helper()
	return DatabaseWith(t, "")
}

// DatabaseWith is Database with options for CREATE DATABASE, such as a
// locale other than C: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'".
func DatabaseWith(t testing.TB, options string) string {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = Start(context.Background()) })
	skipOrFail(t, shared.err)
	return shared.srv.Database(t, options)
}

// skipOrFail skips the test when err says PostgreSQL is not installed
// (unless CI=true) and fails it on any other err.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var missing *netlab.MissingError
	if errors.As(err, &missing) && os.Getenv("CI") != "true" {
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	t.Fatalf("start PostgreSQL: %v", err)
}

// Own starts a PostgreSQL server for this test alone, which it may Halt
// and Resume (an outage, a restart) without touching the server the
// other tests of the binary share; it is stopped when the test ends.
func Own(t testing.TB) *Server {
	t.Helper()
	s, err := Start(context.Background())
	skipOrFail(t, err)
	t.Cleanup(s.Stop)
	return s
}

// Halt shuts the server down as an operator's restart does (fast
// shutdown: sessions are ended) and keeps its data; Resume starts it
// again on the same port.
func (s *Server) Halt() {
	s.halted.Store(true)
	s.shutdown()
}

// Resume starts a halted server again on its port, with its data, and
// returns once it accepts connections.
func (s *Server) Resume() error {
	if err := s.start(s.port); err != nil {
		return fmt.Errorf("start PostgreSQL again on port %d: %w", s.port, err)
	}
	s.halted.Store(false)
	return nil
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start initialises a cluster in a temporary directory and runs it on a
// free loopback port. Under root it runs as the postgres user, as
// PostgreSQL refuses to run as root.
func Start(ctx context.Context) (*Server, error) {
	postgres, err := netlab.Postgres.Path()
	if err != nil {
		return nil, err
	}
	initdb := filepath.Join(filepath.Dir(postgres), "initdb")
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs a user of its own: no postgres user (the postgresql package makes it): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "gridcity-pgtest-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	secret := make([]byte, 12)
	rand.Read(secret)
	s := &Server{dir: dir, password: "pg-" + hex.EncodeToString(secret), postgres: postgres, cred: cred}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.password+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if cred != nil {
		os.Chown(pwfile, int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.CommandContext(ctx, initdb, "-D", filepath.Join(dir, "data"), "-U", "postgres", "--no-sync", "--no-instructions",
		"--no-locale", "-E", "UTF8", "--auth-local", "trust", "--auth-host", "scram-sha-256", "--pwfile", pwfile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// The port is the kernel's pick, free a moment ago; another process
	// may take it before postgres binds it, so a failed bind tries again.
	var lastErr error
	for range 5 {
		if lastErr = s.start(0); lastErr == nil {
			return s, nil
		}
	}
	return fail(lastErr)
}

// start runs postgres on port, or on a port free a moment ago when port is 0.
func (s *Server) start(port int) error {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	s.port = port
	cmd := exec.Command(s.postgres, "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "logging_collector=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	// Killed with the test binary, however it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	cmd.Dir = s.dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd, s.exited, s.log = cmd, make(chan struct{}), &tail{}
	ready := make(chan struct{})
	exited := s.exited
	go func() {
		// Ready when the server says so in its log; the log is read to
		// its end before Wait closes it.
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			s.log.add(sc.Text())
			if strings.Contains(sc.Text(), "database system is ready to accept connections") {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
		return nil
	case <-s.exited:
		return fmt.Errorf("postgres on port %d exited before it was ready:\n%s", s.port, s.log)
	case <-time.After(60 * time.Second):
		s.Stop()
		return fmt.Errorf("postgres on port %d not ready after a minute:\n%s", s.port, s.log)
	}
}

// Stop shuts the server down (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	s.shutdown()
	os.RemoveAll(s.dir)
}

func (s *Server) shutdown() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
}

// URL is the address of database db, with the superuser's password.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", s.password), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Password is the superuser's password, which the URLs carry.
func (s *Server) Password() string { return s.password }

// Database creates an empty database for the test, with options for
// CREATE DATABASE, and returns its URL; it is dropped when the test ends,
// after the test's own cleanups.
func (s *Server) Database(t testing.TB, options string) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n.Add(1))
	if err := s.admin(fmt.Sprintf(`CREATE DATABASE %s %s`, name, options)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.halted.Load() {
			return // the test left its own server down; Stop removes it all
		}
		if err := s.admin(fmt.Sprintf(`DROP DATABASE %s WITH (FORCE)`, name)); err != nil {
			t.Errorf("drop the test's database: %v", err)
		}
	})
	return s.URL(name)
}

func (s *Server) admin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the test PostgreSQL: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// tail keeps the server's last log lines for a failure report.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 50 {
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
