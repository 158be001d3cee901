package render

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
)

// reservation is what one dispatch transaction decided: an attempt reserved on a worker slot.
type reservation struct {
	req            Request
	attemptID      string
	seq            int64
	workerID       string
	epoch          string
	url            string
	slotGeneration int64
}

// dispatchOne runs one dispatch transaction. It returns nil when nothing can be dispatched now
// (no waiting request, no idle worker, or a limit reached).
//
// It runs at READ COMMITTED: its correctness rests on the scheduler row lock (every attempt is
// inserted, and every request leaves the queue, under it, so the occupancy count and the pick
// are exact once the lock is held), the worker row lock and the two partial unique indexes, not
// on serializability. At SERIALIZABLE every dispatcher that queued behind the lock would fail
// with a serialization error when it got it (the row changed after its snapshot). On a
// CockroachDB cluster without READ COMMITTED it runs SERIALIZABLE, which is also correct.
func (c *Coordinator) dispatchOne(ctx context.Context) (*reservation, error) {
	var res *reservation
	err := c.db.ReadCommitted(ctx, func(tx pgx.Tx) error {
		res = nil
		now := c.now().UTC()
		// One round trip (with BEGIN) for every read: the lock comes first in the pipeline, so
		// each later statement (READ COMMITTED: a snapshot per statement) reads after it is held.
		b := &pgx.Batch{}
		b.Queue(`SELECT round FROM render_scheduler_state WHERE id = 1 FOR UPDATE`)
		b.Queue(`SELECT count(*) FROM render_attempts WHERE released = false`)
		b.Queue(`SELECT w.worker_id, w.epoch, w.url, w.slot_generation FROM render_workers w
			WHERE w.state = 'ready' AND w.environment_digest = $1
			  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.released = false)
			ORDER BY w.last_dispatch_at, w.worker_id LIMIT 1 FOR UPDATE`, c.cfg.ProfileDigest)
		b.Queue(pickSQL, now, now.Add(-c.cfg.PromoteAfter), c.cfg.WorkspaceConcurrency)
		br := tx.SendBatch(ctx, b)
		var round int64
		var total int
		var w reservation
		var req Request
		err := br.QueryRow().Scan(&round)
		if err == nil {
			err = br.QueryRow().Scan(&total)
		}
		noWorker, noPick := false, false
		if err == nil {
			err = br.QueryRow().Scan(&w.workerID, &w.epoch, &w.url, &w.slotGeneration)
			if errors.Is(err, pgx.ErrNoRows) {
				noWorker, err = true, nil
			}
		}
		if err == nil {
			var prio int
			req, err = scanRequest(br.QueryRow(), &w.seq, &prio)
			if errors.Is(err, pgx.ErrNoRows) {
				noPick, err = true, nil
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil || noWorker || noPick || total >= c.cfg.GlobalConcurrency {
			return err
		}
		// Every write goes out with the COMMIT, in the same round trip; nothing reads them. If
		// the request was cancelled since the pick, the update matches nothing, no attempt is
		// inserted, and markDispatched (which needs the reserved row) sends nothing.
		w.slotGeneration++
		w.attemptID = ids.New(ids.Attempt)
		req.State, req.AttemptsUsed = StateExecuting, req.AttemptsUsed+1
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE render_requests SET state = 'executing', attempts_used = attempts_used + 1, next_seq = next_seq + 1, updated_at = $3
				WHERE workspace_id = $1 AND id = $2 AND state IN ('queued', 'retry_wait')`, []any{req.WorkspaceID, req.ID, now}},
			{`UPDATE render_workers SET slot_generation = $3, last_dispatch_at = $4 WHERE worker_id = $1 AND epoch = $2`,
				[]any{w.workerID, w.epoch, w.slotGeneration, now}},
			{`INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch,
				slot_generation, state, driver, driver_until, created_at)
				SELECT workspace_id, id, $3::INT8, $4, $5, $6, $7::INT8, 'reserved', $8, $9, $10 FROM render_requests
				WHERE workspace_id = $1 AND id = $2 AND state = 'executing' AND next_seq = $3::INT8 + 1`,
				[]any{req.WorkspaceID, req.ID, w.seq, w.attemptID, w.workerID, w.epoch, w.slotGeneration, c.id, now.Add(c.Lease), now}},
			{`UPDATE render_scheduler_state SET round = round + 1,
				cursor_interactive = CASE WHEN $1::TEXT = 'interactive' THEN $2::TEXT ELSE cursor_interactive END,
				cursor_background = CASE WHEN $1::TEXT = 'background' THEN $2::TEXT ELSE cursor_background END,
				dispatched = dispatched + 1, updated_at = $3 WHERE id = 1`, []any{string(req.Category), req.WorkspaceID, now}},
		} {
			if err := db.Defer(ctx, tx, q.sql, q.args...); err != nil {
				return err
			}
		}
		w.req = req
		res = &w
		return nil
	})
	return res, err
}

// pickSQL picks the next request: one waiting past the promotion threshold first (oldest
// first), else by the rotation's category (round % 4 < 3: interactive) then the other, each
// round-robin over workspaces from the category's cursor (wrapping around), oldest first
// within a workspace; workspaces at their concurrency cap are skipped. Every branch is an
// index range scan with LIMIT 1 over the waiting rows ($1 now, $2 promotion cutoff, $3 the
// workspace cap).
var pickSQL = `WITH st AS (
	SELECT CASE WHEN round % 4 < 3 THEN 'interactive' ELSE 'background' END AS pref,
	       cursor_interactive, cursor_background FROM render_scheduler_state WHERE id = 1),
capped AS (
	SELECT workspace_id FROM render_attempts WHERE released = false GROUP BY workspace_id HAVING count(*) >= $3)
SELECT ` + requestCols + `, next_seq, prio FROM (
	(SELECT 1 AS prio, workspace_id, id FROM render_requests WHERE ` + waitingSQL + ` AND enqueued_at <= $2
	 ORDER BY enqueued_at LIMIT 1)
	UNION ALL
	(SELECT 2, workspace_id, id FROM render_requests WHERE ` + waitingSQL + `
	   AND category = (SELECT pref FROM st)
	   AND workspace_id > (SELECT CASE WHEN pref = 'interactive' THEN cursor_interactive ELSE cursor_background END FROM st)
	 ORDER BY category, workspace_id, enqueued_at LIMIT 1)
	UNION ALL
	(SELECT 3, workspace_id, id FROM render_requests WHERE ` + waitingSQL + ` AND category = (SELECT pref FROM st)
	 ORDER BY category, workspace_id, enqueued_at LIMIT 1)
	UNION ALL
	(SELECT 4, workspace_id, id FROM render_requests WHERE ` + waitingSQL + `
	   AND category = (SELECT CASE WHEN pref = 'interactive' THEN 'background' ELSE 'interactive' END FROM st)
	   AND workspace_id > (SELECT CASE WHEN pref = 'interactive' THEN cursor_background ELSE cursor_interactive END FROM st)
	 ORDER BY category, workspace_id, enqueued_at LIMIT 1)
	UNION ALL
	(SELECT 5, workspace_id, id FROM render_requests WHERE ` + waitingSQL + `
	   AND category = (SELECT CASE WHEN pref = 'interactive' THEN 'background' ELSE 'interactive' END FROM st)
	 ORDER BY category, workspace_id, enqueued_at LIMIT 1)
) candidates JOIN render_requests USING (workspace_id, id) ORDER BY prio LIMIT 1`

// waitingSQL is a waiting request that may run now, outside a capped workspace; it matches the
// predicate of render_requests_waiting_idx.
var waitingSQL = `state IN ('queued', 'retry_wait') AND not_before <= $1 AND deadline_at > $1
	AND workspace_id NOT IN (SELECT workspace_id FROM capped) AND ` + activeWorkspace

// activeWorkspace: only a workspace this cell serves now gets work; a fenced one (a move is
// copying it) or one that moved away keeps its waiting requests for the copy.
var activeWorkspace = tenancy.ActiveSQL("render_requests.workspace_id")

// markDispatched is the conditional update after the dispatch commit: whoever moves the
// attempt from reserved to dispatched is its only sender.
func (c *Coordinator) markDispatched(ctx context.Context, attemptID string) (bool, error) {
	tag, err := c.db.Exec(ctx, `UPDATE render_attempts SET state = 'dispatched', dispatched_at = $2
		WHERE attempt_id = $1 AND state = 'reserved'`, attemptID, c.now().UTC())
	return tag.RowsAffected() == 1, err
}

// dispatchLoop dispatches while there is something to dispatch, then waits for a kick or a
// tick.
func (c *Coordinator) dispatchLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.TickInterval)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			res, err := c.dispatchOne(ctx)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("render dispatch failed", zapErr(err))
				}
				break
			}
			if res == nil {
				break
			}
			c.observe("dispatch", res.req.Operation, time.Since(res.req.EnqueuedAt))
			c.startDriver(ctx, res.attemptID, res, true)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
	}
}

func (c *Coordinator) observe(event string, op rc.Operation, d time.Duration) {
	if c.Observe != nil {
		c.Observe(event, op, d)
	}
}
