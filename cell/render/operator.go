package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"slidecells/shared/db"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
)

// Operator is the operator's procedure for renderers (cellctl renderers): list the worker
// epochs with their state, host, quarantine and the attempts they hold; release the unknown
// attempts of a node whose termination the operator verified; retire an epoch for good; lift a
// quarantine. Every change is recorded in render_operator_actions with who, why and when. It
// works on the cell's database alone, like any coordinator replica, so it needs no running
// cell; a running coordinator sees the released capacity at its next dispatch.
type Operator struct {
	c *Coordinator
}

// NewOperator builds the operator's procedure over a cell database.
func NewOperator(d *db.DB, log *zap.Logger) *Operator {
	if log == nil {
		log = zap.NewNop()
	}
	return &Operator{c: New(Config{}, d, nil, log)}
}

// RendererEpoch is one worker epoch as the operator sees it.
type RendererEpoch struct {
	WorkerID      string     `json:"worker_id"`
	Epoch         string     `json:"epoch"`
	State         string     `json:"state"`
	URL           string     `json:"url"`
	BootID        string     `json:"boot_id"`
	Cgroup        string     `json:"cgroup"`
	Detail        string     `json:"detail"`
	Quarantined   bool       `json:"quarantined"`
	QuarantinedAt *time.Time `json:"quarantined_at,omitempty"`
	HeartbeatAt   time.Time  `json:"heartbeat_at"`
	RegisteredAt  time.Time  `json:"registered_at"`
	// Occupied counts the epoch's unreleased attempts (each holds a slot); Unknown those of
	// them whose end nothing has proven.
	Occupied int `json:"occupied_attempts"`
	Unknown  int `json:"unknown_attempts"`
	// Attempts are the unreleased attempts' IDs (at most 20).
	Attempts []string `json:"attempts"`
}

// List returns the worker epochs, newest first per worker: every epoch that is not retired,
// and retired ones still holding attempts; all of them with all.
func (o *Operator) List(ctx context.Context, all bool) ([]RendererEpoch, error) {
	rows, err := o.c.db.Q(ctx).Query(ctx, `SELECT w.worker_id, w.epoch, w.state, w.url, w.boot_id, w.cgroup_id, w.detail,
		w.quarantined_at, w.heartbeat_at, w.registered_at,
		count(a.attempt_id), count(a.attempt_id) FILTER (WHERE a.state = 'unknown'),
		COALESCE((array_agg(a.attempt_id ORDER BY a.created_at) FILTER (WHERE a.attempt_id IS NOT NULL))[1:20], '{}')
		FROM render_workers w
		LEFT JOIN render_attempts a ON a.worker_id = w.worker_id AND a.epoch = w.epoch AND a.released = false
		GROUP BY w.worker_id, w.epoch
		HAVING $1 OR w.state <> 'retired' OR count(a.attempt_id) > 0
		ORDER BY w.worker_id, w.registered_at DESC, w.epoch LIMIT 1000`, all)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RendererEpoch
	for rows.Next() {
		var e RendererEpoch
		if err := rows.Scan(&e.WorkerID, &e.Epoch, &e.State, &e.URL, &e.BootID, &e.Cgroup, &e.Detail, &e.QuarantinedAt,
			&e.HeartbeatAt, &e.RegisteredAt, &e.Occupied, &e.Unknown, &e.Attempts); err != nil {
			return nil, err
		}
		e.Quarantined = e.State == "quarantined"
		out = append(out, e)
	}
	return out, rows.Err()
}

// Action is one operator request: which worker (and, optionally, which of its epochs), who
// asks and why. Operator and Reason are required and recorded.
type Action struct {
	WorkerID string
	Epoch    string // empty: every epoch of the worker the action applies to
	Operator string
	Reason   string
}

// ErrInput is an operator request that is not valid (missing or oversized fields, an unknown
// worker, nothing to act on).
var ErrInput = errors.New("invalid operator request")

func (a Action) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, args...))
	}
	switch {
	case !rc.ValidID(a.WorkerID):
		return bad("the renderer must be a worker ID (letters, digits, '_' and '-')")
	case a.Epoch != "" && (len(a.Epoch) > 100 || !rc.ValidID(a.Epoch)):
		return bad("the epoch must be an epoch ID as listed")
	case strings.TrimSpace(a.Operator) == "" || utf8.RuneCountInString(a.Operator) > 200:
		return bad("--operator is required: who confirms (at most 200 characters)")
	case strings.TrimSpace(a.Reason) == "" || utf8.RuneCountInString(a.Reason) > 1000:
		return bad("--reason is required: why, with the evidence of termination (at most 1000 characters)")
	}
	return nil
}

// ActionResult is what an operator action did.
type ActionResult struct {
	ActionID string   `json:"action_id"`
	Epochs   []string `json:"epochs"`
	Released []string `json:"released_attempts"`
}

// Pending lists the unknown attempts Release would release (the operator's dry run).
func (o *Operator) Pending(ctx context.Context, a Action) ([]string, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	list := o.c.attemptsWhere(ctx, `a.worker_id = $1 AND ($2 = '' OR a.epoch = $2) AND a.state = 'unknown'`, a.WorkerID, a.Epoch)
	out := make([]string, 0, len(list))
	for _, at := range list {
		out = append(out, at.attemptID)
	}
	return out, nil
}

// Release releases the worker's unknown attempts (of one epoch, or of all) after the operator
// verified that the node that ran them is terminated: each is finished as RENDER_BROWSER_LOST
// (its request retries within its budget or ends), a superseded epoch left holding nothing is
// retired, and the action is recorded.
func (o *Operator) Release(ctx context.Context, a Action) (ActionResult, error) {
	return o.act(ctx, a, "release")
}

// Retire ends worker epochs for good (a decommissioned node): their unknown attempts are
// released as by Release and the epochs are retired; a retired epoch is never dispatched to
// again, even if it answers (a restart makes a new epoch).
func (o *Operator) Retire(ctx context.Context, a Action) (ActionResult, error) {
	return o.act(ctx, a, "retire")
}

func (o *Operator) act(ctx context.Context, a Action, action string) (ActionResult, error) {
	if err := a.check(); err != nil {
		return ActionResult{}, err
	}
	var known bool
	if err := o.c.db.Q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM render_workers WHERE worker_id = $1 AND ($2 = '' OR epoch = $2))`,
		a.WorkerID, a.Epoch).Scan(&known); err != nil {
		return ActionResult{}, err
	}
	if !known {
		return ActionResult{}, fmt.Errorf("%w: no renderer %s%s in this cell", ErrInput, a.WorkerID, epochSuffix(a.Epoch))
	}
	res := ActionResult{ActionID: ids.New("rop")}
	now := o.c.now().UTC()
	why := clip(fmt.Sprintf("released by operator %s (%s): %s", a.Operator, res.ActionID, a.Reason), 500)
	for range 100 { // attemptsWhere reads at most 50 at a time
		list := o.c.attemptsWhere(ctx, `a.worker_id = $1 AND ($2 = '' OR a.epoch = $2) AND a.state = 'unknown'`, a.WorkerID, a.Epoch)
		if len(list) == 0 {
			break
		}
		for _, at := range list {
			o.c.finish(ctx, at, rc.NewError(rc.CodeBrowserLost, rc.StageCleanup, "%s", why), true)
			var released bool
			if err := o.c.db.Q(ctx).QueryRow(ctx, `SELECT released FROM render_attempts WHERE attempt_id = $1`, at.attemptID).Scan(&released); err != nil {
				return res, err
			}
			if !released {
				return res, fmt.Errorf("attempt %s could not be released; nothing else was changed for it", at.attemptID)
			}
			res.Released = append(res.Released, at.attemptID)
		}
	}
	err := o.c.db.Tx(ctx, func(tx pgx.Tx) error {
		var q string
		if action == "retire" {
			q = `UPDATE render_workers w SET state = 'retired', detail = $3, quarantined_at = NULL
				WHERE worker_id = $1 AND ($2 = '' OR epoch = $2) AND state <> 'retired'
				AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.epoch = w.epoch AND a.released = false)
				RETURNING epoch`
		} else {
			// A superseded epoch quarantined for want of proof is retired once it holds nothing.
			q = `UPDATE render_workers w SET state = 'retired', detail = $3, quarantined_at = NULL
				WHERE worker_id = $1 AND ($2 = '' OR epoch = $2) AND state = 'quarantined' AND detail LIKE '` + supersededPrefix + `%'
				AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.epoch = w.epoch AND a.released = false)
				RETURNING epoch`
		}
		rows, err := tx.Query(ctx, q, a.WorkerID, a.Epoch, clip(action+"d by operator "+a.Operator+": "+a.Reason, 300))
		if err != nil {
			return err
		}
		if res.Epochs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		return o.record(ctx, tx, res, a, action, now)
	})
	return res, err
}

// Unquarantine lifts the quarantine of the worker's epochs that a renderer fault put there: they
// become unready, and the registry's next passing probe makes them ready. An epoch quarantined
// because a newer one could not prove its attempts stopped is lifted only by Release.
func (o *Operator) Unquarantine(ctx context.Context, a Action) (ActionResult, error) {
	if err := a.check(); err != nil {
		return ActionResult{}, err
	}
	res := ActionResult{ActionID: ids.New("rop")}
	now := o.c.now().UTC()
	err := o.c.db.Tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE render_workers SET state = 'unready', detail = $3, quarantined_at = NULL
			WHERE worker_id = $1 AND ($2 = '' OR epoch = $2) AND state = 'quarantined' AND detail NOT LIKE '`+supersededPrefix+`%'
			RETURNING epoch`, a.WorkerID, a.Epoch, clip("quarantine lifted by operator "+a.Operator+"; waiting for a passing probe", 300))
		if err != nil {
			return err
		}
		if res.Epochs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if len(res.Epochs) == 0 {
			return fmt.Errorf("%w: renderer %s%s has no quarantine an operator can lift (a superseded epoch's is lifted by release)", ErrInput, a.WorkerID, epochSuffix(a.Epoch))
		}
		return o.record(ctx, tx, res, a, "unquarantine", now)
	})
	return res, err
}

func (o *Operator) record(ctx context.Context, tx pgx.Tx, res ActionResult, a Action, action string, now time.Time) error {
	epoch := a.Epoch
	if epoch == "" {
		epoch = "*"
	}
	released, _ := json.Marshal(append([]string{}, res.Released...))
	_, err := tx.Exec(ctx, `INSERT INTO render_operator_actions (id, worker_id, epoch, action, operator, reason, attempts_released, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, res.ActionID, a.WorkerID, epoch, action, a.Operator, a.Reason, released, now)
	return err
}

// OperatorAction is one recorded action.
type OperatorAction struct {
	ID       string    `json:"id"`
	WorkerID string    `json:"worker_id"`
	Epoch    string    `json:"epoch"`
	Action   string    `json:"action"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason"`
	Released []string  `json:"released_attempts"`
	At       time.Time `json:"at"`
}

// Actions returns the latest recorded actions (at most limit, newest first).
func (o *Operator) Actions(ctx context.Context, limit int) ([]OperatorAction, error) {
	rows, err := o.c.db.Q(ctx).Query(ctx, `SELECT id, worker_id, epoch, action, operator, reason, attempts_released, created_at
		FROM render_operator_actions ORDER BY created_at DESC, id LIMIT $1`, min(max(limit, 1), 1000))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OperatorAction
	for rows.Next() {
		var a OperatorAction
		var rel []byte
		if err := rows.Scan(&a.ID, &a.WorkerID, &a.Epoch, &a.Action, &a.Operator, &a.Reason, &rel, &a.At); err != nil {
			return nil, err
		}
		_ = json.Unmarshal(rel, &a.Released)
		out = append(out, a)
	}
	return out, rows.Err()
}

func epochSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " epoch " + e
}
