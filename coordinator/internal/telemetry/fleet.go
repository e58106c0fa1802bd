package telemetry

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// fleetFamily is one metric of /metrics/fleet: its samples are written
// as the servers are walked, and the families one after the other.
type fleetFamily struct {
	name, help string
	labels     []string
	buf        bytes.Buffer
}

// add writes one sample; values are in the order of the family's labels.
func (f *fleetFamily) add(v float64, values ...string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return // the agent API refuses these; never write one
	}
	f.buf.WriteString(f.name)
	f.buf.WriteByte('{')
	for i, l := range f.labels {
		if i > 0 {
			f.buf.WriteByte(',')
		}
		f.buf.WriteString(l)
		f.buf.WriteString(`="`)
		labelEscaper.WriteString(&f.buf, values[i])
		f.buf.WriteByte('"')
	}
	f.buf.WriteString("} ")
	f.buf.Write(strconv.AppendFloat(f.buf.AvailableBuffer(), v, 'g', -1, 64))
	f.buf.WriteByte('\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// fleetMetrics is every family of /metrics/fleet, in the order written.
type fleetMetrics struct {
	up, lastSeen, cores, busy, load1, load5, load15 *fleetFamily
	memUsed, memTotal, diskUsed, diskTotal          *fleetFamily
	failedUnits, updates, securityUpdates, attacks  *fleetFamily
	resourceStatus                                  *fleetFamily
	all                                             []*fleetFamily
}

func newFleetMetrics() *fleetMetrics {
	m := &fleetMetrics{}
	server := []string{"district", "server"} // in the order Prometheus sorts them
	disk := []string{"district", "mountpoint", "server"}
	d := func(name, help string, labels []string) *fleetFamily {
		f := &fleetFamily{name: namespace + "_" + name, help: help, labels: labels}
		m.all = append(m.all, f)
		return f
	}
	m.up = d("server_up", "1 while the server's agent is connected, 0 when it is not (every other series of an offline server is left out: its last report is not its state).", server)
	m.lastSeen = d("server_last_seen_timestamp_seconds", "When the server's agent was last heard from.", server)
	m.cores = d("server_cpu_cores", "CPU cores.", server)
	m.busy = d("server_cpu_busy_ratio", "Share of CPU time busy over the agent's last sample interval (absent until it has two samples).", server)
	m.load1 = d("server_load1", "Load average over 1 minute.", server)
	m.load5 = d("server_load5", "Load average over 5 minutes.", server)
	m.load15 = d("server_load15", "Load average over 15 minutes.", server)
	m.memUsed = d("server_memory_used_bytes", "Memory in use.", server)
	m.memTotal = d("server_memory_total_bytes", "Memory installed.", server)
	m.diskUsed = d("server_disk_used_bytes", "Bytes used on a mounted file system (the server's largest "+strconv.Itoa(MaxFleetDisks)+").", disk)
	m.diskTotal = d("server_disk_total_bytes", "Size of a mounted file system (the server's largest "+strconv.Itoa(MaxFleetDisks)+").", disk)
	m.failedUnits = d("server_failed_units", "systemd units in the failed state (absent when unknown).", server)
	m.updates = d("server_updates_pending", "Package updates pending (absent until the agent's first package-manager run).", server)
	m.securityUpdates = d("server_updates_security", "Security updates among the pending ones.", server)
	m.attacks = d("server_attacks_open", "Open SSH attacks on the server (brute force, or a login after many failures).", server)
	m.resourceStatus = d("resource_status", "1 for a configured resource's current status (ok, degraded, failed, unknown), 0 for the others.", []string{"kind", "resource", "status"})
	return m
}

// FleetNames lists the names of every series /metrics/fleet may hold.
func FleetNames() []string {
	var names []string
	for _, f := range newFleetMetrics().all {
		names = append(names, f.name)
	}
	return names
}

// writeFleet writes the fleet (one district's servers when district is
// set, and then no resources) in Prometheus' text format.
func writeFleet(w io.Writer, src FleetSource, district string) error {
	m := newFleetMetrics()
	seen := map[string]bool{}
	for _, s := range src.Servers() {
		name, dist := Label(s.Name), Label(s.District)
		// Names are unique in the fleet; cut to the label bound two could
		// meet, and a second series with the same labels would fail the
		// whole scrape.
		if seen[name] || (district != "" && !strings.EqualFold(s.District, district)) {
			continue
		}
		seen[name] = true
		up := 0.0
		if s.Online {
			up = 1
		}
		m.up.add(up, dist, name)
		if !s.LastSeen.IsZero() {
			m.lastSeen.add(float64(s.LastSeen.UnixMilli())/1000, dist, name)
		}
		st := s.State
		if !s.Online || st == nil {
			continue
		}
		if cpu := st.GetCpu(); cpu != nil {
			m.cores.add(float64(cpu.GetCores()), dist, name)
			if cpu.BusyPercent != nil {
				m.busy.add(cpu.GetBusyPercent()/100, dist, name)
			}
			m.load1.add(cpu.GetLoad1(), dist, name)
			m.load5.add(cpu.GetLoad5(), dist, name)
			m.load15.add(cpu.GetLoad15(), dist, name)
		}
		if mem := st.GetMemory(); mem != nil {
			m.memUsed.add(float64(mem.GetUsedBytes()), dist, name)
			m.memTotal.add(float64(mem.GetTotalBytes()), dist, name)
		}
		for _, d := range largestDisks(st.GetDisks().GetItems()) {
			m.diskUsed.add(float64(d.GetUsedBytes()), dist, d.mount, name)
			m.diskTotal.add(float64(d.GetTotalBytes()), dist, d.mount, name)
		}
		if st.GetFailedUnits() != nil {
			m.failedUnits.add(float64(len(st.GetFailedUnits().GetItems())), dist, name)
		}
		if u := st.GetUpdates(); u != nil {
			m.updates.add(float64(u.GetPending()), dist, name)
			m.securityUpdates.add(float64(u.GetSecurity()), dist, name)
		}
		if st.GetLogins() != nil {
			m.attacks.add(float64(s.OpenAttacks), dist, name)
		}
	}
	if district == "" && src.Resources != nil {
		done := map[string]bool{}
		for _, r := range src.Resources() {
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
				m.resourceStatus.add(v, Label(r.Kind), id, status)
			}
		}
	}
	for _, f := range m.all {
		if f.buf.Len() == 0 {
			continue
		}
		if _, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", f.name, f.help, f.name); err != nil {
			return err
		}
		if _, err := w.Write(f.buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
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

// FleetHandler serves the fleet as metrics, in Prometheus' text format
// (gzipped when the scraper accepts it, as Prometheus does); ?district=NAME
// keeps one district's servers (and leaves the resources out), so that a
// large fleet can be scraped in shards. It writes the text itself rather
// than through a registry: at 10,000 servers that is a tenth of the time
// and of the garbage.
func FleetHandler(src FleetSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		district := r.URL.Query().Get("district")
		if len(district) > MaxLabelBytes {
			http.Error(w, "district: at most 128 bytes", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var out io.Writer = w
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			z, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer z.Close()
			out = z
		}
		writeFleet(out, src, district) // an error is the scraper gone
	})
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); strings.EqualFold(enc, "gzip") {
			return true
		}
	}
	return false
}
