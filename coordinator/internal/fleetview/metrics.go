package fleetview

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// MetricsInput is get_metrics' input.
type MetricsInput struct {
	Target  string   `json:"target" jsonschema:"the server's name, as list_servers shows it"`
	Since   string   `json:"since,omitempty" jsonschema:"how far back to look: 30m, 6h, 1d, 7d or any Go duration (default 1h; at most what the coordinator keeps, 7d unless its config says otherwise)"`
	Metrics []string `json:"metrics,omitempty" jsonschema:"which series: cpu, memory, load and disk:MOUNT (e.g. disk:/var); default cpu, memory, load and every disk"`
}

// MetricsOutput is get_metrics' result.
type MetricsOutput struct {
	Target string `json:"target"`
	Since  string `json:"since" jsonschema:"the window asked for, e.g. 1h or 7d"`
	From   string `json:"from" jsonschema:"start of the first bucket (RFC 3339)"`
	To     string `json:"to" jsonschema:"when the answer was made (RFC 3339)"`
	Step   string `json:"step" jsonschema:"the length of each bucket, e.g. 1m or 2h"`
	Note   string `json:"note,omitempty" jsonschema:"what the answer leaves out or why it is empty, and how to get more"`
	// Series are in the order asked, or cpu, memory, load, then disks by mount.
	Series []SeriesView    `json:"series"`
	Disks  []DiskTrendView `json:"disks" jsonschema:"for each disk asked for (every disk by default): how full it is and when it fills at the trend of the window"`
}

// SeriesView is one metric over the window.
type SeriesView struct {
	Metric string `json:"metric" jsonschema:"cpu, memory, load or disk:MOUNT"`
	Unit   string `json:"unit" jsonschema:"percent, or load for the 1-minute load average"`
	// Points are [time, min, avg, max] per bucket that holds samples.
	Points       []MetricPointView `json:"points" jsonschema:"one [time (RFC 3339), min, avg, max] per bucket with samples, oldest first; at most 120"`
	Now          float64           `json:"now" jsonschema:"the live value when the server is online, else the newest bucket's average"`
	Min          float64           `json:"min"`
	Max          float64           `json:"max"`
	Avg          float64           `json:"avg"`
	TrendPerHour float64           `json:"trendPerHour" jsonschema:"the least-squares slope of the buckets' averages, per hour (positive: rising)"`
}

// MetricPointView is [time, min, avg, max].
type MetricPointView [4]any

// DiskTrendView is how soon a disk fills.
type DiskTrendView struct {
	Mount        string  `json:"mount"`
	UsedPercent  float64 `json:"usedPercent"`
	TrendPerHour float64 `json:"trendPerHour" jsonschema:"percentage points per hour over the window"`
	FullIn       string  `json:"fullIn,omitempty" jsonschema:"when the disk is full at this trend, e.g. 5h20m or 3d4h (0m: full now)"`
	FullAt       string  `json:"fullAt,omitempty" jsonschema:"the time it is full at this trend (RFC 3339)"`
	NotFilling   bool    `json:"notFilling,omitempty" jsonschema:"true when its use is flat or falling over the window"`
	Note         string  `json:"note,omitempty" jsonschema:"why neither fullIn nor notFilling is given"`
}

// Bounds of a get_metrics answer.
const (
	MaxBuckets = 120
	// minBuckets is how coarse a series may grow to fit the answer's
	// budget before disks' series are left out instead.
	minBuckets = 12
	// The answer's size in characters, with only a target, and with
	// since or metrics; a margin below the 16,000 and 48,000 every tool
	// holds to.
	metricsBudget     = 15_000
	metricsBudgetArgs = 45_000
)

// steps are the bucket lengths an answer uses, the shortest that fits.
// The last ones are for a rollup kept longer than the default week.
var steps = []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	2 * 24 * time.Hour, 4 * 24 * time.Hour, 7 * 24 * time.Hour}

// getMetrics answers get_metrics at now.
func getMetrics(ctx context.Context, d Deps, in MetricsInput, now time.Time) (MetricsOutput, error) {
	srv, ok := d.Fleet.Server(in.Target)
	if !ok {
		return MetricsOutput{}, fmt.Errorf("unknown server %q; known servers: %s (names as list_servers shows them)", in.Target, CloseMatches(in.Target, d.Fleet.Names()))
	}
	keep := d.Fleet.MetricRetention()
	since := time.Hour
	if in.Since != "" {
		var err error
		if since, err = parseSince(in.Since); err != nil {
			return MetricsOutput{}, err
		}
	}
	if since > keep.Rollup {
		return MetricsOutput{}, fmt.Errorf("since %s is more than the coordinator keeps: %s at one-minute and %s at fifteen-minute resolution "+
			"(metrics: in its config); ask for since up to %s", in.Since, human(keep.Raw), human(keep.Rollup), human(keep.Rollup))
	}
	// The steps that give at most MaxBuckets buckets (a window of n steps
	// touches n+1 of them, and since need not be a whole number of steps);
	// past the raw retention only whole quarter hours, which the rollup
	// holds.
	var cands []time.Duration
	for _, step := range steps {
		if since/step <= MaxBuckets-2 && (since <= keep.Raw || step%store.MetricRollupStep == 0) {
			cands = append(cands, step)
		}
	}
	if len(cands) == 0 {
		return MetricsOutput{}, fmt.Errorf("since %s is too long to show in %d buckets; ask for since up to %s", in.Since, MaxBuckets, human(steps[len(steps)-1]*(MaxBuckets-2)))
	}
	// Each step reads the coarsest resolution that divides it, from the
	// start of its first bucket; the minute in progress is still in the
	// fleet, not in the store.
	read := map[[2]int64][]store.MetricPoint{}
	history := func(step time.Duration) ([]store.MetricPoint, error) {
		res := store.MetricStep
		if step%store.MetricRollupStep == 0 {
			res = store.MetricRollupStep
		}
		from := floorTo(now.Add(-since), step)
		key := [2]int64{int64(res), from.UnixMilli()}
		if rows, ok := read[key]; ok {
			return rows, nil
		}
		rows, err := d.Store.MetricHistory(ctx, srv.Name, res, from, step)
		if err != nil {
			return nil, fmt.Errorf("read the metric history of %s: %w", srv.Name, err)
		}
		rows = append(rows, d.Fleet.OpenMetrics(srv.Name)...)
		read[key] = rows
		return rows, nil
	}
	rows, err := history(cands[0])
	if err != nil {
		return MetricsOutput{}, err
	}
	live := liveFigures(srv.Online, srv.State)
	// Disks are known from the history, which the fleet bounds to the
	// largest few of a host; the live state names every mount.
	known := map[string]bool{"cpu": true, "memory": true, "load": true}
	for _, p := range rows {
		known[p.Metric] = true
	}
	names := slices.SortedFunc(maps.Keys(known), metricOrder)
	asked := names
	if len(in.Metrics) > 0 {
		asked = nil
		for _, m := range in.Metrics {
			if !known[m] {
				return MetricsOutput{}, fmt.Errorf("unknown metric %q for %s; its metrics: %s", m, srv.Name, someOf(names))
			}
			if !slices.Contains(asked, m) {
				asked = append(asked, m)
			}
		}
	}
	sinceText := in.Since
	if sinceText == "" {
		sinceText = "1h"
	}
	out := MetricsOutput{Target: srv.Name, Since: sinceText, To: metricTime(now), Series: []SeriesView{}, Disks: []DiskTrendView{}}
	if len(rows) == 0 {
		out.Step, out.From = human(cands[0]), metricTime(floorTo(now.Add(-since), cands[0]))
		out.Note = fmt.Sprintf("no metric history of %s in this window: samples appear within seconds of its agent sending CPU, memory or disk figures; "+
			"ask again shortly, or with a longer since (the server is %s)", srv.Name, srv.Status())
		return out, nil
	}
	budget := metricsBudget
	if in.Since != "" || len(in.Metrics) > 0 {
		budget = metricsBudgetArgs
	}
	// The shortest step whose answer fits the budget. Past minBuckets
	// buckets a series is not made coarser: the disks' series are left
	// out instead, the least full first, and their trends stay in disks.
	var dropped, hidden []string
	for i := 0; ; {
		step := cands[i]
		rows, err := history(step)
		if err != nil {
			return MetricsOutput{}, err
		}
		o := buildMetrics(out, rows, asked, dropped, hidden, live, step, since, now)
		b, err := json.Marshal(o)
		if err != nil {
			return MetricsOutput{}, err
		}
		if len(b) <= budget {
			return o, nil
		}
		if i+1 < len(cands) && since/cands[i+1] >= minBuckets {
			i++
			continue
		}
		// The disk that matters least: its series first, then (with
		// mounts of extraordinary length) its trend.
		least, trend := "", len(dropped) == len(disksOf(asked))
		for _, m := range disksOf(asked) {
			if slices.Contains(dropped, m) == trend && !slices.Contains(hidden, m) && (least == "" || diskUse(o, m) < diskUse(o, least)) {
				least = m
			}
		}
		switch {
		case least == "":
			return o, nil // cpu, memory and load alone are far below the budget
		case trend:
			hidden = append(hidden, least)
		default:
			dropped = append(dropped, least)
		}
	}
}

func disksOf(metrics []string) []string {
	var out []string
	for _, m := range metrics {
		if strings.HasPrefix(m, "disk:") {
			out = append(out, m)
		}
	}
	return out
}

// diskUse is how full the answer says a disk is.
func diskUse(o MetricsOutput, metric string) float64 {
	for _, dt := range o.Disks {
		if "disk:"+dt.Mount == metric {
			return dt.UsedPercent
		}
	}
	return 0
}

// buildMetrics fills the series and disks of out from rows, bucketed by step.
func buildMetrics(out MetricsOutput, rows []store.MetricPoint, asked, dropped, hidden []string, live map[string]float64, step, since time.Duration, now time.Time) MetricsOutput {
	from := floorTo(now.Add(-since), step)
	out.From, out.Step = metricTime(from), human(step)
	by := map[string]map[int64]*store.MetricPoint{}
	for _, p := range rows {
		if p.At.Before(from) {
			continue
		}
		b := floorTo(p.At, step).UnixMilli()
		m := by[p.Metric]
		if m == nil {
			m = map[int64]*store.MetricPoint{}
			by[p.Metric] = m
		}
		if m[b] == nil {
			m[b] = &store.MetricPoint{Metric: p.Metric, At: time.UnixMilli(b).UTC()}
		}
		m[b].Merge(p)
	}
	out.Series, out.Disks = []SeriesView{}, []DiskTrendView{}
	for _, name := range asked {
		var pts []store.MetricPoint
		for _, p := range by[name] {
			pts = append(pts, *p)
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].At.Before(pts[j].At) })
		sv := summarize(name, pts, live, step)
		if strings.HasPrefix(name, "disk:") && !slices.Contains(hidden, name) {
			out.Disks = append(out.Disks, diskTrend(name, sv, len(pts), now))
		}
		if !slices.Contains(dropped, name) {
			out.Series = append(out.Series, sv)
		}
	}
	switch {
	case len(hidden) > 0:
		out.Note = fmt.Sprintf("the series of %d disks are left out to keep the answer short, and %d of them are left out of disks too: %s; ask for them with metrics",
			len(dropped), len(hidden), someOf(hidden))
	case len(dropped) > 0:
		out.Note = fmt.Sprintf("the series of %d disks are left out to keep the answer short (their trends are in disks): %s; ask for them with metrics",
			len(dropped), someOf(dropped))
	}
	return out
}

// summarize is one series with its summary.
func summarize(name string, pts []store.MetricPoint, live map[string]float64, step time.Duration) SeriesView {
	sv := SeriesView{Metric: name, Unit: "percent", Points: make([]MetricPointView, 0, len(pts))}
	digits := 1.0
	if name == "load" {
		sv.Unit, digits = "load", 2
	}
	r := func(v float64) float64 { return round(v, digits) }
	var all store.MetricPoint
	for _, p := range pts {
		sv.Points = append(sv.Points, MetricPointView{metricTime(p.At), r(p.Min), r(p.Avg()), r(p.Max)})
		all.Merge(p)
	}
	if len(pts) == 0 {
		return sv
	}
	sv.Min, sv.Max, sv.Avg = r(all.Min), r(all.Max), r(all.Avg())
	sv.Now = r(pts[len(pts)-1].Avg())
	if v, ok := live[name]; ok {
		sv.Now = r(v)
	}
	sv.TrendPerHour = round(slope(pts, step), 3)
	return sv
}

// slope is the least-squares slope of the buckets' averages per hour, each
// placed at its middle.
func slope(pts []store.MetricPoint, step time.Duration) float64 {
	if len(pts) < 2 {
		return 0
	}
	t0 := pts[0].At
	var sx, sy, sxx, sxy float64
	for _, p := range pts {
		x := (p.At.Sub(t0) + step/2).Hours()
		y := p.Avg()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(pts))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// diskTrend says when a disk fills at its series' trend.
func diskTrend(name string, sv SeriesView, buckets int, now time.Time) DiskTrendView {
	dt := DiskTrendView{Mount: strings.TrimPrefix(name, "disk:"), UsedPercent: sv.Now, TrendPerHour: sv.TrendPerHour}
	switch {
	case sv.Now >= 100:
		dt.FullIn, dt.FullAt = "0m", metricTime(now)
	case buckets < 2:
		dt.Note = "not enough history for a trend yet: ask again in a few minutes, or with a longer since"
	case sv.TrendPerHour <= 0.0005:
		dt.NotFilling = true
	default:
		in := time.Duration((100 - sv.Now) / sv.TrendPerHour * float64(time.Hour))
		if in > 10*365*24*time.Hour {
			dt.NotFilling = true
			break
		}
		dt.FullIn, dt.FullAt = human(in), metricTime(now.Add(in))
	}
	return dt
}

// liveFigures are the server's current values by metric, when it is online.
func liveFigures(online bool, st *gridcityv1.StateUpdate) map[string]float64 {
	out := map[string]float64{}
	if !online {
		return out
	}
	if c := st.GetCpu(); c != nil {
		if c.BusyPercent != nil {
			out["cpu"] = c.GetBusyPercent()
		}
		out["load"] = c.GetLoad1()
	}
	if m := st.GetMemory(); m != nil {
		out["memory"] = m.GetUsedPercent()
	}
	for _, dk := range st.GetDisks().GetItems() {
		if dk.GetTotalBytes() > 0 && dk.GetMount() != "" {
			out["disk:"+dk.GetMount()] = dk.GetUsedPercent()
		}
	}
	return out
}

// metricOrder sorts cpu, memory, load, then disks by mount.
func metricOrder(a, b string) int {
	rank := func(m string) int {
		switch m {
		case "cpu":
			return 0
		case "memory":
			return 1
		case "load":
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}

var daysForm = regexp.MustCompile(`^(\d+)d(.*)$`)

// parseSince reads a Go duration or days ("1d", "7d", "1d12h").
func parseSince(s string) (time.Duration, error) {
	bad := func() error {
		return fmt.Errorf("since %q is not a duration: write 30m, 6h, 1d or 7d (a Go duration, or days with d)", s)
	}
	var days time.Duration
	rest := s
	if m := daysForm.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 10_000 {
			return 0, bad()
		}
		days, rest = time.Duration(n)*24*time.Hour, m[2]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return 0, bad()
		}
	}
	d += days
	if d < time.Minute {
		return 0, fmt.Errorf("since %q is shorter than a minute, the history's finest resolution: ask for 1m or more", s)
	}
	return d, nil
}

// human writes a duration as a person would: 45m, 5h20m, 3d4h.
func human(d time.Duration) string {
	d = d.Round(time.Minute)
	days, hours, mins := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	var b strings.Builder
	if days > 0 {
		fmt.Fprintf(&b, "%dd", days)
	}
	if hours > 0 {
		fmt.Fprintf(&b, "%dh", hours)
	}
	if mins > 0 && days == 0 {
		fmt.Fprintf(&b, "%dm", mins)
	}
	if b.Len() == 0 {
		return "0m"
	}
	return b.String()
}

func round(v, digits float64) float64 {
	p := math.Pow(10, digits)
	return math.Round(v*p) / p
}

// floorTo is the start of the bucket of length step that holds t, aligned
// to the Unix epoch as the store's buckets are (time.Truncate aligns to
// year 1, which differs for steps of several days).
func floorTo(t time.Time, step time.Duration) time.Time {
	ms := t.UnixMilli()
	return time.UnixMilli(ms - ms%step.Milliseconds()).UTC()
}

// metricTime is a bucket's or an answer's time, in UTC.
func metricTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// someOf names the first of names, up to about a thousand characters,
// and counts the rest.
func someOf(names []string) string {
	n, size := 0, 0
	for n < len(names) && (n == 0 || size+len(names[n]) <= 1000) {
		size += len(names[n]) + 2
		n++
	}
	if n == len(names) {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
