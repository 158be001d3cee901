// Package tenancy is the cell's tenancy guard: a cell answers for a workspace only while its
// tenancy row says so at the epoch the router routed with. Otherwise it answers 421
// WORKSPACE_MISDIRECTED with the owning cell as a hint, and the router looks up the placement
// again and retries once.
//
// A row is active (served), fenced (a move is copying the workspace away: reads are served,
// writes get 503 WORKSPACE_MOVING with Retry-After, and no job or render starts), or moved
// (not served here; owner_hint names the new owner). Moves (cellctl, cell/moves) write the rows;
// the guard and Writable read them.
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

// Tenancy states.
const (
	Active = "active"
	Fenced = "fenced"
	Moved  = "moved"
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
// travels in a header. The guard and Writable both answer with it.
func Misdirected(owner string) error {
	e := problem.New(problem.WorkspaceMisdirected, "this cell does not serve the workspace at the routed epoch")
	e.Header = http.Header{cellproto.HeaderOwningCell: []string{owner}}
	return e
}

// ErrMoving is the answer to a write while the workspace is fenced for a move: 503 with
// Retry-After, retryable. The client retries with the same Idempotency-Key; after the flip the
// router sends the retry to the new owner, where it runs once.
func ErrMoving() error {
	return problem.New(problem.WorkspaceMoving, "the workspace is being moved to another cell; writes resume within seconds")
}

// Check lets the request through or refuses it. write says whether the operation changes
// anything. routedEpoch 0 means no epoch was asserted (a direct call inside the cell network,
// or a workspace unknown to the router); a write without one is refused with a 421 once the
// workspace has changed owner (epoch above 1), so the router looks the placement up and
// retries with the epoch.
func (g *Guard) Check(ctx context.Context, workspaceID string, routedEpoch int64, write bool) error {
	row, err := g.row(ctx, workspaceID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return g.adopt(ctx, workspaceID, routedEpoch, write)
	case err != nil:
		return problem.Wrap(err, "tenancy lookup failed")
	}
	if routedEpoch > row.Epoch {
		// The router knows a newer placement that names this cell: the workspace came (back)
		// here. The directory decides.
		return g.adopt(ctx, workspaceID, routedEpoch, write)
	}
	if routedEpoch != 0 && routedEpoch < row.Epoch {
		// The router's placement is older than ours; it must look up again.
		if row.State == Moved {
			return Misdirected(row.OwnerHint)
		}
		return Misdirected(g.CellID)
	}
	switch row.State {
	case Moved:
		return Misdirected(row.OwnerHint)
	case Fenced:
		if write {
			return ErrMoving()
		}
		return nil
	}
	if routedEpoch == 0 && write && row.Epoch > 1 {
		return Misdirected(g.CellID)
	}
	return nil
}

func (g *Guard) row(ctx context.Context, workspaceID string) (Row, error) {
	var r Row
	err := g.DB.Pool.QueryRow(ctx, `SELECT epoch, state, owner_hint FROM tenancy WHERE workspace_id = $1`, workspaceID).
		Scan(&r.Epoch, &r.State, &r.OwnerHint)
	return r, err
}

// adopt creates or advances the tenancy row when the directory says this cell owns the
// workspace at an epoch at least routedEpoch. A placement in the middle of a move ("moving") is
// not adopted: its source keeps its fenced row and nothing else may take it.
func (g *Guard) adopt(ctx context.Context, workspaceID string, routedEpoch int64, write bool) error {
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
	// The row is now at least at the directory's epoch, which is at least routedEpoch, so this
	// check does not come back here.
	return g.Check(ctx, workspaceID, routedEpoch, write)
}

// Writable reports whether this cell may write for the workspace now: nil while its tenancy row
// is active; ErrMoving (503, Retry-After) while it is fenced for a move; a 421 naming the owner
// when the workspace moved away or was never hosted here.
//
// It is the one check every write path makes before changing a workspace's data, and that the
// job pool and the render coordinator make before starting work for a workspace. Give it the
// transaction of the write: the check then commits with the write, and since the move's fence is
// a write of the same row, a write that overlapped the fence either commits before it (and is
// copied) or is aborted and retried (and sees the fence) — serializable isolation guarantees
// it on PostgreSQL and CockroachDB alike.
func Writable(ctx context.Context, q db.Querier, workspaceID string) error {
	var state, owner string
	err := q.QueryRow(ctx, `SELECT state, owner_hint FROM tenancy WHERE workspace_id = $1`, workspaceID).Scan(&state, &owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Misdirected("")
	case err != nil:
		return err
	case state == Active:
		return nil
	case state == Fenced:
		return ErrMoving()
	}
	return Misdirected(owner)
}

// NotWritable reports whether err is Writable's refusal (fenced, moved or not hosted), as
// opposed to a failure to find out.
func NotWritable(err error) bool {
	var pe *problem.Error
	return errors.As(err, &pe) && (pe.Code == problem.WorkspaceMoving || pe.Code == problem.WorkspaceMisdirected)
}

// ActiveSQL is a SQL predicate, true while the workspace whose ID is the SQL expression ws is
// active here: for statements that pick work for many workspaces at once (the job queue's claim,
// the render coordinator's dispatch), so that a fenced or departed workspace gets no new work.
// ws must be a column reference, never input.
func ActiveSQL(ws string) string {
	return `EXISTS (SELECT 1 FROM tenancy WHERE tenancy.workspace_id = ` + ws + ` AND tenancy.state = 'active')`
}

// HostedSQL is like ActiveSQL but also true while the workspace is fenced: for housekeeping that
// must go on during a move's drain (returning the jobs of a dead replica to the queue) and stop
// once the workspace has moved away or before it arrived.
func HostedSQL(ws string) string {
	return `EXISTS (SELECT 1 FROM tenancy WHERE tenancy.workspace_id = ` + ws + ` AND tenancy.state IN ('active', 'fenced'))`
}

// Fence writes a workspace's tenancy row as given (tests use it to simulate what a move does).
// owner is the hint given to routers.
func (g *Guard) Fence(ctx context.Context, workspaceID string, epoch int64, state, owner string) error {
	_, err := g.DB.Exec(ctx, `
		INSERT INTO tenancy (workspace_id, epoch, state, owner_hint) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workspace_id) DO UPDATE SET epoch = excluded.epoch, state = excluded.state, owner_hint = excluded.owner_hint, updated_at = now()`,
		workspaceID, epoch, state, owner)
	return err
}
