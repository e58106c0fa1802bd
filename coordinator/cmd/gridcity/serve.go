package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/agentapi"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/frontdoor"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
	"github.com/gridcity/gridcity/coordinator/internal/web"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

// runtimeInfo is written to DATA/coordinator.json at start so that the CLI
// (join, mcp) knows where the running coordinator listens.
type runtimeInfo struct {
	HTTP      string `json:"http"`
	GRPC      string `json:"grpc"`
	Advertise string `json:"advertise"`
	TLS       bool   `json:"tls"`
}

// defaultGCPercent is serve's GOGC unless the environment sets one.
const defaultGCPercent = 50

// tuneGC sets the garbage collector's percent to defaultGCPercent unless
// GOGC is set.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	sf := addStoreFlags(fs)
	data := sf.data
	httpAddr := fs.String("http", "127.0.0.1:4600", "HTTP address: /mcp, /healthz, /metrics and the app")
	grpcAddr := fs.String("grpc", ":4601", "gRPC address the agents connect to (always TLS)")
	advertise := fs.String("advertise", "", "HOST:PORT agents dial, as written into join lines (default: this host's first non-loopback address and the gRPC port)")
	tlsCert := fs.String("tls-cert", "", "certificate file for HTTPS on --http")
	tlsKey := fs.String("tls-key", "", "key file for HTTPS on --http")
	publicHTTP := fs.Bool("public-http", false, "allow plain HTTP on a non-loopback --http address (put TLS in front of it)")
	configPath := fs.String("config", "", "YAML file: districts, resources, links, probe defaults, runbooks")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text (key=value) or json, one event per line")
	appURLFlag := fs.String("app-url", "", "the app's address as people open it (behind a proxy, say), for the links in notifications (default: from --http)")
	bodyTimeout := fs.Duration("body-timeout", frontdoor.DefaultBodyTimeout, "longest a client may take to send a request's body after its headers (which have "+frontdoor.HeaderTimeout.String()+"); answers, such as run_command's wait and the app's event stream, are not bounded by it")
	if err := parse(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	for flagName, addr := range map[string]string{"--http": *httpAddr, "--grpc": *grpcAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q is not an address: use HOST:PORT, e.g. 127.0.0.1:4600 or :4601", flagName, addr)
		}
	}
	if *advertise != "" {
		if err := gridcityv1.CheckReplicaAddress(*advertise); err != nil {
			return fmt.Errorf("--advertise: %w", err)
		}
	}
	if *bodyTimeout <= 0 {
		return fmt.Errorf("--body-timeout %s: give a positive duration, e.g. 30s", *bodyTimeout)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if !loopback.Host(*httpAddr) {
		if *tlsCert == "" && !*publicHTTP {
			return fmt.Errorf("--http %s is reachable from other hosts: give --tls-cert and --tls-key, or --public-http if a TLS proxy sits in front", *httpAddr)
		}
		logger.Warn("HTTP listens on a non-loopback address; the MCP endpoint and the app are reachable from the network", "http", *httpAddr)
	}

	// The coordinator's heap is mostly what it holds for each connected
	// agent, long-lived and slowly allocated: collecting when the heap has
	// grown by half rather than doubled keeps about a quarter of its memory
	// at 10,000 agents for a little more collection work (bench/profiles.md).
	// GOGC in the environment sets it as usual.
	tuneGC(os.Getenv)

	cfg := config.Default()
	if *configPath != "" {
		if cfg, err = config.Load(*configPath); err != nil {
			return err // every problem, with its line
		}
	}
	// Everything in the data directory is private: the store holds the CA
	// key (and its WAL a copy until a checkpoint), mcp-token and
	// admin-password are credentials.
	if was, err := atomicfile.PrivateDir(*data, "data directory"); err != nil {
		return err
	} else if was != 0 {
		logger.Warn("made the data directory private (0700): other users could enter it", "data", *data, "was", fmt.Sprintf("%04o", was))
	}
	unlock, err := lockData(*data)
	if err != nil {
		return err
	}
	defer unlock()
	raw, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer raw.Close()
	metrics := telemetry.New(version)
	st := store.Observe(raw, metrics.StoreOperation)
	ca, err := pki.LoadOrCreate(ctx, st)
	if err != nil {
		return err
	}
	fl, err := fleet.New(ctx, st, logger, fleet.WithMetricRetention(store.MetricRetention{Raw: cfg.Metrics.Raw, Rollup: cfg.Metrics.Rollup}))
	if err != nil {
		return fmt.Errorf("load fleet: %w", err)
	}
	if *configPath != "" {
		// Names that are neither resources nor enrolled servers may be
		// servers yet to enroll: say so, but start.
		agents, err := st.Agents(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, a := range agents {
			names = append(names, a.Name)
		}
		if err := cfg.Validate(names); err != nil {
			logger.Warn("the config names servers that have not enrolled yet; they join the topology when they do", "problems", err.Error())
		}
	}
	apiCfg := agentapi.DefaultConfig()
	apiCfg.Metrics = metrics
	secs := func(d time.Duration) uint32 { return uint32(d / time.Second) }
	apiCfg.Settings.FastIntervalSeconds, apiCfg.Settings.MediumIntervalSeconds = secs(cfg.Collect.Fast), secs(cfg.Collect.Medium)
	apiCfg.Settings.SlowIntervalSeconds, apiCfg.Settings.UpdatesIntervalSeconds = secs(cfg.Collect.Slow), secs(cfg.Collect.Updates)
	api := agentapi.New(apiCfg, st, ca, fl, logger)
	gs, err := api.GRPCServer()
	if err != nil {
		return err
	}
	gl, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return fmt.Errorf("listen for agents on %s: %w", *grpcAddr, err)
	}
	// From the listener, so that --grpc HOST:0 advertises the port it got.
	adv := *advertise
	if adv == "" {
		adv = defaultAdvertise(gl.Addr().String())
		if loopback.Host(adv) {
			logger.Warn("join lines will name a loopback address, which only agents on this host can reach; set --advertise HOST:PORT", "advertise", adv)
		}
	}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		gl.Close()
		return fmt.Errorf("listen for HTTP on %s: %w", *httpAddr, err)
	}
	info := runtimeInfo{HTTP: hl.Addr().String(), GRPC: gl.Addr().String(), Advertise: adv, TLS: *tlsCert != ""}
	if err := writeJSONFile(*data, "coordinator.json", info); err != nil {
		return err
	}
	if err := ensureAdmin(ctx, st, *data, stdout, logger); err != nil {
		return err
	}
	if _, created, err := ensureLocalToken(ctx, st, *data); err != nil {
		return err
	} else if created {
		logger.Info("created the local MCP token; `gridcity mcp` prints it", "file", filepath.Join(*data, localTokenFile))
	}

	// Registered before serving, so that a store that cannot record this
	// replica stops the start; agents hear of every live replica.
	// Replicas sharing a PostgreSQL store hand approved commands to the
	// one holding the agent, sealed to the key it registers here.
	pg, shared := raw.(*store.Postgres)
	var handoff *command.HandoffKey
	if shared {
		if handoff, err = command.NewHandoffKey(); err != nil {
			return err
		}
	}
	heart := replicas.New(st, replicas.Config{GRPC: adv, HTTP: info.HTTP, HandoffKey: handoff.Public()}, api.SetReplicas, logger)
	if err := heart.Beat(ctx); err != nil {
		return err
	}
	// Replicas sharing a PostgreSQL store show each other's agents; one
	// coordinator on its SQLite file has no one to share with.
	if shared {
		fl.Share(heart.ID(), heart.LiveFor())
	}

	scheme := "http"
	if info.TLS {
		scheme = "https"
	}
	appURL := scheme + "://" + info.HTTP + "/"
	prober := resources.New(cfg, logger)
	topo := topology.New(cfg, fl, prober)
	if *appURLFlag == "" {
		*appURLFlag = appURL
	}
	hub, err := newNotifyHub(cfg, *appURLFlag, topo, metrics, logger)
	if err != nil {
		return err
	}
	cmdCfg := command.Config{Metrics: metrics}
	if len(cfg.Notify) > 0 {
		cmdCfg.Notice = hub.Request
	}
	cmds := command.New(cmdCfg, st, fl, api, logger)
	api.SetCommands(cmds)
	if shared {
		cmds.Share(command.Shared{Replica: heart.ID(), Key: handoff, LiveFor: heart.LiveFor()})
	}

	mux := http.NewServeMux()
	prober.SetMetrics(metrics)
	// Resources are probed from the agents of the servers that use them.
	prober.SetAgents(api, topo.Vantages)
	api.SetProbes(prober)
	// One judgement for the fleet: replicas sharing a store elect a
	// leader, which alone probes from the coordinator and records
	// incidents; the others read what it records, and every replica
	// shares the checks of the agents it holds.
	var lead *replicas.Leader
	var leads func() bool // nil: a lone coordinator judges on its own
	if shared {
		lead = replicas.NewLeader(logger)
		leads = lead.Leads
		// diagnose's on-demand probes from an agent another replica holds
		// are asked of that replica through the store.
		heldBy := func(server string) string {
			if info := fl.ServerInfo(server); !info.Online {
				return info.Replica
			}
			return ""
		}
		prober.Share(resources.Shared{Store: st, Replica: heart.ID(), Leads: lead.Leads, Changed: lead.Changed, Asks: st, HeldBy: heldBy})
	}
	tracker := incidents.New(st, func() (graph.Report, error) {
		g, err := topo.Graph()
		if err != nil {
			return graph.Report{}, err
		}
		// The tracker reads root causes and what they explain, not the at-risk lists.
		return g.IncidentsWith(graph.IncidentOptions{MaxAtRisk: -1}), nil
	}, logger)
	if err := tracker.Load(ctx); err != nil {
		return fmt.Errorf("load open incidents: %w", err)
	}
	deps := mcpserver.Deps{Fleet: fl, Store: st, Commands: cmds, Topology: topo, Resources: prober, Incidents: tracker, AppURL: appURL, Logger: logger, Metrics: metrics,
		Agents: mcpserver.NewAgentsCache()}
	mux.Handle("/mcp", mcpserver.Handler(deps, mcpserver.DefaultGuardConfig()))
	// Behind a TLS proxy (--public-http) the browser sees https too.
	mux.Handle("/", web.New(web.Config{Secure: info.TLS || *publicHTTP, Views: mcpserver.NewApp(deps)}, cmds, st, logger))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		health := map[string]any{"status": "ok", "version": version, "agentsConnected": len(api.Connected())}
		if shared { // which replica this is, and whether it does the fleet's judgement
			health["replica"], health["leader"] = heart.ID(), lead.Leads()
		}
		// Still 200: this replica serves what it holds, as every other
		// replica on the same store would.
		if o, down := fl.StoreOutage(); down {
			health["status"], health["store"] = "degraded", fmt.Sprintf("unreachable since %s: approvals and commands wait (%v)", o.Since.UTC().Format(time.RFC3339), o.Err)
		}
		json.NewEncoder(w).Encode(health)
	})
	registerGauges(metrics, api, fl, cmds, tracker, heart.ID(), lead, logger)
	// Off loopback, Prometheus brings a token of scope metrics.
	scrape := func(h http.Handler) http.Handler {
		if loopback.Host(info.HTTP) {
			return h
		}
		return telemetry.RequireToken(h, st, logger)
	}
	mux.Handle("GET /metrics", scrape(metrics.Handler()))
	mux.Handle("GET /metrics/fleet", scrape(telemetry.FleetHandler(fleetSource(fl, topo, prober))))

	// Requests live in a context that ends at shutdown, so that open
	// event streams of the app do not hold the shutdown up.
	baseCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	// Every route passes the front door: the DNS-rebinding rule on a
	// loopback listener, and the bound on reading a request.
	hs := frontdoor.NewServer(mux, frontdoor.Config{BodyTimeout: *bodyTimeout, Logger: logger})
	hs.BaseContext = func(net.Listener) context.Context { return baseCtx }

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { fl.Run(ctx, 2*time.Second) })
	wg.Go(func() { cmds.Run(ctx) })
	if shared { // changes other replicas make, as they commit
		wg.Go(func() { pg.Listen(ctx, store.RequestsChannel, logger, func(id string) { cmds.Changed(ctx, id) }) })
		wg.Go(func() { pg.Listen(ctx, store.ProbesChannel, logger, prober.Notified) })
	}
	wg.Go(func() { prober.Run(ctx) })
	if shared {
		wg.Go(func() { pg.Lead(ctx, time.Second, logger, lead.Set) })
	}
	wg.Go(func() { tracker.Run(ctx, 5*time.Second, leads) })
	wg.Go(func() { heart.Run(ctx) })
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { hub.Watch(ctx, notifySources(cfg, tracker, fl, topo, leads)) })
	wg.Go(func() {
		if err := gs.Serve(gl); err != nil {
			errs <- fmt.Errorf("gRPC server: %w", err)
		}
	})
	wg.Go(func() {
		var err error
		if *tlsCert != "" {
			err = hs.ServeTLS(hl, *tlsCert, *tlsKey)
		} else {
			err = hs.Serve(hl)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("HTTP server: %w", err)
		}
	})
	logger.Info("coordinator ready", "version", version, "mcp", scheme+"://"+info.HTTP+"/mcp", "grpc", info.GRPC, "advertise", adv, "ca_pin", ca.Pin(), "data", *data, "store", sf.where())
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	logger.Info("coordinator stopping")
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	endRequests()
	hs.Shutdown(sctx)
	api.Shutdown()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		gs.Stop()
	}
	cancel()
	wg.Wait()
	return err
}

// lockData keeps a second coordinator off the same data directory (which
// must exist): it would rewrite coordinator.json under the first one and
// race its store.
func lockData(data string) (func(), error) {
	path := filepath.Join(data, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil { // whatever the umask, or an older gridcity, made it
		f.Close()
		return nil, fmt.Errorf("make %s private: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		pid, _ := os.ReadFile(path)
		return nil, fmt.Errorf("another coordinator (pid %s) is serving from %s: stop it first, or give this one its own --data", strings.TrimSpace(string(pid)), data)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { f.Close() }, nil
}

// defaultAdvertise picks the address agents should dial: the gRPC host if it
// is specific, else this host's first non-loopback IPv4 address.
func defaultAdvertise(grpcAddr string) string {
	host, port, err := net.SplitHostPort(grpcAddr)
	if err != nil {
		return grpcAddr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return grpcAddr
	}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return net.JoinHostPort(n.IP.String(), port)
			}
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
}

func writeJSONFile(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(dir, name, append(b, '\n'))
}

func readRuntime(data string) (runtimeInfo, error) {
	var info runtimeInfo
	b, err := os.ReadFile(filepath.Join(data, "coordinator.json"))
	if errors.Is(err, os.ErrNotExist) {
		hint := ""
		if fi, err := os.Stat(filepath.Join(".run", "coordinator", "coordinator.json")); err == nil && fi.Mode().IsRegular() {
			hint = " (the one `make run` started here has --data .run/coordinator)"
		}
		return info, fmt.Errorf("no coordinator has run with --data %s yet: give --data (or GRIDCITY_DATA) the data directory of the coordinator you started%s, or start `gridcity serve --data %s` first", data, hint, data)
	}
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}
