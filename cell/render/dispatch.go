package render

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

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

// rotation is the 3:1 weighted rotation: three interactive dispatches, then one background.
func preferred(round int64) Category {
	if round%4 < 3 {
		return Interactive
	}
	return Background
}

// dispatchOne runs one dispatch transaction. It returns nil when nothing can be dispatched now
// (no waiting request, no idle worker, or a limit reached).
func (c *Coordinator) dispatchOne(ctx context.Context) (*reservation, error) {
	var res *reservation
	err := c.db.Tx(ctx, func(tx pgx.Tx) error {
		res = nil
		now := c.now().UTC()
		var round int64
		var cursorI, cursorB string
		if err := tx.QueryRow(ctx, `SELECT round, cursor_interactive, cursor_background FROM render_scheduler_state
			WHERE id = 1 FOR UPDATE`).Scan(&round, &cursorI, &cursorB); err != nil {
			return err
		}
		// Occupancy: every attempt is inserted under the lock held now, so this count is exact.
		busy := map[string]int{}
		total := 0
		rows, err := tx.Query(ctx, `SELECT workspace_id, count(*) FROM render_attempts WHERE released = false GROUP BY workspace_id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var ws string
			var n int
			if err := rows.Scan(&ws, &n); err != nil {
				rows.Close()
				return err
			}
			busy[ws], total = n, total+n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if total >= c.cfg.GlobalConcurrency {
			return nil
		}
		full := make([]string, 0, len(busy))
		for ws, n := range busy {
			if n >= c.cfg.WorkspaceConcurrency {
				full = append(full, ws)
			}
		}
		var w reservation
		err = tx.QueryRow(ctx, `SELECT w.worker_id, w.epoch, w.url FROM render_workers w
			WHERE w.state = 'ready' AND w.environment_digest = $1
			  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.released = false)
			ORDER BY w.last_dispatch_at, w.worker_id LIMIT 1 FOR UPDATE`, c.cfg.ProfileDigest).Scan(&w.workerID, &w.epoch, &w.url)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		// Pick: promoted (waited too long) first, then the rotation's category, then the other.
		pick := func(where string, args ...any) (string, string, error) {
			var ws, id string
			args = append([]any{now, full}, args...)
			err := tx.QueryRow(ctx, `SELECT workspace_id, id FROM render_requests
				WHERE state IN ('queued', 'retry_wait') AND not_before <= $1 AND deadline_at > $1
				  AND NOT (workspace_id = ANY($2)) AND `+where+` LIMIT 1`, args...).Scan(&ws, &id)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", "", nil
			}
			return ws, id, err
		}
		var ws, id string
		var cat Category
		ws, id, err = pick(`enqueued_at <= $3 ORDER BY enqueued_at`, now.Add(-c.cfg.PromoteAfter))
		if err != nil {
			return err
		}
		promoted := id != ""
		if !promoted {
			first := preferred(round)
			for _, cand := range []Category{first, other(first)} {
				cursor := cursorI
				if cand == Background {
					cursor = cursorB
				}
				// Workspace round-robin: the next workspace after the cursor, wrapping around.
				ws, id, err = pick(`category = $3 AND workspace_id > $4 ORDER BY workspace_id, enqueued_at`, string(cand), cursor)
				if err == nil && id == "" {
					ws, id, err = pick(`category = $3 ORDER BY workspace_id, enqueued_at`, string(cand))
				}
				if err != nil {
					return err
				}
				if id != "" {
					cat = cand
					break
				}
			}
		}
		if id == "" {
			return nil
		}
		req, err := scanRequest(tx.QueryRow(ctx, `UPDATE render_requests
			SET state = 'executing', attempts_used = attempts_used + 1, next_seq = next_seq + 1, updated_at = $3
			WHERE workspace_id = $1 AND id = $2 AND state IN ('queued', 'retry_wait')
			RETURNING `+requestCols, ws, id, now))
		if err != nil {
			return err
		}
		if promoted {
			cat = req.Category
		}
		if err := tx.QueryRow(ctx, `SELECT next_seq - 1 FROM render_requests WHERE workspace_id = $1 AND id = $2`, ws, id).Scan(&w.seq); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `UPDATE render_workers SET slot_generation = slot_generation + 1, last_dispatch_at = $3
			WHERE worker_id = $1 AND epoch = $2 RETURNING slot_generation`, w.workerID, w.epoch, now).Scan(&w.slotGeneration); err != nil {
			return err
		}
		w.attemptID = ids.New(ids.Attempt)
		if _, err := tx.Exec(ctx, `INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch,
			slot_generation, state, driver, driver_until, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'reserved', $8, $9, $10)`,
			ws, id, w.seq, w.attemptID, w.workerID, w.epoch, w.slotGeneration, c.id, now.Add(c.Lease), now); err != nil {
			return err
		}
		col := "cursor_interactive"
		if cat == Background {
			col = "cursor_background"
		}
		if _, err := tx.Exec(ctx, `UPDATE render_scheduler_state SET round = round + 1, `+col+` = $1,
			dispatched = dispatched + 1, updated_at = $2 WHERE id = 1`, ws, now); err != nil {
			return err
		}
		w.req = req
		res = &w
		return nil
	})
	return res, err
}

func other(c Category) Category {
	if c == Interactive {
		return Background
	}
	return Interactive
}

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
