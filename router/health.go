package router

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OpsHandler serves the operator endpoints:
//
//   - /livez: 200 while the process runs; nothing else is checked, so a restart is never
//     triggered by a dependency's outage.
//   - /readyz: 200 when the router can route: it can reach the directory (the last cell list
//     read succeeded) OR it has cached placements to serve from, AND at least one cell takes
//     traffic (active or draining, passing its probes, breaker not open), AND it got some cell's
//     probe answered in time in the last ProbeFailures rounds. Otherwise 503. The body has the
//     parts of that decision, as counts, never cell URLs or workspace IDs.
//   - /metrics: Prometheus.
func (rt *Router) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", rt.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(rt.m.reg, promhttp.HandlerOpts{}))
	return mux
}

// Readiness is the body of /readyz.
type Readiness struct {
	Ready            bool `json:"ready"`
	DirectoryOK      bool `json:"directory_ok"`
	CachedPlacements int  `json:"cached_placements"`
	Cells            int  `json:"cells"`
	CellsServing     int  `json:"cells_serving"`
	// ProbeRoundsUnanswered is the number of rounds of health probes in a row in which no cell
	// answered in time (ProbeCells); at ProbeFailures the router is not ready.
	ProbeRoundsUnanswered int `json:"probe_rounds_unanswered"`
}

// Readiness evaluates what /readyz answers.
func (rt *Router) Readiness() Readiness {
	r := Readiness{DirectoryOK: rt.cellsOK.Load(), CachedPlacements: rt.cache.Len(),
		ProbeRoundsUnanswered: int(rt.unanswered.Load())}
	for _, c := range rt.cells.Load().sorted {
		r.Cells++
		if c.serving() {
			r.CellsServing++
		}
	}
	r.Ready = (r.DirectoryOK || r.CachedPlacements > 0) && r.CellsServing > 0 &&
		r.ProbeRoundsUnanswered < rt.cfg.ProbeFailures
	return r
}

func (rt *Router) readyz(w http.ResponseWriter, _ *http.Request) {
	r := rt.Readiness()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !r.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(r)
}
