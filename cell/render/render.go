// Package render is the cell's render control plane (render-execution.md): render requests
// persisted first, one coordinator in every cell replica dispatching them to the renderer pool
// from RENDER_WORKERS_CONFIG in one short database transaction each, retries decided only by
// the coordinator, results fetched, verified digest by digest, stored and committed, and
// capacity released only when the renderer proves its resources released.
//
// # Tables (migrations/cell/0013_render.up.sql)
//
// render_requests is the queue and the only record of a render stage; render_attempts hold the
// capacity (an attempt holds its worker from reservation until it is released, which needs a
// terminal receipt with resource_state=released, or proof that the worker's process that ran it
// is gone); render_workers are worker/epoch rows learnt from the workers' capabilities;
// render_scheduler_state is the one row a dispatch locks; render_results are verified results.
// Two partial unique indexes make "at most one unreleased attempt per request and per worker"
// a database fact, not a hope.
//
// # Dispatch
//
// One transaction: lock the scheduler row; count occupying attempts (exact: every attempt is
// inserted under that lock); lock an idle ready worker whose environment digest is the
// manifest's; pick a request — a waiting one past the wait-promotion threshold first, else by
// the 3:1 rotation between interactive and background categories (falling back to the other
// category when one is empty), round-robin over workspaces within it, oldest first within a
// workspace, skipping workspaces at their concurrency cap; bump the worker's slot generation;
// insert the reserved attempt; mark the request executing (the attempt counts against its
// budget); advance the rotation and the cursor; commit. Then a conditional update marks the
// attempt dispatched — whoever makes it is the only sender — and the execution request is sent
// with a signed admission ticket and preview access. No HTTP inside a transaction.
//
// # Driving, retry, reconciliation
//
// The coordinator that sent an attempt drives it (polls its receipt) under a lease on the
// attempt row (driver, driver_until), renewed while it lives. Any coordinator takes over an
// attempt whose lease ended: a reserved attempt was never sent and is released; any other is
// asked for at its worker/epoch first. An attempt whose state cannot be learnt becomes unknown
// and keeps its capacity until its worker answers for it or reports a new epoch on the same
// host boot and cgroup (a renderer kills every process left in its cgroup before it serves, so
// such an epoch proves them gone; one elsewhere proves nothing and leaves them to the operator's
// audited release: workers.go, operator.go). Retries: by the error's category, the time left and the budget (max attempts, backoff
// 250 ms × 2^n with jitter); an explicit non-takeover (429 busy, or a refusal before start)
// gives the attempt back to the budget.
package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	gcblob "gocloud.dev/blob"

	"slidecells/cell/auth"
	"slidecells/cell/snapshot"
	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/digest"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/tracing"
)

// Category is the business entry's scheduling category.
type Category string

// Categories: interactive diagnosis (validation) and background screenshots rotate 3:1.
const (
	Interactive Category = "interactive"
	Background  Category = "background"
)

// Request states.
const (
	StateQueued    = "queued"
	StateExecuting = "executing"
	StateRetryWait = "retry_wait"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
	StateExpired   = "expired"
)

// Terminal reports whether a request state is final.
func Terminal(state string) bool {
	return state == StateSucceeded || state == StateFailed || state == StateCancelled || state == StateExpired
}

// Spec is one render need of a business stage.
type Spec struct {
	// Owner is the logical business owner (a job ID, "validation:<user>", "screenshot:<page>");
	// Stage names the business stage. With the operation and the input and render digests they
	// make the request key: the same need returns the same request, without new budget.
	Owner, Stage string
	Operation    rc.Operation
	Category     Category
	// Snapshot is the fixed input; it is saved only when the request is new.
	Snapshot *snapshot.Manifest
	Options  rc.OperationOptions
	// Deadline is a stricter business deadline; zero means the render stage's own budget.
	Deadline time.Time
	// Renew starts a new request when the one under the key ended without success (a user
	// asking again is a new business action).
	Renew bool
}

// Request is a render request as persisted.
type Request struct {
	WorkspaceID   string
	ID            string
	Operation     rc.Operation
	Category      Category
	State         string
	SnapshotRef   string
	InputDigest   string
	RenderDigest  string
	ProfileDigest string
	Viewport      rc.Viewport
	Options       rc.OperationOptions
	AttemptsUsed  int
	MaxAttempts   int
	CancelVersion int64
	DeadlineAt    time.Time
	EnqueuedAt    time.Time
	FinishedAt    *time.Time
	ErrorCode     string
	ErrorStage    string
	ErrorMessage  string
	// Reclaiming: the request ended (expired, cancelled, failed) but an attempt of it still
	// holds its capacity until the renderer proves its resources released (the spec's
	// "reclaiming"). Read by Get and Wait only.
	Reclaiming bool

	// traceparent: the submitter's trace context, stored with the request (traceAttempt); ""
	// when none was.
	traceparent string
}

// Result is a committed, verified render result.
type Result struct {
	AttemptID      string
	ArtifactKey    string // blob key of the PNG (page.capture)
	ArtifactSHA256 string
	Bytes          int64
	Width, Height  int
	Diagnosis      *rc.Diagnosis // page.diagnose, component.diagnose
	HostBuild      string
}

// Coordinator dispatches, drives and reconciles the cell's render requests.
type Coordinator struct {
	cfg    Config
	db     *db.DB
	bucket *gcblob.Bucket
	log    *zap.Logger
	client *client
	id     string // this coordinator, as recorded in attempts it drives
	now    func() time.Time

	// Lease is how long an attempt's driver holds it without renewing (default 10 s).
	Lease time.Duration
	// PollInterval is how often a driver reads its attempt's receipt at most when the renderer
	// answers without holding the read (default 15 ms, growing to 50 ms on long attempts); a
	// renderer that holds it (the receipt long-poll, drive.go receiptWait) answers at the
	// attempt's next state change.
	PollInterval time.Duration
	// TickInterval is how often the dispatcher looks at the queue without being woken, and
	// the reconciler and the worker registry run (default 1 s).
	TickInterval time.Duration
	// Observe, when set, is told about dispatches and finished requests (metrics).
	Observe func(event string, op rc.Operation, d time.Duration)
	// Permitted, when set, rechecks at dispatch that the request's business owner may still
	// render in the workspace (a removed member's queued validation does not run). false
	// cancels the request before anything is sent; an error lets it run (the check is a
	// business guard, not a reason to fail renders while the directory is away).
	Permitted func(ctx context.Context, workspaceID, owner string) (bool, error)

	kick    chan struct{}
	mu      sync.Mutex
	waiters map[string][]chan struct{}
	driving map[string]bool
	wg      sync.WaitGroup
	stop    chan struct{}
	stopped sync.Once
}

// New builds a coordinator; Start runs it.
func New(cfg Config, d *db.DB, bucket *gcblob.Bucket, log *zap.Logger) *Coordinator {
	return &Coordinator{cfg: cfg, db: d, bucket: bucket, log: log, client: newClientTrusting(cfg.Credential, cfg.WorkersCA),
		id: ids.New("coord"), now: time.Now, Lease: 10 * time.Second, PollInterval: 15 * time.Millisecond,
		TickInterval: time.Second, kick: make(chan struct{}, 1), waiters: map[string][]chan struct{}{},
		driving: map[string]bool{}, stop: make(chan struct{})}
}

// Config returns the coordinator's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// requestKey is the hash of logical owner, business stage, operation, input and render digests.
func requestKey(owner, stage string, op rc.Operation, inputDigest, renderDigest string) (string, error) {
	return digest.JSON(map[string]string{"owner": owner, "stage": stage, "operation": string(op),
		"input_digest": inputDigest, "render_digest": renderDigest})
}

// CacheKey is the hash of cache schema, input digest and render digest: equal for equal
// renders whoever asked.
func CacheKey(inputDigest, renderDigest string) (string, error) {
	return digest.JSON(map[string]string{"schema": "render-cache.v1", "input_digest": inputDigest, "render_digest": renderDigest})
}

// QueueFull is the answer when a queue is at capacity: 429 RENDER_QUEUE_FULL with Retry-After.
func QueueFull(scope string) error {
	return problem.New(problem.RenderQueueFull, "the %s render queue is full; retry later", scope)
}

// Submit creates the render request for spec in the workspace, or returns the one that exists
// under its request key (repeats, re-claims and restarts never get new budget). A new request
// needs room in the global and the workspace's queue, checked under the scheduler lock.
func (c *Coordinator) Submit(ctx context.Context, sc auth.Scope, spec Spec) (Request, error) {
	workspaceID := sc.WorkspaceID()
	m := spec.Snapshot
	if m == nil || m.WorkspaceID != workspaceID || !spec.Operation.Valid() {
		return Request{}, errors.New("render: submit needs a snapshot of the workspace and a valid operation")
	}
	if spec.Category != Interactive && spec.Category != Background {
		return Request{}, errors.New("render: submit needs a category")
	}
	vp := rc.Viewport{Width: m.Canvas.Width, Height: m.Canvas.Height, DeviceScaleFactor: m.Canvas.DeviceScaleFactor}
	if e := vp.Check(); e != nil {
		return Request{}, problem.New(problem.ValidationFailed, "%s", e.Message)
	}
	renderDigest, err := rc.RenderDigest(c.cfg.ProfileDigest, spec.Operation, vp, spec.Options)
	if err != nil {
		return Request{}, err
	}
	owner := spec.Owner
	for range 8 {
		key, err := requestKey(owner, spec.Stage, spec.Operation, m.InputDigest, renderDigest)
		if err != nil {
			return Request{}, err
		}
		existing, err := c.byKey(ctx, workspaceID, key)
		if err == nil {
			if spec.Renew && Terminal(existing.State) && existing.State != StateSucceeded {
				owner = spec.Owner + "/after:" + existing.ID
				continue
			}
			return existing, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Request{}, err
		}
		return c.create(ctx, workspaceID, key, owner, spec, vp, renderDigest)
	}
	return Request{}, errors.New("render: too many renewed requests under one key")
}

func (c *Coordinator) create(ctx context.Context, ws, key, owner string, spec Spec, vp rc.Viewport, renderDigest string) (Request, error) {
	m := *spec.Snapshot
	m.Ref = ids.New(ids.Snapshot)
	m.Owner = owner
	if m.CreatedAt.IsZero() {
		m.CreatedAt = c.now().UTC()
	}
	now := c.now().UTC()
	deadline := now.Add(c.cfg.RequestTimeout)
	if !spec.Deadline.IsZero() && spec.Deadline.Before(deadline) {
		deadline = spec.Deadline
	}
	if m.ExpiresAt.IsZero() || m.ExpiresAt.Before(deadline) {
		m.ExpiresAt = deadline.Add(time.Hour)
	}
	if err := snapshot.Save(ctx, c.bucket, &m); err != nil {
		return Request{}, fmt.Errorf("render: saving the snapshot: %w", err)
	}
	r := Request{WorkspaceID: ws, ID: ids.New(ids.Render), Operation: spec.Operation, Category: spec.Category,
		State: StateQueued, SnapshotRef: m.Ref, InputDigest: m.InputDigest, RenderDigest: renderDigest,
		ProfileDigest: c.cfg.ProfileDigest, Viewport: vp, Options: spec.Options, MaxAttempts: c.cfg.MaxAttempts,
		DeadlineAt: deadline, EnqueuedAt: now}
	vpJSON, _ := json.Marshal(vp)
	optJSON, _ := json.Marshal(spec.Options)
	cacheKey, err := CacheKey(m.InputDigest, renderDigest)
	if err != nil {
		return Request{}, err
	}
	// READ COMMITTED under the scheduler lock, like a dispatch: every request enters the queue
	// under that lock, so the count is exact (see dispatchOne).
	err = c.db.ReadCommitted(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT id FROM render_scheduler_state WHERE id = 1 FOR UPDATE`); err != nil {
			return err
		}
		// A workspace being moved (or gone) starts no renders here.
		if err := tenancy.Writable(ctx, tx, ws); err != nil {
			return err
		}
		var global, mine int
		if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE workspace_id = $1)
			FROM render_requests WHERE state IN ('queued', 'retry_wait')`, ws).Scan(&global, &mine); err != nil {
			return err
		}
		if global >= c.cfg.QueueSize {
			return QueueFull("cell's")
		}
		if mine >= c.cfg.WorkspaceQueueSize {
			return QueueFull("workspace's")
		}
		_, err := tx.Exec(ctx, `INSERT INTO render_requests (workspace_id, id, request_key, owner, stage, operation,
			category, snapshot_ref, input_digest, render_digest, cache_key, profile_digest, viewport, options, state,
			max_attempts, deadline_at, not_before, enqueued_at, updated_at, traceparent)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $17, $11, $12, $13, 'queued', $14, $15, $16, $16, $16, $18)`,
			ws, r.ID, key, owner, spec.Stage, string(spec.Operation), string(spec.Category), m.Ref, m.InputDigest,
			renderDigest, c.cfg.ProfileDigest, vpJSON, optJSON, c.cfg.MaxAttempts, deadline, now, cacheKey, tracing.StoredTraceparent(ctx))
		return err
	})
	if err != nil {
		// The request did not enter the queue (full, workspace not writable, a concurrent
		// submit of the same need won): nothing refers to its snapshot. Best effort: the
		// manifest is small and expires anyway.
		if derr := c.bucket.Delete(context.WithoutCancel(ctx), snapshot.ManifestKey(ws, m.Ref)); derr != nil {
			c.log.Warn("an unused snapshot manifest was not deleted", zap.String("snapshot_ref", m.Ref), zap.Error(derr))
		}
	}
	if db.IsUniqueViolation(err) {
		return c.byKey(ctx, ws, key) // a concurrent submit of the same need won
	}
	if err != nil {
		return Request{}, err
	}
	c.Kick()
	return r, nil
}

const requestCols = `workspace_id, id, operation, category, state, snapshot_ref, input_digest, render_digest,
	profile_digest, viewport, options, attempts_used, max_attempts, cancel_version, deadline_at, enqueued_at,
	finished_at, error_code, error_stage, error_message, traceparent`

// scanRequest scans requestCols, then extra columns into extra.
func scanRequest(row pgx.Row, extra ...any) (Request, error) {
	var r Request
	var op, cat string
	var vp, opts []byte
	var tp *string
	err := row.Scan(append([]any{&r.WorkspaceID, &r.ID, &op, &cat, &r.State, &r.SnapshotRef, &r.InputDigest, &r.RenderDigest,
		&r.ProfileDigest, &vp, &opts, &r.AttemptsUsed, &r.MaxAttempts, &r.CancelVersion, &r.DeadlineAt, &r.EnqueuedAt,
		&r.FinishedAt, &r.ErrorCode, &r.ErrorStage, &r.ErrorMessage, &tp}, extra...)...)
	if err != nil {
		return r, err
	}
	if tp != nil {
		r.traceparent = *tp
	}
	r.Operation, r.Category = rc.Operation(op), Category(cat)
	_ = json.Unmarshal(vp, &r.Viewport)
	_ = json.Unmarshal(opts, &r.Options)
	return r, nil
}

func (c *Coordinator) byKey(ctx context.Context, ws, key string) (Request, error) {
	return scanRequest(c.db.Q(ctx).QueryRow(ctx, `SELECT `+requestCols+` FROM render_requests
		WHERE workspace_id = $1 AND request_key = $2`, ws, key))
}

// Get reads one request of the scope's workspace.
func (c *Coordinator) Get(ctx context.Context, sc auth.Scope, id string) (Request, error) {
	return c.get(ctx, sc.WorkspaceID(), id)
}

func (c *Coordinator) get(ctx context.Context, ws, id string) (Request, error) {
	r, err := scanRequest(c.db.Q(ctx).QueryRow(ctx, `SELECT `+requestCols+` FROM render_requests
		WHERE workspace_id = $1 AND id = $2`, ws, id))
	if err == nil && Terminal(r.State) && r.State != StateSucceeded {
		err = c.db.Q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM render_attempts
			WHERE workspace_id = $1 AND request_id = $2 AND released = false)`, ws, id).Scan(&r.Reclaiming)
	}
	return r, err
}

// expireSQL ends requests that reached their deadline without a result: waiting ones and
// executing ones alike (render-execution.md: executing → expired at the deadline). The
// attempt of an executing one is not touched: it keeps its capacity until its stop is proven
// (its driver asks the renderer to stop it and releases it on the terminal receipt).
const expireSQL = `UPDATE render_requests SET state = 'expired', finished_at = $1, updated_at = $1,
	error_code = 'RENDER_DEADLINE_EXCEEDED',
	error_stage = CASE WHEN state = 'executing' THEN 'cleanup' ELSE 'admission' END,
	error_message = CASE WHEN state = 'executing' THEN 'the render stage''s budget ran out while executing; its resources are being reclaimed'
		ELSE 'the render stage''s budget ran out while waiting' END
	WHERE state IN ('queued', 'retry_wait', 'executing') AND deadline_at <= $1`

// expireOverdue expires one request past its deadline (if it still is not terminal) and
// returns it as it stands then.
func (c *Coordinator) expireOverdue(ctx context.Context, ws, id string) (Request, error) {
	tag, err := c.db.Exec(ctx, expireSQL+` AND workspace_id = $2 AND id = $3`, c.now().UTC(), ws, id)
	if err != nil {
		return Request{}, err
	}
	if tag.RowsAffected() == 1 {
		c.notify(id)
		c.Kick()
	}
	return c.get(ctx, ws, id)
}

// Result reads the committed result of a succeeded request and records its consumption.
func (c *Coordinator) Result(ctx context.Context, sc auth.Scope, id string) (Result, error) {
	ws := sc.WorkspaceID()
	var r Result
	var diag []byte
	err := c.db.Q(ctx).QueryRow(ctx, `SELECT attempt_id, artifact_key, artifact_sha256, artifact_bytes, width, height,
		diagnosis, host_build FROM render_results WHERE workspace_id = $1 AND request_id = $2`, ws, id).
		Scan(&r.AttemptID, &r.ArtifactKey, &r.ArtifactSHA256, &r.Bytes, &r.Width, &r.Height, &diag, &r.HostBuild)
	if err != nil {
		return r, err
	}
	if len(diag) > 0 {
		r.Diagnosis = new(rc.Diagnosis)
		if err := json.Unmarshal(diag, r.Diagnosis); err != nil {
			return r, err
		}
	}
	_, err = c.db.Exec(ctx, `UPDATE render_results SET consumed_at = $3 WHERE workspace_id = $1 AND request_id = $2 AND consumed_at IS NULL`,
		ws, id, c.now().UTC())
	return r, err
}

// Wait waits until the request is terminal or ctx ends, and returns it as it stands then. It
// never waits past the request's deadline: a request still waiting or executing then is
// expired on the spot (RENDER_DEADLINE_EXCEEDED; an attempt whose stop is not proven keeps its
// capacity and the request shows as reclaiming until it is).
func (c *Coordinator) Wait(ctx context.Context, sc auth.Scope, id string) (Request, error) {
	for {
		ch := c.waiter(id)
		r, err := c.get(ctx, sc.WorkspaceID(), id)
		if err == nil && !Terminal(r.State) && !c.now().Before(r.DeadlineAt) {
			r, err = c.expireOverdue(ctx, r.WorkspaceID, id)
		}
		if err != nil || Terminal(r.State) {
			c.dropWaiter(id, ch)
			return r, err
		}
		pause := min(250*time.Millisecond, max(r.DeadlineAt.Sub(c.now()), time.Millisecond)) // another replica may finish it
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			c.dropWaiter(id, ch)
			return r, ctx.Err()
		case <-ch:
		case <-t.C:
		}
		t.Stop()
		c.dropWaiter(id, ch)
	}
}

func (c *Coordinator) waiter(id string) chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	c.waiters[id] = append(c.waiters[id], ch)
	c.mu.Unlock()
	return ch
}

func (c *Coordinator) dropWaiter(id string, ch chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.waiters[id]
	for i, w := range list {
		if w == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.waiters, id)
	} else {
		c.waiters[id] = list
	}
}

// notify wakes the waiters of a request that changed.
func (c *Coordinator) notify(id string) {
	c.mu.Lock()
	list := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	for _, ch := range list {
		close(ch)
	}
}

// Kick wakes the dispatcher.
func (c *Coordinator) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// backoff is the pause before retry n (1-based): 250 ms × 2^(n-1), ±50 % jitter, at most 8 s.
func backoff(n int) time.Duration {
	d := 250 * time.Millisecond << min(max(n-1, 0), 5)
	d = min(d, 8*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}
