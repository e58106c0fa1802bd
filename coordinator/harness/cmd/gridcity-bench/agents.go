package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
)

// agentsRun is what `agents` writes for report: one coordinator's memory
// and CPU with N simulated agents connected, next to the same process with
// none, and the latency of two MCP tools at that size.
type agentsRun struct {
	Agents        int       `json:"agents"`
	Start         time.Time `json:"start"`   // the window's
	Seconds       int       `json:"seconds"` // the window's length
	SettleSeconds int       `json:"settleSeconds"`
	ClkTck        int       `json:"clkTck"`
	// What each simulated agent sends: a heartbeat every HeartbeatSeconds
	// and a change of CPU and memory every ChangeSeconds ±10 %.
	HeartbeatSeconds float64 `json:"heartbeatSeconds"`
	ChangeSeconds    float64 `json:"changeSeconds"`

	EnrollSeconds  float64 `json:"enrollSeconds"`
	EnrollParallel int     `json:"enrollParallel"`
	EnrollRetries  int64   `json:"enrollRetries"`
	RampSeconds    float64 `json:"rampSeconds"`
	RampRate       int     `json:"rampRate"` // agents started per second

	// The coordinator before any agent enrolled, and over the window.
	BaselineSeconds int        `json:"baselineSeconds"`
	Baseline        procResult `json:"baseline"`
	Coordinator     procResult `json:"coordinator"`
	CoordinatorFDs  int        `json:"coordinatorFDs"`
	// The driver itself (every simulated agent) over the window.
	Driver procResult `json:"driver"`

	// Messages the simulated agents sent inside the window, and streams
	// that ended and were opened again (over the run, and inside the window).
	Heartbeats         int64 `json:"heartbeats"`
	Changes            int64 `json:"changes"`
	Reconnects         int64 `json:"reconnects"`
	ReconnectsInWindow int64 `json:"reconnectsInWindow"`
	// WindowEnds says why streams ended in the window, when a few did
	// (see tolerated).
	WindowEnds []string `json:"windowEnds,omitempty"`

	ListServers    toolLatency `json:"listServers"`
	IncidentReport toolLatency `json:"incidentReport"`
	// Tools are the other read tools' latencies (readTools), by name.
	Tools map[string]toolLatency `json:"tools,omitempty"`
	// What the tools answered: servers online and known, targets healthy
	// and in all, and the links and districts of get_topology.
	Online    int `json:"online"`
	Total     int `json:"total"`
	Healthy   int `json:"healthy"`
	Targets   int `json:"targets"`
	Links     int `json:"links"`
	Districts int `json:"districts"`

	NoFile      uint64  `json:"noFile"` // the driver's open-files limit
	MachineBusy float64 `json:"machineBusyPercent"`
	MachineNote string  `json:"machineNote"` // at the end of the window
	// CallsMachineNote is the machine's load after the tools' calls, which
	// come after the window.
	CallsMachineNote string `json:"callsMachineNote"`
}

// errNotHeld means the coordinator did not hold the simulated fleet: its
// streams kept ending (dropped as silent, keepalives unanswered) faster
// than they came back. That is a finding about the coordinator on this
// machine rather than a failure to run, and the driver exits with
// exitNotHeld so that bench.sh can tell the two apart.
var errNotHeld = errors.New("the coordinator did not hold the fleet")

const exitNotHeld = 3

// toolLatency is one tool's calls: each one's wall time at the MCP client
// (request sent → result decoded), in ms, and the response's size.
type toolLatency struct {
	Ms    []float64 `json:"ms"`
	Bytes int64     `json:"bytes"`
}

// agentsConfig is what runAgents needs; cmdAgents fills it from flags.
type agentsConfig struct {
	N        int
	PID      int    // the coordinator's
	Data     string // its data directory
	Gridcity string // the gridcity binary, for join and mcp --json

	Baseline, Settle, Window time.Duration
	Heartbeat, Change        time.Duration
	Parallel, Rate           int
	Calls                    int
	ClkTck                   int
	Log                      io.Writer
}

func cmdAgents(args []string) error {
	fs := flag.NewFlagSet("agents", flag.ContinueOnError)
	c := agentsConfig{Log: os.Stderr}
	fs.IntVar(&c.PID, "pid", 0, "pid of the `gridcity serve` to measure (freshly started, no agents yet)")
	fs.StringVar(&c.Data, "data", "", "its data directory")
	fs.IntVar(&c.Parallel, "parallel", 4, "enrollments at a time (the coordinator writes each with an fsync, one at a time: more only queue for its store)")
	fs.IntVar(&c.Rate, "rate", 50, "agents starting per second while ramping up")
	fs.IntVar(&c.Calls, "calls", 20, "calls of list_servers and of incident_report")
	parse := fleetFlags(fs, &c)
	out := fs.String("out", "", "write the figures here (JSON)")
	if err := parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("agents needs -out")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runAgents(ctx, c)
	if err != nil {
		return err
	}
	return writeJSON(*out, res)
}

// fleetFlags defines the flags of a simulated fleet's run, agents' and the
// replicas' alike; parse parses them into c.
func fleetFlags(fs *flag.FlagSet, c *agentsConfig) (parse func([]string) error) {
	fs.IntVar(&c.N, "n", 1000, "simulated agents")
	fs.StringVar(&c.Gridcity, "gridcity", "bin/gridcity", "the gridcity binary (for `join --reusable` and `mcp --json`)")
	baseline := fs.Int("baseline", 5, "seconds of measuring the coordinators with no agents")
	settle := fs.Int("settle", 15, "seconds between the last stream's start and the window (failover: the kill)")
	seconds := fs.Int("seconds", 30, "length of the window, s")
	fs.DurationVar(&c.Heartbeat, "heartbeat", 5*time.Second, "each agent's heartbeat interval (the coordinator's default settings)")
	fs.DurationVar(&c.Change, "change", 5*time.Second, "each agent's interval between CPU and memory changes, ±10 % (the fast tier)")
	fs.IntVar(&c.ClkTck, "clk-tck", 100, "clock ticks per second (getconf CLK_TCK)")
	return func(args []string) error {
		if err := fs.Parse(args); err != nil {
			return err
		}
		c.Baseline, c.Settle, c.Window = time.Duration(*baseline)*time.Second, time.Duration(*settle)*time.Second, time.Duration(*seconds)*time.Second
		return nil
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func (c agentsConfig) validate() error {
	switch {
	case c.N < 1:
		return fmt.Errorf("-n %d: want at least one agent", c.N)
	case c.PID <= 0 || c.Data == "":
		return errors.New("agents needs the coordinator's -pid and -data")
	case c.Window < time.Second || c.Baseline < time.Second:
		return errors.New("-seconds and -baseline must be at least 1s")
	case c.Heartbeat <= 0 || c.Change <= 0:
		return errors.New("-heartbeat and -change must be positive")
	case c.Parallel < 1 || c.Rate < 1 || c.Calls < 1:
		return errors.New("-parallel, -rate and -calls must be at least 1")
	}
	return nil
}

func (c agentsConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "gridcity-bench: agents: "+format+"\n", args...)
	}
}

// runAgents measures the coordinator with no agents, enrolls and connects
// c.N simulated ones, lets it settle, measures it over the window, then
// times the tools.
func runAgents(ctx context.Context, c agentsConfig) (agentsRun, error) {
	res := agentsRun{Agents: c.N, Seconds: int(c.Window / time.Second), SettleSeconds: int(c.Settle / time.Second), ClkTck: c.ClkTck,
		HeartbeatSeconds: c.Heartbeat.Seconds(), ChangeSeconds: c.Change.Seconds(), EnrollParallel: c.Parallel, RampRate: c.Rate,
		BaselineSeconds: int(c.Baseline / time.Second)}
	if err := c.validate(); err != nil {
		return res, err
	}
	// Every agent is a connection on each side. Go raises its own soft
	// limit to the hard one; the hard one has to be enough.
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		res.NoFile = rl.Cur
		if need := uint64(c.N) + 256; rl.Cur < need {
			return res, fmt.Errorf("%d agents need %d open files here and in the coordinator; the limit is %d (raise the hard limit: ulimit -Hn)", c.N, need, rl.Cur)
		}
	}
	tok, err := mcpEndpoint(ctx, c.Gridcity, c.Data)
	if err != nil {
		return res, err
	}
	base := strings.TrimSuffix(tok.Endpoint, "/mcp")
	if n, err := connectedAgents(ctx, base); err != nil {
		return res, err
	} else if n != 0 {
		return res, fmt.Errorf("the coordinator already has %d agents connected: the baseline needs a fresh one", n)
	}

	// The coordinator alone.
	c.logf("measuring the coordinator (pid %d) with no agents for %s", c.PID, c.Baseline)
	base0, err := measureProc(ctx, c.PID, c.Baseline, nil)
	if err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	res.Baseline = base0

	// Enrollment, with one reusable join line.
	jl, err := reusableJoin(ctx, c.Gridcity, c.Data)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	ids, ca, retries, err := enrollAll(ctx, []gridcityv1.JoinLine{jl}, c.N, c.Parallel)
	if err != nil {
		return res, err
	}
	res.EnrollSeconds, res.EnrollRetries = time.Since(t0).Seconds(), retries
	c.logf("enrolled %d agents in %.1f s (%d at a time, %d retries)", c.N, res.EnrollSeconds, c.Parallel, retries)

	// The streams, started at a steady rate as if the agents came up one
	// after another: the coordinator re-checks each stream's certificate
	// every 30 s from its start, so a burst of connections would stay a
	// burst of store reads.
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	f := &simFleet{addr: jl.Coordinator, roots: roots, heartbeat: c.Heartbeat, change: c.Change}
	simCtx, stopSims := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopSims()
		wg.Wait()
	}()
	t0 = time.Now()
	ready := make(chan struct{}, c.N)
	up, started := 0, 0
	tick := time.NewTicker(time.Second / time.Duration(c.Rate))
	defer tick.Stop()
	lastLog := t0
	storm := func() error { return f.storm(started, c.N) }
	for ; started < c.N; started++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return res, ctx.Err()
		}
		a := newSimAgent(started, c.N, ids[started])
		wg.Go(func() { f.run(simCtx, a, sync.OnceFunc(func() { ready <- struct{}{} })) })
		for len(ready) > 0 {
			<-ready
			up++
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			c.logf("ramp: %d of %d started, %d up at least once after %.0f s; %d streams ended", started, c.N, up, time.Since(t0).Seconds(), f.reconnects.Load())
			if err := storm(); err != nil {
				return res, err
			}
		}
	}
	for deadline := time.After(2 * time.Minute); up < c.N; {
		select {
		case <-ready:
			up++
		case <-deadline:
			return res, fmt.Errorf("%w: %d of %d streams up 2 minutes after the last agent started; streams ended: %s", errNotHeld, up, c.N, strings.Join(f.endCauses(), "; "))
		case <-time.After(10 * time.Second):
			if err := storm(); err != nil {
				return res, err
			}
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	if n := f.refused.Load(); n > 0 {
		return res, fmt.Errorf("the coordinator refused %d agents: %v", n, f.lastError())
	}
	res.RampSeconds = time.Since(t0).Seconds()
	c.logf("%d streams up in %.1f s (%d started a second); %d reconnects %v", c.N, res.RampSeconds, c.Rate, f.reconnects.Load(), f.endCauses())
	if err := waitStreams(ctx, base, c.N, time.Minute); err != nil {
		return res, err
	}

	// Settled: a whole settle period without a stream ending, and every
	// stream up at its end.
	c.logf("all %d streams up; settling for %s, then measuring for %s", c.N, c.Settle, c.Window)
	for try := 1; ; try++ {
		r0 := f.reconnects.Load()
		select {
		case <-time.After(c.Settle):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		n, err := connectedAgents(ctx, base)
		if err != nil {
			return res, err
		}
		ended := f.reconnects.Load() - r0
		if ended == 0 && n == c.N {
			break
		}
		if try == 4 {
			return res, fmt.Errorf("%w: it did not settle: %d streams ended in the last %s and %d of %d are up; streams ended: %s",
				errNotHeld, ended, c.Settle, n, c.N, strings.Join(f.endCauses(), "; "))
		}
		c.logf("not settled: %d streams ended in %s, %d of %d up; waiting again", ended, c.Settle, n, c.N)
	}
	rec0, hb0, ch0 := f.reconnects.Load(), f.heartbeats.Load(), f.changes.Load()
	busy0, total0, err := machineTicks()
	if err != nil {
		return res, err
	}
	res.Start = time.Now()
	var driver procResult
	res.Coordinator, err = measureProc(ctx, c.PID, c.Window, func(d time.Duration) error {
		var err error
		driver, err = measureProc(ctx, os.Getpid(), d, nil)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("window: %w", err)
	}
	res.Driver = driver
	res.Heartbeats, res.Changes = f.heartbeats.Load()-hb0, f.changes.Load()-ch0
	res.Reconnects, res.ReconnectsInWindow = f.reconnects.Load(), f.reconnects.Load()-rec0
	if busy, total, err := machineTicks(); err == nil && total > total0 {
		res.MachineBusy = float64(busy-busy0) * 100 / float64(total-total0)
	}
	res.MachineNote = machineNote()
	res.CoordinatorFDs = countFDs(c.PID)
	c.logf("window: coordinator RSS %.1f MiB (%.1f MiB with no agents), CPU %.1f%% of one core; %d heartbeats and %d changes; %d reconnects",
		float64(res.Coordinator.RSS)/1024, float64(res.Baseline.RSS)/1024, float64(res.Coordinator.CPUNs)/1e7/c.Window.Seconds(),
		res.Heartbeats, res.Changes, res.ReconnectsInWindow)
	if res.ReconnectsInWindow > tolerated(res.Agents) {
		return res, fmt.Errorf("%w: %d streams ended during the window, so the figures would mix in reconnects; streams ended: %s",
			errNotHeld, res.ReconnectsInWindow, strings.Join(f.endCauses(), "; "))
	}
	if res.ReconnectsInWindow > 0 {
		res.WindowEnds = f.endCauses()
	}

	// The tools, in turns, after the window: they allocate MiB at these
	// sizes, which the Go runtime hands back to the system only slowly, so
	// calls before the window would show in its RSS. Each list_servers
	// call (no arguments: the first page, of 200) checks the fleet's counts
	// and its page; after them every page is read once, untimed, to check
	// that every agent is online with its state. /healthz above only counts
	// the streams.
	meter := &meteredTransport{headers: map[string]string{"Authorization": "Bearer " + tok.Token, "X-Agent-Client": "gridcity-bench"}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "gridcity-bench", Version: "1"}, nil)
	// A page of a thousand servers (the check of every agent) is several
	// MiB, which may be beyond the SDK's default bound on an event.
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.Endpoint, HTTPClient: &http.Client{Transport: meter}, MaxRetries: -1, MaxEventSize: -1}, nil)
	if err != nil {
		return res, fmt.Errorf("MCP session: %w", err)
	}
	defer cs.Close()
	for range c.Calls {
		d, n, err := listServers(ctx, cs, meter, &res)
		if err != nil {
			return res, err
		}
		res.ListServers.Ms, res.ListServers.Bytes = append(res.ListServers.Ms, ms(d)), n
		d, n, err = incidentReport(ctx, cs, meter, &res)
		if err != nil {
			return res, err
		}
		res.IncidentReport.Ms, res.IncidentReport.Bytes = append(res.IncidentReport.Ms, ms(d)), n
	}
	for _, tool := range readTools {
		for range c.Calls {
			var out any
			d, n, err := callTool(ctx, cs, meter, tool.name, tool.args, &out)
			if err != nil {
				return res, err
			}
			if res.Tools == nil {
				res.Tools = map[string]toolLatency{}
			}
			t := res.Tools[tool.label]
			t.Ms, t.Bytes = append(t.Ms, ms(d)), n
			res.Tools[tool.label] = t
		}
	}
	res.CallsMachineNote = machineNote()
	if err := allServersOnline(ctx, cs, meter, res.Agents); err != nil {
		return res, err
	}
	if err := topologyCounts(ctx, cs, meter, &res); err != nil {
		return res, err
	}
	c.logf("list_servers median %.1f ms (p95 %.1f, %d KiB); incident_report median %.1f ms (p95 %.1f); %d links, %d districts",
		medianF(res.ListServers.Ms), percentile(res.ListServers.Ms, 95), res.ListServers.Bytes/1024,
		medianF(res.IncidentReport.Ms), percentile(res.IncidentReport.Ms, 95), res.Links, res.Districts)
	return res, nil
}

// tolerated is how many of n streams may end during the window with the
// figures still reported (and the ends said): one in 5,000, none below
// that. Where the driver and the coordinator share two cores, a few
// keepalive pings of tens of thousands go unanswered in time; that is the
// machine, not the coordinator failing to hold the fleet.
func tolerated(n int) int64 { return int64(n / 5000) }

// readTools are the read tools timed after list_servers and
// incident_report, each called as an AI would first. diagnose is not
// among them: it asks agents to connect and waits for them (the simulated
// agents answer nothing), which is not a read of what the coordinator holds.
var readTools = []struct {
	label, name string
	args        map[string]any
}{
	{"list_servers (one server)", "list_servers", map[string]any{"name": simfleet.Name(0)}},
	{"get_metrics", "get_metrics", map[string]any{"target": simfleet.Name(0)}},
	{"get_topology", "get_topology", map[string]any{}},
	{"security_findings", "security_findings", map[string]any{}},
	{"list_resources", "list_resources", map[string]any{}},
	{"list_runbooks", "list_runbooks", map[string]any{}},
}

// mcpToken is what `gridcity mcp --json` prints: the endpoint and the
// local token.
type mcpToken struct{ Endpoint, Token string }

// mcpEndpoint asks `gridcity mcp --json` for the MCP endpoint and token of
// the coordinator whose data directory is data.
func mcpEndpoint(ctx context.Context, gridcity, data string) (mcpToken, error) {
	var tok mcpToken
	b, err := exec.CommandContext(ctx, gridcity, "mcp", "--data", data, "--json").Output()
	if err != nil {
		return tok, fmt.Errorf("gridcity mcp --data %s --json: %w", data, err)
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.Token == "" || tok.Endpoint == "" {
		return tok, fmt.Errorf("gridcity mcp --data %s --json printed %q", data, b)
	}
	return tok, nil
}

// reusableJoin mints a join line for any number of agents (for two hours)
// on the coordinator whose data directory is data.
func reusableJoin(ctx context.Context, gridcity, data string) (gridcityv1.JoinLine, error) {
	var join struct{ JoinLine string }
	b, err := exec.CommandContext(ctx, gridcity, "join", "--data", data, "--reusable", "--ttl", "2h", "--json").Output()
	if err != nil {
		return gridcityv1.JoinLine{}, fmt.Errorf("gridcity join --data %s --reusable: %w", data, err)
	}
	if err := json.Unmarshal(b, &join); err != nil {
		return gridcityv1.JoinLine{}, fmt.Errorf("gridcity join --json printed %q", b)
	}
	return gridcityv1.ParseJoinLine(join.JoinLine)
}

// enrollAll enrolls n agents, parallel at a time, agent i with join line
// jls[i % len(jls)], and returns their identities and the CA they all
// pinned. A busy coordinator's refusal is tried again, up to three times.
func enrollAll(ctx context.Context, jls []gridcityv1.JoinLine, n, parallel int) ([]simIdentity, *x509.Certificate, int64, error) {
	ids := make([]simIdentity, n)
	cas := make([]*x509.Certificate, n)
	var next, retries atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				var err error
				for try := 0; ; try++ {
					ids[i], cas[i], err = enrollSim(ctx, jls[i%len(jls)], simfleet.Name(i))
					if err == nil || try == 3 || !transient(err) {
						break
					}
					retries.Add(1)
					time.Sleep(time.Duration(100<<try) * time.Millisecond)
				}
				if err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, nil, 0, fmt.Errorf("enrollment: %w", err)
	}
	for _, ca := range cas[1:] {
		if !ca.Equal(cas[0]) {
			return nil, nil, 0, errors.New("enrollment: the agents pinned different CAs")
		}
	}
	return ids, cas[0], retries.Load(), nil
}

// measureProc samples a process's memory every second for d and returns
// them with its CPU time over d. during, if set, runs alongside (it
// measures another process over the same time).
func measureProc(ctx context.Context, pid int, d time.Duration, during func(time.Duration) error) (procResult, error) {
	m, err := newCPUMeter(pid)
	if err != nil {
		return procResult{}, err
	}
	errc := make(chan error, 1)
	if during != nil {
		go func() { errc <- during(d) }()
	} else {
		errc <- nil
	}
	start := time.Now()
	var mem []memSample
	for s := 1; time.Duration(s)*time.Second <= d; s++ {
		select {
		case <-time.After(time.Until(start.Add(time.Duration(s) * time.Second))):
		case <-ctx.Done():
			return procResult{}, ctx.Err()
		}
		if err := alive(pid); err != nil {
			return procResult{}, err
		}
		if err := m.update(); err != nil {
			return procResult{}, err
		}
		sample, err := readMem(pid)
		if err != nil {
			return procResult{}, err
		}
		mem = append(mem, sample)
	}
	if err := <-errc; err != nil {
		return procResult{}, err
	}
	return result(pid, m, mem)
}

func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// connectedAgents asks the coordinator's /healthz how many agent streams
// are up: cheap, unlike list_servers, so it can be polled.
func connectedAgents(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("coordinator health: %w", err)
	}
	defer resp.Body.Close()
	var h struct {
		AgentsConnected int `json:"agentsConnected"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("coordinator health: %w", err)
	}
	return h.AgentsConnected, nil
}

func waitStreams(ctx context.Context, base string, n int, within time.Duration) error {
	return waitUntil(ctx, within, func() (bool, string, error) {
		got, err := connectedAgents(ctx, base)
		return got == n, fmt.Sprintf("the coordinator counts %d agents connected after %s, want %d", got, within, n), err
	})
}

// waitUntil polls check every 200 ms until it holds, and fails with what
// check last said once within has passed.
func waitUntil(ctx context.Context, within time.Duration, check func() (ok bool, why string, err error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, why, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New(why)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// callTool calls a tool and returns its wall time, the bytes of its
// response and its structured result, decoded into out.
func callTool(ctx context.Context, cs *mcp.ClientSession, meter *meteredTransport, name string, args map[string]any, out any) (time.Duration, int64, error) {
	n0 := meter.n.Load()
	t0 := time.Now()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	d := time.Since(t0)
	n := meter.n.Load() - n0
	if err != nil {
		return d, n, fmt.Errorf("%s: %w", name, err)
	}
	if r.IsError {
		return d, n, fmt.Errorf("%s failed: %s", name, toolText(r))
	}
	b, err := json.Marshal(r.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		return d, n, fmt.Errorf("%s: %w", name, err)
	}
	return d, n, nil
}

// listServersPage is what the driver reads of a list_servers answer.
type listServersPage struct {
	Online, Total, Matched int
	ByStatus               map[string]int
	NextAfter              string
	Rows                   []serverRow
}

// serverRow is a server's row: why lists what needs attention, "no state
// yet" among it while its agent's first state has not arrived.
type serverRow struct {
	Name, Status string
	Why          []string
}

// listServers calls list_servers without arguments, as an AI starts: the
// fleet at a glance. It checks that the whole fleet is counted online and
// that no row says a server is waiting for its first state.
func listServers(ctx context.Context, cs *mcp.ClientSession, meter *meteredTransport, res *agentsRun) (time.Duration, int64, error) {
	var out listServersPage
	d, size, err := callTool(ctx, cs, meter, "list_servers", map[string]any{}, &out)
	if err != nil {
		return d, size, err
	}
	res.Online, res.Total = out.Online, out.Total
	n := res.Agents
	if out.Online != n || out.Total != n || out.Matched != n || out.ByStatus["online"] != n {
		return d, size, fmt.Errorf("list_servers: %d of %d servers online (%d matched, by status %v), want all %d", out.Online, out.Total, out.Matched, out.ByStatus, n)
	}
	return d, size, checkOnline(out.Rows)
}

// allServersOnline reads list_servers' rows page by page and checks that
// every one of the n simulated agents is listed once, online with its state.
func allServersOnline(ctx context.Context, cs *mcp.ClientSession, meter *meteredTransport, n int) error {
	seen := 0
	for after := ""; ; {
		var out listServersPage
		if _, _, err := callTool(ctx, cs, meter, "list_servers", map[string]any{"limit": 1000, "after": after}, &out); err != nil {
			return err
		}
		if err := checkOnline(out.Rows); err != nil {
			return err
		}
		seen += len(out.Rows)
		if after = out.NextAfter; after == "" {
			break
		}
	}
	if seen != n {
		return fmt.Errorf("list_servers: %d servers over all pages, want %d", seen, n)
	}
	return nil
}

func checkOnline(rows []serverRow) error {
	for _, s := range rows {
		if s.Status != "online" || slices.Contains(s.Why, "no state yet") {
			return fmt.Errorf("list_servers: %s is %s (%s)", s.Name, s.Status, strings.Join(s.Why, "; "))
		}
	}
	return nil
}

func incidentReport(ctx context.Context, cs *mcp.ClientSession, meter *meteredTransport, res *agentsRun) (time.Duration, int64, error) {
	var out struct{ Healthy, Total int }
	d, size, err := callTool(ctx, cs, meter, "incident_report", map[string]any{}, &out)
	if err != nil {
		return d, size, err
	}
	if out.Total < res.Agents {
		return d, size, fmt.Errorf("incident_report counts %d targets, want at least %d", out.Total, res.Agents)
	}
	res.Healthy, res.Targets = out.Healthy, out.Total
	return d, size, nil
}

// topologyCounts records how many links the coordinator discovered.
func topologyCounts(ctx context.Context, cs *mcp.ClientSession, meter *meteredTransport, res *agentsRun) error {
	var out struct {
		LinksTotal int
		Districts  []struct{ ID string }
	}
	if _, _, err := callTool(ctx, cs, meter, "get_topology", map[string]any{}, &out); err != nil {
		return err
	}
	res.Links, res.Districts = out.LinksTotal, len(out.Districts)
	return nil
}

// meteredTransport adds headers to every request and counts the bytes of
// every response body.
type meteredTransport struct {
	headers map[string]string
	n       atomic.Int64
}

func (t *meteredTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}
