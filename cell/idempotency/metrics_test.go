package idempotency

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func purgeLagValue(t *testing.T, s *Store) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "cell_idempotency_purge_lag_seconds" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no cell_idempotency_purge_lag_seconds in %v", mfs)
	return 0
}

// The retention backlog: 0 while nothing is expired, then how long the oldest expired record
// has waited, and 0 again once the purger deleted it.
func TestPurgeLag(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	if _, _, err := f.s.Run(ctx, key("k1"), fpA, f.create("one")); err != nil {
		t.Fatal(err)
	}
	if lag := purgeLagValue(t, f.s); lag != 0 {
		t.Fatalf("lag %v before expiry, want 0", lag)
	}
	f.advance(24*time.Hour + 90*time.Minute)
	if lag := purgeLagValue(t, f.s); lag != (90 * time.Minute).Seconds() {
		t.Fatalf("lag %v, want %v", lag, (90 * time.Minute).Seconds())
	}
	if n, err := f.s.Purge(ctx, 100); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if lag := purgeLagValue(t, f.s); lag != 0 {
		t.Fatalf("lag %v after the purge, want 0", lag)
	}
}
