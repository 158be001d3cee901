package directory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/shared/db"
	"slidecells/shared/ids"
)

// Move steps, in the order a move runs them. A move's Step is the next one to run.
const (
	StepPlan    = "plan"
	StepPrecopy = "precopy"
	StepFence   = "fence"
	StepDrain   = "drain"
	StepCopy    = "copy"
	StepVerify  = "verify"
	StepFlip    = "flip"
	StepClean   = "clean"
	StepDone    = "done"
)

// MoveSteps lists the steps in order.
var MoveSteps = []string{StepPlan, StepPrecopy, StepFence, StepDrain, StepCopy, StepVerify, StepFlip, StepClean, StepDone}

// Move statuses.
const (
	MoveActive   = "active"   // under way, or waiting for a runner (resume)
	MoveFailed   = "failed"   // the last run stopped with Error; resume retries the step, abort rolls back
	MoveAborting = "aborting" // the abort is decided (the source owns the workspace again) and being finished
	MoveDone     = "done"
	MoveAborted  = "aborted"
)

// Move reasons.
const (
	ReasonManual    = "manual"
	ReasonDrain     = "drain"
	ReasonRebalance = "rebalance"
)

// Move is one workspace move: a persisted state machine (see cell/moves).
type Move struct {
	ID          string
	WorkspaceID string
	FromCell    string
	ToCell      string
	FromEpoch   int64
	Step        string
	Status      string
	Reason      string
	Error       string
	Runner      string
	RunnerUntil *time.Time
	// Timings holds milliseconds per step (and "write_unavailable": fence to flip).
	Timings    map[string]int64
	Report     json.RawMessage
	FencedAt   *time.Time
	FlippedAt  *time.Time
	CleanAfter *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// Live reports whether the move is not over.
func (m Move) Live() bool { return m.Status != MoveDone && m.Status != MoveAborted }

// Errors of the move functions.
var (
	// ErrMoveHeld: another runner holds the move's lease.
	ErrMoveHeld = errors.New("directory: the move is being run by another cellctl")
	// ErrMoveLost: this runner no longer holds the move (its lease ended and another took it,
	// or the move was aborted); it must stop without touching anything.
	ErrMoveLost = errors.New("directory: the move is no longer this runner's")
	// ErrPastFlip: the placement already names the target; the move can only be finished.
	ErrPastFlip = errors.New("directory: the move has flipped the placement; it can only be finished (cellctl moves resume)")
)

const moveCols = `id, workspace_id, from_cell, to_cell, from_epoch, step, status, reason, error, runner, runner_until,
	timings, report, fenced_at, flipped_at, clean_after, created_at, updated_at, finished_at`

func scanMove(r pgx.Row) (Move, error) {
	var m Move
	var timings []byte
	err := r.Scan(&m.ID, &m.WorkspaceID, &m.FromCell, &m.ToCell, &m.FromEpoch, &m.Step, &m.Status, &m.Reason, &m.Error,
		&m.Runner, &m.RunnerUntil, &timings, &m.Report, &m.FencedAt, &m.FlippedAt, &m.CleanAfter, &m.CreatedAt, &m.UpdatedAt, &m.FinishedAt)
	if err == nil {
		m.Timings = map[string]int64{}
		err = json.Unmarshal(timings, &m.Timings)
	}
	return m, err
}

// CreateMove records a move of a workspace to the cell toCell, starting at its plan step, and
// marks the placement moving (no cell adopts a moving workspace). The workspace must be placed
// and not moving; the target must be active, not the current cell, and have room (its
// workspaces and the moves already heading there count).
func (d *Directory) CreateMove(ctx context.Context, workspaceID, toCell, reason string) (Move, error) {
	if reason == "" {
		reason = ReasonManual
	}
	var m Move
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		var p Placement
		err := tx.QueryRow(ctx, `SELECT cell_id, epoch, state FROM placements WHERE workspace_id = $1 FOR UPDATE`, workspaceID).
			Scan(&p.CellID, &p.Epoch, &p.State)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: workspace %s", ErrNotFound, workspaceID)
		}
		if err != nil {
			return err
		}
		if p.State != "active" {
			return fmt.Errorf("%w: workspace %s is already moving (cellctl moves list --workspace %s)", ErrConflict, workspaceID, workspaceID)
		}
		if p.CellID == toCell {
			return invalid("workspace %s is on %s already", workspaceID, toCell)
		}
		var state string
		var max, n int64
		err = tx.QueryRow(ctx, `
			SELECT state, max_workspaces,
			       (SELECT count(*) FROM placements WHERE cell_id = $1) +
			       (SELECT count(*) FROM moves WHERE to_cell = $1 AND status NOT IN ('done', 'aborted'))
			FROM cells WHERE id = $1`, toCell).Scan(&state, &max, &n)
		if errors.Is(err, pgx.ErrNoRows) {
			return invalid("cell %q does not exist", toCell)
		}
		if err != nil {
			return err
		}
		if state != "active" {
			return invalid("cell %q is %s and takes no workspaces", toCell, state)
		}
		if max > 0 && n >= max {
			return invalid("cell %q is full (%d of %d workspaces, incoming moves included)", toCell, n, max)
		}
		m, err = scanMove(tx.QueryRow(ctx, `
			INSERT INTO moves (id, workspace_id, from_cell, to_cell, from_epoch, step, status, reason)
			VALUES ($1, $2, $3, $4, $5, 'plan', 'active', $6) RETURNING `+moveCols,
			ids.New(ids.Move), workspaceID, p.CellID, toCell, p.Epoch, reason))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE placements SET state = 'moving', updated_at = now() WHERE workspace_id = $1 AND epoch = $2 AND state = 'active'`,
			workspaceID, p.Epoch)
		return err
	})
	if db.IsUniqueViolation(err) {
		return Move{}, fmt.Errorf("%w: workspace %s has a move that is not over (cellctl moves list --workspace %s)", ErrConflict, workspaceID, workspaceID)
	}
	return m, err
}

// GetMove returns a move.
func (d *Directory) GetMove(ctx context.Context, id string) (Move, error) {
	m, err := scanMove(d.DB.Pool.QueryRow(ctx, `SELECT `+moveCols+` FROM moves WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, fmt.Errorf("%w: move %s", ErrNotFound, id)
	}
	return m, err
}

// MoveFilter selects moves.
type MoveFilter struct {
	WorkspaceID string // one workspace's
	Cell        string // from or to this cell
	Live        bool   // only moves that are not over
	Limit       int    // default 100
}

// Moves lists moves, newest first.
func (d *Directory) Moves(ctx context.Context, f MoveFilter) ([]Move, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := d.DB.Pool.Query(ctx, `SELECT `+moveCols+` FROM moves
		WHERE ($1 = '' OR workspace_id = $1) AND ($2 = '' OR from_cell = $2 OR to_cell = $2)
		AND (NOT $3 OR status NOT IN ('done', 'aborted'))
		ORDER BY created_at DESC, id LIMIT $4`, f.WorkspaceID, f.Cell, f.Live, f.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Move, error) { return scanMove(r) })
}

// ClaimMove gives runner the move's lease for ttl, when the move is not over and nobody else
// holds a live lease (ErrMoveHeld, with the holder's expiry). A failed move becomes active
// again and its error is cleared.
func (d *Directory) ClaimMove(ctx context.Context, id, runner string, ttl time.Duration) (Move, error) {
	var m Move
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		m, err = scanMove(tx.QueryRow(ctx, `SELECT `+moveCols+` FROM moves WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: move %s", ErrNotFound, id)
		}
		if err != nil {
			return err
		}
		if !m.Live() {
			return fmt.Errorf("%w: move %s is %s", ErrConflict, id, m.Status)
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		if m.Runner != "" && m.Runner != runner && m.RunnerUntil != nil && m.RunnerUntil.After(now) {
			return fmt.Errorf("%w until %s", ErrMoveHeld, m.RunnerUntil.UTC().Format(time.RFC3339))
		}
		m, err = scanMove(tx.QueryRow(ctx, `
			UPDATE moves SET runner = $2, runner_until = now() + $3::INTERVAL, updated_at = now(),
				status = CASE WHEN status = 'failed' THEN 'active' ELSE status END,
				error = CASE WHEN status = 'failed' THEN '' ELSE error END
			WHERE id = $1 RETURNING `+moveCols, id, runner, interval(ttl)))
		return err
	})
	return m, err
}

func interval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }

// RenewMove extends runner's lease; ErrMoveLost when runner no longer holds it.
func (d *Directory) RenewMove(ctx context.Context, id, runner string, ttl time.Duration) error {
	tag, err := d.DB.Exec(ctx, `UPDATE moves SET runner_until = now() + $3::INTERVAL
		WHERE id = $1 AND runner = $2 AND status IN ('active', 'aborting')`, id, runner, interval(ttl))
	if err == nil && tag.RowsAffected() == 0 {
		return ErrMoveLost
	}
	return err
}

// MoveUpdate is what finishing a step records besides the next step.
type MoveUpdate struct {
	// Timing is the step's duration, stored under the step's name (added to earlier runs').
	Timing time.Duration
	// Report, when set, replaces the move's report (verify's per-table counts and checksums).
	Report json.RawMessage
	// Fenced records the fence time; Window records fence→flip as write_unavailable.
	Fenced bool
	Window bool
	// CleanAfter, when set, is when the clean step may remove the source's copy.
	CleanAfter *time.Time
}

// AdvanceMove records that runner finished step from and that to is next. ErrMoveLost when the
// move is not runner's, or not at that step, or no longer active.
func (d *Directory) AdvanceMove(ctx context.Context, id, runner, from, to string, u MoveUpdate) (Move, error) {
	var report any
	if len(u.Report) > 0 {
		report = []byte(u.Report)
	}
	timing, _ := json.Marshal(map[string]int64{from: u.Timing.Milliseconds()})
	status := MoveActive
	if to == StepDone {
		status = MoveDone
	}
	// Its own retried transaction: the runner's lease renewal updates the same row, and a lone
	// statement at SERIALIZABLE fails with a serialization error when they meet.
	var m Move
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		m, err = scanMove(tx.QueryRow(ctx, `
		UPDATE moves SET step = $4, status = $5, updated_at = now(),
			timings = timings || jsonb_build_object($3::TEXT, COALESCE((timings->>$3::TEXT)::INT8, 0) + ($6::JSONB->>$3::TEXT)::INT8)
				|| CASE WHEN $9 AND fenced_at IS NOT NULL THEN jsonb_build_object('write_unavailable', (EXTRACT(EPOCH FROM now() - fenced_at) * 1000)::INT8) ELSE '{}'::JSONB END,
			report = COALESCE($7::JSONB, report),
			fenced_at = CASE WHEN $8 THEN COALESCE(fenced_at, now()) ELSE fenced_at END,
			flipped_at = CASE WHEN $9 THEN COALESCE(flipped_at, now()) ELSE flipped_at END,
			clean_after = COALESCE($10, clean_after),
			finished_at = CASE WHEN $5 = 'done' THEN now() ELSE finished_at END,
			runner = CASE WHEN $5 = 'done' THEN '' ELSE runner END
		WHERE id = $1 AND runner = $2 AND step = $3 AND status = 'active'
		RETURNING `+moveCols, id, runner, from, to, status, timing, report, u.Fenced, u.Window, u.CleanAfter))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return m, ErrMoveLost
	}
	return m, err
}

// FailMove records that runner's run stopped with an error at the move's current step and
// releases the lease; resume retries the step. back, when set, is the step to retry from (a
// failed verify copies again);
// report, when set, replaces the move's report (a failed verify's).
func (d *Directory) FailMove(ctx context.Context, id, runner, back, msg string, report json.RawMessage) error {
	if len(msg) > 2000 {
		msg = msg[:2000]
	}
	var r any
	if len(report) > 0 {
		r = []byte(report)
	}
	tag, err := d.DB.Exec(ctx, `
		UPDATE moves SET status = CASE WHEN status = 'aborting' THEN status ELSE 'failed' END, error = $3,
			step = CASE WHEN $4 = '' OR status = 'aborting' THEN step ELSE $4 END,
			report = COALESCE($5::JSONB, report),
			runner = '', runner_until = NULL, updated_at = now()
		WHERE id = $1 AND runner = $2 AND status IN ('active', 'aborting')`, id, runner, msg, back, r)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrMoveLost
	}
	return err
}

// ReleaseMove gives up runner's lease without changing the move (a clean step waiting for its
// grace period).
func (d *Directory) ReleaseMove(ctx context.Context, id, runner string) error {
	_, err := d.DB.Exec(ctx, `UPDATE moves SET runner = '', runner_until = NULL, updated_at = now() WHERE id = $1 AND runner = $2`, id, runner)
	return err
}

// FlipMove points the workspace's placement at the move's target at the next epoch, in one
// transaction that checks that runner still holds the move at its flip step: the moment the
// target becomes the owner. Flipping again is a no-op (a resumed flip). It returns the new
// epoch.
func (d *Directory) FlipMove(ctx context.Context, id, runner string) (int64, error) {
	var epoch int64
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		m, err := scanMove(tx.QueryRow(ctx, `SELECT `+moveCols+` FROM moves WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		if m.Runner != runner || m.Step != StepFlip || m.Status != MoveActive {
			return ErrMoveLost
		}
		epoch = m.FromEpoch + 1
		var p Placement
		if err := tx.QueryRow(ctx, `SELECT cell_id, epoch, state FROM placements WHERE workspace_id = $1 FOR UPDATE`, m.WorkspaceID).
			Scan(&p.CellID, &p.Epoch, &p.State); err != nil {
			return err
		}
		switch {
		case p.CellID == m.ToCell && p.Epoch == epoch:
			return nil // flipped already
		case p.CellID != m.FromCell || p.Epoch != m.FromEpoch || p.State != "moving":
			return fmt.Errorf("directory: the placement of %s changed under the move (%s@%d %s)", m.WorkspaceID, p.CellID, p.Epoch, p.State)
		}
		_, err = tx.Exec(ctx, `UPDATE placements SET cell_id = $2, epoch = $3, state = 'active', updated_at = now() WHERE workspace_id = $1`,
			m.WorkspaceID, m.ToCell, epoch)
		return err
	})
	return epoch, err
}

// BeginAbort decides the abort of a move runner holds: the placement is active on the source
// again (nothing can flip any more) and the move is aborting until FinishAbort. ErrPastFlip when
// the placement already names the target.
func (d *Directory) BeginAbort(ctx context.Context, id, runner string) (Move, error) {
	var m Move
	err := d.DB.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		m, err = scanMove(tx.QueryRow(ctx, `SELECT `+moveCols+` FROM moves WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		if m.Runner != runner || (m.Status != MoveActive && m.Status != MoveFailed && m.Status != MoveAborting) {
			return ErrMoveLost
		}
		var p Placement
		if err := tx.QueryRow(ctx, `SELECT cell_id, epoch, state FROM placements WHERE workspace_id = $1 FOR UPDATE`, m.WorkspaceID).
			Scan(&p.CellID, &p.Epoch, &p.State); err != nil {
			return err
		}
		if p.CellID != m.FromCell || p.Epoch != m.FromEpoch {
			return ErrPastFlip
		}
		if _, err := tx.Exec(ctx, `UPDATE placements SET state = 'active', updated_at = now() WHERE workspace_id = $1 AND state = 'moving'`, m.WorkspaceID); err != nil {
			return err
		}
		m, err = scanMove(tx.QueryRow(ctx, `UPDATE moves SET status = 'aborting', updated_at = now() WHERE id = $1 RETURNING `+moveCols, id))
		return err
	})
	return m, err
}

// FinishAbort marks an aborting move aborted and releases it.
func (d *Directory) FinishAbort(ctx context.Context, id, runner string) error {
	tag, err := d.DB.Exec(ctx, `UPDATE moves SET status = 'aborted', runner = '', runner_until = NULL, finished_at = now(), updated_at = now()
		WHERE id = $1 AND runner = $2 AND status = 'aborting'`, id, runner)
	if err == nil && tag.RowsAffected() == 0 {
		return ErrMoveLost
	}
	return err
}
