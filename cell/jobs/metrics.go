package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	queueDepth  = prometheus.NewDesc("cell_jobs_queue", "Mutation jobs by state: pending (runnable) and running.", []string{"state"}, nil)
	queueOldest = prometheus.NewDesc("cell_jobs_oldest_pending_seconds", "Age of the oldest runnable pending job.", nil, nil)
)

// Collector reports the queue's depth to Prometheus at each scrape.
func (q *Queue) Collector() prometheus.Collector { return queueCollector{q} }

type queueCollector struct{ q *Queue }

func (queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepth
	ch <- queueOldest
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.q.Stats(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(queueDepth, prometheus.GaugeValue, float64(st.Pending), "pending")
	ch <- prometheus.MustNewConstMetric(queueDepth, prometheus.GaugeValue, float64(st.Running), "running")
	ch <- prometheus.MustNewConstMetric(queueOldest, prometheus.GaugeValue, st.OldestPending.Seconds())
}
