package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"slidecells/shared/db"
	"slidecells/shared/problem"
)

// metrics are the cell's Prometheus series, in a registry of their own (several cells live in
// one test process). Every label is bounded: operation IDs come from the registry, codes from
// shared/problem, outcomes from cell/idempotency; never workspace or object IDs.
type metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	errors      *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	idempotency *prometheus.CounterVec
	txRetries   *prometheus.CounterVec
	jobs        *prometheus.CounterVec
}

// unknownOperation labels requests that matched no operation.
const unknownOperation = "none"

// counter declares a counter of the cell by its labels.
func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func newMetrics(d *db.DB) *metrics {
	m := &metrics{
		reg:      prometheus.NewRegistry(),
		requests: counter("cell_requests_total", "Requests answered, by operation and HTTP status (499: the client went away first).", "operation", "status"),
		errors:   counter("cell_request_errors_total", "Error answers by operation and error code.", "operation", "code"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cell_request_duration_seconds",
			Help:    "Time to answer a request, by operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation"}),
		idempotency: counter("cell_idempotency_total",
			"Idempotency-Key requests by operation and outcome (executed, not_stored, replayed, conflict, in_flight).", "operation", "outcome"),
		txRetries: counter("cell_tx_retries_total",
			"Database transactions, and single statements outside one, run again after a serialization failure or deadlock, by operation.", "operation"),
		jobs: counter("cell_jobs_total", "Mutation-job state changes made by this replica's workers, by kind and state entered "+
			"(running, succeeded, failed, canceled, pending: an automatic retry).", "kind", "state"),
	}
	m.reg.MustRegister(m.requests, m.errors, m.duration, m.idempotency, m.txRetries, m.jobs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if d != nil {
		m.reg.MustRegister(d.Collector("cell"))
	}
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) observe(op string, status int, code problem.Code, took time.Duration) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	if code != "" {
		m.errors.WithLabelValues(op, string(code)).Inc()
	}
	m.duration.WithLabelValues(op).Observe(took.Seconds())
}

func (m *metrics) idempotencyOutcome(ctx context.Context, outcome string) {
	m.idempotency.WithLabelValues(opLabel(ctx), outcome).Inc()
}

func (m *metrics) txRetry(ctx context.Context) {
	m.txRetries.WithLabelValues(opLabel(ctx)).Inc()
}

func opLabel(ctx context.Context) string {
	if op := db.Operation(ctx); op != "" {
		return op
	}
	return unknownOperation
}

func (m *metrics) jobState(kind, state string) { m.jobs.WithLabelValues(kind, state).Inc() }

// outcome is filled in while a request runs: the error code its answer carries, if any.
type outcome struct {
	op   string // the operation, unknownOperation for a path that matched none
	code problem.Code
}

type outcomeKey struct{}

func withOutcome(ctx context.Context) (context.Context, *outcome) {
	o := &outcome{op: unknownOperation}
	return context.WithValue(ctx, outcomeKey{}, o), o
}

// nameOperation records which operation serves the request, for its metrics.
func nameOperation(ctx context.Context, op string) {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		o.op = op
	}
}

// attemptKey marks the context of one execution of an idempotent request (idempotency.Exec),
// which a serialization failure may run again.
type attemptKey struct{}

// newAttempt starts an execution of an idempotent request: what an earlier, rolled-back
// execution noted is forgotten, so a request that succeeded at its second execution is not
// counted as an error.
func newAttempt(ctx context.Context) context.Context {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok {
		o.code = ""
	}
	return context.WithValue(ctx, attemptKey{}, true)
}

// inAttempt reports whether ctx belongs to an execution that newAttempt started.
func inAttempt(ctx context.Context) bool { return ctx.Value(attemptKey{}) != nil }

// noteError records the code of an error answer for the request's metrics.
func noteError(ctx context.Context, c problem.Code) {
	if o, ok := ctx.Value(outcomeKey{}).(*outcome); ok && o.code == "" {
		o.code = c
	}
}
