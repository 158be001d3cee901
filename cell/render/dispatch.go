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

// dispatchBatchMax bounds the dispatches of one transaction: the scheduler row lock is held for
// all of them, so a larger batch would make other coordinators wait longer.
const dispatchBatchMax = 8

// dispatchOne is dispatchBatch of one.
func (c *Coordinator) dispatchOne(ctx context.Context) (*reservation, error) {
	res, err := c.dispatchBatch(ctx, 1)
	if len(res) == 0 {
		return nil, err
	}
	return res[0], err
}

// dispatchBatch runs one dispatch transaction that reserves up to limit attempts, one after the
// other under one hold of the scheduler row lock: exactly the dispatches that limit transactions
// of one would make in a row (same picks, same rotation and cursors, same occupancy checks),
// with one lock wait and one commit instead of limit. It returns none when nothing can be
// dispatched now (no waiting request, no idle worker, or a limit reached).
//
// It runs at READ COMMITTED: its correctness rests on the scheduler row lock (every attempt is
// inserted, and every request leaves the queue, under it, so the occupancy count and the pick
// are exact once the lock is held), the worker row lock and the two partial unique indexes, not
// on serializability. Each pick is a statement of its own, after the previous dispatch's writes
// in the same transaction, so it sees them (the attempt that occupies a worker and counts
// against the cell's and the workspace's limits, the moved cursor). At SERIALIZABLE every
// dispatcher that queued behind the lock would fail with a serialization error when it got it
// (the row changed after its snapshot). On a CockroachDB cluster without READ COMMITTED it runs
// SERIALIZABLE, which is also correct.
func (c *Coordinator) dispatchBatch(ctx context.Context, limit int) ([]*reservation, error) {
	var out []*reservation
	err := c.db.ReadCommitted(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		now := c.now().UTC()
		// One round trip per dispatch: the lock comes first in the first pipeline, so each later
		// statement (READ COMMITTED: a snapshot per statement) reads after it is held; each
		// dispatch's writes go out in the pipeline of the next dispatch's reads, and the last
		// one's with the COMMIT.
		b := &pgx.Batch{}
		b.Queue(`SELECT round FROM render_scheduler_state WHERE id = 1 FOR UPDATE`)
		c.queueDispatchReads(b, now)
		br := tx.SendBatch(ctx, b)
		var round int64
		err := br.QueryRow().Scan(&round)
		writes := 0 // the write statements at the head of br, before the reads
		for err == nil {
			for range writes {
				if _, err = br.Exec(); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
			var res *reservation
			res, err = c.scanDispatchReads(br)
			if cerr := br.Close(); err == nil {
				err = cerr
			}
			if err != nil || res == nil {
				return err
			}
			out = append(out, res)
			w := c.dispatchWrites(res, now)
			if len(out) >= limit {
				for _, q := range w {
					if err := db.Defer(ctx, tx, q.SQL, q.Arguments...); err != nil {
						return err
					}
				}
				return nil
			}
			b = &pgx.Batch{QueuedQueries: w}
			c.queueDispatchReads(b, now)
			br, writes = tx.SendBatch(ctx, b), len(w)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queueDispatchReads queues the reads of one dispatch: the occupancy, an idle worker (locked),
// the pick.
func (c *Coordinator) queueDispatchReads(b *pgx.Batch, now time.Time) {
	b.Queue(`SELECT count(*) FROM render_attempts WHERE released = false`)
	b.Queue(`SELECT w.worker_id, w.epoch, w.url, w.slot_generation FROM render_workers w
		WHERE w.state = 'ready' AND w.environment_digest = $1
		  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.released = false)
		ORDER BY w.last_dispatch_at, w.worker_id LIMIT 1 FOR UPDATE`, c.cfg.ProfileDigest)
	b.Queue(pickSQL, now, now.Add(-c.cfg.PromoteAfter), c.cfg.WorkspaceConcurrency)
}

// scanDispatchReads reads what queueDispatchReads queued: a reservation to make, or nil when
// nothing can be dispatched.
func (c *Coordinator) scanDispatchReads(br pgx.BatchResults) (*reservation, error) {
	var total int
	var w reservation
	if err := br.QueryRow().Scan(&total); err != nil {
		return nil, err
	}
	noWorker := false
	err := br.QueryRow().Scan(&w.workerID, &w.epoch, &w.url, &w.slotGeneration)
	if errors.Is(err, pgx.ErrNoRows) {
		noWorker, err = true, nil
	}
	if err != nil {
		return nil, err
	}
	var prio int
	req, err := scanRequest(br.QueryRow(), &w.seq, &prio)
	if errors.Is(err, pgx.ErrNoRows) || noWorker || total >= c.cfg.GlobalConcurrency {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	w.req = req
	return &w, nil
}

// dispatchWrites are the writes of one reservation (it sets the reservation's attempt and slot
// generation). If the request was cancelled since the pick, the update matches nothing, no
// attempt is inserted, and markDispatched (which needs the reserved row) sends nothing.
func (c *Coordinator) dispatchWrites(w *reservation, now time.Time) []*pgx.QueuedQuery {
	w.slotGeneration++
	w.attemptID = ids.New(ids.Attempt)
	req := &w.req
	req.State, req.AttemptsUsed = StateExecuting, req.AttemptsUsed+1
	return []*pgx.QueuedQuery{
		{SQL: `UPDATE render_requests SET state = 'executing', attempts_used = attempts_used + 1, next_seq = next_seq + 1, updated_at = $3
				WHERE workspace_id = $1 AND id = $2 AND state IN ('queued', 'retry_wait')`, Arguments: []any{req.WorkspaceID, req.ID, now}},
		{SQL: `UPDATE render_workers SET slot_generation = $3, last_dispatch_at = $4 WHERE worker_id = $1 AND epoch = $2`,
			Arguments: []any{w.workerID, w.epoch, w.slotGeneration, now}},
		{SQL: `INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch,
				slot_generation, state, driver, driver_until, created_at)
				SELECT workspace_id, id, $3::INT8, $4, $5, $6, $7::INT8, 'reserved', $8, $9, $10 FROM render_requests
				WHERE workspace_id = $1 AND id = $2 AND state = 'executing' AND next_seq = $3::INT8 + 1`,
			Arguments: []any{req.WorkspaceID, req.ID, w.seq, w.attemptID, w.workerID, w.epoch, w.slotGeneration, c.id, now.Add(c.Lease), now}},
		{SQL: `UPDATE render_scheduler_state SET round = round + 1,
				cursor_interactive = CASE WHEN $1::TEXT = 'interactive' THEN $2::TEXT ELSE cursor_interactive END,
				cursor_background = CASE WHEN $1::TEXT = 'background' THEN $2::TEXT ELSE cursor_background END,
				dispatched = dispatched + 1, updated_at = $3 WHERE id = 1`, Arguments: []any{string(req.Category), req.WorkspaceID, now}},
	}
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
			batch, err := c.dispatchBatch(ctx, dispatchBatchMax)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("render dispatch failed", zapErr(err))
				}
				break
			}
			if len(batch) == 0 {
				break
			}
			for _, res := range batch {
				c.observe("dispatch", res.req.Operation, time.Since(res.req.EnqueuedAt))
				c.startDriver(ctx, res.attemptID, res, true)
			}
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
