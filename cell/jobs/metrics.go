package jobs

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/shared/scrape"
)

var (
	queueDepth  = prometheus.NewDesc("cell_jobs_queue", "Mutation jobs by state: pending (runnable) and running.", []string{"state"}, nil)
	queueOldest = prometheus.NewDesc("cell_jobs_oldest_pending_seconds", "Age of the oldest runnable pending job.", nil, nil)
)

// Collector reports the queue's depth to Prometheus at each scrape.
func (q *Queue) Collector() prometheus.Collector {
	return scrape.Collector(func(ctx context.Context) ([]scrape.Sample, error) {
		st, err := q.Stats(ctx)
		return []scrape.Sample{
			scrape.Gauge(queueDepth, float64(st.Pending), "pending"),
			scrape.Gauge(queueDepth, float64(st.Running), "running"),
			scrape.Gauge(queueOldest, st.OldestPending.Seconds()),
		}, err
	}, queueDepth, queueOldest)
}
