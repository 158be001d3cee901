package api

import (
	"context"
	"slices"
	"testing"

	"go.uber.org/zap"

	"slidecells/cell/render"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/scrape"
)

// MetricNames is what a cell with a database registers, plus the render coordinator's
// families (a cell without renderers configured has none): a collector added to New and not to
// MetricNames (or the other way) fails here, so deploy/monitoring's check reads the truth.
func TestMetricNamesMatchTheRegistry(t *testing.T) {
	dir, err := directory.Connect(context.Background(), dbtest.NewDatabase(t, migrations.FS, migrations.Directory))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dir.Close)
	s := New(Config{CellID: "cell-a", DB: dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell)), Log: zap.NewNop(),
		Dir: directory.NewCached(dir, directory.CacheOptions{})})
	got := scrape.Names(s.metrics.reg)
	want := MetricNames()
	var renderNames []string
	// The coordinator's and the render retention's are registered by the binary (Renderer,
	// Collectors), not by this bare server.
	for _, c := range append((&render.Coordinator{}).Collectors(), render.NewRetention(render.RetentionConfig{}, nil, nil, nil).Collectors()...) {
		renderNames = append(renderNames, scrape.Names(c)...)
	}
	for _, n := range got {
		if !slices.Contains(want, n) {
			t.Errorf("the cell registers %s, which MetricNames lacks", n)
		}
	}
	for _, n := range want {
		if !slices.Contains(got, n) && !slices.Contains(renderNames, n) {
			t.Errorf("MetricNames lists %s, which the cell does not register", n)
		}
	}
	for _, n := range []string{"cell_requests_total", "cell_request_errors_total", "cell_jobs_oldest_pending_seconds",
		"cell_idempotency_purge_lag_seconds", "cell_db_pool_max_connections", "cell_moves", "cell_workspaces", "cell_render_workers_dispatchable", "go_goroutines"} {
		if !slices.Contains(want, n) {
			t.Errorf("MetricNames lacks %s", n)
		}
	}
}
