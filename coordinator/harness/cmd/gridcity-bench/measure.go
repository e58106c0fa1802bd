package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// live is what measure writes for report: the figures of one window.
type live struct {
	Start          time.Time `json:"start"`
	Seconds        int       `json:"seconds"`
	AgentConnected time.Time `json:"agentConnected"`
	Intervals      intervals `json:"intervals"`
	// Ticks of each agent tier inside the window.
	FastTicks    int `json:"fastTicks"`
	MediumTicks  int `json:"mediumTicks"`
	SlowTicks    int `json:"slowTicks"`
	UpdatesTicks int `json:"updatesTicks"`
	// Scrapes of the exporter inside the window.
	Scrapes         int     `json:"scrapes"`
	ScrapeBytes     int64   `json:"scrapeBytes"`     // median body size, uncompressed
	ScrapeMs        float64 `json:"scrapeMs"`        // median wall time
	ScrapeSeries    int     `json:"scrapeSeries"`    // samples in the last body
	ExporterVersion string  `json:"exporterVersion"` // from node_exporter_build_info
	ClkTck          int     `json:"clkTck"`
	// What could not be collected on this machine: the exporter's
	// collectors whose node_scrape_collector_success is 0, the agent's
	// gaps from its log.
	ExporterFailed []string `json:"exporterFailed"`
	AgentGaps      []string `json:"agentGaps"`
	// The machine over the window: how busy all its CPUs were, in percent,
	// and its load and TCP sockets at the end.
	MachineBusy float64 `json:"machineBusyPercent"`
	MachineNote string  `json:"machineNote"`

	Agent    procResult `json:"agent"`
	Exporter procResult `json:"exporter"`
	Rounds   []round    `json:"rounds"`
}

type intervals struct {
	Fast, Medium, Slow, Updates int // seconds
}

// procResult is one process over the window. Memory is in KiB: the median
// of the once-a-second samples, and the largest.
type procResult struct {
	PID          int    `json:"pid"`
	MemSamples   int    `json:"memSamples"`
	RSS          uint64 `json:"rssKiB"`
	RSSMax       uint64 `json:"rssMaxKiB"`
	Pss          uint64 `json:"pssKiB"`
	Private      uint64 `json:"privateKiB"`
	Anon         uint64 `json:"anonKiB"`
	CPUNs        uint64 `json:"cpuNs"`      // schedstat, all threads
	StatTicks    uint64 `json:"statTicks"`  // utime+stime
	ChildTicks   uint64 `json:"childTicks"` // cutime+cstime: children it waited for
	Threads      int    `json:"threads"`
	ThreadsEnded int    `json:"threadsEnded"`
	// The process's own executable: mapped and resident at the end.
	ExeMapped   uint64 `json:"exeMappedKiB"`
	ExeResident uint64 `json:"exeResidentKiB"`
}

// round is one medium interval of the window: its CPU per process, for the
// spread between rounds.
type round struct {
	AgentNs     uint64 `json:"agentNs"`
	ExporterNs  uint64 `json:"exporterNs"`
	FastTicks   int    `json:"fastTicks"`
	MediumTicks int    `json:"mediumTicks"`
	Scrapes     int    `json:"scrapes"`
}

func cmdMeasure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	agentPID := fs.Int("agent-pid", 0, "pid of gridcity-agent")
	agentLog := fs.String("agent-log", "", "the agent's log, for the moment it connected (its tickers start then)")
	exporterPID := fs.Int("exporter-pid", 0, "pid of the peer exporter")
	exporterURL := fs.String("exporter-url", "", "the peer's metrics URL")
	seconds := fs.Int("seconds", 90, "length of the window; rounded up to a whole number of medium intervals")
	warmup := fs.Int("warmup", 15, "at least this many seconds of warm-up before the window")
	fast := fs.Int("fast", 5, "the agent's fast interval and the scrape interval, s (the coordinator's default settings)")
	medium := fs.Int("medium", 30, "the agent's medium interval, s")
	slow := fs.Int("slow", 300, "the agent's slow interval, s")
	updates := fs.Int("updates", 1800, "the agent's updates interval, s")
	clkTck := fs.Int("clk-tck", 100, "clock ticks per second (getconf CLK_TCK)")
	connectTimeout := fs.Duration("connect-timeout", 90*time.Second, "how long to wait for the agent to connect")
	out := fs.String("out", "", "write the figures here (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *agentPID <= 0 || *exporterPID <= 0 || *exporterURL == "" || *agentLog == "" || *out == "" {
		return errors.New("measure needs -agent-pid, -agent-log, -exporter-pid, -exporter-url and -out")
	}
	if *fast <= 0 || *medium <= 0 || *medium%*fast != 0 {
		return errors.New("-medium must be a multiple of -fast")
	}
	iv := intervals{*fast, *medium, *slow, *updates}

	connected, err := waitConnected(*agentLog, *agentPID, *connectTimeout)
	if err != nil {
		return err
	}
	// The agent's tickers start when it connects, and tick at
	// connected + k·interval. The window starts half a fast interval after
	// a medium tick, so it holds whole rounds of exactly medium/fast fast
	// ticks and one medium tick each, and no edge cuts a sample in two.
	W := ((*seconds + *medium - 1) / *medium) * *medium
	earliest := time.Now().Add(time.Duration(*warmup) * time.Second)
	med := time.Duration(*medium) * time.Second
	fastD := time.Duration(*fast) * time.Second
	k := (earliest.Sub(connected) + med - 1) / med
	start := connected.Add(k*med + fastD/2)
	end := start.Add(time.Duration(W) * time.Second)
	fmt.Fprintf(os.Stderr, "gridcity-bench: agent connected %s; warm-up until %s, window %d s until %s\n",
		connected.Format("15:04:05.000"), start.Format("15:04:05.000"), W, end.Format("15:04:05.000"))

	res := live{
		Start: start, Seconds: W, AgentConnected: connected, Intervals: iv, ClkTck: *clkTck,
		FastTicks:    ticksIn(connected, start, end, *fast),
		MediumTicks:  ticksIn(connected, start, end, *medium),
		SlowTicks:    ticksIn(connected, start, end, *slow),
		UpdatesTicks: ticksIn(connected, start, end, *updates),
	}

	// The scraper runs through the warm-up too, as Prometheus would, and
	// scrapes a second after the window's edge and every fast interval
	// after: 1.5 s away from the agent's ticks, so they do not queue for
	// the same CPUs.
	sc := &scraper{url: *exporterURL, client: &http.Client{Timeout: 4 * time.Second}}
	if err := sc.scrape(); err != nil {
		return fmt.Errorf("scrape %s: %w", *exporterURL, err)
	}
	scrapeErr := make(chan error, 1)
	stopScrapes := make(chan struct{})
	go func() {
		first := start.Add(time.Second)
		for first.Add(-fastD).After(time.Now()) {
			first = first.Add(-fastD)
		}
		for t := first; t.Before(end); t = t.Add(fastD) {
			select {
			case <-stopScrapes:
				scrapeErr <- nil
				return
			case <-time.After(time.Until(t)):
			}
			inWindow := !t.Before(start)
			if err := sc.scrape(); err != nil {
				scrapeErr <- fmt.Errorf("scrape %s: %w", *exporterURL, err)
				return
			}
			if inWindow {
				sc.countInWindow()
			}
		}
		scrapeErr <- nil
	}()

	// Warm-up: wait for the window, checking that both processes live.
	for time.Until(start) > 0 {
		if err := alive(*agentPID, *exporterPID); err != nil {
			close(stopScrapes)
			return err
		}
		time.Sleep(min(time.Second, time.Until(start)))
	}

	agentCPU, err := newCPUMeter(*agentPID)
	if err != nil {
		close(stopScrapes)
		return fmt.Errorf("agent: %w", err)
	}
	expCPU, err := newCPUMeter(*exporterPID)
	if err != nil {
		close(stopScrapes)
		return fmt.Errorf("exporter: %w", err)
	}
	mBusy0, mTotal0, err := machineTicks()
	if err != nil {
		close(stopScrapes)
		return err
	}
	if late := time.Since(start); late > 200*time.Millisecond {
		fmt.Fprintf(os.Stderr, "gridcity-bench: the window opened %s late\n", late.Round(time.Millisecond))
	}

	var agentMem, expMem []memSample
	var lastAgentNs, lastExpNs uint64
	roundScrapes := 0
	for s := 1; s <= W; s++ {
		time.Sleep(time.Until(start.Add(time.Duration(s) * time.Second)))
		if err := errors.Join(agentCPU.update(), expCPU.update()); err != nil {
			close(stopScrapes)
			return fmt.Errorf("a measured process ended: %w", err)
		}
		am, err1 := readMem(*agentPID)
		em, err2 := readMem(*exporterPID)
		if err := errors.Join(err1, err2); err != nil {
			close(stopScrapes)
			return fmt.Errorf("a measured process ended: %w", err)
		}
		agentMem, expMem = append(agentMem, am), append(expMem, em)
		if s%*medium == 0 {
			a, e := agentCPU.ns(), expCPU.ns()
			n := sc.inWindow()
			roundStart := start.Add(time.Duration(s-*medium) * time.Second)
			roundEnd := start.Add(time.Duration(s) * time.Second)
			r := round{
				AgentNs: a - lastAgentNs, ExporterNs: e - lastExpNs, Scrapes: n - roundScrapes,
				FastTicks:   ticksIn(connected, roundStart, roundEnd, *fast),
				MediumTicks: ticksIn(connected, roundStart, roundEnd, *medium),
			}
			res.Rounds = append(res.Rounds, r)
			lastAgentNs, lastExpNs, roundScrapes = a, e, n
			fmt.Fprintf(os.Stderr, "gridcity-bench: round %d/%d: agent %.2f ms CPU over %d fast + %d medium ticks, exporter %.2f ms CPU over %d scrapes\n",
				len(res.Rounds), W / *medium, float64(r.AgentNs)/1e6, r.FastTicks, r.MediumTicks, float64(r.ExporterNs)/1e6, r.Scrapes)
		}
	}
	if busy, total, err := machineTicks(); err == nil && total > mTotal0 {
		res.MachineBusy = float64(busy-mBusy0) * 100 / float64(total-mTotal0)
	}
	res.MachineNote = machineNote()
	if err := <-scrapeErr; err != nil {
		return err
	}
	if again, ok := lastConnected(*agentLog); !ok || !again.Equal(connected) {
		return fmt.Errorf("the agent reconnected during the window (see %s): its tickers restarted, so the samples cannot be counted", *agentLog)
	}

	var err1, err2 error
	res.Agent, err1 = result(*agentPID, agentCPU, agentMem)
	res.Exporter, err2 = result(*exporterPID, expCPU, expMem)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	res.Scrapes = sc.inWindow()
	res.ScrapeBytes, res.ScrapeMs, res.ScrapeSeries, res.ExporterVersion = sc.summary()
	res.ExporterFailed = sc.failedCollectors()
	res.AgentGaps = agentGaps(*agentLog)
	if res.Scrapes != W / *fast {
		return fmt.Errorf("%d scrapes in the window, want %d: the machine is too busy to keep time", res.Scrapes, W / *fast)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}

// ticksIn counts the instants origin + k·every (k ≥ 1) inside [from, to).
func ticksIn(origin, from, to time.Time, every int) int {
	if every <= 0 {
		return 0
	}
	d := time.Duration(every) * time.Second
	n := 0
	for t := origin.Add(d); t.Before(to); t = t.Add(d) {
		if !t.Before(from) {
			n++
		}
	}
	return n
}

func alive(pids ...int) error {
	for _, p := range pids {
		st, err := readStat(p)
		if err != nil {
			return fmt.Errorf("process %d is gone: %w", p, err)
		}
		if st.State == "Z" || st.State == "X" {
			return fmt.Errorf("process %d has ended", p)
		}
	}
	return nil
}

func result(pid int, m *cpuMeter, mem []memSample) (procResult, error) {
	self, children, err := m.ticks()
	if err != nil {
		return procResult{}, err
	}
	pick := func(f func(memSample) uint64) uint64 {
		v := make([]uint64, len(mem))
		for i, s := range mem {
			v[i] = f(s)
		}
		return medianU(v)
	}
	r := procResult{
		PID: pid, MemSamples: len(mem),
		RSS:          pick(func(s memSample) uint64 { return s.RSS }),
		Pss:          pick(func(s memSample) uint64 { return s.Pss }),
		Private:      pick(func(s memSample) uint64 { return s.Private }),
		Anon:         pick(func(s memSample) uint64 { return s.Anon }),
		CPUNs:        m.ns(),
		StatTicks:    self,
		ChildTicks:   children,
		Threads:      len(m.last) - len(m.ended),
		ThreadsEnded: len(m.ended),
	}
	for _, s := range mem {
		r.RSSMax = max(r.RSSMax, s.RSS)
	}
	r.ExeMapped, r.ExeResident, err = exeResident(pid)
	return r, err
}

func medianU(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// connectedLine is the agent's log line when its stream is up; its
// collectLoop and tickers start right after it.
var connectedLine = regexp.MustCompile(`^time=(\S+) .*msg="connected to the coordinator"`)

// waitConnected returns when the agent (last) connected, from its log.
func waitConnected(path string, pid int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		if t, ok := lastConnected(path); ok {
			return t, nil
		}
		if err := alive(pid); err != nil {
			return time.Time{}, fmt.Errorf("the agent ended before it connected: %w", err)
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the agent did not connect within %s (see %s)", timeout, path)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func lastConnected(path string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	var last time.Time
	found := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if m := connectedLine.FindStringSubmatch(s.Text()); m != nil {
			if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				last, found = t, true
			}
		}
	}
	return last, found
}

// scraper scrapes the exporter the way Prometheus does: its Accept header,
// gzip (Go's transport asks for it and inflates), the body read to the end.
type scraper struct {
	url    string
	client *http.Client

	mu      sync.Mutex
	n       int // scrapes inside the window
	bytes   []float64
	ms      []float64
	series  int
	version string
	failed  []string
}

const promAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

var buildInfo = regexp.MustCompile(`node_exporter_build_info\{[^}]*version="([^"]+)"`)

func (s *scraper) scrape() error {
	req, err := http.NewRequest(http.MethodGet, s.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", promAccept)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "4")
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	d := time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	series := 0
	for line := range bytes.Lines(body) {
		if len(line) > 0 && line[0] != '#' {
			series++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes = append(s.bytes, float64(len(body)))
	s.ms = append(s.ms, float64(d.Microseconds())/1000)
	s.series = series
	if m := buildInfo.FindSubmatch(body); m != nil {
		s.version = strings.TrimSpace(string(m[1]))
	}
	s.failed = s.failed[:0]
	for _, m := range collectorFailed.FindAllSubmatch(body, -1) {
		s.failed = append(s.failed, string(m[1]))
	}
	return nil
}

var collectorFailed = regexp.MustCompile(`(?m)^node_scrape_collector_success\{collector="([^"]+)"\} 0$`)

func (s *scraper) failedCollectors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.failed))
}

var gapLine = regexp.MustCompile(`msg="fact (not collected|collected again)" check=(\S+)`)

// agentGaps is the agent's current gaps, from the transitions it logs.
func agentGaps(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	open := map[string]bool{}
	for _, m := range gapLine.FindAllSubmatch(b, -1) {
		open[string(m[2])] = string(m[1]) == "not collected"
	}
	var out []string
	for k, v := range open {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (s *scraper) countInWindow() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
}

func (s *scraper) inWindow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *scraper) summary() (bytes int64, ms float64, series int, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(medianF(s.bytes)), medianF(s.ms), s.series, s.version
}
