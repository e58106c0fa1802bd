package main

// gridcity-bench seed and app: the approval app's fleet pages in a real
// browser (Debian's Chromium, headless) on a coordinator holding a
// simulated fleet, with a week of metric history seeded into its store
// before it starts: the time from navigation to the page's data on screen
// (the page sets document.body.dataset.ready) and the bytes transferred.

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gridcity/gridcity/coordinator/harness/simfleet"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// cmdSeed writes a week of one-minute samples (cpu, memory, load, two
// disks) for the first -servers simulated servers into the store in
// -data, before the coordinator starts there; the store keeps them as it
// keeps its own (a day at one minute, a week at a quarter hour).
func cmdSeed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	data := fs.String("data", "", "the coordinator's data directory (the coordinator is not running yet)")
	servers := fs.Int("servers", 10, "how many of the simulated servers (sim-00001 …) get a history")
	days := fs.Int("days", 7, "how many days back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *servers < 1 || *days < 1 {
		return errors.New("seed needs -data, -servers ≥ 1 and -days ≥ 1")
	}
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, *data)
	if err != nil {
		return err
	}
	defer st.Close()
	keep := store.DefaultMetricRetention
	now := time.Now().UTC().Truncate(time.Minute)
	from := now.Add(-time.Duration(*days) * 24 * time.Hour)
	t0 := time.Now()
	points := 0
	for i := range *servers {
		name := simfleet.Name(i)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		var batch []store.MetricPoint
		flush := func(at time.Time) error {
			if len(batch) == 0 {
				return nil
			}
			err := st.AppendMetrics(ctx, batch, at, keep)
			points += len(batch)
			batch = batch[:0]
			return err
		}
		disk := 40 + rng.Float64()*20
		for at := from; at.Before(now); at = at.Add(store.MetricStep) {
			day := 2 * math.Pi * float64(at.Unix()%86400) / 86400
			cpu := math.Max(0, math.Min(100, 30+25*math.Sin(day)+rng.NormFloat64()*8))
			disk = math.Min(99, disk+0.0004) // filling slowly: a projected full time
			for metric, v := range map[string]float64{"cpu": cpu, "memory": 55 + 10*math.Sin(day/2) + rng.Float64()*3,
				"load": cpu / 25, "disk:/": disk, "disk:/var": disk / 2} {
				p := store.MetricPoint{Server: name, Metric: metric, At: at}
				p.Add(v)
				batch = append(batch, p)
			}
			if len(batch) >= 5000 {
				if err := flush(at); err != nil {
					return err
				}
			}
		}
		if err := flush(now); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "gridcity-bench: seed: %d one-minute samples for %d servers over %d days in %.1f s\n", points, *servers, *days, time.Since(t0).Seconds())
	return nil
}

// appRun is what app measured.
type appRun struct {
	Servers        int `json:"servers"`
	HistoryDays    int `json:"historyDays"`
	HistoryServers int `json:"historyServers"`
	// Each page: times from navigation to its data on screen (ms), and the
	// bytes the browser received for it (encoded, as on the wire).
	Pages       map[string]*pageRun `json:"pages"`
	MachineNote string              `json:"machineNote"`
	Chromium    string              `json:"chromium"`
}

type pageRun struct {
	What  string    `json:"what"`
	Ms    []float64 `json:"ms"`
	Bytes []int64   `json:"bytes"`
}

func cmdApp(args []string) error {
	fs := flag.NewFlagSet("app", flag.ContinueOnError)
	c := agentsConfig{Log: os.Stderr}
	fs.IntVar(&c.N, "n", 1000, "simulated agents")
	fs.StringVar(&c.Data, "data", "", "the coordinator's data directory")
	fs.StringVar(&c.Gridcity, "gridcity", "bin/gridcity", "the gridcity binary, for join and mcp --json")
	fs.IntVar(&c.Rate, "rate", 100, "agents starting per second")
	chromium := fs.String("chromium", "chromium", "the browser")
	rounds := fs.Int("rounds", 5, "loads of each page")
	historyServers := fs.Int("history-servers", 10, "the servers seed gave a history (their pages are measured)")
	historyDays := fs.Int("history-days", 7, "the days seed wrote")
	out := fs.String("out", "", "write the figures here (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || c.Data == "" {
		return errors.New("app needs -data and -out")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runApp(ctx, c, *chromium, *rounds)
	res.HistoryDays, res.HistoryServers = *historyDays, *historyServers
	if err != nil {
		return err
	}
	return writeJSON(*out, res)
}

func runApp(ctx context.Context, c agentsConfig, chromium string, rounds int) (appRun, error) {
	res := appRun{Servers: c.N, Pages: map[string]*pageRun{}, Chromium: chromium}
	tok, err := mcpEndpoint(ctx, c.Gridcity, c.Data)
	if err != nil {
		return res, err
	}
	base := strings.TrimSuffix(tok.Endpoint, "/mcp")
	pw, err := os.ReadFile(filepath.Join(c.Data, "admin-password"))
	if err != nil {
		return res, fmt.Errorf("the approver's password: %w", err)
	}

	// The fleet: every agent enrolled and streaming its state.
	jl, err := reusableJoin(ctx, c.Gridcity, c.Data)
	if err != nil {
		return res, err
	}
	ids, ca, _, err := enrollAll(ctx, []gridcityv1.JoinLine{jl}, c.N, 4)
	if err != nil {
		return res, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	f := &simFleet{addr: jl.Coordinator, roots: roots, heartbeat: 5 * time.Second, change: 5 * time.Second}
	simCtx, stopSims := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stopSims()
		wg.Wait()
	}()
	tick := time.NewTicker(time.Second / time.Duration(max(c.Rate, 1)))
	for i := range c.N {
		<-tick.C
		a := newSimAgent(i, c.N, ids[i])
		wg.Go(func() { f.run(simCtx, a, func() {}) })
	}
	tick.Stop()
	if err := waitStreams(ctx, base, c.N, 2*time.Minute); err != nil {
		return res, err
	}
	c.logf("app: %d simulated agents connected; opening the app in %s", c.N, chromium)
	time.Sleep(3 * time.Second) // every first state applied and flushed

	// The browser, as a person on a desktop would have it.
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-dev-shm-usage", true))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	var received atomic.Int64
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventLoadingFinished); ok {
			received.Add(int64(e.EncodedDataLength))
		}
	}); err != nil {
		return res, fmt.Errorf("start %s: %w", chromium, err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		return res, err
	}
	if _, err := chromedp.Call(bctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return res, err
	}
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=username]"), "admin"),
		chromedp.SendKeys(chromedp.CSS("#login-form [name=password]"), strings.TrimSpace(string(pw))),
		chromedp.Click(chromedp.CSS("#login-form button")), chromedp.WaitVisible(chromedp.CSS("#pending-view"))); err != nil {
		return res, fmt.Errorf("log in to the app: %w", err)
	}
	// load opens a URL afresh (a reload: the page, its script and style,
	// then its calls) and waits for page's data on screen.
	load := func(key, what, url, page string) error {
		p := res.Pages[key]
		if p == nil {
			p = &pageRun{What: what}
			res.Pages[key] = p
		}
		// A blank page between loads, so that each starts from nothing.
		if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // the last responses' byte counts
		before := received.Load()
		start := time.Now()
		if err := chromedp.Do(bctx, chromedp.Navigate(url),
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.body && document.body.dataset.ready === %q`, page),
				chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second))); err != nil {
			return fmt.Errorf("%s: not shown within 60 s: %w", what, err)
		}
		p.Ms = append(p.Ms, ms(time.Since(start)))
		time.Sleep(300 * time.Millisecond) // the last responses' byte counts
		p.Bytes = append(p.Bytes, received.Load()-before)
		return nil
	}
	server := simfleet.Name(0)
	for range rounds {
		if err := load("map", fmt.Sprintf("the city map of %d servers, loaded afresh", c.N), base+"/#map", "map"); err != nil {
			return res, err
		}
		if err := load("server", "a server's page (its facts, topology, commands and the last hour's charts), loaded afresh", base+"/#servers/"+server, "server"); err != nil {
			return res, err
		}
	}
	// The week's charts: what the page fetches when the person picks 7d.
	week := &pageRun{What: "a server's week of history (GET /api/servers/NAME/metrics?since=7d from the page)"}
	res.Pages["week"] = week
	for range rounds {
		type fetched struct {
			Ms    float64 `json:"ms"`
			Bytes int64   `json:"bytes"`
		}
		js := fmt.Sprintf(`(async () => { const t0 = performance.now();
			const r = await fetch('/api/servers/%s/metrics?since=7d', {headers: {'X-Gridcity-Session': sessionStorage.getItem('gridcity.session')}});
			const b = await r.arrayBuffer(); if (!r.ok) throw new Error('status ' + r.status);
			return {ms: performance.now() - t0, bytes: b.byteLength}; })()`, server)
		r, err := chromedp.Run(bctx, chromedp.Evaluate[fetched](js, chromedp.EvalAwaitPromise))
		if err != nil {
			return res, fmt.Errorf("the week's history: %w", err)
		}
		week.Ms, week.Bytes = append(week.Ms, r.Ms), append(week.Bytes, r.Bytes)
	}
	res.MachineNote = machineNote()
	for k, p := range res.Pages {
		c.logf("app: %s: median %.0f ms, %d KiB", k, medianF(p.Ms), p.Bytes[len(p.Bytes)/2]/1024)
	}
	return res, nil
}

// appRows are the app's pages: the median time to the data on screen (with
// the range) and the median bytes received, for each page.
func appRows(a appRun) []Row {
	var rows []Row
	for _, key := range []string{"map", "server", "week"} {
		p := a.Pages[key]
		if p == nil || len(p.Ms) == 0 {
			continue
		}
		lo, hi := minMax(p.Ms)
		bytes := make([]float64, len(p.Bytes))
		for i, b := range p.Bytes {
			bytes[i] = float64(b)
		}
		common := fmt.Sprintf("%s; %d simulated servers, a week of history for %d of them (seeded one-minute samples kept as the store keeps its own); "+
			"headless Chromium on this machine at 1280×800, cache disabled, %d loads; %s", p.What, a.Servers, a.HistoryServers, len(p.Ms), a.MachineNote)
		rows = append(rows,
			Row{Name: "app " + key + ", time to its data on screen", Unit: "ms", Value: round3(medianF(p.Ms)),
				Notes: fmt.Sprintf("median; range %.0f–%.0f ms; from navigation until the page marks its data shown (document.body.dataset.ready). %s.", lo, hi, common)},
			Row{Name: "app " + key + ", bytes received", Unit: "KiB", Value: round3(medianF(bytes) / 1024),
				Notes: fmt.Sprintf("median of the bytes on the wire (encoded) for the load: the page, its script and style, and its API calls. %s.", common)})
	}
	return rows
}
