// Package tenancy is the cell's tenancy guard: a cell answers for a workspace only while its
// tenancy row says active at the epoch the router routed with. Otherwise it answers 421
// WORKSPACE_MISDIRECTED with the owning cell as a hint, and the router looks up the placement
// again and retries once.
//
// A workspace placed on this cell by the directory and never seen here before is adopted: its
// tenancy row is created at the directory's epoch.
package tenancy

import (
	"context"
	"errors"
	"net/http"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/cellproto"
	"slidecells/shared/db"
	"slidecells/shared/directory"
	"slidecells/shared/problem"
)

// Placements is what the guard needs from the directory (satisfied by *directory.Cached).
type Placements interface {
	Placement(ctx context.Context, workspaceID string) (directory.Placement, error)
	FreshPlacement(ctx context.Context, workspaceID string) (directory.Placement, error)
}

// Guard checks tenancy.
type Guard struct {
	DB     *db.DB
	CellID string
	Dir    Placements
}

// Row is one tenancy row.
type Row struct {
	Epoch     int64
	State     string
	OwnerHint string
}

// Misdirected is the 421 answer for a workspace this cell does not serve; the owner hint
// travels in a header. The guard and the write fence (cell/store) both answer with it.
func Misdirected(owner string) error {
	e := problem.New(problem.WorkspaceMisdirected, "this cell does not serve the workspace at the routed epoch")
	e.Header = http.Header{cellproto.HeaderOwningCell: []string{owner}}
	return e
}

// Check lets the request through or returns a 421. routedEpoch 0 means no epoch was asserted
// (a direct call inside the cell network, or a workspace unknown to the router).
func (g *Guard) Check(ctx context.Context, workspaceID string, routedEpoch int64) error {
	row, err := g.row(ctx, workspaceID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return g.adopt(ctx, workspaceID, routedEpoch)
	case err != nil:
		return problem.Wrap(err, "tenancy lookup failed")
	}
	if row.State != "active" {
		if routedEpoch > row.Epoch {
			// The router knows a newer placement that names this cell: the workspace came back
			// after a move away. The directory decides.
			return g.adopt(ctx, workspaceID, routedEpoch)
		}
		return Misdirected(row.OwnerHint)
	}
	if routedEpoch == 0 || routedEpoch == row.Epoch {
		return nil
	}
	if routedEpoch < row.Epoch {
		// The router's placement is older than ours; it must look up again.
		return Misdirected(g.CellID)
	}
	// The router knows a newer placement that names this cell: the workspace came back.
	return g.adopt(ctx, workspaceID, routedEpoch)
}

func (g *Guard) row(ctx context.Context, workspaceID string) (Row, error) {
	var r Row
	err := g.DB.Pool.QueryRow(ctx, `SELECT epoch, state, owner_hint FROM tenancy WHERE workspace_id = $1`, workspaceID).
		Scan(&r.Epoch, &r.State, &r.OwnerHint)
	return r, err
}

// adopt creates or advances the tenancy row when the directory says this cell owns the
// workspace at an epoch at least routedEpoch.
func (g *Guard) adopt(ctx context.Context, workspaceID string, routedEpoch int64) error {
	p, err := g.Dir.FreshPlacement(ctx, workspaceID)
	if errors.Is(err, directory.ErrNotFound) {
		return problem.ErrNotFound()
	}
	if err != nil {
		return problem.ErrDirectoryUnavailable(err)
	}
	if p.CellID != g.CellID || p.State != "active" || p.Epoch < routedEpoch {
		return Misdirected(p.CellID)
	}
	_, err = g.DB.Exec(ctx, `
		INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, $2, 'active')
		ON CONFLICT (workspace_id) DO UPDATE SET epoch = excluded.epoch, state = 'active', owner_hint = '', updated_at = now()
		WHERE tenancy.epoch < excluded.epoch`, workspaceID, p.Epoch)
	if err != nil {
		return problem.Wrap(err, "tenancy adoption failed")
	}
	return g.Check(ctx, workspaceID, routedEpoch)
}

// Fence marks a workspace as no longer served here (the first step of a move, and what tests use
// to simulate one). owner is the hint given to routers.
func (g *Guard) Fence(ctx context.Context, workspaceID string, epoch int64, state, owner string) error {
	_, err := g.DB.Exec(ctx, `
		INSERT INTO tenancy (workspace_id, epoch, state, owner_hint) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workspace_id) DO UPDATE SET epoch = excluded.epoch, state = excluded.state, owner_hint = excluded.owner_hint, updated_at = now()`,
		workspaceID, epoch, state, owner)
	return err
}
