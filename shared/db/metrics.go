package db

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/shared/scrape"
)

// Collector reports the pool's connections to Prometheus, as <prefix>_db_pool_….
func (d *DB) Collector(prefix string) prometheus.Collector {
	total := prometheus.NewDesc(prefix+"_db_pool_connections", "Connections of the database pool, by state.", []string{"state"}, nil)
	maxConns := prometheus.NewDesc(prefix+"_db_pool_max_connections", "Size limit of the database pool.", nil, nil)
	waits := prometheus.NewDesc(prefix+"_db_pool_acquire_waits_total", "Acquisitions that had to wait for a connection.", nil, nil)
	waitTime := prometheus.NewDesc(prefix+"_db_pool_acquire_wait_seconds_total", "Time spent waiting for a connection.", nil, nil)
	return scrape.Collector(func(context.Context) ([]scrape.Sample, error) {
		s := d.Pool.Stat()
		return []scrape.Sample{
			scrape.Gauge(total, float64(s.AcquiredConns()), "acquired"),
			scrape.Gauge(total, float64(s.IdleConns()), "idle"),
			scrape.Gauge(total, float64(s.ConstructingConns()), "constructing"),
			scrape.Gauge(maxConns, float64(s.MaxConns())),
			scrape.Counter(waits, float64(s.EmptyAcquireCount())),
			scrape.Counter(waitTime, s.AcquireDuration().Seconds()),
		}, nil
	}, total, maxConns, waits, waitTime)
}
