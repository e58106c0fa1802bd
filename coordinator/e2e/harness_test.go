// Package e2e runs the real gridcity and gridcity-agent binaries against each
// other over TLS on loopback, and real MCP clients against the coordinator.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/pgtest"
)

// bin is the directory holding the binaries under test.
var bin string

func TestMain(m *testing.M) {
	if mib, err := strconv.Atoi(os.Getenv(memHogEnv)); err == nil {
		memHog(mib) // a child of TestDiagnoseNamesTheHogs
		return
	}
	bin = os.Getenv("GRIDCITY_BIN")
	var tmp string
	if bin == "" {
		// Build them, so that `go test ./...` needs nothing beforehand.
		var err error
		tmp, err = os.MkdirTemp("", "gridcity-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for pkg, name := range map[string]string{"../cmd/gridcity": "gridcity", "../../agent/cmd/gridcity-agent": "gridcity-agent"} {
			cmd := exec.Command("go", "build", "-race", "-o", filepath.Join(tmp, name), pkg)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build", pkg, err)
				os.Exit(1)
			}
		}
		bin = tmp
	}
	code := pgtest.Run(m) // stops the PostgreSQL the tests started, if any
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// proc is a started binary whose output is kept for failure reports.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startCmd(t, name, exec.Command(filepath.Join(bin, args[0]), args[1:]...))
}

func (p *proc) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// run runs a binary to completion and returns its stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, args[0]), args[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// coordinator is a running `gridcity serve` with its addresses.
type coordinator struct {
	t          *testing.T
	data       string
	http, grpc string
	p          *proc
	// storeURL is the PostgreSQL store of a replica ("": SQLite in data).
	storeURL string
}

// storeArgs are the flags that name the coordinator's store to the CLI.
func (c *coordinator) storeArgs() []string {
	if c.storeURL == "" {
		return nil
	}
	return []string{"--store", c.storeURL}
}

func startCoordinator(t *testing.T) *coordinator {
	t.Helper()
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: freePort(t)}
	c.start()
	return c
}

// startCoordinatorWithConfig starts a coordinator on loopback with the config given as YAML.
func startCoordinatorWithConfig(t *testing.T, yaml string) *coordinator {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "gridcity.yaml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &coordinator{t: t, data: t.TempDir(), http: freePort(t), grpc: freePort(t)}
	c.p = start(t, "coordinator", "gridcity", "serve", "--data", c.data, "--config", cfgFile, "--http", c.http, "--grpc", c.grpc,
		"--advertise", c.grpc, "--log-level", "debug")
	c.waitHealthy()
	return c
}

func (c *coordinator) start() {
	c.t.Helper()
	c.p = start(c.t, "coordinator", "gridcity", "serve", "--data", c.data, "--http", c.http, "--grpc", c.grpc, "--advertise", c.grpc, "--log-level", "debug")
	c.waitHealthy()
}

// waitHealthy waits until the coordinator answers /healthz.
func (c *coordinator) waitHealthy() {
	c.t.Helper()
	eventually(c.t, 20*time.Second, "coordinator healthy", func() error {
		resp, err := http.Get("http://" + c.http + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// waitFlush waits until the fleet has written its servers to the store
// since the call: two more SaveServers on /metrics (a flush every 2 s), as
// the first may have begun before.
func (c *coordinator) waitFlush() {
	c.t.Helper()
	flushes := func() float64 {
		_, body := scrape(c.t, "http://"+c.http+"/metrics", "")
		n, _ := sample(families(c.t, body), "gridcity_store_operation_duration_seconds", "operation", "SaveServers")
		return n
	}
	before := flushes()
	eventually(c.t, 30*time.Second, "a flush of the fleet", func() error {
		if n := flushes() - before; n < 2 {
			return fmt.Errorf("%v flushes", n)
		}
		return nil
	})
}

func (c *coordinator) joinLine(extra ...string) string {
	c.t.Helper()
	out, err := run(c.t, append([]string{"gridcity", "join", "--data", c.data, "--json"}, extra...)...)
	if err != nil {
		c.t.Fatalf("gridcity join: %v", err)
	}
	var j struct {
		JoinLine, Coordinator, Token, CAPin string
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		c.t.Fatalf("join --json output %q: %v", out, err)
	}
	if j.JoinLine == "" || j.Token == "" || !strings.HasPrefix(j.CAPin, "sha256:") || j.Coordinator != c.grpc {
		c.t.Fatalf("join --json gave %+v", j)
	}
	return j.JoinLine
}

func (c *coordinator) token() string {
	c.t.Helper()
	out, err := run(c.t, append([]string{"gridcity", "mcp", "--data", c.data, "--json"}, c.storeArgs()...)...)
	if err != nil {
		c.t.Fatalf("gridcity mcp: %v", err)
	}
	var m struct {
		Endpoint, Token string
	}
	json.Unmarshal([]byte(out), &m)
	if m.Endpoint != "http://"+c.http+"/mcp" || !strings.HasPrefix(m.Token, "gc_") {
		c.t.Fatalf("gridcity mcp --json gave %q", out)
	}
	return m.Token
}

func startAgent(t *testing.T, c *coordinator, name, state, join string) *proc {
	t.Helper()
	args := []string{"gridcity-agent", "run", "--state", state, "--name", name, "--log-level", "debug"}
	if join != "" {
		args = append(args, "--join", join)
	}
	return start(t, "agent "+name, args...)
}

type headerTransport struct{ h map[string]string }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the go-sdk client with the token and a client name.
func (c *coordinator) mcpClient(token, client string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: headerTransport{map[string]string{"Authorization": "Bearer " + token, "X-Agent-Client": client}}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	return cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + c.http + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
}

type serverView struct {
	Name, Status, LastSeen string
	Addresses              []string
	OS                     struct{ Name, Kernel, Hostname string }
	CPU                    struct{ Cores int }
	Memory                 struct{ TotalBytes uint64 }
	Disks                  []map[string]any
	Listening              []struct {
		Proto, Address, Process string
		Port                    int
	}
	Gaps []struct{ Check, Reason string }
}

// servers calls list_servers over a fresh MCP session and reads every
// server in full, page by page.
func (c *coordinator) servers(token string) (map[string]serverView, error) {
	cs, err := c.mcpClient(token, "e2e-test")
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	return fullServers(context.Background(), cs)
}

// fullServers reads every server in full: list_servers {"full": true},
// page by page (an answer holds as many whole views as fit its size bound).
func fullServers(ctx context.Context, cs *mcp.ClientSession) (map[string]serverView, error) {
	m := map[string]serverView{}
	for after := ""; ; {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_servers", Arguments: map[string]any{"full": true, "after": after}})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, fmt.Errorf("list_servers error: %+v", res.Content)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var out struct {
			Servers   []serverView
			NextAfter string
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		for _, s := range out.Servers {
			m[s.Name] = s
		}
		if after = out.NextAfter; after == "" {
			return m, nil
		}
	}
}

func (c *coordinator) waitStatus(token, name, status string, within time.Duration) serverView {
	c.t.Helper()
	var got serverView
	eventually(c.t, within, name+" "+status, func() error {
		m, err := c.servers(token)
		if err != nil {
			return err
		}
		s, ok := m[name]
		if !ok {
			return fmt.Errorf("%s not listed", name)
		}
		if s.Status != status {
			return fmt.Errorf("%s is %s", name, s.Status)
		}
		// An agent is online as soon as its stream opens; its facts come
		// with its first state, a moment later. Wait for those too.
		for _, g := range s.Gaps {
			if status == "online" && g.Check == "agent" && strings.Contains(g.Reason, "first state") {
				return fmt.Errorf("%s is online without its first state: %s", name, g.Reason)
			}
		}
		got = s
		return nil
	})
	return got
}

func eventually(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, within, err)
}
