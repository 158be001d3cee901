package render

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
)

// The worker registry's record of epochs, their host identity and their quarantine.
//
// A renderer kills every process left in its cgroup before it serves, so a new epoch of a
// worker proves an older epoch's attempts gone — but only when both ran on the same host boot
// and in the same cgroup (rc.HostIdentity.Proves). A worker that reappears elsewhere (another
// node, another container) proves nothing: the older epoch is quarantined with its attempts
// unknown, holding their capacity (and the worker's slot: at most one unreleased attempt per
// worker), until an operator confirms the old node's termination (Operator.Release) — the
// audited procedure of render-execution.md, "Deadline and cancellation" 3.

// supersededPrefix starts the detail of an epoch quarantined because a newer epoch of its
// worker could not prove its processes gone; a probe never lifts such a quarantine.
const supersededPrefix = "superseded by epoch "

// workerRecord is what the registry learnt from one look at a configured worker.
type workerRecord struct {
	w      Worker
	caps   rc.Capabilities
	state  string // ready, unready or mismatch, as the probe found it
	detail string
}

// register records a worker's current epoch (its identity, the probe's state, a quarantine
// kept or lifted by the probe after its cool-down) and settles its older epochs: retired when
// the new epoch proves them gone or they hold nothing, quarantined when they hold attempts that
// nothing proves stopped. It returns the older epochs whose attempts the new one proves gone.
func (c *Coordinator) register(ctx context.Context, r workerRecord) ([]string, error) {
	now := c.now().UTC()
	host := r.caps.Host
	if host == nil {
		host = &rc.HostIdentity{}
	}
	cooldown := c.cfg.QuarantineCooldown
	if cooldown <= 0 {
		cooldown = DefaultQuarantineCooldown
	}
	var proven []string
	var lifted, quarantined []string
	err := c.db.Tx(ctx, func(tx pgx.Tx) error {
		proven, lifted, quarantined = proven[:0], lifted[:0], quarantined[:0]
		state, detail := r.state, r.detail
		var qAt *time.Time
		var prev, prevDetail string
		err := tx.QueryRow(ctx, `SELECT state, detail, quarantined_at FROM render_workers WHERE worker_id = $1 AND epoch = $2 FOR UPDATE`,
			r.w.ID, r.caps.Epoch).Scan(&prev, &prevDetail, &qAt)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		switch {
		case prev == "retired":
			state, detail = prev, prevDetail // an operator retired this epoch: final
		case prev == "quarantined" && state == "ready" && qAt != nil && !qAt.After(now.Add(-cooldown)) && !strings.HasPrefix(prevDetail, supersededPrefix):
			// The probe passed after the cool-down: the quarantine is lifted, and recorded.
			if _, err := tx.Exec(ctx, `INSERT INTO render_operator_actions (id, worker_id, epoch, action, operator, reason, created_at)
				VALUES ($1, $2, $3, 'probe_lift', 'probe', $4, $5)`, ids.New("rop"), r.w.ID, r.caps.Epoch,
				clip("capabilities and /readyz passed after the quarantine's cool-down; it was quarantined for: "+prevDetail, 1000), now); err != nil {
				return err
			}
			qAt = nil
			lifted = append(lifted, prevDetail)
		case prev == "quarantined":
			state, detail = prev, prevDetail
		default:
			qAt = nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO render_workers (worker_id, epoch, url, environment_digest, state, detail,
			registered_at, heartbeat_at, last_dispatch_at, boot_id, cgroup_id, quarantined_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7, $8, $9, $10)
			ON CONFLICT (worker_id, epoch) DO UPDATE SET url = excluded.url, environment_digest = excluded.environment_digest,
			heartbeat_at = excluded.heartbeat_at, state = excluded.state, detail = excluded.detail,
			boot_id = excluded.boot_id, cgroup_id = excluded.cgroup_id, quarantined_at = excluded.quarantined_at`,
			r.w.ID, r.caps.Epoch, r.w.URL, r.caps.EnvironmentDigest, state, clip(detail, 300), now, host.BootID, host.Cgroup, qAt); err != nil {
			return err
		}
		type older struct {
			epoch, state, detail string
			id                   rc.HostIdentity
			holds                bool
		}
		rows, err := tx.Query(ctx, `SELECT w.epoch, w.state, w.detail, w.boot_id, w.cgroup_id,
			EXISTS (SELECT 1 FROM render_attempts a WHERE a.worker_id = w.worker_id AND a.epoch = w.epoch AND a.released = false)
			FROM render_workers w WHERE w.worker_id = $1 AND w.epoch <> $2 AND w.state <> 'retired' FOR UPDATE OF w`, r.w.ID, r.caps.Epoch)
		if err != nil {
			return err
		}
		var olds []older
		for rows.Next() {
			var o older
			if err := rows.Scan(&o.epoch, &o.state, &o.detail, &o.id.BootID, &o.id.Cgroup, &o.holds); err != nil {
				rows.Close()
				return err
			}
			olds = append(olds, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, o := range olds {
			if host.Proves(&o.id) || !o.holds {
				why := supersededPrefix + r.caps.Epoch
				if o.holds {
					why += " on the same host and cgroup, which killed its processes at start"
					proven = append(proven, o.epoch)
				}
				if _, err := tx.Exec(ctx, `UPDATE render_workers SET state = 'retired', detail = $3 WHERE worker_id = $1 AND epoch = $2`,
					r.w.ID, o.epoch, clip(why, 300)); err != nil {
					return err
				}
				continue
			}
			// Nothing proves its attempts stopped: they keep their capacity, unknown, and the
			// epoch is quarantined until an operator confirms its termination.
			if _, err := tx.Exec(ctx, `UPDATE render_attempts SET state = 'unknown' WHERE worker_id = $1 AND epoch = $2 AND released = false`,
				r.w.ID, o.epoch); err != nil {
				return err
			}
			if o.state == "quarantined" && strings.HasPrefix(o.detail, supersededPrefix) {
				continue
			}
			why := supersededPrefix + r.caps.Epoch + " on another host or cgroup: nothing proves its attempts stopped; verify the old node's termination, then cellctl renderers release"
			if _, err := tx.Exec(ctx, `UPDATE render_workers SET state = 'quarantined', detail = $3, quarantined_at = $4 WHERE worker_id = $1 AND epoch = $2`,
				r.w.ID, o.epoch, clip(why, 300), now); err != nil {
				return err
			}
			quarantined = append(quarantined, o.epoch)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, d := range lifted {
		c.log.Info("render worker quarantine lifted by a passing probe", zap.String("worker_id", r.w.ID), zap.String("epoch", r.caps.Epoch), zap.String("was", d))
	}
	for _, e := range quarantined {
		c.log.Warn("render worker epoch quarantined: a new epoch on another host or cgroup does not prove its attempts stopped",
			zap.String("worker_id", r.w.ID), zap.String("epoch", e), zap.String("new_epoch", r.caps.Epoch))
	}
	return proven, nil
}

// epochProven reports whether a worker now answering with caps proves that the processes of
// its earlier epoch (the one an attempt ran on) are gone.
func (c *Coordinator) epochProven(ctx context.Context, workerID, epoch string, caps rc.Capabilities) bool {
	if caps.Epoch == epoch {
		return false
	}
	var old rc.HostIdentity
	if err := c.db.Q(ctx).QueryRow(ctx, `SELECT boot_id, cgroup_id FROM render_workers WHERE worker_id = $1 AND epoch = $2`,
		workerID, epoch).Scan(&old.BootID, &old.Cgroup); err != nil {
		return false
	}
	return caps.Host.Proves(&old)
}

// quarantine takes a worker epoch out of dispatch for a renderer fault; a probe lifts it after
// the cool-down (register), an operator at once (Operator.Unquarantine).
func (c *Coordinator) quarantine(ctx context.Context, workerID, epoch, why string) {
	_, err := c.db.Exec(ctx, `UPDATE render_workers SET state = 'quarantined', detail = $3, quarantined_at = $4
		WHERE worker_id = $1 AND epoch = $2 AND state NOT IN ('quarantined', 'retired')`, workerID, epoch, clip(why, 300), c.now().UTC())
	if err != nil {
		c.log.Warn("render worker could not be quarantined", zap.String("worker_id", workerID), zapErr(err))
		return
	}
	c.log.Warn("render worker quarantined", zap.String("worker_id", workerID), zap.String("epoch", epoch), zap.String("reason", why))
}
