package router

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sony/gobreaker/v2"

	"slidecells/router/h1"
	"slidecells/router/placement"
	"slidecells/shared/scrape"
)

// metrics are the router's Prometheus series, in a registry of its own so that several routers
// (tests) can live in one process. Labels are bounded: cell IDs, status classes and fixed
// outcome names; never workspace IDs.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	cacheVec   *prometheus.CounterVec
	cacheBy    [6]prometheus.Counter // by placement.Outcome
	misdirects *prometheus.CounterVec
	dirErrors  *prometheus.CounterVec
	shed       *prometheus.CounterVec
	wsShed     *prometheus.CounterVec
	noCell     [6]prometheus.Counter // requests answered before a cell was picked
	// probeInconclusive counts rounds of health probes whose timeouts were discounted.
	probeInconclusive prometheus.Counter
}

// cellMetrics are one cell's series, resolved once so the hot path does no label lookups.
type cellMetrics struct {
	requests [6]prometheus.Counter // by status class, see class
	latency  prometheus.Observer
	shed     prometheus.Counter
	wsShed   prometheus.Counter
}

var classes = [6]string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"}

func class(status int) int {
	if status >= 100 && status < 600 {
		return status/100 - 1
	}
	return 5
}

// noCellLabel is the cell label of requests the router answered without picking a cell.
const noCellLabel = "none"

func newMetrics(rt *Router) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_requests_total",
			Help: "Requests answered, by serving cell (none: answered by the router before picking one) and status class.",
		}, []string{"cell", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "router_proxy_duration_seconds",
			Help:    "Time from sending a request to a cell until its answer was copied to the client, per attempt.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"cell"}),
		cacheVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_placement_lookups_total",
			Help: "Placement lookups by result: hit, miss, refreshed, stale_served (directory failed, stale entry used), negative_hit.",
		}, []string{"result"}),
		misdirects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_misdirect_total",
			Help: "421 answers from cells by what the router did: retried, misdirected_twice, body_too_large, lookup_failed.",
		}, []string{"outcome"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_shed_total",
			Help: "Requests shed with 503 CELL_OVERLOADED because the cell had ROUTER_MAX_IN_FLIGHT_PER_CELL requests in flight.",
		}, []string{"cell"}),
		wsShed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_workspace_shed_total",
			Help: "Requests refused with 429 RATE_LIMITED (X-RateLimit-Scope: workspace) because their workspace had ROUTER_MAX_IN_FLIGHT_PER_WORKSPACE requests in flight to the cell.",
		}, []string{"cell"}),
		dirErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_directory_errors_total",
			Help: "Failed directory reads by kind (placement, cells).",
		}, []string{"op"}),
		probeInconclusive: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "router_probe_rounds_inconclusive_total",
			Help: "Rounds of cell health probes whose timeouts were not counted against the cells: no cell answered, or the round ran late (the router itself is the likelier cause); at most ROUTER_PROBE_FAILURES rounds in a row.",
		}),
	}
	for o := range m.cacheBy {
		m.cacheBy[o] = m.cacheVec.WithLabelValues(placement.Outcome(o).String())
	}
	for i, cl := range classes {
		m.noCell[i] = m.requests.WithLabelValues(noCellLabel, cl)
	}
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "router_placement_cache_entries",
		Help: "Placements held in the cache now (not counting cached not-found answers); at most ROUTER_PLACEMENT_CACHE_SIZE.",
	}, func() float64 { return float64(rt.cache.Len()) })
	m.reg.MustRegister(m.requests, m.latency, m.cacheVec, m.misdirects, m.dirErrors, m.shed, m.wsShed,
		entries, m.probeInconclusive, rt.cellCollector(), rt.publicCollector(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) forCell(id string) cellMetrics {
	var cm cellMetrics
	for i, cl := range classes {
		cm.requests[i] = m.requests.WithLabelValues(id, cl)
	}
	cm.latency = m.latency.WithLabelValues(id)
	cm.shed = m.shed.WithLabelValues(id)
	cm.wsShed = m.wsShed.WithLabelValues(id)
	return cm
}

// forgetCell drops the series of a cell that left the list, so they do not linger forever.
func (m *metrics) forgetCell(id string) {
	for _, cl := range classes {
		m.requests.DeleteLabelValues(id, cl)
	}
	m.latency.DeleteLabelValues(id)
	m.shed.DeleteLabelValues(id)
	m.wsShed.DeleteLabelValues(id)
}

func (m *metrics) request(c *cell, status int) {
	if c == nil {
		m.noCell[class(status)].Inc()
		return
	}
	c.m.requests[class(status)].Inc()
}

func (m *metrics) cache(o placement.Outcome, err error) {
	if int(o) < len(m.cacheBy) {
		m.cacheBy[o].Inc()
	}
	if o == placement.StaleServed || errors.Is(err, placement.ErrUnavailable) {
		m.directoryError("placement")
	}
}

func (m *metrics) misdirect(outcome string) { m.misdirects.WithLabelValues(outcome).Inc() }

func (m *metrics) directoryError(op string) { m.dirErrors.WithLabelValues(op).Inc() }

// cellCollector reports each cell's breaker state and health at scrape time, so an open breaker
// that has since become half-open shows as such.
func (rt *Router) cellCollector() prometheus.Collector {
	return scrape.Collector(func(context.Context) ([]scrape.Sample, error) {
		var out []scrape.Sample
		for _, c := range rt.cells.Load().sorted {
			var st float64
			switch c.breaker.State() {
			case gobreaker.StateHalfOpen:
				st = 1
			case gobreaker.StateOpen:
				st = 2
			}
			h := 0.0
			if c.healthy.Load() {
				h = 1
			}
			out = append(out, scrape.Gauge(breakerDesc, st, c.id), scrape.Gauge(healthyDesc, h, c.id),
				scrape.Gauge(inFlightDesc, float64(c.inFlight.Load()), c.id),
				scrape.Gauge(stateDesc, 1, c.id, string(c.State())))
		}
		return out, nil
	}, breakerDesc, healthyDesc, stateDesc, inFlightDesc)
}

// publicCollector reports the public listener's connections (ObservePublic), once there is one.
func (rt *Router) publicCollector() prometheus.Collector {
	return scrape.Collector(func(context.Context) ([]scrape.Sample, error) {
		s := rt.public.Load()
		if s == nil {
			return nil, nil
		}
		st := s.Stats()
		return []scrape.Sample{
			scrape.Gauge(connsDesc, float64(st.Open)),
			scrape.Gauge(connsMaxDesc, float64(st.MaxConns)),
			scrape.Counter(evictedDesc, float64(st.Evicted[h1.EvictStalledHead]), "stalled_head"),
			scrape.Counter(evictedDesc, float64(st.Evicted[h1.EvictIdle]), "idle"),
			scrape.Counter(waitedDesc, float64(st.Waited)),
		}, nil
	}, connsDesc, connsMaxDesc, evictedDesc, waitedDesc)
}

// ObservePublic makes /metrics report the public listener's connections (router_public_*).
func (rt *Router) ObservePublic(s *h1.Server) { rt.public.Store(s) }

var (
	connsDesc = prometheus.NewDesc("router_public_connections",
		"Public connections served now; at most router_public_connections_max.", nil, nil)
	connsMaxDesc = prometheus.NewDesc("router_public_connections_max",
		"ROUTER_MAX_CONNS: the public connections served at most.", nil, nil)
	waitedDesc = prometheus.NewDesc("router_public_connections_waited_total",
		"Public connections accepted at ROUTER_MAX_CONNS that waited for a place: every connection had a request in flight (or a head under 2 s old), none could be closed for them.", nil, nil)
	evictedDesc = prometheus.NewDesc("router_public_connections_evicted_total",
		"Public connections closed at ROUTER_MAX_CONNS to make room for a new one, by reason: stalled_head (no whole head for 2 s), idle (between keep-alive requests).", []string{"reason"}, nil)
)

var (
	breakerDesc = prometheus.NewDesc("router_cell_breaker_state",
		"Breaker state per cell: 0 closed, 1 half-open, 2 open.", []string{"cell"}, nil)
	healthyDesc = prometheus.NewDesc("router_cell_healthy",
		"1 when the cell passes its /readyz probes, else 0.", []string{"cell"}, nil)
	inFlightDesc = prometheus.NewDesc("router_cell_in_flight",
		"Requests in flight to the cell (its API and preview host) now; at most ROUTER_MAX_IN_FLIGHT_PER_CELL.", []string{"cell"}, nil)
	stateDesc = prometheus.NewDesc("router_cell_state",
		"The cell's directory state (always 1; the state is the label).", []string{"cell", "state"}, nil)
)
