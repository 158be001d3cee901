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
)

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
		return []scrape.Sample{
			scrape.Gauge(renderQueue, float64(h.Queued), "waiting"),
			scrape.Gauge(renderQueue, float64(h.Executing), "executing"),
			scrape.Gauge(renderWorkers, float64(h.Ready)),
		}, nil
	}, renderQueue, renderWorkers)
	return []prometheus.Collector{m.events, m.latency, gauges}
}
