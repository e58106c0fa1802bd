package netlab

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gridcity/gridcity/lib/probe"
)

// The demo city: a load balancer in front of two web servers, which serve
// a page and pass /api to the orders API, which keeps its orders in
// PostgreSQL; a scraper calls the API through the load balancer. Each runs
// on a host of its own.
const (
	CityLB      = "lb-1"
	CityWeb1    = "web-1"
	CityWeb2    = "web-2"
	CityAPI     = "api-1"
	CityDB      = "db-1"
	CityScraper = "scraper-1"

	// The resources the coordinator probes.
	ResourceLB       = "shop-lb"
	ResourceWeb1     = "shop-web-1"
	ResourceWeb2     = "shop-web-2"
	ResourceAPI      = "orders-api"
	ResourceDatabase = "orders-db"

	apiPort = 8080
	dbPort  = 5432
)

// CityHosts are the city's hosts in the order they are added (and so of
// their addresses: .2 to .7).
var CityHosts = []string{CityLB, CityWeb1, CityWeb2, CityAPI, CityDB, CityScraper}

// CityResources are the resources of the city's config.
var CityResources = []string{ResourceDatabase, ResourceAPI, ResourceWeb1, ResourceWeb2, ResourceLB}

// CityOptions configure Start.
type CityOptions struct {
	// FleetBin is the gridcity-fleet binary, whose app and scrape
	// subcommands are the orders API and the scraper.
	FleetBin string
	// ScrapeEvery is how often the scraper calls the API (default 3 s).
	ScrapeEvery time.Duration
	// Env is added to the environment of the API and the scraper.
	Env []string
	// Progress, when set, hears of each step.
	Progress func(host, what string)
}

// City is the demo city on a net.
type City struct {
	Net                              *Net
	LB, Web1, Web2, API, DB, Scraper *Host
	// Database is PostgreSQL on DB: stop it to break the city.
	Database *Proc
	App      *Proc // the orders API on API
}

// BuildCity adds the city's hosts to the net and starts their services
// (NewCity, then Start).
func BuildCity(ctx context.Context, n *Net, o CityOptions) (*City, error) {
	c, err := NewCity(ctx, n)
	if err != nil {
		return nil, err
	}
	return c, c.Start(ctx, o)
}

// NewCity adds the city's hosts to the net, with nothing running on them
// yet: their addresses, and so the coordinator's config, are known from
// here on.
func NewCity(ctx context.Context, n *Net) (*City, error) {
	c := &City{Net: n}
	for _, slot := range []struct {
		name string
		h    **Host
	}{{CityLB, &c.LB}, {CityWeb1, &c.Web1}, {CityWeb2, &c.Web2}, {CityAPI, &c.API}, {CityDB, &c.DB}, {CityScraper, &c.Scraper}} {
		h, err := n.AddHost(ctx, slot.name)
		if err != nil {
			return nil, err
		}
		*slot.h = h
	}
	return c, nil
}

// Start starts the city's services, the database first and the scraper
// last, each once the one it uses answers. The agents come apart
// (StartAgents), once the coordinator runs.
func (c *City) Start(ctx context.Context, o CityOptions) error {
	if o.FleetBin == "" {
		return fmt.Errorf("the city needs the gridcity-fleet binary (its app and scrape commands)")
	}
	if o.ScrapeEvery <= 0 {
		o.ScrapeEvery = 3 * time.Second
	}
	say := func(host, what string) {
		if o.Progress != nil {
			o.Progress(host, what)
		}
	}
	if missing := Missing(Nginx, Postgres, Setpriv); len(missing) > 0 {
		return &MissingError{Needs: missing}
	}
	var err error
	if c.Database, err = c.DB.StartPostgres(ctx, PostgresOptions{Port: dbPort}); err != nil {
		return err
	}
	say(CityDB, "PostgreSQL on "+c.Database.Addr())
	apiAddr := c.apiAddr()
	c.App, err = c.API.StartProcess(ctx, ProcessOptions{
		Name:  "app",
		Argv:  []string{o.FleetBin, "app", "--listen", apiAddr, "--db", c.Database.Addr()},
		Env:   o.Env,
		Addr:  "http://" + apiAddr + "/",
		Ready: &probe.Spec{Engine: "http", Target: "http://" + apiAddr + "/health"},
	})
	if err != nil {
		return err
	}
	say(CityAPI, "the orders API on "+apiAddr+" (gridcity-fleet app)")
	for _, h := range []*Host{c.Web1, c.Web2} {
		page := fmt.Sprintf("<!doctype html><title>Shop</title><h1>The shop</h1><p>Served by %s. Orders: <a href=\"/api/orders\">/api/orders</a></p>\n", h.Name)
		if _, err := h.StartNginx(ctx, NginxOptions{Pages: map[string]string{"index.html": page}, Routes: []Route{{Path: "/api/", Backends: []string{apiAddr}}}}); err != nil {
			return err
		}
		say(h.Name, "nginx on "+h.Addr.String()+":80: a page, and /api/ passed to "+CityAPI)
	}
	if _, err := c.LB.StartNginx(ctx, NginxOptions{Routes: []Route{{Path: "/", Backends: []string{c.Web1.Addr.String() + ":80", c.Web2.Addr.String() + ":80"}}}}); err != nil {
		return err
	}
	say(CityLB, "nginx load balancer on "+c.LB.Addr.String()+":80 in front of "+CityWeb1+" and "+CityWeb2)
	url := "http://" + c.LB.Addr.String() + "/api/orders"
	if _, err := c.Scraper.StartProcess(ctx, ProcessOptions{
		Name: "scraper",
		Argv: []string{o.FleetBin, "scrape", "--url", url, "--every", o.ScrapeEvery.String()},
		Env:  o.Env,
		Addr: url,
	}); err != nil {
		return err
	}
	say(CityScraper, "a scraper calling "+url+" every "+o.ScrapeEvery.String())
	return nil
}

func (c *City) apiAddr() string { return net.JoinHostPort(c.API.Addr.String(), strconv.Itoa(apiPort)) }
func (c *City) dbAddr() string  { return net.JoinHostPort(c.DB.Addr.String(), strconv.Itoa(dbPort)) }

// OpenCity finds the city on a net opened with Open.
func OpenCity(n *Net) (*City, error) {
	c := &City{Net: n}
	for _, slot := range []struct {
		name string
		h    **Host
	}{{CityLB, &c.LB}, {CityWeb1, &c.Web1}, {CityWeb2, &c.Web2}, {CityAPI, &c.API}, {CityDB, &c.DB}, {CityScraper, &c.Scraper}} {
		if *slot.h = n.Host(slot.name); *slot.h == nil {
			return nil, fmt.Errorf("the net in %s has no host %s: it is not the demo city", n.Dir, slot.name)
		}
	}
	c.Database, c.App = n.Proc(CityDB, "postgres"), n.Proc(CityAPI, "app")
	if c.Database == nil || c.App == nil {
		return nil, fmt.Errorf("the net in %s has no PostgreSQL on %s or no API on %s: it is not the demo city", n.Dir, CityDB, CityAPI)
	}
	return c, nil
}

// ConfigOptions tune the coordinator config of the city.
type ConfigOptions struct {
	// Probe defaults (probes:); zero values are left to the coordinator.
	ProbeInterval, ProbeTimeout time.Duration
	FailuresBeforeTroubled      int
	// Collection intervals (collect:); zero values are left out.
	CollectFast, CollectMedium time.Duration
	// FixCommand, when set, becomes a runbook matching the database: the
	// command that starts it again.
	FixCommand string
}

// Config is the coordinator's config for the city: its districts, the
// resources it probes, and the links that make blame travel from the load
// balancer down to the database. The links between servers and resources
// are left to discovery: the agents see the connections (kept alive by
// nginx, the API and the scraper) and the listening ports.
func (c *City) Config(o ConfigOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# The gridcity demo city on %[1]s (generated by netlab).
districts:
  - id: storefront
    name: Storefront
    members: [%[2]s, %[3]s, %[4]s, %[5]s, %[6]s, %[7]s]
  - id: orders
    name: Orders
    members: [%[8]s, %[9]s, %[10]s, %[11]s]
resources:
  - {id: %[11]s, kind: database, engine: postgres, target: "%[12]s"}
  - {id: %[10]s, kind: probe, engine: http, target: "http://%[13]s/health"}
  - {id: %[6]s, kind: probe, engine: http, target: "http://%[14]s/api/health"}
  - {id: %[7]s, kind: probe, engine: http, target: "http://%[15]s/api/health"}
  - {id: %[5]s, kind: load_balancer, engine: http, target: "http://%[16]s/api/health"}
links:
  # The front door uses the web servers' sites, which use the API, which
  # uses the database. Servers' links (scraper-1 uses shop-lb, orders-db
  # runs on db-1 …) are discovered.
  - {from: %[5]s, to: %[6]s}
  - {from: %[5]s, to: %[7]s}
  - {from: %[6]s, to: %[10]s}
  - {from: %[7]s, to: %[10]s}
  - {from: %[10]s, to: %[11]s}
  - {from: %[8]s, to: %[11]s}
`, c.Net.Subnet,
		CityLB, CityWeb1, CityWeb2, ResourceLB, ResourceWeb1, ResourceWeb2,
		CityAPI, CityDB, ResourceAPI, ResourceDatabase,
		c.dbAddr(), c.apiAddr(), c.Web1.Addr, c.Web2.Addr, c.LB.Addr)
	var probes []string
	if o.ProbeInterval > 0 {
		probes = append(probes, "interval: "+o.ProbeInterval.String())
	}
	if o.ProbeTimeout > 0 {
		probes = append(probes, "timeout: "+o.ProbeTimeout.String())
	}
	if o.FailuresBeforeTroubled > 0 {
		probes = append(probes, "failuresBeforeTroubled: "+strconv.Itoa(o.FailuresBeforeTroubled))
	}
	if len(probes) > 0 {
		fmt.Fprintf(&b, "probes: {%s}\n", strings.Join(probes, ", "))
	}
	var collect []string
	if o.CollectFast > 0 {
		collect = append(collect, "fast: "+o.CollectFast.String())
	}
	if o.CollectMedium > 0 {
		collect = append(collect, "medium: "+o.CollectMedium.String())
	}
	if len(collect) > 0 {
		fmt.Fprintf(&b, "collect: {%s}\n", strings.Join(collect, ", "))
	}
	if o.FixCommand != "" {
		fmt.Fprintf(&b, `runbooks:
  - name: start-orders-db
    description: Start the demo city's PostgreSQL again on %s (what make demo-fix does)
    command: %q
    readOnly: false
    match: {id: %s}
`, CityDB, o.FixCommand, ResourceDatabase)
	}
	return b.String()
}

// AgentConfig is the agent.yaml of a city host: the scraper declares its
// own district; the others are placed by the coordinator's config.
func AgentConfig(host string) string {
	cfg := "name: " + host + "\n"
	if host == CityScraper {
		cfg += "district: jobs\n"
	}
	return cfg
}

// StartAgents starts an agent on every host of the city; join gives the
// join line for a host ("" when its agent is enrolled already).
func (c *City) StartAgents(ctx context.Context, o AgentOptions, join func(h *Host) (string, error)) ([]*Proc, error) {
	var ps []*Proc
	for _, h := range []*Host{c.LB, c.Web1, c.Web2, c.API, c.DB, c.Scraper} {
		ao := o
		ao.Config, ao.ConfigFile = AgentConfig(h.Name), ""
		var err error
		if ao.Join, err = join(h); err != nil {
			return ps, fmt.Errorf("join line for %s: %w", h.Name, err)
		}
		p, err := h.StartAgent(ctx, ao)
		if err != nil {
			return ps, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}
