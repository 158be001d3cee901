package renderer

import "slidecells/shared/scrape"

// MetricNames lists every metric family the renderer's /metrics can export, those without a
// series yet included. deploy/monitoring checks its dashboards and alert rules against it.
func MetricNames() []string { return scrape.Names(newMetrics().reg) }
