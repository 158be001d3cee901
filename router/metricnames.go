package router

import "slidecells/shared/scrape"

// MetricNames lists every metric family the router's /metrics can export, those without a
// series yet included: the registry newMetrics builds, described without a running router.
// deploy/monitoring checks its dashboards and alert rules against it.
func MetricNames() []string { return scrape.Names(newMetrics(&Router{}).reg) }
