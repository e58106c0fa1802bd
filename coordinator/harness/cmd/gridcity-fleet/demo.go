package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
	"github.com/gridcity/gridcity/lib/probe"
)

// demo is where the demo keeps everything, and the binaries it runs.
type demo struct {
	dir      string // .demo, absolute
	fleet    string // DIR/fleet: the net's state, hosts and logs
	data     string // DIR/coordinator: the coordinator's data, kept from run to run
	config   string // DIR/gridcity.yaml
	bin      string // the directory of gridcity, gridcity-agent and gridcity-fleet
	gridcity string
	agent    string
	self     string
}

const tag = "demo" // the bridge is gcfdemo, the namespaces gcfdemo-HOST

// needRootMsg is what a user who forgot sudo reads.
const needRootMsg = "make demo needs root for network namespaces: run sudo make demo"

func openDemo(dir string) (*demo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	bin := filepath.Dir(self)
	d := &demo{dir: abs, fleet: filepath.Join(abs, "fleet"), data: filepath.Join(abs, "coordinator"), config: filepath.Join(abs, "gridcity.yaml"),
		bin: bin, gridcity: filepath.Join(bin, "gridcity"), agent: filepath.Join(bin, "gridcity-agent"), self: self}
	return d, nil
}

// logs is where the processes' output goes.
func (d *demo) logs() string { return filepath.Join(d.fleet, "logs") }

func (d *demo) rel(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}

func cmdUp(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("up", stderr)
	dir := fs.String("dir", ".demo", "the demo's directory: coordinator data, config, hosts, logs")
	httpAddr := fs.String("http", "127.0.0.1:4600", "the coordinator's HTTP address: MCP endpoint and app")
	install := fs.Bool("install", os.Getenv("CI") == "true", "install missing Debian packages with apt-get (default when CI=true)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New(needRootMsg)
	}
	d, err := openDemo(*dir)
	if err != nil {
		return err
	}
	for _, b := range []string{d.gridcity, d.agent} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run make build (make demo builds it)", b)
		}
	}
	needs := []netlab.Need{netlab.IP, netlab.Setpriv, netlab.Nginx, netlab.Postgres}
	if missing := netlab.Missing(needs...); len(missing) > 0 {
		if !*install {
			return errors.New(missingMessage(missing))
		}
		fmt.Fprintf(stdout, "Installing %s (apt-get, services kept from starting) …\n", strings.Join(netlab.Packages(missing), " "))
		if err := netlab.Install(ctx, netlab.Packages(missing), stdout, stderr); err != nil {
			return err
		}
		if missing := netlab.Missing(needs...); len(missing) > 0 {
			return &netlab.MissingError{Needs: missing}
		}
	}
	if pid, ok := netlab.IsRunning(d.fleet); ok {
		return fmt.Errorf("the demo is already running (pid %d): make demo-down stops it", pid)
	}
	if netlab.Exists(d.fleet) {
		fmt.Fprintln(stdout, "Removing what an earlier run of the demo left behind …")
		if _, err := netlab.Down(ctx, d.fleet, nil); err != nil {
			return err
		}
	}
	if l, err := net.Listen("tcp", *httpAddr); err != nil {
		return fmt.Errorf("%s is in use (%v): is make run, or another coordinator, running? Stop it, or choose another address: sudo make demo DEMO_HTTP=127.0.0.1:4700", *httpAddr, errors.Unwrap(err))
	} else {
		l.Close()
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return err
	}

	// Keep the addresses of the last run where they are free: the agents'
	// enrollments name the coordinator's address.
	prev := d.lastAdvertise()
	var prefer netip.Prefix
	if ap, err := netip.ParseAddrPort(prev); err == nil {
		prefer = netip.PrefixFrom(ap.Addr(), 24).Masked()
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	began := time.Now()
	n, err := netlab.New(ctx, netlab.Options{Tag: tag, Dir: d.fleet, Subnet: prefer, Logger: logger})
	if err != nil {
		return err
	}
	// From here on, everything made goes again when up returns: at Ctrl-C,
	// or on a failure (which then shows the logs).
	defer func() {
		if ctx.Err() != nil {
			err = nil // Ctrl-C (or make demo-down): not a failure
		}
		if err != nil {
			fmt.Fprintf(stdout, "\nThe demo failed; its logs are in %s. Tearing it down …\n", d.rel(d.logs()))
		} else {
			fmt.Fprintln(stdout, "\nTearing the city down …")
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rm, derr := netlab.Down(dctx, d.fleet, logger)
		if derr != nil {
			err = errors.Join(err, fmt.Errorf("%w\n(make demo-down tries again)", derr))
			return
		}
		fmt.Fprintf(stdout, "Removed %d processes, %d network namespaces and the bridge %s. The coordinator's data stays in %s (rm -rf %s to start afresh).\n",
			rm.Processes, rm.Namespaces, n.Bridge, d.rel(d.data), d.rel(d.dir))
	}()

	fmt.Fprintf(stdout, "Building the demo city: 6 hosts (network namespaces) on the bridge %s, %s\n", n.Bridge, n.Subnet)
	city, err := netlab.BuildCity(ctx, n, netlab.CityOptions{
		FleetBin: d.self,
		Progress: func(host, what string) { fmt.Fprintf(stdout, "  %-10s %s\n", host, what) },
	})
	if err != nil {
		return err
	}
	cfg := city.Config(netlab.ConfigOptions{
		ProbeInterval: 3 * time.Second, ProbeTimeout: 2 * time.Second, FailuresBeforeTroubled: 2,
		CollectFast: 5 * time.Second, CollectMedium: 5 * time.Second,
		FixCommand: d.self + " fix --dir " + d.dir + " --wait=false",
	})
	if err := os.WriteFile(d.config, []byte(cfg), 0o600); err != nil {
		return err
	}

	grpc := d.grpcAddr(n, prev)
	if _, err := n.StartRoot(ctx, netlab.ProcessOptions{
		Name:  "coordinator",
		Argv:  []string{d.gridcity, "serve", "--data", d.data, "--config", d.config, "--http", *httpAddr, "--grpc", grpc, "--advertise", grpc},
		Addr:  "http://" + *httpAddr + "/",
		Ready: &probe.Spec{Engine: "http", Target: "http://" + *httpAddr + "/healthz"},
	}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  %-10s gridcity serve: MCP and the app on %s, agents connect to %s\n", "this host", *httpAddr, grpc)

	var join *joinInfo
	_, err = city.StartAgents(ctx, netlab.AgentOptions{Bin: d.agent}, func(h *netlab.Host) (string, error) {
		if join == nil {
			j, err := d.mintJoin(ctx)
			if err != nil {
				return "", err
			}
			join = j
		}
		return d.joinFor(ctx, h, join, grpc)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  %-10s a gridcity-agent\n", "each host")

	access, err := mcpAccess(ctx, d.gridcity, d.data)
	if err != nil {
		return err
	}
	cs, err := mcpSession(ctx, access)
	if err != nil {
		return fmt.Errorf("connect to the MCP endpoint %s: %w", access.Endpoint, err)
	}
	defer cs.Close()
	fmt.Fprintln(stdout, "Waiting for the agents to connect and the first probes to pass …")
	start := time.Now()
	var rep report
	for {
		var servers serverList
		online := 0
		err := callTool(ctx, cs, "list_servers", &servers)
		if err == nil {
			for _, s := range servers.Rows {
				if s.Status == "online" && slices.Contains(netlab.CityHosts, s.Name) {
					online++
				}
			}
			for _, name := range servers.Others {
				if slices.Contains(netlab.CityHosts, name) {
					online++
				}
			}
			rep = report{}
			err = callTool(ctx, cs, "incident_report", &rep)
		}
		probed := 0
		if err == nil {
			// Healthy counts resources not probed yet; wait for their first checks.
			var rs resourceList
			err = callTool(ctx, cs, "list_resources", &rs)
			for _, r := range rs.Resources {
				if r.Status == "ok" {
					probed++
				}
			}
		}
		if err == nil && online == len(netlab.CityHosts) && probed == len(netlab.CityResources) && rep.Healthy == rep.Total {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > 90*time.Second {
			if err != nil {
				return fmt.Errorf("the city is not healthy after 90 s: %w", err)
			}
			return fmt.Errorf("the city is not healthy after 90 s: %d of %d servers online, %d of %d resources answer their probes; %s",
				online, len(netlab.CityHosts), probed, len(netlab.CityResources), rep.summary("  "))
		}
		time.Sleep(time.Second)
	}
	d.banner(stdout, n, city, access, *httpAddr, grpc, time.Since(began))
	return d.watch(ctx, stdout, n, cs, rep)
}

// missingMessage tells what to install, and how.
func missingMessage(missing []netlab.Need) string {
	var b strings.Builder
	b.WriteString("the demo needs programs that are not installed:\n")
	for _, m := range missing {
		fmt.Fprintf(&b, "  %-12s from the Debian package %s\n", m.Program, m.Package)
	}
	fmt.Fprintf(&b, "Install them with:\n  sudo %s\nor let the demo install them: sudo make demo INSTALL=1", netlab.InstallLine(missing))
	return b.String()
}

// lastAdvertise is the gRPC address the coordinator advertised last time.
func (d *demo) lastAdvertise() string {
	b, err := os.ReadFile(filepath.Join(d.data, "coordinator.json"))
	if err != nil {
		return ""
	}
	var info struct {
		Advertise string `json:"advertise"`
	}
	json.Unmarshal(b, &info)
	return info.Advertise
}

// grpcAddr is the coordinator's gRPC address on the gateway: the last
// run's when it is still right, else port 4601, else any free port.
func (d *demo) grpcAddr(n *netlab.Net, prev string) string {
	for _, a := range []string{prev, net.JoinHostPort(n.Gateway.String(), "4601")} {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || ap.Addr() != n.Gateway {
			continue
		}
		if l, err := net.Listen("tcp", a); err == nil {
			l.Close()
			return a
		}
	}
	a, _ := n.FreePort()
	return a
}

type joinInfo struct {
	JoinLine string `json:"joinLine"`
	CAPin    string `json:"caPin"`
}

// mintJoin mints one join line for the agents that need to enroll.
func (d *demo) mintJoin(ctx context.Context) (*joinInfo, error) {
	out, err := exec.CommandContext(ctx, d.gridcity, "join", "--data", d.data, "--reusable", "--ttl", "10m", "--json").Output()
	if err != nil {
		return nil, fmt.Errorf("gridcity join: %v%s", err, stderrOf(err))
	}
	var j joinInfo
	if err := json.Unmarshal(out, &j); err != nil || j.JoinLine == "" {
		return nil, fmt.Errorf("gridcity join --json printed %q", out)
	}
	return &j, nil
}

// joinFor is "" when the host's agent is enrolled with this coordinator at
// this address already (a second make demo); otherwise its old enrollment
// is revoked and forgotten, and it enrolls with the join line.
func (d *demo) joinFor(ctx context.Context, h *netlab.Host, j *joinInfo, grpc string) (string, error) {
	state := filepath.Join(h.Dir, "agent")
	var id struct {
		Name        string `json:"name"`
		Coordinator string `json:"coordinator"`
		CAPin       string `json:"caPin"`
	}
	if b, err := os.ReadFile(filepath.Join(state, "identity.json")); err == nil && json.Unmarshal(b, &id) == nil &&
		id.Name == h.Name && id.CAPin == j.CAPin && id.Coordinator == grpc {
		return "", nil
	}
	if err := os.RemoveAll(state); err != nil {
		return "", err
	}
	exec.CommandContext(ctx, d.gridcity, "agents", "revoke", h.Name, "--data", d.data).Run() // not enrolled yet: nothing to revoke
	return j.JoinLine, nil
}

func (d *demo) banner(w io.Writer, n *netlab.Net, c *netlab.City, a coordinatorAccess, httpAddr, grpc string, took time.Duration) {
	pw, _ := os.ReadFile(filepath.Join(d.data, "admin-password"))
	fmt.Fprintf(w, "\nThe city is up after %s: 6 servers online, 5 resources healthy.\n\n", took.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  server\taddress\truns\tresource the coordinator probes")
	rows := [][4]string{
		{netlab.CityLB, c.LB.Addr.String(), "nginx, load balancer for web-1 and web-2", netlab.ResourceLB},
		{netlab.CityWeb1, c.Web1.Addr.String(), "nginx: a page, /api/ → api-1", netlab.ResourceWeb1},
		{netlab.CityWeb2, c.Web2.Addr.String(), "nginx: a page, /api/ → api-1", netlab.ResourceWeb2},
		{netlab.CityAPI, c.API.Addr.String(), "the orders API on :8080 (gridcity-fleet app)", netlab.ResourceAPI},
		{netlab.CityDB, c.DB.Addr.String(), "PostgreSQL on :5432", netlab.ResourceDatabase},
		{netlab.CityScraper, c.Scraper.Addr.String(), "a scraper: GET /api/orders on lb-1 every 3 s", ""},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3])
	}
	tw.Flush()
	fmt.Fprintf(w, "  Each server runs a gridcity-agent; they reach the coordinator at %s.\n\n", grpc)
	fmt.Fprintf(w, `MCP endpoint:  %[1]s   (Streamable HTTP)
Token:         %[2]s
Headers:       Authorization: Bearer %[2]s
Claude Code:   claude mcp add --transport http gridcity-demo %[1]s --header "Authorization: Bearer %[2]s"
               (other clients: README.md, "Connect your AI client", with this endpoint and token)
App:           http://%[3]s/   user admin, password %[4]s   (approve commands here)

Ask your AI client: "Is anything wrong with my fleet?" Then break something:
  sudo make demo-break   stops PostgreSQL on db-1 (in another terminal)
  sudo make demo-fix     starts it again (or ask the AI: it may offer the runbook start-orders-db, for you to approve)
  sudo make demo-down    tears everything down (or Ctrl-C here)

Config: %[5]s   Logs: %[6]s/   Coordinator data: %[7]s

Watching the incident report (what your AI client sees):
`, a.Endpoint, a.Token, httpAddr, strings.TrimSpace(string(pw)), d.rel(d.config), d.rel(d.logs()), d.rel(d.data))
}

// watch prints the incident report whenever its root causes change, until
// ctx ends; it returns an error when the coordinator stops by itself.
func (d *demo) watch(ctx context.Context, w io.Writer, n *netlab.Net, cs *mcp.ClientSession, first report) error {
	coord := n.Proc("", "coordinator")
	last := ""
	show := func(r report) {
		if k := r.key(); k != last {
			last = k
			fmt.Fprintf(w, "%s  %s\n", time.Now().Format("15:04:05"), r.summary("          "))
		}
	}
	show(first)
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !coord.Running() {
			return fmt.Errorf("the coordinator stopped; the end of its log (%s):\n%s", coord.Log(), coord.Tail(15))
		}
		var r report
		if err := callTool(ctx, cs, "incident_report", &r); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintf(w, "%s  incident_report failed: %v\n", time.Now().Format("15:04:05"), err)
			continue
		}
		show(r)
	}
}

// attach opens the running demo for break, fix and status.
func attach(dir string) (*demo, *netlab.City, error) {
	if os.Geteuid() != 0 {
		return nil, nil, errors.New(needRootMsg)
	}
	d, err := openDemo(dir)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := netlab.IsRunning(d.fleet); !ok {
		if netlab.Exists(d.fleet) {
			return nil, nil, errors.New("the demo ended without tearing its city down (was it killed?): sudo make demo-down removes what it left, then sudo make demo starts afresh")
		}
		return nil, nil, errors.New("the demo is not running: start it with sudo make demo")
	}
	n, err := netlab.Open(d.fleet)
	if err != nil {
		return nil, nil, err
	}
	c, err := netlab.OpenCity(n)
	return d, c, err
}

func cmdBreak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("break", stderr)
	dir := fs.String("dir", ".demo", "the demo's directory")
	wait := fs.Bool("wait", true, "wait until the coordinator names the root cause")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, c, err := attach(*dir)
	if err != nil {
		return err
	}
	if !c.Database.Running() {
		fmt.Fprintf(stdout, "PostgreSQL on %s is down already; sudo make demo-fix starts it again.\n", netlab.CityDB)
		return nil
	}
	if err := c.Database.Stop(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Stopped PostgreSQL on %s (%s): the resource %s is down, and with it the API, the web servers' sites and the load balancer.\n",
		netlab.CityDB, c.Database.Addr(), netlab.ResourceDatabase)
	if !*wait {
		return nil
	}
	fmt.Fprintln(stdout, "Waiting for the coordinator to name the root cause (a probe fails twice in a row: about 10–20 s) …")
	rep, took, err := d.waitReport(ctx, 60*time.Second, func(r report) bool {
		for _, rc := range r.RootCauses {
			if rc.ID == netlab.ResourceDatabase && len(rc.Explains) >= 4 {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "After %s, incident_report says: %s\n\nAsk your AI client: \"What is broken, and why?\" Then: sudo make demo-fix\n", took.Round(100*time.Millisecond), rep.summary("  "))
	return nil
}

func cmdFix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fix", stderr)
	dir := fs.String("dir", ".demo", "the demo's directory")
	wait := fs.Bool("wait", true, "wait until the city is healthy again")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, c, err := attach(*dir)
	if err != nil {
		return err
	}
	if c.Database.Running() {
		fmt.Fprintf(stdout, "PostgreSQL on %s runs already.\n", netlab.CityDB)
	} else {
		if err := c.Database.Start(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Started PostgreSQL on %s (%s) again.\n", netlab.CityDB, c.Database.Addr())
	}
	if !*wait {
		return nil
	}
	fmt.Fprintln(stdout, "Waiting for the coordinator to see the city healthy …")
	rep, took, err := d.waitReport(ctx, 60*time.Second, func(r report) bool { return len(r.RootCauses) == 0 && r.Healthy == r.Total })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "After %s: %s. The incident stays in incident_report's history (recent).\n", took.Round(100*time.Millisecond), rep.summary("  "))
	return nil
}

// waitReport polls incident_report until ok says yes.
func (d *demo) waitReport(ctx context.Context, within time.Duration, ok func(report) bool) (report, time.Duration, error) {
	start := time.Now()
	access, err := mcpAccess(ctx, d.gridcity, d.data)
	if err != nil {
		return report{}, 0, err
	}
	cs, err := mcpSession(ctx, access)
	if err != nil {
		return report{}, 0, fmt.Errorf("connect to %s: %w", access.Endpoint, err)
	}
	defer cs.Close()
	var r report
	for {
		r = report{}
		err := callTool(ctx, cs, "incident_report", &r)
		if err == nil && ok(r) {
			return r, time.Since(start), nil
		}
		if ctx.Err() != nil {
			return r, 0, ctx.Err()
		}
		if time.Since(start) > within {
			if err != nil {
				return r, 0, fmt.Errorf("not within %s: %w", within, err)
			}
			return r, 0, fmt.Errorf("not within %s; the report says: %s", within, r.summary("  "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	dir := fs.String("dir", ".demo", "the demo's directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d, c, err := attach(*dir)
	if err != nil {
		return err
	}
	n := c.Net
	fmt.Fprintf(stdout, "The demo city on %s (bridge %s), made by pid %d.\n\n", n.Subnet, n.Bridge, n.Owner())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  host\tprocess\tstate\tpid\tserves")
	for _, p := range n.Procs() {
		host := p.Host
		if host == "" {
			host = "(this host)"
		}
		state, pid := "running", fmt.Sprint(p.PID())
		if pid == "0" {
			state, pid = "exited", "-"
			if p.Stopped() {
				state = "stopped"
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", host, p.Name, state, pid, p.Addr())
	}
	tw.Flush()
	rep, _, err := d.waitReport(ctx, 0, func(report) bool { return true })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nincident_report: %s\n", rep.summary("  "))
	return nil
}

func cmdDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("down", stderr)
	dir := fs.String("dir", ".demo", "the demo's directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("make demo-down needs root to remove network namespaces: run sudo make demo-down")
	}
	d, err := openDemo(*dir)
	if err != nil {
		return err
	}
	if !netlab.Exists(d.fleet) {
		fmt.Fprintln(stdout, "Nothing to tear down: no demo city is up.")
		return nil
	}
	if pid, ok := netlab.IsRunning(d.fleet); ok {
		// The demo tears its city down itself, in order, and says so in
		// its terminal.
		fmt.Fprintf(stdout, "Asking the demo (pid %d) to tear the city down …\n", pid)
		syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(90 * time.Second)
		for netlab.Exists(d.fleet) && time.Now().Before(deadline) {
			if _, ok := netlab.IsRunning(d.fleet); !ok {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !netlab.Exists(d.fleet) {
		fmt.Fprintln(stdout, "The demo tore the city down: no namespaces, links or processes of it are left.")
		return nil
	}
	rm, err := netlab.Down(ctx, d.fleet, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Removed %d processes, %d network namespaces and the bridge %s%s. The coordinator's data stays in %s.\n",
		rm.Processes, rm.Namespaces, netlab.Prefix, tag, d.rel(d.data))
	return nil
}
