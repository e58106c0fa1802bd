package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Replicas on one PostgreSQL, measured with simulated agents (the store
// URL reaches `gridcity join` and `gridcity mcp` in GRIDCITY_STORE, from
// bench.sh, which starts the replicas, each given the store's unseal key
// in GRIDCITY_UNSEAL_KEY_FILE):
//
//	gridcity-bench failover -replica PID,DATA,HTTP … -n 1000 -out failover.json
//	gridcity-bench spread   -replica PID,DATA,HTTP … -n 10000 -out spread.json
//
// failover connects every agent to the first replica, kills it (-9) and
// times each agent's stream up again on a survivor; spread connects the
// agents round the replicas and measures each replica's memory and CPU,
// as `agents` does for one coordinator.

// replicaProc is one running `gridcity serve` of the set.
type replicaProc struct {
	PID  int    `json:"pid"`
	Data string `json:"-"`
	HTTP string `json:"http"`
	GRPC string `json:"grpc"` // what it advertises, from its join line
}

type replicaFlags []replicaProc

func (r *replicaFlags) String() string { return fmt.Sprint(*r) }

func (r *replicaFlags) Set(v string) error {
	f := strings.Split(v, ",")
	if len(f) != 3 {
		return fmt.Errorf("-replica %q: want PID,DATA,HTTP", v)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return fmt.Errorf("-replica %q: %q is not a pid", v, f[0])
	}
	*r = append(*r, replicaProc{PID: pid, Data: f[1], HTTP: f[2]})
	return nil
}

// haFailover is what `failover` writes for report.
type haFailover struct {
	Agents        int     `json:"agents"`
	Replicas      int     `json:"replicas"`
	EnrollSeconds float64 `json:"enrollSeconds"`
	RampSeconds   float64 `json:"rampSeconds"`
	// Seconds are each agent's time from the kill to its stream up again
	// on a survivor (its settings arrived), sorted.
	Seconds []float64 `json:"seconds"`
	// OnSurvivors is how many streams each survivor held at the end, by
	// its /healthz.
	OnSurvivors map[string]int `json:"onSurvivors"`
	Reconnects  int64          `json:"reconnects"` // stream ends after the kill: one per agent, more where a try failed
	MachineNote string         `json:"machineNote"`
}

// haSpread is what `spread` writes for report.
type haSpread struct {
	Agents          int `json:"agents"`
	Seconds         int `json:"seconds"`
	SettleSeconds   int `json:"settleSeconds"`
	BaselineSeconds int `json:"baselineSeconds"`
	ClkTck          int `json:"clkTck"`
	RampRate        int `json:"rampRate"`
	// What each agent sends: a heartbeat every HeartbeatSeconds and a
	// change of CPU and memory every ChangeSeconds ±10 %.
	HeartbeatSeconds float64     `json:"heartbeatSeconds"`
	ChangeSeconds    float64     `json:"changeSeconds"`
	EnrollSeconds    float64     `json:"enrollSeconds"`
	RampSeconds      float64     `json:"rampSeconds"`
	Replicas         []haReplica `json:"replicas"`
	Driver           procResult  `json:"driver"`
	Heartbeats       int64       `json:"heartbeats"`
	Changes          int64       `json:"changes"`
	// ListedOnline is what list_servers on each replica counted online
	// after the window: every agent, whichever replica holds its stream.
	ListedOnline []int   `json:"listedOnline"`
	MachineBusy  float64 `json:"machineBusyPercent"`
	MachineNote  string  `json:"machineNote"`
}

// haReplica is one replica's share of the spread fleet.
type haReplica struct {
	replicaProc
	Agents   int        `json:"agents"`
	Baseline procResult `json:"baseline"`
	Window   procResult `json:"window"`
	FDs      int        `json:"fds"`
}

// haConfig is what both take; cmdHA fills it from flags.
type haConfig struct {
	agentsConfig
	Replicas []replicaProc
	Limit    time.Duration // failover: how long the agents have to come back
}

func cmdHA(kind string, args []string) error {
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	c := haConfig{agentsConfig: agentsConfig{Log: os.Stderr}}
	var reps replicaFlags
	fs.Var(&reps, "replica", "a replica of the set, `PID,DATA,HTTP` (repeatable; the first is the one failover kills)")
	limit := fs.Int("limit", 120, "failover: seconds the agents have to come back before it counts as a failure")
	fs.IntVar(&c.Parallel, "parallel", 6, "enrollments at a time")
	fs.IntVar(&c.Rate, "rate", 150, "agents starting per second while ramping up (over all replicas)")
	parse := fleetFlags(fs, &c.agentsConfig)
	out := fs.String("out", "", "write the figures here (JSON)")
	if err := parse(args); err != nil {
		return err
	}
	if *out == "" || len(reps) < 2 {
		return fmt.Errorf("%s needs -out and at least two -replica", kind)
	}
	c.Replicas, c.Calls, c.PID, c.Data = reps, 1, reps[0].PID, reps[0].Data
	c.Limit = time.Duration(*limit) * time.Second
	if err := c.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res any
	var err error
	if kind == "failover" {
		res, err = runFailover(ctx, c)
	} else {
		res, err = runSpread(ctx, c)
	}
	if err != nil {
		return err
	}
	return writeJSON(*out, res)
}

// haFleet enrolls c.N simulated agents, agent i through replica
// i % len(starts) of the set (each its first address), and returns the
// fleet to run them with.
func haFleet(ctx context.Context, c haConfig, starts []replicaProc) (*simFleet, []*simAgent, float64, error) {
	var jls []gridcityv1.JoinLine
	for i := range starts {
		jl, err := reusableJoin(ctx, c.Gridcity, starts[i].Data)
		if err != nil {
			return nil, nil, 0, err
		}
		jls = append(jls, jl)
		starts[i].GRPC = jl.Coordinator
	}
	t0 := time.Now()
	ids, ca, _, err := enrollAll(ctx, jls, c.N, c.Parallel)
	if err != nil {
		return nil, nil, 0, err
	}
	enroll := time.Since(t0).Seconds()
	c.logf("enrolled %d agents through %d replicas in %.1f s", c.N, len(starts), enroll)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	f := &simFleet{addr: jls[0].Coordinator, roots: roots, heartbeat: c.Heartbeat, change: c.Change}
	agents := make([]*simAgent, c.N)
	for i := range agents {
		agents[i] = newSimAgent(i, c.N, ids[i])
		agents[i].addr = jls[i%len(jls)].Coordinator
	}
	return f, agents, enroll, nil
}

// ramp starts the agents at c.Rate a second and waits until every stream
// is up. stop stops them and waits for their ends.
func ramp(ctx context.Context, c haConfig, f *simFleet, agents []*simAgent) (stop func(), seconds float64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	d, err := rampUp(ctx, c, f, agents, &wg)
	return stop, d, err
}

func rampUp(ctx context.Context, c haConfig, f *simFleet, agents []*simAgent, wg *sync.WaitGroup) (float64, error) {
	t0 := time.Now()
	var up atomic.Int64
	tick := time.NewTicker(time.Second / time.Duration(c.Rate))
	defer tick.Stop()
	lastLog := t0
	for i, a := range agents {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		wg.Go(func() { f.run(ctx, a, sync.OnceFunc(func() { up.Add(1) })) })
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			c.logf("ramp: %d of %d started, %d up at least once after %.0f s; %d streams ended", i+1, len(agents), up.Load(), time.Since(t0).Seconds(), f.reconnects.Load())
			if err := f.storm(i+1, len(agents)); err != nil {
				return 0, err
			}
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for up.Load() < int64(len(agents)) {
		if err := f.storm(len(agents), len(agents)); err != nil {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%w: %d of %d streams up 2 minutes after the last agent started; streams ended: %s",
				errNotHeld, up.Load(), len(agents), strings.Join(f.endCauses(), "; "))
		}
		if n := f.refused.Load(); n > 0 {
			return 0, fmt.Errorf("the coordinators refused %d agents: %v", n, f.lastError())
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	d := time.Since(t0).Seconds()
	c.logf("%d streams up in %.1f s (%d started a second)", len(agents), d, c.Rate)
	return d, nil
}

// streams is the agent streams each replica's /healthz counts.
func streams(ctx context.Context, reps []replicaProc) ([]int, int, error) {
	var per []int
	sum := 0
	for _, r := range reps {
		n, err := connectedAgents(ctx, "http://"+r.HTTP)
		if err != nil {
			return nil, 0, err
		}
		per, sum = append(per, n), sum+n
	}
	return per, sum, nil
}

// runFailover connects every agent to the first replica (each told of
// all of them by its stream, as gridcity-agent is), kills that replica
// with SIGKILL and times each agent's stream up again on a survivor.
func runFailover(ctx context.Context, c haConfig) (haFailover, error) {
	res := haFailover{Agents: c.N, Replicas: len(c.Replicas)}
	f, agents, enroll, err := haFleet(ctx, c, c.Replicas[:1])
	if err != nil {
		return res, err
	}
	res.EnrollSeconds = enroll
	// Each agent's time back: set once, by the first stream up on a
	// survivor after the kill.
	var killed atomic.Int64 // UnixNano of the kill; 0 before
	back := make([]atomic.Int64, c.N)
	var backN atomic.Int64
	victim := c.Replicas[0].GRPC
	f.up = func(a *simAgent, addr string) {
		if k := killed.Load(); k != 0 && addr != victim && back[a.i].CompareAndSwap(0, time.Now().UnixNano()-k) {
			backN.Add(1)
		}
	}
	stopSims, rampSeconds, err := ramp(ctx, c, f, agents)
	defer stopSims()
	if res.RampSeconds = rampSeconds; err != nil {
		return res, err
	}
	// Every replica registered, and the agents told of them all.
	deadline := time.Now().Add(30 * time.Second)
	for f.knownReplicas() < len(c.Replicas) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the agents were told of %d replicas within 30 s, want %d", f.knownReplicas(), len(c.Replicas))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := waitStreams(ctx, "http://"+c.Replicas[0].HTTP, c.N, time.Minute); err != nil {
		return res, err
	}
	c.logf("all %d agents on %s; settling for %s, then killing it (-9)", c.N, victim, c.Settle)
	select {
	case <-time.After(c.Settle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	r0 := f.reconnects.Load()
	killed.Store(time.Now().UnixNano())
	if err := syscall.Kill(c.Replicas[0].PID, syscall.SIGKILL); err != nil {
		return res, fmt.Errorf("kill the replica %s (pid %d): %w", victim, c.Replicas[0].PID, err)
	}
	deadline = time.Now().Add(c.Limit)
	for backN.Load() < int64(c.N) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d agents were back on a survivor %s after the kill; streams ended: %s",
				backN.Load(), c.N, c.Limit, strings.Join(f.endCauses(), "; "))
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.Reconnects = f.reconnects.Load() - r0
	res.MachineNote = machineNote()
	for i := range back {
		res.Seconds = append(res.Seconds, time.Duration(back[i].Load()).Seconds())
	}
	slices.Sort(res.Seconds)
	// The survivors' own count of the streams they hold.
	survivors := c.Replicas[1:]
	res.OnSurvivors = map[string]int{}
	if err := waitStreamsSum(ctx, survivors, c.N, 30*time.Second); err != nil {
		return res, err
	}
	per, _, err := streams(ctx, survivors)
	if err != nil {
		return res, err
	}
	for i, r := range survivors {
		res.OnSurvivors[r.HTTP] = per[i]
	}
	c.logf("failover of %d agents: p50 %.2f s, p95 %.2f s, all back in %.2f s; on the survivors %v",
		c.N, percentile(res.Seconds, 50), percentile(res.Seconds, 95), res.Seconds[len(res.Seconds)-1], res.OnSurvivors)
	return res, nil
}

func waitStreamsSum(ctx context.Context, reps []replicaProc, n int, within time.Duration) error {
	return waitUntil(ctx, within, func() (bool, string, error) {
		per, sum, err := streams(ctx, reps)
		return sum == n, fmt.Sprintf("the replicas count %v agents connected after %s, want %d in all", per, within, n), err
	})
}

// runSpread measures each replica with no agents, then with c.N agents
// spread round them (agent i enrolled through and streaming to replica
// i % replicas), over the same window, as `agents` measures one
// coordinator.
func runSpread(ctx context.Context, c haConfig) (haSpread, error) {
	res := haSpread{Agents: c.N, Seconds: int(c.Window / time.Second), SettleSeconds: int(c.Settle / time.Second),
		BaselineSeconds: int(c.Baseline / time.Second), ClkTck: c.ClkTck, RampRate: c.Rate,
		HeartbeatSeconds: c.Heartbeat.Seconds(), ChangeSeconds: c.Change.Seconds()}
	if _, sum, err := streams(ctx, c.Replicas); err != nil {
		return res, err
	} else if sum != 0 {
		return res, fmt.Errorf("the replicas already hold %d agent streams: the baseline needs fresh ones", sum)
	}
	reps := slices.Clone(c.Replicas)
	c.logf("measuring %d replicas with no agents for %s", len(reps), c.Baseline)
	base, err := measureAll(ctx, reps, c.Baseline, false)
	if err != nil {
		return res, fmt.Errorf("baseline: %w", err)
	}
	f, agents, enroll, err := haFleet(ctx, c, reps)
	if err != nil {
		return res, err
	}
	res.EnrollSeconds = enroll
	stopSims, rampSeconds, err := ramp(ctx, c, f, agents)
	defer stopSims()
	if res.RampSeconds = rampSeconds; err != nil {
		return res, err
	}
	if err := waitStreamsSum(ctx, reps, c.N, time.Minute); err != nil {
		return res, err
	}
	c.logf("all %d streams up; settling for %s, then measuring for %s", c.N, c.Settle, c.Window)
	r0 := f.reconnects.Load()
	select {
	case <-time.After(c.Settle):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	if n := f.reconnects.Load() - r0; n > 0 {
		return res, fmt.Errorf("%w: %d streams ended while settling; streams ended: %s", errNotHeld, n, strings.Join(f.endCauses(), "; "))
	}
	rec0, hb0, ch0 := f.reconnects.Load(), f.heartbeats.Load(), f.changes.Load()
	busy0, total0, err := machineTicks()
	if err != nil {
		return res, err
	}
	win, err := measureAll(ctx, reps, c.Window, true)
	if err != nil {
		return res, fmt.Errorf("window: %w", err)
	}
	res.Driver = win[len(win)-1]
	res.Heartbeats, res.Changes = f.heartbeats.Load()-hb0, f.changes.Load()-ch0
	if busy, total, err := machineTicks(); err == nil && total > total0 {
		res.MachineBusy = float64(busy-busy0) * 100 / float64(total-total0)
	}
	res.MachineNote = machineNote()
	if n := f.reconnects.Load() - rec0; n > 0 {
		return res, fmt.Errorf("%w: %d streams ended during the window, so the figures would mix in reconnects; streams ended: %s",
			errNotHeld, n, strings.Join(f.endCauses(), "; "))
	}
	per, _, err := streams(ctx, reps)
	if err != nil {
		return res, err
	}
	for i, r := range reps {
		res.Replicas = append(res.Replicas, haReplica{replicaProc: r, Agents: per[i], Baseline: base[i], Window: win[i], FDs: countFDs(r.PID)})
		c.logf("replica %s: %d agents, RSS %.1f MiB (%.1f with none), CPU %.1f%% of one core", r.HTTP, per[i],
			float64(win[i].RSS)/1024, float64(base[i].RSS)/1024, float64(win[i].CPUNs)/1e7/c.Window.Seconds())
	}
	// Every replica lists every agent online, whichever holds its stream.
	for _, r := range reps {
		n, err := listedOnline(ctx, c, r, c.N)
		if err != nil {
			return res, err
		}
		res.ListedOnline = append(res.ListedOnline, n)
	}
	return res, nil
}

// measureAll measures every replica (and, with driver, this process,
// last) over the same d.
func measureAll(ctx context.Context, reps []replicaProc, d time.Duration, driver bool) ([]procResult, error) {
	pids := make([]int, 0, len(reps)+1)
	for _, r := range reps {
		pids = append(pids, r.PID)
	}
	if driver {
		pids = append(pids, os.Getpid())
	}
	out := make([]procResult, len(pids))
	errs := make([]error, len(pids))
	var wg sync.WaitGroup
	for i, pid := range pids {
		wg.Go(func() { out[i], errs[i] = measureProc(ctx, pid, d, nil) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// listedOnline is how many servers list_servers on replica r counts
// online, once it counts want (the shared view catches up within seconds).
func listedOnline(ctx context.Context, c haConfig, r replicaProc, want int) (int, error) {
	tok, err := mcpEndpoint(ctx, c.Gridcity, r.Data)
	if err != nil {
		return 0, err
	}
	meter := &meteredTransport{headers: map[string]string{"Authorization": "Bearer " + tok.Token, "X-Agent-Client": "gridcity-bench"}}
	cl := mcp.NewClient(&mcp.Implementation{Name: "gridcity-bench", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: tok.Endpoint, HTTPClient: &http.Client{Transport: meter}, MaxRetries: -1, MaxEventSize: -1}, nil)
	if err != nil {
		return 0, fmt.Errorf("MCP session with %s: %w", r.HTTP, err)
	}
	defer cs.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out listServersPage
		if _, _, err := callTool(ctx, cs, meter, "list_servers", map[string]any{}, &out); err != nil {
			return 0, err
		}
		if out.Online == want || time.Now().After(deadline) {
			return out.Online, nil
		}
		time.Sleep(time.Second)
	}
}
