package api

import (
	"slidecells/cell/idempotency"
	"slidecells/cell/jobs"
	"slidecells/cell/render"
	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/directory"
	"slidecells/shared/scrape"
)

// MetricNames lists every metric family a cell's /metrics can export (with its database, job
// queue and render coordinator, as cmd/cell runs it), those without a series yet included.
// deploy/monitoring checks its dashboards and alert rules against it;
// TestMetricNamesMatchTheRegistry keeps it equal to what New registers.
func MetricNames() []string {
	reg := newMetrics(nil).reg
	reg.MustRegister((&db.DB{}).Collector("cell"), (&jobs.Queue{}).Collector(), (&idempotency.Store{}).Collector(), (&tenancy.Guard{}).Collector(),
		(&directory.Directory{}).MovesCollector(""))
	reg.MustRegister((&render.Coordinator{}).Collectors()...)
	reg.MustRegister(render.NewRetention(render.RetentionConfig{}, nil, nil, nil).Collectors()...)
	return scrape.Names(reg)
}
