package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
)

// TestRunHA runs `make run-ha` (scripts/run-ha.sh) as a person does, on
// ports of its own: its own PostgreSQL (Debian's, initialised in the run
// directory, or as root run as an unprivileged user), three coordinators
// and this machine's agent. Every replica's MCP endpoint it prints answers
// with the token it prints and lists the agent online; Ctrl-C (SIGINT to
// the script's process group, as a terminal sends it) stops everything,
// PostgreSQL included, and the script exits 0.
func TestRunHA(t *testing.T) {
	t.Parallel()
	if _, err := netlab.Postgres.Path(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL is not installed: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "run-ha.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var https, grpcs []string
	for range 3 {
		https, grpcs = append(https, freePort(t)), append(grpcs, freePort(t))
	}
	pg := freePort(t)
	_, pgPort, _ := net.SplitHostPort(pg)
	const name = "run-ha-e2e"
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "GRIDCITY_RUN_DIR="+t.TempDir(), "GRIDCITY_BIN_DIR="+bin, "GRIDCITY_NAME="+name,
		"GRIDCITY_HA_HTTP="+strings.Join(https, " "), "GRIDCITY_HA_GRPC="+strings.Join(grpcs, " "), "GRIDCITY_HA_PG_PORT="+pgPort)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	printed := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if !seen && strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				seen = true
				close(printed)
			}
		}
	}()
	exited, done := make(chan error, 1), make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		// A failed test leaves no process behind: the script's TERM trap
		// stops what it started, PostgreSQL (in a session of its own) too.
		select {
		case <-done:
			return
		default:
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})

	select {
	case <-printed:
	case err := <-exited:
		t.Fatalf("make run-ha ended before it was up: %v\n%s", err, out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("make run-ha was not up within 3 minutes:\n%s", out)
	}
	text := out.String()
	tok := regexp.MustCompile(`(?m)^Token:\s+(gc_\S+)`).FindStringSubmatch(text)
	if tok == nil {
		t.Fatalf("make run-ha printed no token:\n%s", text)
	}
	if !regexp.MustCompile(`(?m)^App login:\s+admin / \S{12,}`).MatchString(text) {
		t.Fatalf("make run-ha printed no admin password:\n%s", text)
	}
	for i, addr := range https {
		want := fmt.Sprintf("replica %d   MCP http://%s/mcp   app http://%s/   agents %s", i+1, addr, addr, grpcs[i])
		if !strings.Contains(text, want) {
			t.Fatalf("make run-ha did not print %q:\n%s", want, text)
		}
	}
	// Replica 1 holds the agent's stream; the others see it through the
	// store within seconds.
	for i, addr := range https {
		c := &coordinator{t: t, http: addr, grpc: grpcs[i]}
		c.waitStatus(tok[1], name, "online", 30*time.Second)
	}
	if n := connected(t, &coordinator{t: t, http: https[0]}); n != 1 {
		t.Fatalf("replica 1 holds %d agent streams; want this machine's agent", n)
	}

	// Ctrl-C, as a terminal sends it: to the whole foreground group.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("make run-ha after Ctrl-C: %v; want exit status 0\n%s", err, out)
		}
	case <-time.After(time.Minute):
		t.Fatalf("make run-ha did not stop within a minute of Ctrl-C:\n%s", out)
	}
	if !strings.Contains(out.String(), "make run-ha: stopped") {
		t.Fatalf("make run-ha did not say it stopped:\n%s", out)
	}
	for _, addr := range append(append([]string{pg}, https...), grpcs...) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			t.Fatalf("%s still accepts connections after make run-ha stopped:\n%s", addr, out)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s after make run-ha stopped: %v; want connection refused", addr, err)
		}
	}
}
