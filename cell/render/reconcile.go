package render

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"slidecells/cell/auth"
	"slidecells/shared/loop"
	rc "slidecells/shared/rendercontract"
)

// Start runs the dispatcher, the worker registry and the reconciler until Stop.
func (c *Coordinator) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		<-c.stop
		cancel()
	}()
	ready := c.refreshWorkers(ctx)
	c.wg.Add(1)
	go c.dispatchLoop(ctx)
	// Each worker is probed on its own schedule: a renderer that does not answer (frozen,
	// blackholed) costs its own probe's timeout, never the heartbeats of the others. Probed
	// one after another, two such renderers kept every healthy one's heartbeat older than
	// health's three ticks for most of each pass, and the cell reported renders unavailable.
	for i, w := range c.cfg.Workers {
		c.wg.Go(func() {
			wasReady := ready[i] // as the start pass found it
			loop.Every(ctx, c.TickInterval, nil, func(ctx context.Context) {
				// A worker that became ready, or an epoch whose attempts were released, can
				// take a dispatch now; the dispatcher's own tick covers the rest.
				nowReady, released := c.refreshWorker(ctx, w)
				if (nowReady && !wasReady) || released {
					c.Kick()
				}
				wasReady = nowReady
			})
		})
	}
	c.wg.Go(func() { loop.Every(ctx, c.TickInterval, nil, c.reconcile) })
}

// Stop stops dispatching and driving and waits for the goroutines; attempts it drove are taken
// over by another coordinator when their lease ends (or by this cell's successor).
func (c *Coordinator) Stop() {
	c.stopped.Do(func() { close(c.stop) })
	c.wg.Wait()
}

// refreshWorkers reads every configured worker's capabilities and readiness and records its
// current epoch (register). A new epoch on the same host and cgroup retires the older ones: the
// renderer kills every process of earlier epochs in its cgroup before it serves, which proves
// their attempts gone, so those attempts are released. A new epoch elsewhere proves nothing:
// the older epoch is quarantined and its attempts stay unknown until an operator releases them.
//
// This is the pass at start, every worker at once; after it each worker is refreshed by a loop
// of its own (Start). It reports which workers (by index in the configuration) it found ready.
func (c *Coordinator) refreshWorkers(ctx context.Context) []bool {
	ready := make([]bool, len(c.cfg.Workers))
	var wg sync.WaitGroup
	for i, w := range c.cfg.Workers {
		wg.Go(func() { ready[i], _ = c.refreshWorker(ctx, w) })
	}
	wg.Wait()
	c.Kick()
	return ready
}

// probeTimeout bounds one probe of a worker (capabilities, then /readyz).
const probeTimeout = 2 * time.Second

// refreshWorker probes one worker and records what it found (see refreshWorkers). It reports
// whether the probe found the worker ready and whether attempts of a retired epoch were
// released.
func (c *Coordinator) refreshWorker(ctx context.Context, w Worker) (ready, released bool) {
	qctx, cancel := context.WithTimeout(ctx, probeTimeout)
	caps, ans, err := c.client.capabilities(qctx, w.URL)
	state, detail := "ready", ""
	if err == nil && ans.err == nil {
		switch {
		case caps.WorkerID != w.ID:
			state, detail = "mismatch", "another worker answers at this address"
		case caps.ProtocolVersions != rc.CurrentProtocolVersions():
			state, detail = "mismatch", "protocol versions differ from this release's"
		case caps.EnvironmentDigest != c.cfg.ProfileDigest:
			state, detail = "mismatch", "environment digest differs from RENDER_PROFILE_MANIFEST"
		case caps.Slot.State == rc.SlotDraining:
			state, detail = "unready", "draining"
		}
		if state == "ready" {
			if ra, rerr := c.client.do(qctx, "GET", w.URL+"/readyz", nil, nil); rerr != nil || ra.err != nil {
				state, detail = "unready", "execution environment not ready"
			}
		}
	}
	cancel()
	if err != nil || ans.err != nil {
		why := "unreachable"
		var nc *nonContract
		switch {
		case errors.As(err, &nc):
			why = nc.Error()
		case ans.err != nil:
			why = "capabilities refused: " + clip(ans.err.Message, 200)
		}
		_, _ = c.db.Exec(ctx, `UPDATE render_workers SET state = 'unready', detail = $2
			WHERE worker_id = $1 AND state = 'ready'`, w.ID, why)
		return false, false
	}
	proven, err := c.register(ctx, workerRecord{w: w, caps: caps, state: state, detail: detail})
	if err != nil {
		c.log.Warn("render worker registry update failed", zap.String("worker_id", w.ID), zapErr(err))
		return false, false
	}
	for _, e := range proven {
		c.releaseEpoch(ctx, w.ID, e)
	}
	return state == "ready", len(proven) > 0
}

// releaseEpoch releases the unreleased attempts of a retired worker epoch.
func (c *Coordinator) releaseEpoch(ctx context.Context, workerID, epoch string) {
	for _, a := range c.attemptsWhere(ctx, `a.worker_id = $1 AND a.epoch = $2`, workerID, epoch) {
		c.finish(ctx, a, rc.NewError(rc.CodeBrowserLost, rc.StageCleanup, "the worker restarted on the same host and cgroup; its earlier epoch's processes were killed at start"), a.state != "reserved")
	}
}

// attemptsWhere loads unreleased attempts with their requests and worker addresses.
func (c *Coordinator) attemptsWhere(ctx context.Context, where string, args ...any) []*attempt {
	rows, err := c.db.Q(ctx).Query(ctx, `SELECT a.attempt_id, a.worker_id, a.epoch, a.slot_generation, a.state, COALESCE(w.url, ''),
		a.workspace_id, a.request_id FROM render_attempts a
		LEFT JOIN render_workers w ON w.worker_id = a.worker_id AND w.epoch = a.epoch
		WHERE a.released = false AND `+where+` LIMIT 50`, args...)
	if err != nil {
		return nil
	}
	type key struct{ ws, id string }
	var out []*attempt
	var keys []key
	for rows.Next() {
		a := &attempt{}
		var k key
		if rows.Scan(&a.attemptID, &a.workerID, &a.epoch, &a.slotGeneration, &a.state, &a.url, &k.ws, &k.id) == nil {
			out, keys = append(out, a), append(keys, k)
		}
	}
	rows.Close()
	kept := out[:0]
	for i, a := range out {
		r, err := c.get(ctx, keys[i].ws, keys[i].id)
		if err == nil {
			a.req = r
			kept = append(kept, a)
		}
	}
	return kept
}

// reconcile expires what waited or executed past its deadline and takes over attempts whose
// driver's lease ended.
func (c *Coordinator) reconcile(ctx context.Context) {
	now := c.now().UTC()
	rows, err := c.db.Q(ctx).Query(ctx, expireSQL+` RETURNING id`, now)
	if err == nil {
		var expired []string
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				expired = append(expired, id)
			}
		}
		rows.Close()
		for _, id := range expired {
			c.notify(id)
		}
	}
	for _, a := range c.attemptsWhere(ctx, `a.driver_until < $1`, now) {
		tag, err := c.db.Exec(ctx, `UPDATE render_attempts SET driver = $2, driver_until = $3
			WHERE attempt_id = $1 AND released = false AND driver_until < $4`, a.attemptID, c.id, now.Add(c.Lease), now)
		if err != nil || tag.RowsAffected() != 1 {
			continue
		}
		if a.state == "reserved" {
			// Its sender died before marking it dispatched: it was never sent.
			c.finish(ctx, a, rc.NewError(rc.CodeServiceUnavailable, rc.StageAdmission, "the dispatch was never sent"), false)
			continue
		}
		c.startDriver(ctx, a.attemptID, &reservation{req: a.req, workerID: a.workerID, epoch: a.epoch, url: a.url, slotGeneration: a.slotGeneration}, false)
	}
	// Artifact references, results and requests are released by Retention (retention.go).
}

// Cancel persists a new cancel version first; a waiting request ends at once, an executing one
// is told through its attempt's worker and ends when the worker reports it stopped.
func (c *Coordinator) Cancel(ctx context.Context, sc auth.Scope, id string) (Request, error) {
	ws := sc.WorkspaceID()
	var r Request
	err := c.db.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = scanRequest(tx.QueryRow(ctx, `UPDATE render_requests SET cancel_version = cancel_version + 1,
			state = CASE WHEN state IN ('queued', 'retry_wait') THEN 'cancelled' ELSE state END,
			finished_at = CASE WHEN state IN ('queued', 'retry_wait') THEN $3 ELSE finished_at END,
			error_code = CASE WHEN state IN ('queued', 'retry_wait') THEN 'RENDER_CANCELLED' ELSE error_code END,
			updated_at = $3
			WHERE workspace_id = $1 AND id = $2 AND state IN ('queued', 'retry_wait', 'executing') RETURNING `+requestCols, ws, id, c.now().UTC()))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return c.get(ctx, ws, id)
	}
	if err != nil {
		return r, err
	}
	c.notify(id)
	if r.State == StateExecuting {
		for _, a := range c.attemptsWhere(ctx, `a.workspace_id = $1 AND a.request_id = $2 AND a.state <> 'reserved'`, ws, id) {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = c.client.cancel(cctx, a.url, a.attemptID, r.CancelVersion)
			cancel()
		}
	}
	return r, nil
}

// CancelOwner cancels every unfinished render request of a business owner (a job ID,
// "validation:<user>", "screenshot:<page>"), its renewals included: the business action that
// needed them ended (a cancelled job, a removed member, an archived page). Each cancel is
// persisted first (its cancel version), then the renderer of an executing one is told. It
// returns the number of requests cancelled.
func (c *Coordinator) CancelOwner(ctx context.Context, sc auth.Scope, owner string) (int, error) {
	ws := sc.WorkspaceID()
	rows, err := c.db.Q(ctx).Query(ctx, `SELECT id FROM render_requests WHERE workspace_id = $1
		AND state IN ('queued', 'retry_wait', 'executing') AND (owner = $2 OR left(owner, length($2) + 7) = $2 || '/after:')
		LIMIT 1000`, ws, owner)
	if err != nil {
		return 0, err
	}
	var list []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		list = append(list, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, id := range list {
		r, err := c.Cancel(ctx, sc, id)
		if err != nil {
			return n, err
		}
		if r.CancelVersion > 0 {
			n++
		}
	}
	return n, nil
}

// Health is the render capability right now: dispatchable workers, quarantined ones, queue
// depth and attempts whose end is unknown.
type Health struct {
	Available  bool
	Ready      int
	Configured int
	Queued     int
	Executing  int
	// Quarantined are the worker IDs with a quarantined epoch (a renderer fault, or an older
	// epoch whose attempts nothing proves stopped); Unknown counts attempts in state unknown.
	Quarantined []string
	Unknown     int
	Detail      string
}

// Health reports render capability honestly: workers that a dispatch could use now.
func (c *Coordinator) Health(ctx context.Context) Health {
	h := Health{Configured: len(c.cfg.Workers)}
	fresh := c.now().UTC().Add(-3 * c.TickInterval)
	_ = c.db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM render_workers WHERE state = 'ready' AND environment_digest = $1 AND heartbeat_at >= $2`,
		c.cfg.ProfileDigest, fresh).Scan(&h.Ready)
	_ = c.db.Q(ctx).QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('queued', 'retry_wait')), count(*) FILTER (WHERE state = 'executing')
		FROM render_requests WHERE state IN ('queued', 'retry_wait', 'executing')`).Scan(&h.Queued, &h.Executing)
	if rows, err := c.db.Q(ctx).Query(ctx, `SELECT DISTINCT worker_id FROM render_workers WHERE state = 'quarantined' ORDER BY worker_id LIMIT 20`); err == nil {
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				h.Quarantined = append(h.Quarantined, id)
			}
		}
		rows.Close()
	}
	_ = c.db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE released = false AND state = 'unknown'`).Scan(&h.Unknown)
	h.Available = h.Ready > 0
	h.Detail = fmt.Sprintf("%d of %d renderers dispatchable; %d queued, %d executing", h.Ready, h.Configured, h.Queued, h.Executing)
	if len(h.Quarantined) > 0 {
		h.Detail += fmt.Sprintf("; quarantined: %s (cellctl renderers list)", strings.Join(h.Quarantined, ", "))
	}
	if h.Unknown > 0 {
		h.Detail += fmt.Sprintf("; %d attempts of unknown end hold their slots", h.Unknown)
	}
	return h
}
