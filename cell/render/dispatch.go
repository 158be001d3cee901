package render

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
// all of them, so a larger batch makes other coordinators wait longer, and a dispatch's latency
// is its whole transaction's. Measured (BENCHMARKS.md, "Dispatch transactions"), 8 per
// transaction saves under 10 % of the server's CPU per dispatch and raises no throughput once
// the transaction is one round trip, while its p99 is several times one's: so one.
const dispatchBatchMax = 1

// dispatchOne is dispatchBatch of one.
func (c *Coordinator) dispatchOne(ctx context.Context) (*reservation, error) {
	res, _, err := c.dispatchBatch(ctx, 1)
	if len(res) == 0 {
		return nil, err
	}
	return res[0], err
}

// dispatchBatch runs one dispatch transaction that reserves up to limit attempts, one after the
// other under one hold of the scheduler row lock: exactly the dispatches that limit transactions
// of one would make in a row (same picks, same rotation and cursors, same occupancy checks),
// with one lock wait and one commit instead of limit. It returns the reservations made, and
// more: whether another transaction may find work now (the last dispatch statement reserved an
// attempt, or its request was ended by a cancellation or the deadline sweep between the pick
// and the update). None and more false: nothing can be dispatched now (no waiting request, no
// idle worker, or a limit reached).
//
// The whole transaction is one round trip: BEGIN, the lock, limit dispatch statements
// (dispatchSQL) and COMMIT go out as one pipeline, so the lock is held only while the server
// runs the statements, never across a client's turn (reading results, building the next
// statements, being scheduled on a busy host).
//
// It runs at READ COMMITTED: its correctness rests on the scheduler row lock (every attempt is
// inserted, and every request leaves the queue, under it, so the occupancy count and the pick
// are exact once the lock is held), the worker row lock and the two partial unique indexes, not
// on serializability. Each dispatch is a statement of its own after the lock statement and
// after the previous dispatch, so it reads (READ COMMITTED: a snapshot per statement) what they
// did: the attempt that occupies a worker and counts against the cell's and the workspace's
// limits, the moved cursor and round. At SERIALIZABLE every dispatcher that queued behind the
// lock would fail with a serialization error when it got it (the row changed after its
// snapshot). On a CockroachDB cluster without READ COMMITTED it runs SERIALIZABLE, which is
// also correct; a restart it asks for reruns the whole pipeline.
func (c *Coordinator) dispatchBatch(ctx context.Context, limit int) ([]*reservation, bool, error) {
	limit = max(limit, 1)
	for run := 0; ; run++ {
		out, more, err := c.dispatchPipeline(ctx, limit)
		if !db.IsRetryable(err) || run >= db.DefaultMaxRetries {
			return out, more, err
		}
		// Jittered, growing pause before the rerun (as db.Tx's retries).
		d := min(2*time.Millisecond<<min(run, 10), 50*time.Millisecond)
		t := time.NewTimer(d/2 + rand.N(d/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C:
		}
	}
}

// dispatchPipeline is one try of dispatchBatch.
func (c *Coordinator) dispatchPipeline(ctx context.Context, limit int) (out []*reservation, more bool, err error) {
	now := c.now().UTC()
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	if !c.db.Cockroach {
		// PostgreSQL would plan the dispatch statement anew at every execution (its custom
		// plans look cheaper than the generic one), and planning it costs more than running
		// it; the generic plan is the same index range scans. (CockroachDB caches the
		// prepared statement's optimized plan itself.)
		b.Queue(`SET LOCAL plan_cache_mode = force_generic_plan`)
	}
	b.Queue(`SELECT round FROM render_scheduler_state WHERE id = 1 FOR UPDATE`)
	attempts := make([]string, limit)
	for i := range attempts {
		attempts[i] = ids.New(ids.Attempt)
		b.Queue(dispatchSQL, now, now.Add(-c.cfg.PromoteAfter), c.cfg.WorkspaceConcurrency, c.cfg.GlobalConcurrency,
			c.cfg.ProfileDigest, attempts[i], c.id, now.Add(c.Lease))
	}
	b.Queue(`COMMIT`)
	conn, err := c.db.Pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	defer conn.Release()
	br := conn.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			out, more = nil, false
			// A failed statement makes the server skip the rest of the pipeline, COMMIT
			// included: end the transaction (harmless when there is none) so that the
			// connection goes back to the pool idle.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Exec(rctx, `ROLLBACK`)
			cancel()
		}
	}()
	if _, err = br.Exec(); err != nil { // BEGIN
		return nil, false, err
	}
	if !c.db.Cockroach {
		if _, err = br.Exec(); err != nil { // SET LOCAL
			return nil, false, err
		}
	}
	var round int64
	if err = br.QueryRow().Scan(&round); err != nil {
		return nil, false, err
	}
	for i := range attempts {
		var res *reservation
		var lost bool
		if res, lost, err = scanDispatch(br, attempts[i]); err != nil {
			return nil, false, err
		}
		more = res != nil || lost
		if res != nil {
			out = append(out, res)
		}
	}
	var tag pgconn.CommandTag
	if tag, err = br.Exec(); err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	return out, more, err
}

// scanDispatch reads the result of one dispatchSQL: a reservation, or nil and lost when the
// picked request was ended between the pick and its update (nothing was reserved; another
// dispatch may find work), or nil, false when nothing could be dispatched.
func scanDispatch(br pgx.BatchResults, attemptID string) (*reservation, bool, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, rows.Err()
	}
	if rows.RawValues()[1] == nil { // picked, but no longer waiting when updated
		return nil, true, rows.Err()
	}
	var w reservation
	var prio int
	w.req, err = scanRequest(rows, &w.seq, &w.workerID, &w.epoch, &w.url, &w.slotGeneration, &prio)
	if err != nil {
		return nil, false, err
	}
	w.attemptID = attemptID
	rows.Close()
	return &w, false, rows.Err()
}

// dispatchSQL is one dispatch, in one statement run after the scheduler row lock is held: the
// occupancy, an idle worker (locked), the pick (pickSQL), then the writes: the worker's slot
// generation, the request (executing, its attempt budget and sequence), the reserved attempt,
// the rotation and the category's cursor. The writes happen only when a request was picked and
// a worker found; the attempt and the rotation only when the request was still waiting when it
// was updated (a cancellation or the deadline sweep may end it after the pick: the worker's
// generation then moved for nothing, which is harmless, as generations only have to grow).
// Every write is a CTE of its own table, fed by the RETURNING of the earlier ones, since the
// parts of one statement all read the same snapshot.
//
// It returns no row when nothing could be dispatched, else one row: the picked request's
// columns (requestCols, after the update), its attempt's sequence number, the worker, epoch,
// URL and new slot generation, and the pick's branch; all but the last NULL when the picked
// request was no longer waiting. $1 now, $2 the promotion cutoff, $3 the workspace cap, $4 the
// cell's limit, $5 the profile digest, $6 the attempt ID, $7 the driver, $8 its lease's end.
var dispatchSQL = `WITH wk AS (
	SELECT w.worker_id, w.epoch FROM render_workers w
	WHERE w.state = 'ready' AND w.environment_digest = $5
	  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.released = false)
	  AND (SELECT count(*) FROM render_attempts WHERE released = false) < $4
	ORDER BY w.last_dispatch_at, w.worker_id LIMIT 1 FOR UPDATE),
` + pickCTEs + `,
pick AS (
	SELECT prio, p_ws, p_id FROM candidates WHERE EXISTS (SELECT 1 FROM wk) ORDER BY prio LIMIT 1),
slot AS (
	UPDATE render_workers SET slot_generation = render_workers.slot_generation + 1, last_dispatch_at = $1
	FROM wk WHERE render_workers.worker_id = wk.worker_id AND render_workers.epoch = wk.epoch AND EXISTS (SELECT 1 FROM pick)
	RETURNING render_workers.worker_id, render_workers.epoch, render_workers.url, render_workers.slot_generation),
req AS (
	UPDATE render_requests SET state = 'executing', attempts_used = render_requests.attempts_used + 1,
		next_seq = render_requests.next_seq + 1, updated_at = $1
	FROM pick, slot WHERE render_requests.workspace_id = pick.p_ws AND render_requests.id = pick.p_id
	  AND render_requests.state IN ('queued', 'retry_wait')
	RETURNING ` + requestColsOf("render_requests") + `, render_requests.next_seq - 1 AS seq),
att AS (
	INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch,
		slot_generation, state, driver, driver_until, created_at)
	SELECT req.workspace_id, req.id, req.seq, $6, slot.worker_id, slot.epoch, slot.slot_generation, 'reserved', $7, $8, $1
	FROM req, slot
	RETURNING attempt_id),
rot AS (
	UPDATE render_scheduler_state SET round = render_scheduler_state.round + 1,
		cursor_interactive = CASE WHEN req.category = 'interactive' THEN req.workspace_id ELSE render_scheduler_state.cursor_interactive END,
		cursor_background = CASE WHEN req.category = 'background' THEN req.workspace_id ELSE render_scheduler_state.cursor_background END,
		dispatched = render_scheduler_state.dispatched + 1, updated_at = $1
	FROM req WHERE render_scheduler_state.id = 1
	RETURNING render_scheduler_state.round)
SELECT ` + requestColsOf("req") + `, req.seq, slot.worker_id, slot.epoch, slot.url, slot.slot_generation, pick.prio
FROM pick LEFT JOIN (req CROSS JOIN slot) ON true`

// requestColsOf is requestCols qualified by table t.
func requestColsOf(t string) string {
	cols := strings.Split(requestCols, ",")
	for i, col := range cols {
		cols[i] = t + "." + strings.TrimSpace(col)
	}
	return strings.Join(cols, ", ")
}

// pickCTEs picks the next request (the CTE candidates: its branches' first rows, best first by
// prio): one waiting past the promotion threshold first (oldest first), else by the rotation's
// category (round % 4 < 3: interactive) then the other, each round-robin over workspaces from
// the category's cursor (wrapping around), oldest first within a workspace; workspaces at their
// concurrency cap are skipped. Every branch is an index range scan with LIMIT 1 over the waiting
// rows ($1 now, $2 promotion cutoff, $3 the workspace cap).
var pickCTEs = `st AS (
	SELECT CASE WHEN round % 4 < 3 THEN 'interactive' ELSE 'background' END AS pref,
	       cursor_interactive, cursor_background FROM render_scheduler_state WHERE id = 1),
capped AS (
	SELECT workspace_id FROM render_attempts WHERE released = false GROUP BY workspace_id HAVING count(*) >= $3),
candidates (prio, p_ws, p_id) AS (
	(SELECT 1, workspace_id, id FROM render_requests WHERE ` + waitingSQL + ` AND enqueued_at <= $2
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
	 ORDER BY category, workspace_id, enqueued_at LIMIT 1))`

// pickSQL is the pick alone (pickCTEs' best candidate with its request's columns), for
// TestExplainDispatch.
var pickSQL = `WITH ` + pickCTEs + `
SELECT ` + requestCols + `, next_seq, prio FROM (SELECT prio, p_ws AS workspace_id, p_id AS id FROM candidates ORDER BY prio LIMIT 1) p
JOIN render_requests USING (workspace_id, id)`

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
			batch, more, err := c.dispatchBatch(ctx, dispatchBatchMax)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("render dispatch failed", zapErr(err))
				}
				break
			}
			for _, res := range batch {
				c.observe("dispatch", res.req.Operation, time.Since(res.req.EnqueuedAt))
				c.startDriver(ctx, res.attemptID, res, true)
			}
			if !more {
				break
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
