// Package telemetry is the coordinator's own metrics, in Prometheus'
// conventions (base units, _total counters, histograms for latencies),
// served at /metrics; and the fleet as metrics, served at /metrics/fleet
// (fleet.go).
//
// Every method of *Metrics may be called on nil, so that a package tested
// without metrics needs no registry.
package telemetry

import (
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

const namespace = "gridcity"

// Buckets of the latency histograms, in seconds. Tool calls reach 25 s
// (run_command waits that long for a person); a store operation is
// milliseconds, seconds when the database struggles.
var (
	toolBuckets     = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25, 60}
	storeBuckets    = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5}
	decisionBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 60, 120, 180, 300, 600}
)

// Metrics holds the coordinator's metrics and the registry that serves them.
type Metrics struct {
	reg *prometheus.Registry

	agentMessages   *prometheus.CounterVec
	agentRefused    *prometheus.CounterVec
	enrollRefused   *prometheus.CounterVec
	streamRefused   *prometheus.CounterVec
	toolCalls       *prometheus.CounterVec
	toolSeconds     *prometheus.HistogramVec
	requests        *prometheus.CounterVec
	decisionSeconds *prometheus.HistogramVec
	probeChecks     *prometheus.CounterVec
	storeSeconds    *prometheus.HistogramVec
	storeErrors     *prometheus.CounterVec
	notifySent      *prometheus.CounterVec
	notifyDropped   *prometheus.CounterVec
	notifyQuieted   *prometheus.CounterVec
	forgedApprovals *prometheus.CounterVec

	// names are the series names registered here, for Names.
	names []string
}

// New returns the coordinator's metrics, with the Go runtime's and the
// process's collectors, and build_info for version.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
		reg.MustRegister(c)
		m.names = append(m.names, namespace+"_"+name)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
		reg.MustRegister(h)
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m.names = append(m.names, namespace+"_"+name+suffix)
		}
		return h
	}
	m.agentMessages = counter("agent_messages_received_total", "Messages received from agents on their streams, by kind.", "kind")
	m.agentRefused = counter("agent_messages_refused_total", "Agent messages refused as invalid (the stream is ended), by kind.", "kind")
	m.enrollRefused = counter("enrollment_refusals_total", "Enrollments refused, by reason.", "reason")
	m.streamRefused = counter("agent_stream_refusals_total", "Agent streams refused before they opened, by reason.", "reason")
	m.toolCalls = counter("mcp_tool_calls_total", "MCP tool calls answered, by tool and outcome (ok, error: a tool error the model sees, refused: a protocol error).", "tool", "outcome")
	m.toolSeconds = histogram("mcp_tool_call_duration_seconds", "Time to answer an MCP tool call, by tool.", toolBuckets, "tool")
	m.requests = counter("command_requests_total", "Command requests (run_command) that reached each status on this coordinator: pending when asked, then approved or denied, then completed, failed, timed_out or unknown.", "status")
	m.decisionSeconds = histogram("approval_decision_duration_seconds", "Time from a command request to its decision: approved, denied by a person, or expired with no answer.", decisionBuckets, "decision")
	m.probeChecks = counter("probe_checks_total", "Checks of the configured resources, by resource, result (ok, failed) and vantage (coordinator, agent).", "resource", "result", "vantage")
	m.storeSeconds = histogram("store_operation_duration_seconds", "Time of store operations, by operation.", storeBuckets, "operation")
	m.storeErrors = counter("store_operation_errors_total", "Store operations that returned an error, by operation (a row not found counts too).", "operation")
	m.notifySent = counter("notifications_sent_total", "Notifications delivered, by notifier and event (a grouped message counts once).", "notifier", "event")
	m.notifyDropped = counter("notifications_dropped_total", "Notifications given up, by notifier and reason (expired: not delivered within the notifier's dropAfter; refused: the receiver refused it; queue_full: the oldest waiting was dropped for a new one).", "notifier", "reason")
	m.notifyQuieted = counter("notifications_suppressed_total", "Events not sent on purpose, by notifier and reason (min_interval: the same target was told of lately; incident: an incident message already named the server).", "notifier", "reason")
	m.forgedApprovals = counter("forged_approvals_total", "Approved commands read from the store that were refused before dispatch, nothing sent, by reason (unauthenticated: the approval's or hand-off's authenticator did not verify; replayed: a hand-off already taken, written back): someone who can write the store tried to run a command.", "reason")
	info := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info", Help: "Always 1; the coordinator's version is a label.", ConstLabels: prometheus.Labels{"version": version}})
	info.Set(1)
	m.names = append(m.names, namespace+"_build_info")
	reg.MustRegister(info,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the metrics are registered, for tests and for
// collectors of the coordinator's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Gauge registers a gauge read from f at each scrape.
func (m *Metrics) Gauge(name, help string, f func() float64) {
	m.names = append(m.names, namespace+"_"+name)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, f))
}

// GaugeIfKnown registers a gauge read from f at each scrape, left out of
// the scrape when f cannot tell (ok false): unknown is not 0.
func (m *Metrics) GaugeIfKnown(name, help string, f func() (v float64, ok bool)) {
	m.names = append(m.names, namespace+"_"+name)
	m.reg.MustRegister(&optional{desc: prometheus.NewDesc(namespace+"_"+name, help, nil, nil), f: f})
}

type optional struct {
	desc *prometheus.Desc
	f    func() (float64, bool)
}

func (o *optional) Describe(ch chan<- *prometheus.Desc) { ch <- o.desc }

func (o *optional) Collect(ch chan<- prometheus.Metric) {
	if v, ok := o.f(); ok {
		ch <- prometheus.MustNewConstMetric(o.desc, prometheus.GaugeValue, v)
	}
}

// GaugeByLabel registers a gauge with one label, each value read from f
// at each scrape.
func (m *Metrics) GaugeByLabel(name, help, label string, f func() map[string]float64) {
	m.names = append(m.names, namespace+"_"+name)
	m.reg.MustRegister(&labelled{desc: prometheus.NewDesc(namespace+"_"+name, help, []string{label}, nil), f: f})
}

type labelled struct {
	desc *prometheus.Desc
	f    func() map[string]float64
}

func (l *labelled) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

func (l *labelled) Collect(ch chan<- prometheus.Metric) {
	for v, n := range l.f() {
		ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, n, v)
	}
}

// Names lists the names of every series /metrics may hold: the
// coordinator's own (a histogram's _bucket, _sum and _count) and those of
// the Go runtime and the process, as this platform has them.
func (m *Metrics) Names() []string {
	names := slices.Clone(m.names)
	runtime := prometheus.NewRegistry()
	runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fams, _ := runtime.Gather()
	for _, f := range fams {
		names = append(names, f.GetName())
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			names = append(names, f.GetName()+"_sum", f.GetName()+"_count", f.GetName()+"_bucket")
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Handler serves the metrics in the text or OpenMetrics format, as the
// scraper asks.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// AgentMessage counts a message received on an agent's stream.
func (m *Metrics) AgentMessage(kind string) {
	if m != nil {
		m.agentMessages.WithLabelValues(kind).Inc()
	}
}

// AgentRefused counts an agent message refused as invalid.
func (m *Metrics) AgentRefused(kind string) {
	if m != nil {
		m.agentRefused.WithLabelValues(kind).Inc()
	}
}

// EnrollmentRefused counts a refused enrollment.
func (m *Metrics) EnrollmentRefused(reason string) {
	if m != nil {
		m.enrollRefused.WithLabelValues(reason).Inc()
	}
}

// StreamRefused counts an agent stream refused before it opened.
func (m *Metrics) StreamRefused(reason string) {
	if m != nil {
		m.streamRefused.WithLabelValues(reason).Inc()
	}
}

// ToolCall counts an answered tool call and its time.
func (m *Metrics) ToolCall(tool, outcome string, took time.Duration) {
	if m != nil {
		m.toolCalls.WithLabelValues(tool, outcome).Inc()
		m.toolSeconds.WithLabelValues(tool).Observe(took.Seconds())
	}
}

// Request counts a command request reaching status.
func (m *Metrics) Request(status string) {
	if m != nil {
		m.requests.WithLabelValues(status).Inc()
	}
}

// Decision records how long a request waited for its decision.
func (m *Metrics) Decision(decision string, waited time.Duration) {
	if m != nil {
		m.decisionSeconds.WithLabelValues(decision).Observe(max(waited, 0).Seconds())
	}
}

// ProbeCheck counts a check of a resource.
func (m *Metrics) ProbeCheck(resource string, ok bool, vantage string) {
	if m != nil {
		result := "failed"
		if ok {
			result = "ok"
		}
		m.probeChecks.WithLabelValues(resource, result, vantage).Inc()
	}
}

// StoreOperation records a store operation's time and error. A row not
// found is an answer rather than a failure, but it is counted too: a
// caller often asking for what is not there is worth seeing.
func (m *Metrics) StoreOperation(op string, took time.Duration, err error) {
	if m != nil {
		m.storeSeconds.WithLabelValues(op).Observe(took.Seconds())
		if err != nil {
			m.storeErrors.WithLabelValues(op).Inc()
		}
	}
}

// NotificationSent counts a message a notifier delivered.
func (m *Metrics) NotificationSent(notifier, event string) {
	if m != nil {
		m.notifySent.WithLabelValues(notifier, event).Inc()
	}
}

// NotificationDropped counts a message a notifier gave up on.
func (m *Metrics) NotificationDropped(notifier, reason string) {
	if m != nil {
		m.notifyDropped.WithLabelValues(notifier, reason).Inc()
	}
}

// NotificationSuppressed counts an event a notifier kept quiet about.
func (m *Metrics) NotificationSuppressed(notifier, reason string) {
	if m != nil {
		m.notifyQuieted.WithLabelValues(notifier, reason).Inc()
	}
}

// ForgedApproval counts an approved command read from the store and
// refused before dispatch.
func (m *Metrics) ForgedApproval(reason string) {
	if m != nil {
		m.forgedApprovals.WithLabelValues(reason).Inc()
	}
}
