package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gridcity/gridcity/lib/atomicfile"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// latencyRun is what `latency` writes for report: the time from a person's
// approval to the result reaching the MCP client, next to ssh localhost
// running the same command, sampled in turns in one run.
type latencyRun struct {
	N        int                `json:"n"`
	Warmup   int                `json:"warmup"`
	SettleMs int                `json:"settleMs"`
	Commands []commandLatencies `json:"commands"`

	User       string `json:"user"`  // who runs ssh, and whom sshd logs in
	RunAs      string `json:"runAs"` // the agent's run-as user, from the audit
	Shell      string `json:"shell"` // the user's login shell, which sshd runs the command with
	SSHVersion string `json:"sshVersion"`
	SSHKex     string `json:"sshKex"`    // negotiated key exchange
	SSHCipher  string `json:"sshCipher"` // and cipher
	// The Debian package of sshd, and how long the ssh client alone takes
	// to start and exit here (ssh -V), median ms.
	SSHDPackage string  `json:"sshdPackage"`
	SSHClientMs float64 `json:"sshClientStartMs"`
	// The cost on this machine of the login shell's rc files, which sshd's
	// bash would read for a command and the bench's sshd has it skip.
	ShellRcMs float64 `json:"shellRcMs"`
	// One save of the agent's journal as journal.save does it (write a
	// temporary file, fsync, rename, fsync the directory) on the agent's
	// state directory, median ms, and the journal's size.
	JournalSaveMs float64 `json:"journalSaveMs"`
	JournalBytes  int     `json:"journalBytes"`
	// The same save of a journal at its bound of remembered ids (maxSeen
	// ids of about 70 bytes each), as a busy server's would be.
	JournalFullSaveMs float64 `json:"journalFullSaveMs"`
	JournalFullBytes  int     `json:"journalFullBytes"`
	MachineNote       string  `json:"machineNote"`
}

// commandLatencies holds one command's samples, in ms.
type commandLatencies struct {
	Command  string    `json:"command"`
	Gridcity []float64 `json:"gridcity"` // approve POST sent → run_command's result at the client
	Approve  []float64 `json:"approve"`  // the approve POST's own round trip
	SSHFresh []float64 `json:"sshFresh"` // ssh … 127.0.0.1 CMD, a new connection each time
	SSHMux   []float64 `json:"sshMux"`   // the same over a ControlMaster connection
	// Stages from the audit rows' times (ms resolution), keyed by stage.
	Stages map[string][]float64 `json:"stages"`
	// The agent's own duration of the command (start to exit), ms.
	AgentRunMs []float64 `json:"agentRunMs"`
}

// stages are the steps of the gridcity path, in order, as the audit
// records them; stageNames name the gaps between them.
var stages = []string{"approved", "dispatched", "accepted", "started", "finished"}

var stageNames = []string{
	"approve POST → approved row",
	"approved → dispatched row",
	"dispatched → accepted",
	"accepted → started",
	"started → finished",
	"finished → result at client",
}

func cmdLatency(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	httpAddr := fs.String("http", "", "the coordinator's HTTP address (host:port)")
	data := fs.String("data", "", "the coordinator's data directory")
	gridcity := fs.String("gridcity", "bin/gridcity", "the gridcity binary (for `mcp --json` and `audit --json`)")
	server := fs.String("server", "", "the agent's server name")
	agentState := fs.String("agent-state", "", "the agent's state directory (its journal's disk)")
	n := fs.Int("n", 30, "measured samples of each command on each side")
	warmup := fs.Int("warmup", 3, "samples of each command on each side before measuring, not counted")
	settle := fs.Duration("settle", 50*time.Millisecond, "pause between a card appearing and its approval (a person takes seconds)")
	sshPort := fs.Int("ssh-port", 0, "the loopback port of the bench's sshd")
	sshKey := fs.String("ssh-key", "", "the client key sshd accepts")
	sshConfig := fs.String("ssh-config", "", "an ssh_config with the known host")
	sshControl := fs.String("ssh-control", "", "the ControlPath of the multiplexed connection")
	out := fs.String("out", "", "write the samples here (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *httpAddr == "" || *data == "" || *server == "" || *sshPort == 0 || *sshKey == "" || *sshConfig == "" || *sshControl == "" || *out == "" {
		return errors.New("latency needs -http, -data, -server, -ssh-port, -ssh-key, -ssh-config, -ssh-control and -out")
	}
	if *n < 1 || *warmup < 0 {
		return errors.New("-n must be at least 1 and -warmup at least 0")
	}
	commands := []struct{ cmd, stdout string }{{"true", ""}, {"echo hello", "hello\n"}}
	ctx := context.Background()

	// The MCP client: a live session, as an AI client keeps one.
	tok, err := mcpEndpoint(ctx, *gridcity, *data)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + tok.Token, "X-Agent-Client": "gridcity-bench"}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "gridcity-bench", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + *httpAddr + "/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return fmt.Errorf("MCP session: %w", err)
	}
	defer cs.Close()
	if err := waitOnline(ctx, cs, *server, 60*time.Second); err != nil {
		return err
	}

	// The approver, logged in to the app.
	app, err := loginApp(*httpAddr, *data)
	if err != nil {
		return err
	}

	sh := sshRunner{port: *sshPort, key: *sshKey, config: *sshConfig, control: *sshControl}
	master, err := sh.startMaster()
	if err != nil {
		return err
	}
	defer sh.stopMaster(master)

	res := latencyRun{N: *n, Warmup: *warmup, SettleMs: int(settle.Milliseconds()), MachineNote: machineNote()}
	if u, err := user.Current(); err == nil {
		res.User = u.Username
		res.Shell = loginShell(u.Username)
	}
	res.SSHVersion, res.SSHKex, res.SSHCipher = sh.describe()

	samples := make([][]gridcitySample, len(commands))
	res.Commands = make([]commandLatencies, len(commands))
	for i, c := range commands {
		res.Commands[i] = commandLatencies{Command: c.cmd, Stages: map[string][]float64{}}
	}
	total := *warmup + *n
	fmt.Fprintf(os.Stderr, "gridcity-bench: command latency: %d warm-up and %d measured samples of %d commands on gridcity, ssh (new connection) and ssh (multiplexed), in turns\n", *warmup, *n, len(commands))
	started := time.Now()
	for it := range total {
		measured := it >= *warmup
		for ci, c := range commands {
			// The three sides take turns, starting with a different one
			// each time, so that drift in the machine's load spreads over
			// all of them.
			for k := range 3 {
				switch (it + ci + k) % 3 {
				case 0:
					s, err := gridcityOnce(ctx, cs, app, *server, c.cmd, c.stdout, *settle)
					if err != nil {
						return fmt.Errorf("gridcity %q: %w", c.cmd, err)
					}
					if measured {
						samples[ci] = append(samples[ci], s)
						res.Commands[ci].Gridcity = append(res.Commands[ci].Gridcity, ms(s.t2.Sub(s.t0)))
						res.Commands[ci].Approve = append(res.Commands[ci].Approve, s.approveMs)
						res.Commands[ci].AgentRunMs = append(res.Commands[ci].AgentRunMs, float64(s.runMs))
					}
				case 1:
					d, err := sh.run(false, c.cmd, c.stdout)
					if err != nil {
						return fmt.Errorf("ssh %q: %w", c.cmd, err)
					}
					if measured {
						res.Commands[ci].SSHFresh = append(res.Commands[ci].SSHFresh, ms(d))
					}
				case 2:
					d, err := sh.run(true, c.cmd, c.stdout)
					if err != nil {
						return fmt.Errorf("ssh (multiplexed) %q: %w", c.cmd, err)
					}
					if measured {
						res.Commands[ci].SSHMux = append(res.Commands[ci].SSHMux, ms(d))
					}
				}
			}
		}
		if (it+1)%10 == 0 || it+1 == total {
			fmt.Fprintf(os.Stderr, "gridcity-bench: command latency: %d/%d rounds (%s)\n", it+1, total, time.Since(started).Round(time.Second))
		}
	}

	// Where gridcity's time went, from the audit rows of the measured requests.
	rows, err := auditRows(*gridcity, *data)
	if err != nil {
		return err
	}
	for ci := range commands {
		for _, s := range samples[ci] {
			at := rows[s.id]
			if res.RunAs == "" {
				res.RunAs = at.runAs
			}
			points := []time.Time{s.t0}
			for _, st := range stages {
				points = append(points, at.at[st])
			}
			points = append(points, s.t2)
			for i := 1; i < len(points); i++ {
				if points[i].IsZero() || points[i-1].IsZero() {
					continue
				}
				res.Commands[ci].Stages[stageNames[i-1]] = append(res.Commands[ci].Stages[stageNames[i-1]], ms(points[i].Sub(points[i-1])))
			}
		}
	}

	if *agentState != "" {
		res.JournalSaveMs, res.JournalBytes = journalSaveCost(*agentState, 0, 20)
		res.JournalFullBytes = journalMaxSeen * len(`{"id":"cmd_a3a78fa5ece9f8500c07","at":"2026-12-02T15:56:45.941326193Z"},`)
		res.JournalFullSaveMs, _ = journalSaveCost(*agentState, res.JournalFullBytes, 10)
	}
	res.ShellRcMs = shellRcCost(res.Shell, 10)
	res.SSHClientMs = startCost(10, "ssh", "-V")
	if b, err := exec.Command("dpkg-query", "-W", "-f", "${Package} ${Version}", "openssh-server").Output(); err == nil {
		res.SSHDPackage = strings.TrimSpace(string(b))
	}
	for _, c := range res.Commands {
		fmt.Fprintf(os.Stderr, "gridcity-bench: %q median/p90 ms: gridcity %.1f/%.1f, ssh new connection %.1f/%.1f, ssh multiplexed %.1f/%.1f\n", c.Command,
			medianF(c.Gridcity), percentile(c.Gridcity, 90), medianF(c.SSHFresh), percentile(c.SSHFresh, 90), medianF(c.SSHMux), percentile(c.SSHMux, 90))
	}

	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// waitOnline waits until list_servers shows the server online.
func waitOnline(ctx context.Context, cs *mcp.ClientSession, server string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_servers", Arguments: map[string]any{"name": server}})
		if err != nil {
			return fmt.Errorf("list_servers: %w", err)
		}
		var out struct {
			Servers []struct{ Name, Status string }
		}
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &out)
		for _, s := range out.Servers {
			if s.Name == server && s.Status == "online" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server %s is not online after %s (list_servers: %s)", server, within, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// approverApp is a person logged in to the approval app.
type approverApp struct {
	base string
	hc   *http.Client
	// csrf is the session's second secret, when the login answers one
	// (csrfToken): the app's page sends it as X-Gridcity-Session on every
	// call, and so does the driver.
	csrf string
}

func loginApp(addr, data string) (*approverApp, error) {
	pw, err := os.ReadFile(filepath.Join(data, "admin-password"))
	if err != nil {
		return nil, fmt.Errorf("the coordinator wrote no admin password: %w", err)
	}
	jar, _ := cookiejar.New(nil)
	a := &approverApp{base: "http://" + addr, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	code, body, err := a.post("/api/login", map[string]string{"username": "admin", "password": strings.TrimSpace(string(pw))})
	if err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("login: %d %s", code, body)
	}
	var in struct {
		CSRFToken string `json:"csrfToken"`
	}
	json.Unmarshal([]byte(body), &in)
	a.csrf = in.CSRFToken
	return a, nil
}

func (a *approverApp) do(req *http.Request) (*http.Response, error) {
	if a.csrf != "" {
		req.Header.Set("X-Gridcity-Session", a.csrf)
	}
	return a.hc.Do(req)
}

func (a *approverApp) post(path string, v any) (int, string, error) {
	b, _ := json.Marshal(v)
	req, _ := http.NewRequest(http.MethodPost, a.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", a.base)
	resp, err := a.do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// card waits for a pending request with this command (one at a time
// waits: the driver asks for the next only after this one ended).
func (a *approverApp) card(command string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequest(http.MethodGet, a.base+"/api/requests?status=pending", nil)
		resp, err := a.do(req)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return "", fmt.Errorf("pending cards: %s %s", resp.Status, b)
		}
		var cards []struct{ ID, Command string }
		err = json.NewDecoder(resp.Body).Decode(&cards)
		resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("pending cards: %w", err)
		}
		for _, c := range cards {
			if c.Command == command {
				return c.ID, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no card for %q within %s", command, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type gridcitySample struct {
	id        string
	t0, t2    time.Time
	approveMs float64
	runMs     int64
}

// gridcityOnce asks for the command over MCP, waits for its card, and
// approves it: t0 is taken just before the approve POST is sent, t2 as
// soon as run_command's result is back at the client.
func gridcityOnce(ctx context.Context, cs *mcp.ClientSession, app *approverApp, server, command, wantStdout string, settle time.Duration) (gridcitySample, error) {
	type callResult struct {
		res *mcp.CallToolResult
		err error
		at  time.Time
	}
	done := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{
			"server": server, "command": command, "reason": "make bench: latency from approval to result", "timeout_seconds": 30}})
		done <- callResult{res, err, time.Now()}
	}()
	id, err := app.card(command, 20*time.Second)
	if err != nil {
		select {
		case r := <-done:
			if r.err != nil {
				return gridcitySample{}, fmt.Errorf("run_command: %w", r.err)
			}
			if r.res.IsError {
				return gridcitySample{}, fmt.Errorf("run_command: %s", toolText(r.res))
			}
		default:
		}
		return gridcitySample{}, err
	}
	// A person takes seconds to decide: whatever the request's creation
	// set going ends before the approval, as it would.
	time.Sleep(settle)
	s := gridcitySample{id: id, t0: time.Now()}
	code, body, err := app.post("/api/requests/"+id+"/approve", map[string]string{})
	s.approveMs = ms(time.Since(s.t0))
	if err != nil {
		return s, fmt.Errorf("approve: %w", err)
	}
	if code != http.StatusOK {
		return s, fmt.Errorf("approve: %d %s", code, body)
	}
	var r callResult
	select {
	case r = <-done:
	case <-time.After(40 * time.Second):
		return s, errors.New("run_command did not return within 40 s of the approval")
	}
	s.t2 = r.at
	if r.err != nil {
		return s, fmt.Errorf("run_command: %w", r.err)
	}
	if r.res.IsError {
		return s, fmt.Errorf("run_command: %s", toolText(r.res))
	}
	var out struct {
		Status, RequestID, Stdout, Stderr string
		ExitCode                          *int
		DurationMs                        int64
	}
	b, _ := json.Marshal(r.res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		return s, fmt.Errorf("run_command result %s: %w", b, err)
	}
	if out.Status != "completed" || out.ExitCode == nil || *out.ExitCode != 0 || out.Stdout != wantStdout || out.RequestID != id {
		return s, fmt.Errorf("run_command returned %s; want completed, exit code 0, stdout %q, request %s", b, wantStdout, id)
	}
	s.runMs = out.DurationMs
	return s, nil
}

func toolText(r *mcp.CallToolResult) string {
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "an error without text"
}

// sshRunner runs commands through the bench's sshd on loopback.
type sshRunner struct {
	port                 int
	key, config, control string
}

func (s sshRunner) args(extra ...string) []string {
	a := []string{"-F", s.config, "-o", "BatchMode=yes", "-i", s.key, "-p", strconv.Itoa(s.port)}
	return append(a, extra...)
}

// sshMaster is the connection the multiplexed runs share.
type sshMaster struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startMaster opens the shared connection: what ControlMaster=auto with
// ControlPersist would keep in the background, here in the foreground of a
// child that this process waits for, so that nothing outlives the run.
func (s sshRunner) startMaster() (*sshMaster, error) {
	m := &sshMaster{cmd: exec.Command("ssh", s.args("-M", "-N", "-o", "ControlPath="+s.control, "-o", "ControlPersist=no", "127.0.0.1")...), done: make(chan struct{})}
	var errb bytes.Buffer
	m.cmd.Stderr = &errb
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("ssh master: %w", err)
	}
	go func() { m.cmd.Wait(); close(m.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if exec.Command("ssh", s.args("-o", "ControlPath="+s.control, "-O", "check", "127.0.0.1")...).Run() == nil {
			return m, nil
		}
		select {
		case <-m.done:
			return nil, fmt.Errorf("the ssh master connection ended: %s", strings.TrimSpace(errb.String()))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.cmd.Process.Kill()
			<-m.done
			return nil, fmt.Errorf("the ssh master connection did not come up within 15 s: %s", strings.TrimSpace(errb.String()))
		}
	}
}

func (s sshRunner) stopMaster(m *sshMaster) {
	exec.Command("ssh", s.args("-o", "ControlPath="+s.control, "-O", "exit", "127.0.0.1")...).Run()
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
}

// run runs command over ssh and returns how long the ssh process took,
// from its start to its exit with the output read.
func (s sshRunner) run(mux bool, command, wantStdout string) (time.Duration, error) {
	var a []string
	if mux {
		a = s.args("-o", "ControlMaster=no", "-o", "ControlPath="+s.control, "127.0.0.1", command)
	} else {
		a = s.args("-o", "ControlMaster=no", "-o", "ControlPath=none", "127.0.0.1", command)
	}
	cmd := exec.Command("ssh", a...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if stdout.String() != wantStdout {
		return d, fmt.Errorf("stdout %q, want %q (stderr %q)", stdout.String(), wantStdout, stderr.String())
	}
	return d, nil
}

var (
	kexLine    = regexp.MustCompile(`kex: algorithm: (\S+)`)
	cipherLine = regexp.MustCompile(`kex: server->client cipher: (\S+)`)
)

// describe returns ssh's version and what one fresh connection negotiates.
func (s sshRunner) describe() (version, kex, cipher string) {
	var errb bytes.Buffer
	cmd := exec.Command("ssh", s.args("-v", "-o", "ControlPath=none", "127.0.0.1", "true")...)
	cmd.Stderr = &errb
	cmd.Run()
	for line := range strings.Lines(errb.String()) {
		if version == "" && strings.HasPrefix(line, "OpenSSH_") {
			version, _, _ = strings.Cut(strings.TrimSpace(line), ",")
		}
		if m := kexLine.FindStringSubmatch(line); m != nil {
			kex = m[1]
		}
		if m := cipherLine.FindStringSubmatch(line); m != nil {
			cipher = m[1]
		}
	}
	return version, kex, cipher
}

func loginShell(name string) string {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) == 7 && f[0] == name {
			return f[6]
		}
	}
	return ""
}

// shellRcCost is the median extra time the login shell takes for `-c true`
// when it believes sshd started it (bash then reads ~/.bashrc) over when it
// does not: what this machine's rc files would add to every ssh command.
func shellRcCost(shell string, n int) float64 {
	if shell == "" {
		return 0
	}
	timeIt := func(env ...string) float64 {
		var v []float64
		for range n {
			cmd := exec.Command(shell, "-c", "true")
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdin = nil
			t0 := time.Now()
			if cmd.Run() != nil {
				return math.NaN()
			}
			v = append(v, ms(time.Since(t0)))
		}
		return medianF(v)
	}
	base := timeIt("SHLVL=1")
	rc := timeIt("SHLVL=0", "SSH_CLIENT=127.0.0.1 1 22")
	if math.IsNaN(base) || math.IsNaN(rc) {
		return 0
	}
	return math.Max(0, rc-base)
}

// journalMaxSeen is the agent journal's bound on remembered ids
// (agent/internal/cmdjournal maxSeen), each kept for 30 days.
const journalMaxSeen = 10000

// journalSaveCost times the agent journal's way of saving, on its disk:
// atomicfile.Write of size bytes (0: the journal's own size) over a file of
// ours. It returns the median in ms; encoding the journal is not counted.
func journalSaveCost(dir string, size, n int) (float64, int) {
	if st, err := os.Stat(filepath.Join(dir, "journal.json")); size == 0 && err == nil && st.Size() > 0 {
		size = int(st.Size())
	}
	if size == 0 {
		size = 1024
	}
	data := bytes.Repeat([]byte("x"), size)
	target := filepath.Join(dir, "bench-fsync-probe")
	defer os.Remove(target)
	var v []float64
	for range n {
		t0 := time.Now()
		if err := atomicfile.Write(dir, filepath.Base(target), data); err != nil {
			return 0, size
		}
		v = append(v, ms(time.Since(t0)))
	}
	return medianF(v), size
}

// startCost is the median ms a program takes to start and exit.
func startCost(n int, name string, args ...string) float64 {
	var v []float64
	for range n {
		t0 := time.Now()
		if exec.Command(name, args...).Run() != nil {
			return 0
		}
		v = append(v, ms(time.Since(t0)))
	}
	return medianF(v)
}

type auditTimes struct {
	at    map[string]time.Time
	runAs string
}

// auditRows reads the audit log's step times by request.
func auditRows(gridcity, data string) (map[string]auditTimes, error) {
	b, err := exec.Command(gridcity, "audit", "--json", "--data", data).Output()
	if err != nil {
		return nil, fmt.Errorf("gridcity audit --json: %w", err)
	}
	out := map[string]auditTimes{}
	for line := range bytes.Lines(b) {
		var r struct {
			At        time.Time `json:"at"`
			RequestID string    `json:"requestId"`
			Step      string    `json:"step"`
			Detail    struct {
				RunAs string `json:"runAs"`
			} `json:"detail"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("gridcity audit --json line %q: %w", line, err)
		}
		t := out[r.RequestID]
		if t.at == nil {
			t.at = map[string]time.Time{}
		}
		if _, ok := t.at[r.Step]; !ok {
			t.at[r.Step] = r.At
		}
		if r.Detail.RunAs != "" {
			t.runAs = r.Detail.RunAs
		}
		out[r.RequestID] = t
	}
	return out, nil
}

// percentile is the nearest-rank percentile p (0–100) of v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	k := int(math.Ceil(p / 100 * float64(len(v))))
	return v[min(max(k, 1), len(v))-1]
}
