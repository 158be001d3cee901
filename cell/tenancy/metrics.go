package tenancy

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/shared/scrape"
)

var workspaces = prometheus.NewDesc("cell_workspaces",
	"Workspaces of this cell's tenancy table by state: active (served here), fenced (a move out of this cell is between its fence and its flip), moved (gone, kept until the move's clean step).",
	[]string{"state"}, nil)

// States are the tenancy states cell_workspaces always reports (0 when none).
var States = []string{"active", "fenced", "moved"}

// Collector reports the cell's workspaces by tenancy state at each scrape.
func (g *Guard) Collector() prometheus.Collector {
	return scrape.Collector(func(ctx context.Context) ([]scrape.Sample, error) {
		rows, err := g.DB.Q(ctx).Query(ctx, `SELECT state, count(*) FROM tenancy GROUP BY state`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		n := map[string]float64{}
		for rows.Next() {
			var st string
			var c int64
			if err := rows.Scan(&st, &c); err != nil {
				return nil, err
			}
			n[st] = float64(c)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		out := make([]scrape.Sample, 0, len(States))
		for _, st := range States {
			out = append(out, scrape.Gauge(workspaces, n[st], st))
		}
		return out, nil
	}, workspaces)
}
