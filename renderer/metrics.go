package renderer

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"slidecells/renderer/egress"
	"slidecells/renderer/supervisor"
	rc "slidecells/shared/rendercontract"
)

// metrics are the renderer's Prometheus series. Labels are bounded: outcomes
// and stages are fixed enumerations, error codes come from the contract's
// table; no attempt, workspace or trace ID ever becomes a label.
type metrics struct {
	reg       *prometheus.Registry
	attempts  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	stages    *prometheus.HistogramVec
	probes    *prometheus.CounterVec
	ready     prometheus.Gauge
	limitHits *prometheus.CounterVec
	// The standby: ready (1 while a checked standby waits for an
	// attempt), its age (read at scrape time through standbyAge),
	// replacements by reason, and attempts by how they found their
	// browser (warm: a ready standby; cold: it started after admission).
	standbyReady        prometheus.Gauge
	standbyAge          func() float64
	standbyReplacements *prometheus.CounterVec
	attemptStarts       *prometheus.CounterVec
}

// Standby replacement reasons (the label values of
// renderer_standby_replacements_total).
const (
	replacedStartFailed = "start_failed" // did not start or failed its first check
	replacedDied        = "died"         // browser or child exited while waiting
	replacedCheckFailed = "check_failed" // browser stopped answering its check
	replacedMaxAge      = "max_age"      // recycled at RENDER_STANDBY_MAX_AGE_SECONDS
)

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderer_attempts_total",
			Help: "Attempts by terminal outcome (succeeded, failed, cancelled, expired, rejected).",
		}, []string{"outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderer_attempt_errors_total",
			Help: "Terminal attempt errors by contract error code.",
		}, []string{"code"}),
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "renderer_stage_duration_seconds",
			Help:    "Duration of attempt stages: isolation (namespaces, cgroup, egress), launch, readiness, work, cleanup, total.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"stage"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderer_launch_probes_total",
			Help: "Launch probes by result (ok, failed).",
		}, []string{"result"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "renderer_launch_probe_ok",
			Help: "1 while the last launch probe succeeded.",
		}),
		limitHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renderer_attempt_limit_hits_total",
			Help: "Attempts (and launch probes) that met a limit: memory (the kernel OOM-killed in the attempt's cgroup), egress_bytes, egress_connections.",
		}, []string{"limit"}),
	}
	m.standbyReady = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "renderer_standby_ready",
		Help: "1 while a prepared standby (the next attempt's isolated environment and browser) has passed its check and waits for an attempt.",
	})
	m.standbyReplacements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderer_standby_replacements_total",
		Help: "Standbys discarded and replaced before any attempt took them, by reason (start_failed, died, check_failed, max_age).",
	}, []string{"reason"})
	m.attemptStarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "renderer_attempt_starts_total",
		Help: "Attempts by how they found their browser: warm (a ready standby), cold (started or still starting after admission).",
	}, []string{"start"})
	standbyAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "renderer_standby_age_seconds",
		Help: "Age of the standby waiting for an attempt (0 when there is none).",
	}, func() float64 {
		if m.standbyAge == nil {
			return 0
		}
		return m.standbyAge()
	})
	m.reg.MustRegister(m.standbyReady, m.standbyReplacements, m.attemptStarts, standbyAge)
	m.reg.MustRegister(m.attempts, m.errors, m.stages, m.probes, m.ready, m.limitHits,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) outcome(o rc.Outcome) { m.attempts.WithLabelValues(string(o)).Inc() }

func (m *metrics) failed(e *rc.Error) {
	if e != nil && e.Code.Known() {
		m.errors.WithLabelValues(string(e.Code)).Inc()
	}
}

func (m *metrics) stage(name string, d time.Duration) {
	if d > 0 {
		m.stages.WithLabelValues(name).Observe(d.Seconds())
	}
}

// between observes the time between two receipt stamps, when both exist.
func (m *metrics) between(name string, from, to *time.Time) {
	if from != nil && to != nil {
		m.stage(name, to.Sub(*from))
	}
}

// isolation observes what setting up the attempt's boundary cost.
func (m *metrics) isolation(t supervisor.IsolationTimes) {
	m.stage("isolation_cgroup", t.Cgroup)
	m.stage("isolation_namespaces", t.Namespaces)
	m.stage("isolation_idmap", t.IDMap)
	m.stage("isolation_cgroup_join", t.Join)
	m.stage("isolation_egress", t.Egress)
}

// limits counts the limits an attempt met.
func (m *metrics) limits(out supervisor.Outcome, proxy *egress.Proxy) {
	if out.OOMKills > 0 {
		m.limitHits.WithLabelValues("memory").Inc()
	}
	if proxy != nil {
		if l := proxy.LimitHit(); l != "" {
			m.limitHits.WithLabelValues("egress_" + l).Inc()
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// MetricsHandler serves GET /metrics alone, without the service credential: the handler of the
// monitoring listener (RENDER_METRICS_ADDR). Metrics carry no secret and no attempt, workspace
// or trace ID (see metrics); nothing else of the control API is reachable through it.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this listener serves GET /metrics only", http.StatusNotFound)
	})
	return mux
}
