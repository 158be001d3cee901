package directory

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
)

// Limits are a workspace's overrides of its cell's noisy-neighbour limits; a nil field keeps the
// cell's default.
type Limits struct {
	WorkspaceID       string
	RequestsPerSecond *float64 // token-bucket rate of the workspace's requests
	Burst             *int64   // token-bucket depth
	JobConcurrency    *int64   // mutation jobs of the workspace running at once
}

// SetLimits stores a workspace's overrides (replacing earlier ones).
func (d *Directory) SetLimits(ctx context.Context, l Limits) error {
	if (l.RequestsPerSecond != nil && *l.RequestsPerSecond <= 0) || (l.Burst != nil && *l.Burst < 1) || (l.JobConcurrency != nil && *l.JobConcurrency < 1) {
		return invalid("a rate must be above 0, a burst and a job concurrency 1 or more")
	}
	_, err := d.DB.Exec(ctx, `
		INSERT INTO workspace_limits (workspace_id, requests_per_second, burst, job_concurrency) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workspace_id) DO UPDATE SET requests_per_second = excluded.requests_per_second,
			burst = excluded.burst, job_concurrency = excluded.job_concurrency, updated_at = now()`,
		l.WorkspaceID, l.RequestsPerSecond, l.Burst, l.JobConcurrency)
	if db.IsForeignKeyViolation(err) {
		return ErrNotFound
	}
	return err
}

// ClearLimits removes a workspace's overrides.
func (d *Directory) ClearLimits(ctx context.Context, workspaceID string) error {
	_, err := d.DB.Exec(ctx, `DELETE FROM workspace_limits WHERE workspace_id = $1`, workspaceID)
	return err
}

// WorkspaceLimits returns a workspace's overrides; ErrNotFound when it has none.
func (d *Directory) WorkspaceLimits(ctx context.Context, workspaceID string) (Limits, error) {
	l := Limits{WorkspaceID: workspaceID}
	err := d.DB.Pool.QueryRow(ctx, `SELECT requests_per_second, burst, job_concurrency FROM workspace_limits WHERE workspace_id = $1`, workspaceID).
		Scan(&l.RequestsPerSecond, &l.Burst, &l.JobConcurrency)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, ErrNotFound
	}
	return l, err
}

// AllLimits lists every workspace's overrides.
func (d *Directory) AllLimits(ctx context.Context) ([]Limits, error) {
	rows, err := d.DB.Pool.Query(ctx, `SELECT workspace_id, requests_per_second, burst, job_concurrency FROM workspace_limits ORDER BY workspace_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Limits, error) {
		var l Limits
		err := r.Scan(&l.WorkspaceID, &l.RequestsPerSecond, &l.Burst, &l.JobConcurrency)
		return l, err
	})
}
