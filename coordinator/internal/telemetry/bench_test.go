package telemetry

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// A scrape of /metrics/fleet on 10,000 servers (four disks each, every
// section known, a tenth offline) in 20 districts, and of one district:
// the time, the body's size plain and gzipped (as Prometheus asks for
// it), and the series.
func BenchmarkFleetScrape(b *testing.B) {
	const n = 10000
	servers := make([]FleetServer, n)
	now := time.Now()
	for i := range servers {
		st := &gridcityv1.StateUpdate{
			Cpu:         &gridcityv1.CPU{Cores: 8, BusyPercent: proto.Float64(float64(i % 100)), Load1: 1.25, Load5: 1, Load15: 0.75},
			Memory:      &gridcityv1.Memory{TotalBytes: 16 << 30, UsedBytes: uint64(i) << 20},
			FailedUnits: &gridcityv1.Units{},
			Updates:     &gridcityv1.Updates{Pending: uint32(i % 40), Security: uint32(i % 3)},
			Logins:      &gridcityv1.Logins{},
		}
		for _, m := range []string{"/", "/var", "/srv/data", "/boot"} {
			st.Disks = &gridcityv1.Disks{Items: append(st.GetDisks().GetItems(), &gridcityv1.Disk{Mount: m, TotalBytes: 100 << 30, UsedBytes: uint64(i) << 24})}
		}
		servers[i] = FleetServer{Name: fmt.Sprintf("web-%05d", i), District: fmt.Sprintf("district-%02d", i%20), Online: i%10 != 0, LastSeen: now, State: st}
	}
	resources := make([]FleetResource, 1000)
	for i := range resources {
		resources[i] = FleetResource{ID: fmt.Sprintf("db-%04d", i), Kind: "database", Status: ResourceStatuses[i%4]}
	}
	h := FleetHandler(FleetSource{Servers: func() []FleetServer { return servers }, Resources: func() []FleetResource { return resources }})
	for _, c := range []struct {
		name, query string
		gzip        bool
	}{{"all", "", false}, {"all-gzip", "", true}, {"district", "?district=district-07", false}} {
		b.Run(c.name, func(b *testing.B) {
			var body []byte
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/metrics/fleet"+c.query, nil)
				if c.gzip {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				h.ServeHTTP(rec, req)
				body = rec.Body.Bytes()
			}
			if c.gzip {
				r, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				if body, err = io.ReadAll(r); err != nil {
					b.Fatal(err)
				}
			}
			var z bytes.Buffer
			w := gzip.NewWriter(&z)
			w.Write(body)
			w.Close()
			series := 0
			for _, l := range strings.Split(string(body), "\n") {
				if l != "" && !strings.HasPrefix(l, "#") {
					series++
				}
			}
			b.ReportMetric(float64(len(body))/1024, "KiB/scrape")
			b.ReportMetric(float64(z.Len())/1024, "gzipKiB/scrape")
			b.ReportMetric(float64(series), "series")
		})
	}
}
