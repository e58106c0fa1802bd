package telemetry

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// FleetServer is one server as /metrics/fleet shows it.
type FleetServer struct {
	Name, District string
	Online         bool
	LastSeen       time.Time
	// State is the server's merged state; nil before its first.
	State *gridcityv1.StateUpdate
	// OpenAttacks counts its open attacks (see package security).
	OpenAttacks int
}

// FleetResource is one configured resource as /metrics/fleet shows it.
type FleetResource struct {
	ID, Kind, Status string // Status: ok, degraded, failed or unknown
}

// FleetSource gives the fleet at each scrape.
type FleetSource struct {
	Servers   func() []FleetServer
	Resources func() []FleetResource
}

// Bounds on what one scrape of /metrics/fleet holds, whatever agents
// send: a server exports at most 12 series of its own and two per disk,
// for at most MaxFleetDisks disks (its largest); label values are cut to
// MaxLabelBytes of valid UTF-8.
const (
	MaxFleetDisks = 8
	MaxLabelBytes = 128
)

// ResourceStatuses are the values of gridcity_resource_status' status
// label, one series each per resource (1 for the current one).
var ResourceStatuses = []string{"ok", "degraded", "failed", "unknown"}

type fleetCollector struct {
	src      FleetSource
	district string // "": every district

	up, lastSeen, cores, busy, load1, load5, load15 *prometheus.Desc
	memUsed, memTotal, diskUsed, diskTotal          *prometheus.Desc
	failedUnits, updates, securityUpdates, attacks  *prometheus.Desc
	resourceStatus                                  *prometheus.Desc

	names []string
}

func newFleetCollector(src FleetSource, district string) *fleetCollector {
	server := []string{"server", "district"}
	disk := []string{"server", "district", "mountpoint"}
	var names []string
	d := func(name, help string, labels []string) *prometheus.Desc {
		names = append(names, namespace+"_"+name)
		return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	}
	c := &fleetCollector{src: src, district: district,
		up:              d("server_up", "1 while the server's agent is connected, 0 when it is not (every other series of an offline server is left out: its last report is not its state).", server),
		lastSeen:        d("server_last_seen_timestamp_seconds", "When the server's agent was last heard from.", server),
		cores:           d("server_cpu_cores", "CPU cores.", server),
		busy:            d("server_cpu_busy_ratio", "Share of CPU time busy over the agent's last sample interval (absent until it has two samples).", server),
		load1:           d("server_load1", "Load average over 1 minute.", server),
		load5:           d("server_load5", "Load average over 5 minutes.", server),
		load15:          d("server_load15", "Load average over 15 minutes.", server),
		memUsed:         d("server_memory_used_bytes", "Memory in use.", server),
		memTotal:        d("server_memory_total_bytes", "Memory installed.", server),
		diskUsed:        d("server_disk_used_bytes", "Bytes used on a mounted file system (the server's largest "+strconv.Itoa(MaxFleetDisks)+").", disk),
		diskTotal:       d("server_disk_total_bytes", "Size of a mounted file system (the server's largest "+strconv.Itoa(MaxFleetDisks)+").", disk),
		failedUnits:     d("server_failed_units", "systemd units in the failed state (absent when unknown).", server),
		updates:         d("server_updates_pending", "Package updates pending (absent until the agent's first package-manager run).", server),
		securityUpdates: d("server_updates_security", "Security updates among the pending ones.", server),
		attacks:         d("server_attacks_open", "Open SSH attacks on the server (brute force, or a login after many failures).", server),
		resourceStatus:  d("resource_status", "1 for a configured resource's current status (ok, degraded, failed, unknown), 0 for the others.", []string{"resource", "kind", "status"}),
	}
	c.names = names
	return c
}

// FleetNames lists the names of every series /metrics/fleet may hold.
func FleetNames() []string { return newFleetCollector(FleetSource{}, "").names }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.lastSeen, c.cores, c.busy, c.load1, c.load5, c.load15, c.memUsed, c.memTotal,
		c.diskUsed, c.diskTotal, c.failedUnits, c.updates, c.securityUpdates, c.attacks, c.resourceStatus} {
		ch <- d
	}
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	seen := map[string]bool{}
	for _, s := range c.src.Servers() {
		name, district := Label(s.Name), Label(s.District)
		// Names are unique in the fleet; cut to the label bound two could
		// meet, and a second series with the same labels would fail the
		// whole scrape.
		if seen[name] || (c.district != "" && !strings.EqualFold(s.District, c.district)) {
			continue
		}
		seen[name] = true
		up := 0.0
		if s.Online {
			up = 1
		}
		gauge(c.up, up, name, district)
		if !s.LastSeen.IsZero() {
			gauge(c.lastSeen, float64(s.LastSeen.UnixMilli())/1000, name, district)
		}
		st := s.State
		if !s.Online || st == nil {
			continue
		}
		if cpu := st.GetCpu(); cpu != nil {
			gauge(c.cores, float64(cpu.GetCores()), name, district)
			if cpu.BusyPercent != nil {
				gauge(c.busy, cpu.GetBusyPercent()/100, name, district)
			}
			gauge(c.load1, cpu.GetLoad1(), name, district)
			gauge(c.load5, cpu.GetLoad5(), name, district)
			gauge(c.load15, cpu.GetLoad15(), name, district)
		}
		if mem := st.GetMemory(); mem != nil {
			gauge(c.memUsed, float64(mem.GetUsedBytes()), name, district)
			gauge(c.memTotal, float64(mem.GetTotalBytes()), name, district)
		}
		for _, d := range largestDisks(st.GetDisks().GetItems()) {
			gauge(c.diskUsed, float64(d.GetUsedBytes()), name, district, d.mount)
			gauge(c.diskTotal, float64(d.GetTotalBytes()), name, district, d.mount)
		}
		if st.GetFailedUnits() != nil {
			gauge(c.failedUnits, float64(len(st.GetFailedUnits().GetItems())), name, district)
		}
		if u := st.GetUpdates(); u != nil {
			gauge(c.updates, float64(u.GetPending()), name, district)
			gauge(c.securityUpdates, float64(u.GetSecurity()), name, district)
		}
		if st.GetLogins() != nil {
			gauge(c.attacks, float64(s.OpenAttacks), name, district)
		}
	}
	if c.district != "" || c.src.Resources == nil {
		return
	}
	done := map[string]bool{}
	for _, r := range c.src.Resources() {
		id := Label(r.ID)
		if done[id] {
			continue
		}
		done[id] = true
		for _, status := range ResourceStatuses {
			v := 0.0
			if r.Status == status {
				v = 1
			}
			gauge(c.resourceStatus, v, id, Label(r.Kind), status)
		}
	}
}

type disk struct {
	*gridcityv1.Disk
	mount string
}

// largestDisks is a server's MaxFleetDisks largest disks, one per mount
// point as cut to a label, largest first.
func largestDisks(items []*gridcityv1.Disk) []disk {
	sorted := slices.Clone(items)
	slices.SortStableFunc(sorted, func(a, b *gridcityv1.Disk) int {
		return cmp.Or(cmp.Compare(b.GetTotalBytes(), a.GetTotalBytes()), strings.Compare(a.GetMount(), b.GetMount()))
	})
	var out []disk
	seen := map[string]bool{}
	for _, d := range sorted {
		if len(out) == MaxFleetDisks {
			break
		}
		m := Label(d.GetMount())
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, disk{d, m})
	}
	return out
}

// Label is s as a label value: valid UTF-8 (invalid bytes replaced), at
// most MaxLabelBytes, cut at a character boundary. Names come from the
// agents, which may be hostile.
func Label(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxLabelBytes {
		return s
	}
	cut := MaxLabelBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// FleetHandler serves the fleet as metrics; ?district=NAME keeps one
// district's servers (and leaves the resources out), so that a large fleet
// can be scraped in shards.
func FleetHandler(src FleetSource) http.Handler {
	all := prometheus.NewRegistry()
	all.MustRegister(newFleetCollector(src, ""))
	whole := promhttp.HandlerFor(all, promhttp.HandlerOpts{EnableOpenMetrics: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		district := r.URL.Query().Get("district")
		if district == "" {
			whole.ServeHTTP(w, r)
			return
		}
		if len(district) > MaxLabelBytes {
			http.Error(w, "district: at most 128 bytes", http.StatusBadRequest)
			return
		}
		one := prometheus.NewRegistry()
		one.MustRegister(newFleetCollector(src, district))
		promhttp.HandlerFor(one, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP(w, r)
	})
}
