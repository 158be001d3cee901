package idempotency

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/shared/scrape"
)

var purgeLag = prometheus.NewDesc("cell_idempotency_purge_lag_seconds",
	"How long the oldest expired Idempotency-Key record has waited for the purger (0 when none is expired): the retention backlog.", nil, nil)

// Collector reports the retention backlog to Prometheus at each scrape (one index read of
// idempotency_keys_expiry_idx).
func (s *Store) Collector() prometheus.Collector {
	return scrape.Collector(func(ctx context.Context) ([]scrape.Sample, error) {
		now := s.now()
		var oldest *time.Time
		if err := s.DB.Q(ctx).QueryRow(ctx, `SELECT min(expires_at) FROM idempotency_keys WHERE expires_at < $1`, now).Scan(&oldest); err != nil {
			return nil, err
		}
		lag := 0.0
		if oldest != nil {
			lag = now.Sub(*oldest).Seconds()
		}
		return []scrape.Sample{scrape.Gauge(purgeLag, lag)}, nil
	}, purgeLag)
}
