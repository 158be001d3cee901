package render

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	gcblob "gocloud.dev/blob"

	cblob "slidecells/cell/blob"
	"slidecells/cell/snapshot"
	"slidecells/shared/config"
	"slidecells/shared/db"
	"slidecells/shared/loop"
	"slidecells/shared/scrape"
)

// Retention defaults (render-execution.md, "Limits": terminal artifact retention 600 s, cleanup
// grace 5 s).
const (
	DefaultRetentionWindow   = 600 * time.Second
	DefaultRetentionGrace    = 5 * time.Second
	DefaultRetentionBatch    = 200
	DefaultRetentionInterval = 30 * time.Second
	DefaultOrphanInterval    = time.Hour
	DefaultOrphanAfter       = time.Hour
)

// RetentionConfig configures the render retention (the cleaner).
type RetentionConfig struct {
	// Window is how long a terminal request is kept with its attempts, its result and the
	// result's PNG after it finished (RENDER_RETENTION_SECONDS). Within it, a repeat of the
	// same need returns the cached result; past it, everything the request made is deleted.
	Window time.Duration
	// Grace is how long a terminal request keeps its snapshot manifest after its result was
	// consumed (or, without a result, after it finished) (RENDER_RETENTION_GRACE_SECONDS).
	Grace time.Duration
	// Batch is the most requests one statement releases or deletes (RENDER_RETENTION_BATCH); a
	// round repeats full batches, at most maxBatches times per task.
	Batch int
	// Interval between two rounds of the row and reference rules (RENDER_RETENTION_INTERVAL_SECONDS).
	Interval time.Duration
	// OrphanInterval between two sweeps of the blob store for manifests and PNGs that no
	// request refers to (RENDER_RETENTION_SWEEP_SECONDS): it lists ws/*/snapshots/ and
	// ws/*/renders/ of the workspaces this cell hosts.
	OrphanInterval time.Duration
	// OrphanAfter is the least age (blob modification time) of an unreferenced blob before the
	// sweep deletes it; it covers a request being created (the manifest is written before its
	// row) and a result being fetched (the PNG is written before its commit).
	OrphanAfter time.Duration
}

// LoadRetention reads the retention settings; bad values are reported through l.
func LoadRetention(l *config.Loader) RetentionConfig {
	return RetentionConfig{
		Window:         l.Seconds("RENDER_RETENTION_SECONDS", DefaultRetentionWindow, 30*24*3600),
		Grace:          l.Seconds("RENDER_RETENTION_GRACE_SECONDS", DefaultRetentionGrace, 3600),
		Batch:          l.Int("RENDER_RETENTION_BATCH", DefaultRetentionBatch, 1, 10000),
		Interval:       l.Seconds("RENDER_RETENTION_INTERVAL_SECONDS", DefaultRetentionInterval, 24*3600),
		OrphanInterval: l.Seconds("RENDER_RETENTION_SWEEP_SECONDS", DefaultOrphanInterval, 7*24*3600),
		OrphanAfter:    l.Seconds("RENDER_RETENTION_ORPHAN_AFTER_SECONDS", DefaultOrphanAfter, 7*24*3600),
	}
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	if c.Window <= 0 {
		c.Window = DefaultRetentionWindow
	}
	if c.Grace <= 0 {
		c.Grace = DefaultRetentionGrace
	}
	if c.Batch <= 0 {
		c.Batch = DefaultRetentionBatch
	}
	if c.Interval <= 0 {
		c.Interval = DefaultRetentionInterval
	}
	if c.OrphanInterval <= 0 {
		c.OrphanInterval = DefaultOrphanInterval
	}
	if c.OrphanAfter <= 0 {
		c.OrphanAfter = DefaultOrphanAfter
	}
	return c
}

// maxBatches bounds one task of one round; what is left waits for the next round (the backlog
// gauge shows it).
const maxBatches = 50

// Retention releases everything the render path writes (render-execution.md, "RenderSnapshot":
// the artifact reference is released once the request is terminal, all attempts are done and
// the result is consumed or its retention expired):
//
//   - snapshot manifests of requests: terminal, no unreleased attempt, and the result consumed
//     (or no result: failed, cancelled, expired) Grace ago, or finished Window ago;
//   - requests with their attempts, result row and PNGs (the committed one and any a late
//     commit left under the request's prefix): terminal, no unreleased attempt, finished Window
//     ago;
//   - orphans (the sweep): preview-artifact manifests past their expiry and request manifests
//     whose row is gone, PNGs under ws/<ws>/renders/<request>/ whose request is gone, both only
//     OrphanAfter after they were written.
//
// Every replica runs it. Rows are claimed by one conditional UPDATE or DELETE … RETURNING, so
// a row is released or deleted by exactly one replica and counted once; blob deletes ignore an
// absent blob, so a crash between the row and the blob leaves an orphan the sweep removes and a
// concurrent sweep is harmless.
type Retention struct {
	cfg    RetentionConfig
	db     *db.DB
	bucket *gcblob.Bucket
	log    *zap.Logger
	now    func() time.Time

	deleted *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	rounds  atomic.Int64
}

// RetentionStats is what one call deleted.
type RetentionStats struct {
	Snapshots, Requests, Attempts, Results, PNGs int
	OrphanSnapshots, OrphanPNGs                  int
	Bytes                                        int64
}

func (s *RetentionStats) add(o RetentionStats) {
	s.Snapshots += o.Snapshots
	s.Requests += o.Requests
	s.Attempts += o.Attempts
	s.Results += o.Results
	s.PNGs += o.PNGs
	s.OrphanSnapshots += o.OrphanSnapshots
	s.OrphanPNGs += o.OrphanPNGs
	s.Bytes += o.Bytes
}

// NewRetention builds the cleaner over the cell's database and blob store.
func NewRetention(cfg RetentionConfig, d *db.DB, bucket *gcblob.Bucket, log *zap.Logger) *Retention {
	if log == nil {
		log = zap.NewNop()
	}
	return &Retention{cfg: cfg.withDefaults(), db: d, bucket: bucket, log: log, now: time.Now,
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cell_render_retention_deleted_total",
			Help: "What the render retention deleted in this replica, by kind: snapshot (a request's manifest), request, attempt, result (rows), png, orphan_snapshot, orphan_png."},
			[]string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cell_render_retention_deleted_bytes_total",
			Help: "Blob bytes the render retention deleted in this replica, by kind: snapshot, png (orphans included)."},
			[]string{"kind"}),
	}
}

// Config returns the settings in force (defaults applied).
func (r *Retention) Config() RetentionConfig { return r.cfg }

// Run runs the rules every Interval and the orphan sweep every OrphanInterval until ctx ends.
func (r *Retention) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop.Every(ctx, r.cfg.OrphanInterval, nil, func(ctx context.Context) { r.SweepOrphans(ctx) })
	}()
	loop.Every(ctx, r.cfg.Interval, nil, func(ctx context.Context) { r.Round(ctx) })
	<-done
}

// Round applies the reference and row rules once, in batches, and logs what it deleted.
func (r *Retention) Round(ctx context.Context) RetentionStats {
	var st RetentionStats
	for range maxBatches {
		s, n, err := r.releaseSnapshots(ctx)
		st.add(s)
		if err != nil {
			r.log.Warn("render retention: releasing snapshots failed", zap.Error(err))
			break
		}
		if n < r.cfg.Batch {
			break
		}
	}
	for range maxBatches {
		s, n, err := r.purgeRequests(ctx)
		st.add(s)
		if err != nil {
			r.log.Warn("render retention: deleting requests failed", zap.Error(err))
			break
		}
		if n < r.cfg.Batch {
			break
		}
	}
	r.rounds.Add(1)
	if st != (RetentionStats{}) {
		r.log.Info("render retention round", zap.Int("snapshots", st.Snapshots), zap.Int("requests", st.Requests),
			zap.Int("attempts", st.Attempts), zap.Int("results", st.Results), zap.Int("pngs", st.PNGs), zap.Int64("bytes", st.Bytes))
	}
	return st
}

// releaseSnapshots claims a batch of releasable references (one UPDATE: each is claimed by one
// replica) and deletes their manifests. It returns how many it claimed.
func (r *Retention) releaseSnapshots(ctx context.Context) (RetentionStats, int, error) {
	var st RetentionStats
	now := r.now().UTC()
	rows, err := r.db.Q(ctx).Query(ctx, `UPDATE render_requests SET artifact_released = true
		WHERE artifact_released = false AND (workspace_id, id) IN (
			SELECT q.workspace_id, q.id FROM render_requests q
			WHERE q.artifact_released = false AND q.finished_at IS NOT NULL
			  AND q.state IN ('succeeded', 'failed', 'cancelled', 'expired')
			  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.workspace_id = q.workspace_id AND a.request_id = q.id AND a.released = false)
			  AND (q.finished_at < $1
			       OR (q.state <> 'succeeded' AND q.finished_at < $2)
			       OR EXISTS (SELECT 1 FROM render_results s WHERE s.workspace_id = q.workspace_id AND s.request_id = q.id AND s.consumed_at < $2))
			ORDER BY q.finished_at LIMIT $3)
		RETURNING workspace_id, snapshot_ref`, now.Add(-r.cfg.Window), now.Add(-r.cfg.Grace), r.cfg.Batch)
	if err != nil {
		return st, 0, err
	}
	var keys []string
	for rows.Next() {
		var ws, ref string
		if err := rows.Scan(&ws, &ref); err != nil {
			rows.Close()
			return st, 0, err
		}
		keys = append(keys, snapshot.ManifestKey(ws, ref))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, 0, err
	}
	for _, k := range keys {
		n, ok, err := cblob.Remove(ctx, r.bucket, k)
		if err != nil {
			// Released in the row but still in the store: the sweep finds it once the request
			// row is gone.
			r.log.Warn("render retention: a manifest was not deleted", zap.String("key", k), zap.Error(err))
			continue
		}
		if ok {
			st.Snapshots++
			st.Bytes += n
			r.deleted.WithLabelValues("snapshot").Inc()
			r.bytes.WithLabelValues("snapshot").Add(float64(n))
		}
	}
	return st, len(keys), nil
}

// purgeRequests deletes a batch of requests past the window with their attempts and results in
// one transaction, then their blobs: the manifest if not released yet and every PNG under the
// request's prefix (the committed one and any a late commit left). It returns how many
// requests it deleted.
func (r *Retention) purgeRequests(ctx context.Context) (RetentionStats, int, error) {
	var st RetentionStats
	type gone struct {
		ws, id, ref string
		released    bool
	}
	var reqs []gone
	err := r.db.Tx(ctx, func(tx pgx.Tx) error {
		reqs, st = reqs[:0], RetentionStats{}
		rows, err := tx.Query(ctx, `DELETE FROM render_requests
			WHERE state IN ('succeeded', 'failed', 'cancelled', 'expired') AND finished_at < $1 AND (workspace_id, id) IN (
				SELECT q.workspace_id, q.id FROM render_requests q
				WHERE q.finished_at < $1 AND q.state IN ('succeeded', 'failed', 'cancelled', 'expired')
				  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.workspace_id = q.workspace_id AND a.request_id = q.id AND a.released = false)
				ORDER BY q.finished_at LIMIT $2)
			RETURNING workspace_id, id, snapshot_ref, artifact_released`, r.now().UTC().Add(-r.cfg.Window), r.cfg.Batch)
		if err != nil {
			return err
		}
		var wss, ids []string
		for rows.Next() {
			var g gone
			if err := rows.Scan(&g.ws, &g.id, &g.ref, &g.released); err != nil {
				rows.Close()
				return err
			}
			reqs = append(reqs, g)
			wss, ids = append(wss, g.ws), append(ids, g.id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(reqs) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, `DELETE FROM render_attempts WHERE (workspace_id, request_id) IN
			(SELECT unnest($1::TEXT[]), unnest($2::TEXT[]))`, wss, ids)
		if err != nil {
			return err
		}
		st.Attempts = int(tag.RowsAffected())
		tag, err = tx.Exec(ctx, `DELETE FROM render_results WHERE (workspace_id, request_id) IN
			(SELECT unnest($1::TEXT[]), unnest($2::TEXT[]))`, wss, ids)
		if err != nil {
			return err
		}
		st.Results = int(tag.RowsAffected())
		st.Requests = len(reqs)
		return nil
	})
	if err != nil {
		return RetentionStats{}, 0, err
	}
	r.deleted.WithLabelValues("request").Add(float64(st.Requests))
	r.deleted.WithLabelValues("attempt").Add(float64(st.Attempts))
	r.deleted.WithLabelValues("result").Add(float64(st.Results))
	for _, g := range reqs {
		if !g.released {
			n, ok, err := cblob.Remove(ctx, r.bucket, snapshot.ManifestKey(g.ws, g.ref))
			if err != nil {
				r.log.Warn("render retention: a manifest was not deleted", zap.String("snapshot_ref", g.ref), zap.Error(err))
			} else if ok {
				st.Snapshots++
				st.Bytes += n
				r.deleted.WithLabelValues("snapshot").Inc()
				r.bytes.WithLabelValues("snapshot").Add(float64(n))
			}
		}
		err := cblob.Each(ctx, r.bucket, rendersPrefix(g.ws)+g.id+"/", func(o *gcblob.ListObject) error {
			_, ok, err := cblob.Remove(ctx, r.bucket, o.Key)
			if err == nil && ok {
				st.PNGs++
				st.Bytes += o.Size
				r.deleted.WithLabelValues("png").Inc()
				r.bytes.WithLabelValues("png").Add(float64(o.Size))
			}
			return err
		})
		if err != nil {
			r.log.Warn("render retention: a request's PNGs were not all deleted", zap.String("request_id", g.id), zap.Error(err))
		}
	}
	return st, len(reqs), nil
}

func rendersPrefix(ws string) string   { return "ws/" + ws + "/renders/" }
func snapshotsPrefix(ws string) string { return "ws/" + ws + "/snapshots/" }

// SweepOrphans lists the manifests and PNGs of the workspaces this cell hosts (tenancy state
// active) and deletes those no request refers to: a manifest past its expiry (preview-artifact
// snapshots, and request manifests whose row was deleted before the blob), a PNG whose request
// row is gone. Only blobs written OrphanAfter ago are considered.
func (r *Retention) SweepOrphans(ctx context.Context) RetentionStats {
	var st RetentionStats
	rows, err := r.db.Q(ctx).Query(ctx, `SELECT workspace_id FROM tenancy WHERE state = 'active' ORDER BY workspace_id`)
	if err != nil {
		r.log.Warn("render retention: listing workspaces failed", zap.Error(err))
		return st
	}
	var wss []string
	for rows.Next() {
		var ws string
		if rows.Scan(&ws) == nil {
			wss = append(wss, ws)
		}
	}
	rows.Close()
	for _, ws := range wss {
		if ctx.Err() != nil {
			break
		}
		for _, k := range []orphanKind{orphanSnapshots, orphanPNGs} {
			if err := r.sweep(ctx, k, ws, &st); err != nil {
				r.log.Warn("render retention: orphan sweep failed", zap.String("workspace_id", ws), zap.String("kind", k.label), zap.Error(err))
			}
		}
	}
	if st != (RetentionStats{}) {
		r.log.Info("render retention sweep", zap.Int("orphan_snapshots", st.OrphanSnapshots), zap.Int("orphan_pngs", st.OrphanPNGs),
			zap.Int64("bytes", st.Bytes))
	}
	return st
}

// listOld collects, page by page, the blobs under prefix written before cutoff and hands each
// page to fn.
func (r *Retention) listOld(ctx context.Context, prefix string, cutoff time.Time, fn func([]*gcblob.ListObject) error) error {
	var page []*gcblob.ListObject
	err := cblob.Each(ctx, r.bucket, prefix, func(o *gcblob.ListObject) error {
		if !o.ModTime.Before(cutoff) {
			return nil
		}
		page = append(page, o)
		if len(page) < r.cfg.Batch {
			return nil
		}
		err := fn(page)
		page = nil
		return err
	})
	if err == nil && len(page) > 0 {
		err = fn(page)
	}
	return err
}

// orphanKind is one kind of blob the sweep deletes when no request refers to it.
type orphanKind struct {
	prefix func(ws string) string
	// ref is the request reference in a key under the prefix (a snapshot ref, a request ID).
	ref func(rest string) string
	// usedSQL selects, of the refs ($2) of workspace $1, those a request row still names.
	usedSQL string
	// keep spares an unreferenced blob (a preview artifact still valid); nil spares none.
	keep func(r *Retention, ctx context.Context, o *gcblob.ListObject, now time.Time) bool
	// label is the metrics' label of the deleted blob and of its bytes.
	label, bytesLabel string
	count             func(st *RetentionStats) *int
}

var (
	orphanSnapshots = orphanKind{
		prefix:  snapshotsPrefix,
		ref:     func(rest string) string { return strings.TrimSuffix(rest, ".json") },
		usedSQL: `SELECT snapshot_ref FROM render_requests WHERE workspace_id = $1 AND snapshot_ref = ANY($2)`,
		keep: func(r *Retention, ctx context.Context, o *gcblob.ListObject, now time.Time) bool {
			exp, ok := r.expiry(ctx, o.Key)
			return ok && !exp.Add(r.cfg.Grace).Before(now)
		},
		label: "orphan_snapshot", bytesLabel: "snapshot",
		count: func(st *RetentionStats) *int { return &st.OrphanSnapshots },
	}
	orphanPNGs = orphanKind{
		prefix:  rendersPrefix,
		ref:     func(rest string) string { id, _, _ := strings.Cut(rest, "/"); return id },
		usedSQL: `SELECT id FROM render_requests WHERE workspace_id = $1 AND id = ANY($2)`,
		label:   "orphan_png", bytesLabel: "png",
		count: func(st *RetentionStats) *int { return &st.OrphanPNGs },
	}
)

// sweep deletes ws's blobs of kind k written OrphanAfter ago that no request refers to (those
// a request names are the request rules' to release) and that k does not keep.
func (r *Retention) sweep(ctx context.Context, k orphanKind, ws string, st *RetentionStats) error {
	now := r.now().UTC()
	prefix := k.prefix(ws)
	return r.listOld(ctx, prefix, now.Add(-r.cfg.OrphanAfter), func(page []*gcblob.ListObject) error {
		refs := make([]string, 0, len(page))
		for _, o := range page {
			refs = append(refs, k.ref(strings.TrimPrefix(o.Key, prefix)))
		}
		used, err := r.existing(ctx, k.usedSQL, ws, refs)
		if err != nil {
			return err
		}
		for i, o := range page {
			if used[refs[i]] || (k.keep != nil && k.keep(r, ctx, o, now)) {
				continue
			}
			if _, ok, err := cblob.Remove(ctx, r.bucket, o.Key); err != nil {
				return err
			} else if ok {
				*k.count(st)++
				st.Bytes += o.Size
				r.deleted.WithLabelValues(k.label).Inc()
				r.bytes.WithLabelValues(k.bytesLabel).Add(float64(o.Size))
			}
		}
		return nil
	})
}

// expiry reads a manifest's expires_at; ok is false when it cannot be read (then it is an
// orphan past OrphanAfter like any other).
func (r *Retention) expiry(ctx context.Context, key string) (time.Time, bool) {
	rd, err := r.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return time.Time{}, false
	}
	defer rd.Close()
	var m struct {
		ExpiresAt time.Time `json:"expires_at"`
	}
	if json.NewDecoder(io.LimitReader(rd, snapshot.MaxManifestBytes)).Decode(&m) != nil || m.ExpiresAt.IsZero() {
		return time.Time{}, false
	}
	return m.ExpiresAt, true
}

func (r *Retention) existing(ctx context.Context, sql, ws string, keys []string) (map[string]bool, error) {
	rows, err := r.db.Q(ctx).Query(ctx, sql, ws, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}

// Backlog counts what the rules would delete now: requests past the window (with their rows
// and blobs) and references releasable but not released (a request whose attempt is not
// released yet is not due). A backlog that grows means the
// cleaner falls behind (or fails: see its log).
func (r *Retention) Backlog(ctx context.Context) (requests, snapshots int, err error) {
	now := r.now().UTC()
	err = r.db.Q(ctx).QueryRow(ctx, `SELECT
		count(*) FILTER (WHERE finished_at < $1),
		count(*) FILTER (WHERE artifact_released = false AND (finished_at < $1 OR (state <> 'succeeded' AND finished_at < $2)
			OR EXISTS (SELECT 1 FROM render_results s WHERE s.workspace_id = q.workspace_id AND s.request_id = q.id AND s.consumed_at < $2)))
		FROM render_requests q WHERE finished_at IS NOT NULL AND state IN ('succeeded', 'failed', 'cancelled', 'expired')
		  AND NOT EXISTS (SELECT 1 FROM render_attempts a WHERE a.workspace_id = q.workspace_id AND a.request_id = q.id AND a.released = false)`,
		now.Add(-r.cfg.Window), now.Add(-r.cfg.Grace)).Scan(&requests, &snapshots)
	return requests, snapshots, err
}

var retentionBacklog = prometheus.NewDesc("cell_render_retention_backlog",
	"Render retention work due now: requests past RENDER_RETENTION_SECONDS (kind=request) and snapshot references releasable but not released (kind=snapshot).",
	[]string{"kind"}, nil)

// Collectors returns the retention's counters and its backlog gauge (read at scrape).
func (r *Retention) Collectors() []prometheus.Collector {
	gauge := scrape.Collector(func(ctx context.Context) ([]scrape.Sample, error) {
		reqs, snaps, err := r.Backlog(ctx)
		if err != nil {
			return nil, err
		}
		return []scrape.Sample{
			scrape.Gauge(retentionBacklog, float64(reqs), "request"),
			scrape.Gauge(retentionBacklog, float64(snaps), "snapshot"),
		}, nil
	}, retentionBacklog)
	return []prometheus.Collector{r.deleted, r.bytes, gauge}
}
