package render

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rc "slidecells/shared/rendercontract"
	"slidecells/shared/scrape"
)

var (
	renderQueue   = prometheus.NewDesc("cell_render_requests", "Render requests waiting (queued or retry_wait) and executing.", []string{"state"}, nil)
	renderWorkers = prometheus.NewDesc("cell_render_workers_dispatchable", "Renderers a dispatch could use now (ready, matching profile, fresh heartbeat).", nil, nil)
	renderStates  = prometheus.NewDesc("cell_render_workers", "Registered renderer epochs (retired ones aside) by state: ready, unready, mismatch (environment digest differs), quarantined.", []string{"state"}, nil)
	renderOldest  = prometheus.NewDesc("cell_render_oldest_seconds", "Age since enqueue of the oldest render request waiting (queued or retry_wait) and executing; 0 when there is none.", []string{"state"}, nil)
	renderUnknown = prometheus.NewDesc("cell_render_attempts_unknown", "Unreleased render attempts in state unknown (their renderer could not say how they ended); each holds a slot.", nil, nil)
)

// workerStates are the render_workers states cell_render_workers always reports (0 when none).
var workerStates = []string{"ready", "unready", "mismatch", "quarantined"}

// Metrics are the coordinator's own counters: dispatches and finished requests by operation,
// and the time from enqueue to each.
type Metrics struct {
	events  *prometheus.CounterVec
	latency *prometheus.HistogramVec
	c       *Coordinator
}

// Collectors returns the coordinator's metrics (counters it keeps and gauges read at scrape)
// and wires them as its Observe hook.
func (c *Coordinator) Collectors() []prometheus.Collector {
	m := &Metrics{c: c,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cell_render_events_total",
			Help: "Render events of this replica's coordinator by operation: dispatch (an attempt reserved and sent), succeeded (a result committed)."},
			[]string{"operation", "event"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cell_render_seconds",
			Help:    "Time from a request's enqueue to its dispatch or its committed result, by operation and event.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}},
			[]string{"operation", "event"}),
	}
	c.Observe = func(event string, op rc.Operation, d time.Duration) {
		m.events.WithLabelValues(string(op), event).Inc()
		m.latency.WithLabelValues(string(op), event).Observe(d.Seconds())
	}
	gauges := scrape.Collector(func(ctx context.Context) ([]scrape.Sample, error) {
		h := c.Health(ctx)
		out := []scrape.Sample{
			scrape.Gauge(renderQueue, float64(h.Queued), "waiting"),
			scrape.Gauge(renderQueue, float64(h.Executing), "executing"),
			scrape.Gauge(renderWorkers, float64(h.Ready)),
		}
		if more, err := c.alertGauges(ctx); err == nil { // on a failed read these series are missing: unknown, not 0
			out = append(out, more...)
		}
		return out, nil
	}, renderQueue, renderWorkers, renderStates, renderOldest, renderUnknown)
	return []prometheus.Collector{m.events, m.latency, gauges}
}

// alertGauges reads what the render alerts watch (deploy/monitoring): renderers by state, the
// oldest waiting and executing requests, and attempts in state unknown.
func (c *Coordinator) alertGauges(ctx context.Context) ([]scrape.Sample, error) {
	counts := map[string]float64{}
	rows, err := c.db.Q(ctx).Query(ctx, `SELECT state, count(*) FROM render_workers WHERE state <> 'retired' GROUP BY state`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, err
		}
		counts[st] = float64(n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []scrape.Sample
	for _, st := range workerStates {
		out = append(out, scrape.Gauge(renderStates, counts[st], st))
	}
	now := c.now().UTC()
	var waiting, executing *time.Time
	var unknown int64
	if err := c.db.Q(ctx).QueryRow(ctx, `SELECT min(enqueued_at) FILTER (WHERE state IN ('queued', 'retry_wait')),
		min(enqueued_at) FILTER (WHERE state = 'executing')
		FROM render_requests WHERE state IN ('queued', 'retry_wait', 'executing')`).Scan(&waiting, &executing); err != nil {
		return nil, err
	}
	if err := c.db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE released = false AND state = 'unknown'`).Scan(&unknown); err != nil {
		return nil, err
	}
	age := func(t *time.Time) float64 {
		if t == nil {
			return 0
		}
		return max(0, now.Sub(*t).Seconds())
	}
	return append(out, scrape.Gauge(renderOldest, age(waiting), "waiting"), scrape.Gauge(renderOldest, age(executing), "executing"),
		scrape.Gauge(renderUnknown, float64(unknown))), nil
}
