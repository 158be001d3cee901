package db

import "github.com/prometheus/client_golang/prometheus"

// Collector reports the pool's connections to Prometheus, as <prefix>_db_pool_….
func (d *DB) Collector(prefix string) prometheus.Collector {
	return poolCollector{d: d,
		total:    prometheus.NewDesc(prefix+"_db_pool_connections", "Connections of the database pool, by state.", []string{"state"}, nil),
		max:      prometheus.NewDesc(prefix+"_db_pool_max_connections", "Size limit of the database pool.", nil, nil),
		waits:    prometheus.NewDesc(prefix+"_db_pool_acquire_waits_total", "Acquisitions that had to wait for a connection.", nil, nil),
		waitTime: prometheus.NewDesc(prefix+"_db_pool_acquire_wait_seconds_total", "Time spent waiting for a connection.", nil, nil),
	}
}

type poolCollector struct {
	d                           *DB
	total, max, waits, waitTime *prometheus.Desc
}

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.max
	ch <- c.waits
	ch <- c.waitTime
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waitTime, prometheus.CounterValue, s.AcquireDuration().Seconds())
}
