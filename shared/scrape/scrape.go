// Package scrape makes Prometheus collectors whose values are read when Prometheus scrapes:
// values that live elsewhere (counts in the database, a connection pool's statistics, the
// state of breakers and probes) and are cheaper to ask for at a scrape than to keep up to date
// at every change. It is the one Collect implementation of the cell's job queue and render
// coordinator, the database pool and the router's cells.
//
// It holds no metric of its own: each user declares its descriptions and reads its values.
package scrape

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Timeout bounds one read, so that a slow database cannot hold a scrape.
const Timeout = 2 * time.Second

// Sample is one value of a scrape: a series of Desc with its label values, in Desc's order.
type Sample struct {
	Desc   *prometheus.Desc
	Type   prometheus.ValueType
	Value  float64
	Labels []string
}

// Gauge is a gauge sample.
func Gauge(d *prometheus.Desc, v float64, labels ...string) Sample {
	return Sample{Desc: d, Type: prometheus.GaugeValue, Value: v, Labels: labels}
}

// Counter is a counter sample: a total another component keeps (a pool's wait count).
func Counter(d *prometheus.Desc, v float64, labels ...string) Sample {
	return Sample{Desc: d, Type: prometheus.CounterValue, Value: v, Labels: labels}
}

// Collector returns a collector of descs whose samples read returns at each scrape, with a
// context bounded by Timeout. When read fails, the scrape has none of these series: a missing
// series says "unknown", where a zero would be a wrong answer. A sample that does not fit its
// description (wrong label count) fails the scrape's gathering with an error, never a panic.
func Collector(read func(context.Context) ([]Sample, error), descs ...*prometheus.Desc) prometheus.Collector {
	return collector{read: read, descs: descs}
}

type collector struct {
	read  func(context.Context) ([]Sample, error)
	descs []*prometheus.Desc
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	samples, err := c.read(ctx)
	if err != nil {
		return
	}
	for _, s := range samples {
		m, err := prometheus.NewConstMetric(s.Desc, s.Type, s.Value, s.Labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(s.Desc, err)
		}
		ch <- m
	}
}
