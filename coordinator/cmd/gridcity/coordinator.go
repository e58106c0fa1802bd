package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/gridcity/gridcity/coordinator/internal/agentapi"
	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/config"
	"github.com/gridcity/gridcity/coordinator/internal/fleet"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
	"github.com/gridcity/gridcity/coordinator/internal/frontdoor"
	"github.com/gridcity/gridcity/coordinator/internal/graph"
	"github.com/gridcity/gridcity/coordinator/internal/incidents"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/mcpserver"
	"github.com/gridcity/gridcity/coordinator/internal/notify"
	"github.com/gridcity/gridcity/coordinator/internal/oauth"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/replicas"
	"github.com/gridcity/gridcity/coordinator/internal/resources"
	"github.com/gridcity/gridcity/coordinator/internal/store"
	"github.com/gridcity/gridcity/coordinator/internal/telemetry"
	"github.com/gridcity/gridcity/coordinator/internal/topology"
	"github.com/gridcity/gridcity/coordinator/internal/web"
	"github.com/gridcity/gridcity/lib/atomicfile"
)

// coordinator is every subsystem of a running coordinator, built in one
// place (newCoordinator, which owns the order), then run until its context
// ends (run) and closed (close). A lone coordinator and replicas sharing a
// PostgreSQL store differ in one value, its replication.
type coordinator struct {
	o       serveOptions
	cfg     *config.Config
	logger  *slog.Logger
	closers []func()

	st      store.Store
	ca      *pki.CA
	metrics *telemetry.Metrics
	fleet   *fleet.Fleet
	api     *agentapi.Server
	heart   *replicas.Heart
	repl    replication
	prober  *resources.Prober
	topo    *topology.Source
	hub     *notify.Hub
	cmds    *command.Service
	tracker *incidents.Tracker

	grpc    *grpc.Server
	grpcLn  net.Listener
	http    *http.Server
	httpLn  net.Listener
	https   httpsListeners // https.go: --public-url, --tls-cert
	info    runtimeInfo
	endHTTP context.CancelFunc // ends the requests in flight at shutdown
}

// newCoordinator opens the data directory and the store, loads the
// config, and builds the subsystems in the order each needs the others.
// Its listeners are open when it returns; nothing runs yet.
func newCoordinator(ctx context.Context, o serveOptions, stdout io.Writer) (_ *coordinator, err error) {
	c := &coordinator{o: o, logger: o.logger}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if err := c.openData(ctx); err != nil {
		return nil, err
	}
	if err := c.buildAgents(ctx, c.cfg); err != nil {
		return nil, err
	}
	if err := c.listen(); err != nil {
		return nil, err
	}
	if err := ensureAdmin(ctx, c.st, o.data, stdout, c.logger); err != nil {
		return nil, err
	}
	if _, created, err := ensureLocalToken(ctx, c.st, o.data); err != nil {
		return nil, err
	} else if created {
		c.logger.Info("created the local MCP token; `gridcity mcp` prints it", "file", filepath.Join(o.data, localTokenFile))
	}
	// Registered before serving, so that a store that cannot record this
	// replica stops the start; agents hear of every live replica.
	c.heart = replicas.New(c.st, replicas.Config{GRPC: c.info.Advertise, HTTP: c.info.HTTP, HandoffKey: c.repl.handoffKey().Public()}, c.api.SetReplicas, c.logger)
	if err := c.heart.Beat(ctx); err != nil {
		return nil, err
	}
	if err := c.buildJudgement(ctx, c.cfg); err != nil {
		return nil, err
	}
	return c, c.buildHTTP(ctx)
}

// openData makes the data directory private and locks it, opens the store
// and its CA, and loads the config.
func (c *coordinator) openData(ctx context.Context) error {
	c.cfg = config.Default()
	if c.o.configPath != "" {
		var err error
		if c.cfg, err = config.Load(c.o.configPath); err != nil {
			return err // every problem, with its line
		}
	}
	// Everything in the data directory is private: the store holds the CA
	// key sealed (and its WAL a copy until a checkpoint), unseal.key opens
	// it, mcp-token and admin-password are credentials.
	if was, err := atomicfile.PrivateDir(c.o.data, "data directory"); err != nil {
		return err
	} else if was != 0 {
		c.logger.Warn("made the data directory private (0700): other users could enter it", "data", c.o.data, "was", fmt.Sprintf("%04o", was))
	}
	unlock, err := lockData(c.o.data)
	if err != nil {
		return err
	}
	c.closers = append(c.closers, unlock)
	raw, peers, err := c.o.store.openServe(ctx)
	if err != nil {
		return err
	}
	c.closers = append(c.closers, func() { raw.Close() })
	if c.repl, err = replicationOf(peers, c.o.unsealKeyFile, c.o.data, c.logger); err != nil {
		return err
	}
	c.metrics = telemetry.New(version)
	c.st = store.Observe(raw, c.metrics.StoreOperation)
	unseal := c.repl.unsealKey()
	if c.ca, err = pki.LoadOrCreate(ctx, c.st, unseal.key, c.logger); errors.Is(err, pki.ErrSealedWithAnotherKey) {
		return fmt.Errorf("%w: %s", err, unseal.remedy)
	}
	return err
}

// buildAgents makes the fleet model and the agents' API.
func (c *coordinator) buildAgents(ctx context.Context, cfg *config.Config) error {
	var err error
	c.fleet, err = fleet.New(ctx, c.st, c.logger, fleet.WithMetricRetention(store.MetricRetention{Raw: cfg.Metrics.Raw, Rollup: cfg.Metrics.Rollup}))
	if err != nil {
		return fmt.Errorf("load fleet: %w", err)
	}
	if c.o.configPath != "" {
		// Names that are neither resources nor enrolled servers may be
		// servers yet to enroll: say so, but start.
		agents, err := c.st.Agents(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, a := range agents {
			names = append(names, a.Name)
		}
		if err := cfg.Validate(names); err != nil {
			c.logger.Warn("the config names servers that have not enrolled yet; they join the topology when they do", "problems", err.Error())
		}
	}
	apiCfg := agentapi.DefaultConfig()
	apiCfg.Metrics = c.metrics
	secs := func(d time.Duration) uint32 { return uint32(d / time.Second) }
	apiCfg.Settings.FastIntervalSeconds, apiCfg.Settings.MediumIntervalSeconds = secs(cfg.Collect.Fast), secs(cfg.Collect.Medium)
	apiCfg.Settings.SlowIntervalSeconds, apiCfg.Settings.UpdatesIntervalSeconds = secs(cfg.Collect.Slow), secs(cfg.Collect.Updates)
	c.api = agentapi.New(apiCfg, c.st, c.ca, c.fleet, c.logger)
	return nil
}

// listen opens the gRPC and HTTP listeners and writes where they are to
// the data directory's coordinator.json, for the CLI.
func (c *coordinator) listen() error {
	var err error
	if c.grpcLn, err = net.Listen("tcp", c.o.grpcAddr); err != nil {
		return fmt.Errorf("listen for agents on %s: %w", c.o.grpcAddr, err)
	}
	c.closers = append(c.closers, func() { c.grpcLn.Close() })
	// From the listener, so that --grpc HOST:0 advertises the port it got.
	adv := c.o.advertise
	if adv == "" {
		adv = defaultAdvertise(c.grpcLn.Addr().String())
		if loopback.Host(adv) {
			c.logger.Warn("join lines will name a loopback address, which only agents on this host can reach; set --advertise HOST:PORT", "advertise", adv)
		}
	}
	if c.httpLn, err = net.Listen("tcp", c.o.httpAddr); err != nil {
		return fmt.Errorf("listen for HTTP on %s: %w", c.o.httpAddr, err)
	}
	c.closers = append(c.closers, func() { c.httpLn.Close() })
	if err := c.listenHTTPS(); err != nil {
		return err
	}
	c.info = runtimeInfo{HTTP: c.httpLn.Addr().String(), GRPC: c.grpcLn.Addr().String(), Advertise: adv, TLS: c.o.httpTLS(), PublicURL: c.o.public.String(), HTTPS: c.https.addr()}
	return writeJSONFile(c.o.data, "coordinator.json", c.info)
}

// buildJudgement makes what judges and acts on the fleet: the prober of
// resources, the topology, notifications, the command service and the
// incident tracker, then the agents' gRPC server that feeds them.
func (c *coordinator) buildJudgement(ctx context.Context, cfg *config.Config) error {
	c.repl.shareFleet(c.fleet, c.heart)
	c.prober = resources.New(cfg, c.logger, resources.WithMetrics(c.metrics))
	c.topo = topology.New(cfg, c.fleet, c.prober)
	if c.o.appURL == "" {
		c.o.appURL = c.appURL()
	}
	var err error
	if c.hub, err = newNotifyHub(cfg, c.o.appURL, c.topo, c.metrics, c.logger); err != nil {
		return err
	}
	cmdCfg := command.Config{Metrics: c.metrics, Unseal: c.repl.unsealKey().key}
	if len(cfg.Notify) > 0 {
		cmdCfg.Notice = c.hub.Request
	}
	c.cmds = command.New(cmdCfg, c.st, c.fleet, c.api, c.logger)
	c.repl.shareCommands(c.cmds, c.heart)
	// Resources are probed from the agents of the servers that use them,
	// which the topology (built over the prober's states) tells.
	c.prober.SetAgents(c.api, c.topo.Vantages)
	// One judgement for the fleet: replicas sharing a store elect a
	// leader, which alone probes from the coordinator and records
	// incidents; the others read what it records.
	c.repl.shareProber(c.prober, c.st, c.fleet, c.heart)
	c.tracker = incidents.New(c.st, func() (graph.Report, error) {
		g, err := c.topo.Graph()
		if err != nil {
			return graph.Report{}, err
		}
		// The tracker reads root causes and what they explain, not the at-risk lists.
		return g.IncidentsWith(graph.IncidentOptions{MaxAtRisk: -1}), nil
	}, c.logger)
	if err := c.tracker.Load(ctx); err != nil {
		return fmt.Errorf("load open incidents: %w", err)
	}
	c.grpc, err = c.api.GRPCServer(agentapi.Sinks{Commands: c.cmds, Probes: c.prober})
	return err
}

// appURL is where the app and the MCP endpoint are served: --public-url,
// else from --http.
func (c *coordinator) appURL() string {
	if !c.o.public.IsZero() {
		return c.o.public.String() + "/"
	}
	scheme := "http"
	if c.info.TLS {
		scheme = "https"
	}
	return scheme + "://" + c.info.HTTP + "/"
}

// httpIssuer is the OAuth issuer of the --http listener: its own address
// on loopback (so that signing in can be tried locally), else the URL
// people reach it at (--app-url behind a proxy, or --public-url).
func (c *coordinator) httpIssuer() string {
	if loopback.Host(c.info.HTTP) {
		scheme := "http"
		if c.info.TLS {
			scheme = "https"
		}
		return scheme + "://" + c.info.HTTP
	}
	return strings.TrimSuffix(c.o.appURL, "/")
}

// buildHTTP makes the HTTP servers: the MCP endpoint and the app over the
// same read model, health, and the metrics, on --http and on the public
// listener of --public-url.
func (c *coordinator) buildHTTP(ctx context.Context) error {
	viewDeps := fleetview.Deps{Fleet: c.fleet, Store: c.st, Commands: c.cmds, Topology: c.topo, Resources: c.prober, Incidents: c.tracker,
		Logger: c.logger, Agents: fleetview.NewAgentsCache()}
	views := fleetview.New(viewDeps)
	deps := mcpserver.Deps{Deps: viewDeps, Store: c.st, AppURL: c.appURL(), Metrics: c.metrics}
	guard := mcpserver.DefaultGuardConfig()
	if !c.o.public.IsZero() {
		guard.AllowedOrigins = append(guard.AllowedOrigins, c.o.public.Origin()) // the app's own
	}
	registerGauges(c.metrics, c.api, c.fleet, c.cmds, c.tracker, c.heart.ID(), c.repl.leader(), c.logger)
	metrics, fleetMetrics := c.metrics.Handler(), telemetry.FleetHandler(fleetSource(c.fleet, c.topo, c.prober))
	// Off loopback, Prometheus brings a token of scope metrics.
	needToken := func(h http.Handler) http.Handler { return telemetry.RequireToken(h, c.st, c.logger) }
	scrape := needToken
	if loopback.Host(c.info.HTTP) {
		scrape = func(h http.Handler) http.Handler { return h }
	}
	// Every listener serves the same endpoint and read model; the app's
	// session cookie is Secure where the browser sees https. Each is its
	// own OAuth authorization server, its issuer the URL it is reached at,
	// and takes the tokens issued for its own /mcp.
	routes := func(secure bool, scrape func(http.Handler) http.Handler, issuer string) *http.ServeMux {
		mux := http.NewServeMux()
		authz := oauth.New(oauth.DefaultConfig(issuer), c.st, c.logger)
		authz.Register(mux)
		guard := guard
		guard.OAuth, guard.ResourceMetadataURL = authz, authz.ResourceMetadataURL()
		mux.Handle("/mcp", mcpserver.Handler(deps, guard))
		mux.Handle("/", web.New(web.Config{Secure: secure, Views: views, OAuth: authz}, c.cmds, c.st, c.logger))
		mux.HandleFunc("GET /healthz", c.health)
		mux.Handle("GET /metrics", scrape(metrics))
		mux.Handle("GET /metrics/fleet", scrape(fleetMetrics))
		return mux
	}

	// Requests live in a context that ends at shutdown, so that open
	// event streams of the app do not hold the shutdown up.
	baseCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	c.endHTTP = endRequests
	c.closers = append(c.closers, endRequests)
	// Every route passes the front door: the DNS-rebinding rule on a
	// loopback listener, and the bound on reading a request. Behind a TLS
	// proxy (--public-http) the browser sees https too.
	c.http = frontdoor.NewServer(routes(c.info.TLS || c.o.publicHTTP, scrape, c.httpIssuer()), frontdoor.Config{BodyTimeout: c.o.bodyTimeout, Logger: c.logger})
	c.http.BaseContext = func(net.Listener) context.Context { return baseCtx }
	var public http.Handler
	if !c.o.public.IsZero() {
		public = routes(true, needToken, c.o.public.String())
	}
	c.buildHTTPS(baseCtx, public)
	return nil
}

// health answers /healthz.
func (c *coordinator) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	health := map[string]any{"status": "ok", "version": version, "agentsConnected": len(c.api.Connected())}
	c.repl.health(health, c.heart)
	// Still 200: this replica serves what it holds, as every other
	// replica on the same store would.
	if o, down := c.fleet.StoreOutage(); down {
		health["status"], health["store"] = "degraded", fmt.Sprintf("unreachable since %s: approvals and commands wait (%v)", o.Since.UTC().Format(time.RFC3339), o.Err)
	}
	json.NewEncoder(w).Encode(health)
}

// run starts every subsystem and serves until ctx ends or a server fails,
// then shuts down: the HTTP requests in flight end, the agents' streams
// close, and every loop returns before run does.
func (c *coordinator) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Go(func() { c.fleet.Run(ctx, 2*time.Second) })
	wg.Go(func() { c.cmds.Run(ctx) })
	c.repl.run(ctx, &wg, c.cmds, c.prober)
	wg.Go(func() { c.prober.Run(ctx) })
	wg.Go(func() { c.tracker.Run(ctx, 5*time.Second, c.repl.leads()) })
	wg.Go(func() { c.heart.Run(ctx) })
	wg.Go(func() { c.hub.Run(ctx) })
	wg.Go(func() { c.hub.Watch(ctx, notifySources(c.cfg, c.tracker, c.fleet, c.topo, c.repl.leads())) })
	wg.Go(func() {
		if err := c.grpc.Serve(c.grpcLn); err != nil {
			errs <- fmt.Errorf("gRPC server: %w", err)
		}
	})
	wg.Go(func() {
		var err error
		if c.o.httpTLS() {
			err = c.http.ServeTLS(c.httpLn, "", "") // the certificate of c.http.TLSConfig, read again when its files change
		} else {
			err = c.http.Serve(c.httpLn)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("HTTP server: %w", err)
		}
	})
	c.serveHTTPS(ctx, &wg, errs)
	c.logger.Info("coordinator ready", "version", version, "mcp", c.appURL()+"mcp", "http", c.info.HTTP, "grpc", c.info.GRPC, "advertise", c.info.Advertise, "ca_pin", c.ca.Pin(),
		"data", c.o.data, "store", c.o.store.where())
	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
	}
	c.logger.Info("coordinator stopping")
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	c.endHTTP()
	c.http.Shutdown(sctx)
	c.https.shutdown(sctx)
	c.api.Shutdown()
	stopped := make(chan struct{})
	go func() { c.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		c.grpc.Stop()
	}
	cancel()
	wg.Wait()
	return err
}

// close releases what newCoordinator took, in reverse.
func (c *coordinator) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}
