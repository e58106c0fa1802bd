package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Row is one figure of the report, as a ratio to its peer's where it has
// one. Later benchmarks add rows.
type Row struct {
	Name      string   `json:"name"`
	Unit      string   `json:"unit"`
	Value     float64  `json:"value"`
	Peer      string   `json:"peer"`
	PeerValue *float64 `json:"peerValue"`
	Ratio     *float64 `json:"ratio"`
	Notes     string   `json:"notes"`

	aim string // "aim met (≤ 0.6×)" for the table; the same words open Notes
}

func cmdReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	livePath := fs.String("live", "", "the figures measure wrote")
	latencyPath := fs.String("latency", "", "the samples latency wrote (empty: no latency rows)")
	latencyErr := fs.String("latency-error", "", "why there are no latency samples (noted in the report)")
	gotest := fs.String("gotest", "", "the compiled test binary of agent/internal/collect (empty: no Go benchmarks)")
	gotestDir := fs.String("gotest-dir", "", "the package directory to run it in")
	gotestErr := fs.String("gotest-error", "", "why there is no test binary to run (noted in the report)")
	benchRe := fs.String("bench", "^BenchmarkCollect", "which Go benchmarks to run")
	benchtime := fs.String("benchtime", "500ms", "-test.benchtime")
	count := fs.Int("count", 5, "-test.count: runs of each Go benchmark; the median is reported")
	var agentsFiles, agentsErrs multi
	fs.Var(&agentsFiles, "agents", "the figures `agents` wrote for one fleet size (repeatable: 1,000 and 10,000 agents)")
	fs.Var(&agentsErrs, "agents-error", "why a fleet size was not measured (repeatable; noted in the report)")
	haFailoverPath := fs.String("ha-failover", "", "the figures `failover` wrote (replicas on PostgreSQL)")
	haSpreadPath := fs.String("ha-spread", "", "the figures `spread` wrote (replicas on PostgreSQL)")
	var haErrs multi
	fs.Var(&haErrs, "ha-error", "why a replicas figure was not measured (repeatable; noted in the report)")
	appPath := fs.String("app", "", "the figures `app` wrote (the app's fleet pages in Chromium)")
	appErr := fs.String("app-error", "", "why the app's pages were not measured (noted in the report)")
	var more multi
	fs.Var(&more, "gobench", "more Go benchmarks, BIN|DIR|REGEXP|WHAT (repeatable; WHAT says what one op is): e.g. the graph's incident report on 10,000 targets")
	commit := fs.String("commit", "", "the commit measured")
	outDir := fs.String("out", "bench", "where report.json and report.md go")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *livePath == "" {
		return errors.New("report needs -live")
	}
	b, err := os.ReadFile(*livePath)
	if err != nil {
		return err
	}
	var l live
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("%s: %w", *livePath, err)
	}
	rows := liveRows(l)

	var lat *latencyRun
	var skipped []string
	switch {
	case *latencyErr != "":
		skipped = append(skipped, "Command latency not measured: "+*latencyErr)
	case *latencyPath != "":
		b, err := os.ReadFile(*latencyPath)
		if err != nil {
			return err
		}
		lat = &latencyRun{}
		if err := json.Unmarshal(b, lat); err != nil {
			return fmt.Errorf("%s: %w", *latencyPath, err)
		}
		rows = append(rows, latencyRows(*lat)...)
	}

	var fleets []agentsRun
	for _, path := range agentsFiles {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var r agentsRun
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fleets = append(fleets, r)
		rows = append(rows, agentsRows(r)...)
	}
	for _, e := range agentsErrs {
		skipped = append(skipped, "Coordinator with simulated agents not measured: "+e)
	}
	haRows, err := replicaRows(*haFailoverPath, *haSpreadPath, fleets)
	if err != nil {
		return err
	}
	rows = append(rows, haRows...)
	for _, e := range haErrs {
		skipped = append(skipped, "Replicas on PostgreSQL not measured: "+e)
	}
	if *appPath != "" {
		var a appRun
		if err := readJSON(*appPath, &a); err != nil {
			return err
		}
		rows = append(rows, appRows(a)...)
	}
	if *appErr != "" {
		skipped = append(skipped, "The app's fleet pages not measured: "+*appErr)
	}

	var benchErr error
	if *gotestErr != "" {
		skipped = append(skipped, "Go benchmarks not run: "+*gotestErr)
	} else if *gotest == "" {
		skipped = append(skipped, "Go benchmarks: agent/internal/collect has no "+strings.TrimPrefix(*benchRe, "^")+"* benchmark yet, so there are no interval-free CPU rows.")
	} else {
		fmt.Fprintf(os.Stderr, "gridcity-bench: running the Go benchmarks %s in %s (%d × %s)\n", *benchRe, *gotestDir, *count, *benchtime)
		br, err := goBench(*gotest, *gotestDir, *benchRe, "one Collect of the tier on this machine, no peer: it does not depend on intervals", *benchtime, *count)
		if err != nil {
			benchErr = err
			skipped = append(skipped, "Go benchmarks failed: "+err.Error())
		} else if len(br) == 0 {
			skipped = append(skipped, "Go benchmarks: none matched "+*benchRe+".")
		}
		rows = append(rows, br...)
	}

	for _, m := range more {
		parts, err := splitGoBench(m)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "gridcity-bench: running the Go benchmarks %s in %s (%d × %s)\n", parts[2], parts[1], *count, *benchtime)
		br, err := goBench(parts[0], parts[1], parts[2], parts[3], *benchtime, *count)
		if err != nil {
			benchErr = err
			skipped = append(skipped, "Go benchmarks failed: "+err.Error())
		}
		rows = append(rows, br...)
	}

	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*outDir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	md := markdown(l, lat, fleets, rows, skipped, *commit)
	if err := os.WriteFile(filepath.Join(*outDir, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(*outDir, "report.json"), filepath.Join(*outDir, "report.md"))
	return benchErr
}

const (
	aimRSS = 0.6
	aimCPU = 0.5
)

func ptr(v float64) *float64 { return &v }

func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	// Three significant digits: more would be noise.
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return f
}

// compare makes a row with a peer, and with an aim when aim > 0.
func compare(name, unit string, v, peerV float64, peer string, aim float64, notes string) Row {
	r := Row{Name: name, Unit: unit, Value: round3(v), Peer: peer, PeerValue: ptr(round3(peerV))}
	if peerV > 0 {
		r.Ratio = ptr(round3(v / peerV))
	}
	if aim > 0 && r.Ratio != nil {
		verdict := "met"
		if v/peerV > aim {
			verdict = "missed"
		}
		r.aim = fmt.Sprintf("aim %s (≤ %.1f×)", verdict, aim)
		notes = r.aim + ". " + notes
	}
	r.Notes = notes
	return r
}

func liveRows(l live) []Row {
	peer := "prometheus-node-exporter"
	if l.ExporterVersion != "" {
		peer += " " + l.ExporterVersion
	}
	mib := func(kib uint64) float64 { return float64(kib) / 1024 }
	a, e := l.Agent, l.Exporter
	window := fmt.Sprintf("%d s window after warm-up, sampled every second (%d samples)", l.Seconds, a.MemSamples)

	agentPer := float64(a.CPUNs+a.ChildTicks*uint64(1e9)/uint64(max(l.ClkTck, 1))) / 1e6 / float64(max(l.FastTicks, 1))
	expPer := float64(e.CPUNs) / 1e6 / float64(max(l.Scrapes, 1))
	var spread []string
	var ratios []float64
	for _, r := range l.Rounds {
		ap := float64(r.AgentNs) / 1e6 / float64(max(r.FastTicks, 1))
		ep := float64(r.ExporterNs) / 1e6 / float64(max(r.Scrapes, 1))
		if ep > 0 {
			ratios = append(ratios, ap/ep)
		}
		spread = append(spread, fmt.Sprintf("%.3f/%.2f ms", ap, ep))
	}
	lo, hi := minMax(ratios)
	statMs := func(p procResult) float64 { return float64(p.StatTicks) * 1000 / float64(max(l.ClkTck, 1)) }

	cpuNotes := fmt.Sprintf("CPU time (sum of every thread's schedstat run time, ns) over the %d s window divided by samples: "+
		"the agent's %d fast-tier ticks (%d s), whose CPU also pays for the %d medium-tier ticks, %d heartbeats, gRPC/TLS and its Go runtime in the window; "+
		"the exporter's %d scrapes of /metrics, one every %d s as Prometheus would (gzip, body read to the end, median %d KiB and %d series, %.1f ms each). "+
		"Per %d s round, agent/exporter ms: %s; ratio range %.3f–%.3f, median %.3f. "+
		"Cross-check with utime+stime, which the kernel charges by whole ticks (±%d ms each): agent %.0f ms, exporter %.0f ms; agent's children: %d ticks.",
		l.Seconds, l.FastTicks, l.Intervals.Fast, l.MediumTicks, l.FastTicks, l.Scrapes, l.Intervals.Fast,
		l.ScrapeBytes/1024, l.ScrapeSeries, l.ScrapeMs, l.Intervals.Medium, strings.Join(spread, ", "), lo, hi, medianF(ratios),
		1000/max(l.ClkTck, 1), statMs(a), statMs(e), a.ChildTicks)
	if a.ThreadsEnded+e.ThreadsEnded > 0 {
		cpuNotes += fmt.Sprintf(" Threads that ended in the window (counted to their last reading): agent %d, exporter %d.", a.ThreadsEnded, e.ThreadsEnded)
	}

	return []Row{
		compare("agent steady RSS", "MiB", mib(a.RSS), mib(e.RSS), peer, aimRSS,
			fmt.Sprintf("median VmRSS over a %s; largest sample: agent %.1f MiB, exporter %.1f MiB. "+
				"Of it, the process's own executable: agent %.1f of %.1f MiB mapped resident, exporter %.1f of %.1f MiB "+
				"(so on this kernel RSS follows the size of the binary's loaded segments more than the heap).",
				window, mib(a.RSSMax), mib(e.RSSMax), mib(a.ExeResident), mib(a.ExeMapped), mib(e.ExeResident), mib(e.ExeMapped))),
		compare("agent anonymous RSS", "MiB", mib(a.Anon), mib(e.Anon), peer, 0,
			"median RssAnon from /proc/PID/status: heap, stacks and runtime, what the process allocated rather than mapped from its binary and libraries."),
		compare("agent steady PSS", "MiB", mib(a.Pss), mib(e.Pss), peer, 0,
			"median Pss from /proc/PID/smaps_rollup over the same samples: shared library pages divided among their users."),
		compare("agent private memory", "MiB", mib(a.Private), mib(e.Private), peer, 0,
			"median Private_Clean+Private_Dirty from smaps_rollup: what the process alone holds."),
		compare("agent CPU per sample", "ms", agentPer, expPer, peer, aimCPU, cpuNotes),
		compare("agent CPU share", "% of one CPU", float64(a.CPUNs)/1e7/float64(l.Seconds), float64(e.CPUNs)/1e7/float64(l.Seconds), peer, 0,
			fmt.Sprintf("CPU time over wall time in the window, each at its %d s interval; threads: agent %d, exporter %d.", l.Intervals.Fast, a.Threads, e.Threads)),
	}
}

// splitGoBench splits a -gobench value, BIN|DIR|REGEXP|WHAT. The regexp
// may hold '|' itself (^Benchmark(A|B)$), so it is what lies between the
// second '|' and the last one; WHAT has none.
func splitGoBench(v string) ([4]string, error) {
	var p [4]string
	head := strings.SplitN(v, "|", 3)
	i := strings.LastIndexByte(v, '|')
	if len(head) != 3 || i < len(head[0])+len(head[1])+2 {
		return p, fmt.Errorf("-gobench %q: want BIN|DIR|REGEXP|WHAT", v)
	}
	p[0], p[1] = head[0], head[1]
	p[2], p[3] = v[len(head[0])+len(head[1])+2:i], v[i+1:]
	return p, nil
}

// benchLine is one result line of `go test -bench`.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// goBench runs the compiled test binary and returns rows for the median
// ns/op and allocs/op of each benchmark.
func goBench(bin, dir, re, what, benchtime string, count int) ([]Row, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(abs, "-test.run", "^$", "-test.bench", re, "-test.benchmem",
		"-test.benchtime", benchtime, "-test.count", strconv.Itoa(count))
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", bin, err, out.String())
	}
	byName, order := parseBench(&out)
	var rows []Row
	for _, name := range order {
		m := byName[name]
		ns := m["ns/op"]
		lo, hi := minMax(ns)
		common := fmt.Sprintf("go test -bench %s in %s, median of %d runs of %s", re, relDir(dir), len(ns), benchtime)
		rows = append(rows,
			Row{Name: "go bench " + name, Unit: "ns/op", Value: round3(medianF(ns)),
				Notes: fmt.Sprintf("%s (range %.0f–%.0f ns/op); %s.", common, lo, hi, what)},
			Row{Name: "go bench " + name + " allocs", Unit: "allocs/op", Value: round3(medianF(m["allocs/op"])),
				Notes: fmt.Sprintf("%s; %.0f B/op.", common, medianF(m["B/op"]))},
		)
		rows = append(rows, sizeRows(name, m, common)...)
		// Any other figure the benchmark reports (a scrape's KiB, its
		// series …), in its own unit.
		for _, unit := range slices.Sorted(maps.Keys(m)) {
			switch unit {
			case "ns/op", "B/op", "allocs/op", "budget-chars", "text-chars", "structured-chars":
				continue
			}
			rows = append(rows, Row{Name: "go bench " + name + " " + unit, Unit: unit, Value: round3(medianF(m[unit])), Notes: common + "; " + what + "."})
		}
	}
	return rows, nil
}

// answerForms are the units a benchmark reports an MCP answer's size in:
// the characters of its text content and of its structured content.
var answerForms = []struct{ unit, form string }{{"text-chars", "text"}, {"structured-chars", "structured"}}

// sizesBefore are answers' sizes on the same simulated fleet of 10,000
// servers before issue 14 gave every answer a budget, measured on commit
// 9f55f45 (its list_servers was a page of 200 whole views, and the text
// content a copy of the structured JSON, so both forms had one size).
// They are recorded rather than measured again: that code is gone.
var sizesBefore = map[string]float64{
	"ToolAnswerSizes/list_servers":      430996,
	"ToolAnswerSizes/incident_report":   920572,
	"ToolAnswerSizes/get_topology":      245250,
	"ToolAnswerSizes/security_findings": 7915929,
	"ToolAnswerSizes/list_resources":    406087,
}

// sizeRows are a benchmark's answer sizes, one row per form, each beside
// its size before the budgets where that was measured.
func sizeRows(name string, m map[string][]float64, common string) []Row {
	var rows []Row
	for _, f := range answerForms {
		v, ok := m[f.unit]
		if !ok {
			continue
		}
		// Exact counts: a character is not rounded away.
		r := Row{Name: "answer size " + name + " (" + f.form + ")", Unit: "chars", Value: medianF(v)}
		notes := fmt.Sprintf("characters of the %s content, %s", f.form, common)
		budget := medianF(m["budget-chars"])
		if budget > 0 {
			notes += fmt.Sprintf("; budget %.0f (%s)", budget, map[bool]string{true: "without arguments", false: "with arguments"}[budget < 20000])
		}
		if before, ok := sizesBefore[name]; ok {
			r.Peer, r.PeerValue, r.Ratio = "before the budgets (9f55f45, recorded)", ptr(before), ptr(round3(r.Value/before))
			notes += fmt.Sprintf("; %s answered %.0f characters before the budgets (commit 9f55f45, recorded, not measured in this run)", name, before)
		}
		r.Notes = notes + "."
		switch {
		case budget == 0:
		case r.Value > budget:
			r.aim = fmt.Sprintf("over the budget of %.0f", budget)
		default:
			r.aim = fmt.Sprintf("within %.0f", budget)
		}
		rows = append(rows, r)
	}
	return rows
}

// relDir is dir relative to the working directory (the repository root
// when make bench runs), or dir itself.
func relDir(dir string) string {
	wd, err := os.Getwd()
	if err != nil {
		return dir
	}
	if r, err := filepath.Rel(wd, dir); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return dir
}

// parseBench reads `go test -bench` output into each benchmark's values of
// each unit (ns/op, B/op, allocs/op …), in the order they first appear.
func parseBench(r io.Reader) (map[string]map[string][]float64, []string) {
	byName := map[string]map[string][]float64{}
	var order []string
	s := bufio.NewScanner(r)
	for s.Scan() {
		m := benchLine.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		name := strings.TrimPrefix(m[1], "Benchmark")
		if byName[name] == nil {
			byName[name] = map[string][]float64{}
			order = append(order, name)
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				byName[name][f[i+1]] = append(byName[name][f[i+1]], v)
			}
		}
	}
	return byName, order
}

func minMax(v []float64) (lo, hi float64) {
	for i, x := range v {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func markdown(l live, lat *latencyRun, fleets []agentsRun, rows []Row, skipped []string, commit string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# gridcity benchmarks\n\n")
	fmt.Fprintf(&b, "Measured %s on %s%s. `make bench` writes this file and report.json; it is a benchmark, not a test: a missed aim is reported, not failed.\n\n",
		l.Start.UTC().Format("2006-01-02 15:04 UTC"), machine(), commitNote(commit))
	fmt.Fprintf(&b, "| figure | gridcity | peer | peer's | ratio | aim |\n|---|---:|---|---:|---:|---|\n")
	for _, r := range rows {
		peerV, ratio := "", ""
		if r.PeerValue != nil {
			peerV = fmtNum(*r.PeerValue) + " " + r.Unit
		}
		if r.Ratio != nil {
			ratio = fmtNum(*r.Ratio) + "×"
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s |\n", r.Name, fmtNum(r.Value), r.Unit, r.Peer, peerV, ratio, r.aim)
	}
	fmt.Fprintf(&b, "\n## Method\n\n%s\n\n", method(l))
	if lat != nil {
		fmt.Fprintf(&b, "%s\n\n", latencyMethod(*lat))
	}
	if len(fleets) > 0 {
		fmt.Fprintf(&b, "%s\n\n", agentsMethod(fleets))
	}
	// Each figure's notes (its spread, what it counts, the peer's
	// version) stay in report.json: this page is the latest run's tables.
	fmt.Fprintf(&b, "Each figure's notes (how it was taken, its spread, its samples) are in report.json, under the same name.\n")
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "\n## Not measured\n\n")
		for _, s := range skipped {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	return b.String()
}

func method(l live) string {
	return fmt.Sprintf("A coordinator and one enrolled agent run on loopback with the coordinator's default settings (fast tier every %d s, medium every %d s, slow every %d s), "+
		"next to /usr/bin/prometheus-node-exporter with its default collectors on a loopback port, scraped every %d s. "+
		"The %d s window opens at least the warm-up after the agent connected, half a fast interval after one of the agent's medium ticks, "+
		"so it holds exactly %d fast and %d medium ticks (and %d slow, %d updates) and %d scrapes; scrapes are placed 1.5 s away from the agent's ticks. "+
		"Memory is the median of once-a-second readings of /proc/PID/status and smaps_rollup; CPU is the sum over all threads of /proc/PID/task/TID/schedstat (ns), "+
		"checked against utime+stime, divided by the samples each process took in the window, and given per %d s round for the spread. "+
		"Both processes run as the same user on the same machine at the same time; "+
		"the machine's CPUs were %.1f%% busy over the window, all processes counted (%s), and other work on it adds noise to both. "+
		"Not collectable on this machine: the agent's gaps %s; the exporter's failing collectors %s.",
		l.Intervals.Fast, l.Intervals.Medium, l.Intervals.Slow, l.Intervals.Fast,
		l.Seconds, l.FastTicks, l.MediumTicks, l.SlowTicks, l.UpdatesTicks, l.Scrapes, l.Intervals.Medium,
		l.MachineBusy, l.MachineNote, listOrNone(l.AgentGaps), listOrNone(l.ExporterFailed))
}

func listOrNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ", ")
}

func commitNote(c string) string {
	if c == "" {
		return ""
	}
	return ", commit " + c
}

// machine describes this machine in one phrase.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = ", Linux " + strings.TrimSpace(string(b))
	}
	osName := ""
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
				osName = ", " + strings.Trim(v, `"`)
			}
		}
	}
	memNote := ""
	if kv, err := readKV("/proc/meminfo"); err == nil {
		memNote = fmt.Sprintf(", %.0f GiB", float64(kv["MemTotal:"])/(1<<20))
	}
	return fmt.Sprintf("%d × %s%s%s%s", runtime.NumCPU(), model, memNote, kernel, osName)
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ", ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
