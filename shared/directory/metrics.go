package directory

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/shared/scrape"
)

var (
	movesDesc = prometheus.NewDesc("cell_moves",
		"Moves out of this cell that are not over, by status: active, failed (stopped by an error; resume or abort), aborting.", []string{"status"}, nil)
	moveStepDesc = prometheus.NewDesc("cell_moves_oldest_step_seconds",
		"How long the move out of this cell that has waited longest at its step (active or aborting, the clean step's grace aside) has been there; 0 when none.", nil, nil)
)

// MoveStatuses are the statuses cell_moves always reports (0 when none).
var MoveStatuses = []string{"active", "failed", "aborting"}

// MovesCollector reports the moves whose source is cellID, read from the directory at each
// scrape (the moves alerts of deploy/monitoring). Each move is counted once in the fleet: by its
// source cell.
func (d *Directory) MovesCollector(cellID string) prometheus.Collector {
	return scrape.Collector(func(ctx context.Context) ([]scrape.Sample, error) {
		rows, err := d.DB.Pool.Query(ctx, `SELECT status, count(*), min(updated_at) FILTER (WHERE status IN ('active', 'aborting') AND step <> 'clean'), now()
			FROM moves WHERE from_cell = $1 AND status IN ('active', 'failed', 'aborting') GROUP BY status`, cellID)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		counts := map[string]float64{}
		var oldest float64
		for rows.Next() {
			var st string
			var n int64
			var since *time.Time
			var now time.Time
			if err := rows.Scan(&st, &n, &since, &now); err != nil {
				return nil, err
			}
			counts[st] = float64(n)
			if since != nil {
				oldest = max(oldest, now.Sub(*since).Seconds())
			}
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out := make([]scrape.Sample, 0, len(MoveStatuses)+1)
		for _, st := range MoveStatuses {
			out = append(out, scrape.Gauge(movesDesc, counts[st], st))
		}
		return append(out, scrape.Gauge(moveStepDesc, oldest)), nil
	}, movesDesc, moveStepDesc)
}
