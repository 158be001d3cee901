// Package jobs is the persisted mutation-job queue of a cell: jobs are rows of mutation_jobs,
// claimed under a lease by workers in every cell replica (Pool), renewed while they run, returned
// to the queue by a rescuer when their lease ends (the replica died), retried automatically with
// exponential backoff and jitter when their error is retryable, cancelled cooperatively and
// retried manually as new jobs linked by retry_of_job_id.
//
// Queue transitions (claim, renew, progress, finish, rescue) are single compare-and-set
// statements or short transactions at READ COMMITTED, guarded by status and lease owner in their
// WHERE clauses and by row locks: their correctness rests on those, not on serializability, and
// at SERIALIZABLE they would take predicate locks that make every worker fight every other. The
// business commit of a job (Run.Commit) is one serializable transaction that rechecks the lease,
// the cancel flag and permission, makes the business writes and finishes the job, so a job never
// half-writes and never writes after a cancel. No advisory locks, no LISTEN/NOTIFY: the SQL runs
// on CockroachDB too.
//
// The package holds no business rule of its own: what a job kind does is a Handler.
package jobs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
	"slidecells/shared/tracing"
)

// Job states.
const (
	Pending   = "pending"
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	Canceled  = "canceled"
)

// IDPrefix is the prefix of job IDs.
const IDPrefix = ids.Job

// Defaults.
const (
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 10
	// DefaultMaxInputBytes bounds a job's stored input: a page source of the documented 512 KiB
	// (bytes) whose every byte JSON encodes as six (\u00XX), with room for the other fields.
	DefaultMaxInputBytes = 4 << 20
	DefaultBackoffBase   = time.Second
	DefaultBackoffMax    = 5 * time.Minute
)

// Codes a job fails with when no handler names one.
const (
	CodeInternal    = "JOB_INTERNAL"      // the handler failed unexpectedly (retryable)
	CodeWorkerLost  = "JOB_WORKER_LOST"   // the replica running it died and no attempt was left
	CodeKindUnknown = "JOB_KIND_UNKNOWN"  // no handler for the kind in this build
	CodePanicked    = "JOB_HANDLER_PANIC" // a handler bug; not retried
)

// Job is one mutation job.
type Job struct {
	WorkspaceID     string
	ID              string
	Kind            string
	OwnerID         string
	Input           json.RawMessage
	Status          string
	AttemptCount    int // automatic retries already run
	MaxAttempts     int // including the first run
	RetryOfJobID    string
	Stage           string
	Progress        int
	CancelRequested bool
	ErrorCode       string
	ErrorSummary    string
	Result          json.RawMessage
	RunAfter        time.Time
	CreatedAt       time.Time
	StartedAt       *time.Time
	FinishedAt      *time.Time
	UpdatedAt       time.Time
	// Traceparent is the trace context of the request that submitted the job (W3C
	// traceparent, shared/tracing), or "": its runs are spans of that trace.
	Traceparent string
}

const jobCols = `workspace_id, id, kind, owner_id, input, status, attempt_count, max_attempts, COALESCE(retry_of_job_id, ''),
	stage, progress, cancel_requested, error_code, error_summary, result, run_after, created_at, started_at, finished_at, updated_at, COALESCE(traceparent, '')`

// jobColsQualified is jobCols for statements that join.
const jobColsQualified = `mutation_jobs.workspace_id, mutation_jobs.id, mutation_jobs.kind, mutation_jobs.owner_id, mutation_jobs.input,
	mutation_jobs.status, mutation_jobs.attempt_count, mutation_jobs.max_attempts, COALESCE(mutation_jobs.retry_of_job_id, ''),
	mutation_jobs.stage, mutation_jobs.progress, mutation_jobs.cancel_requested, mutation_jobs.error_code, mutation_jobs.error_summary,
	mutation_jobs.result, mutation_jobs.run_after, mutation_jobs.created_at, mutation_jobs.started_at, mutation_jobs.finished_at, mutation_jobs.updated_at,
	COALESCE(mutation_jobs.traceparent, '')`

func scanJob(r pgx.Row) (Job, error) {
	var j Job
	var result []byte
	err := r.Scan(&j.WorkspaceID, &j.ID, &j.Kind, &j.OwnerID, &j.Input, &j.Status, &j.AttemptCount, &j.MaxAttempts, &j.RetryOfJobID,
		&j.Stage, &j.Progress, &j.CancelRequested, &j.ErrorCode, &j.ErrorSummary, &result, &j.RunAfter, &j.CreatedAt, &j.StartedAt, &j.FinishedAt, &j.UpdatedAt, &j.Traceparent)
	if len(result) > 0 {
		j.Result = result
	}
	return j, err
}

// Failure is a job's business failure: its code and summary are kept on the job. Retryable
// failures are retried automatically while attempts remain.
type Failure struct {
	Code      string
	Summary   string
	Retryable bool
}

func (f *Failure) Error() string { return f.Code + ": " + f.Summary }

// Fail returns a non-retryable failure.
func Fail(code, format string, args ...any) *Failure {
	return &Failure{Code: code, Summary: fmt.Sprintf(format, args...)}
}

// Errors of Run.Commit.
var (
	// ErrCanceled: a cancel was requested; the job converges to canceled without its write.
	ErrCanceled = errors.New("jobs: cancel requested")
	// ErrLeaseLost: the job is no longer this worker's (its lease ended and it was rescued).
	ErrLeaseLost = errors.New("jobs: lease lost")
	// ErrFenced: the workspace is being moved to another cell (or has moved) and this cell takes
	// no more writes for it. Nothing was written; the job goes back to the queue without using
	// an attempt, and runs on whichever cell owns the workspace after the move.
	ErrFenced = errors.New("jobs: the workspace is being moved")
)

// Queue is the mutation_jobs table of one cell.
type Queue struct {
	DB *db.DB
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// BackoffBase and BackoffMax shape automatic retries: attempt n waits about
	// BackoffBase·2ⁿ⁻¹ (full jitter on the upper half), at most BackoffMax.
	BackoffBase, BackoffMax time.Duration
	// MaxInputBytes bounds a job's input; zero is DefaultMaxInputBytes.
	MaxInputBytes int

	wake chan struct{}
}

func (q *Queue) now() time.Time {
	if q.Now != nil {
		return q.Now()
	}
	return time.Now()
}

func (q *Queue) wakeCh() chan struct{} {
	if q.wake == nil {
		q.wake = make(chan struct{}, 1)
	}
	return q.wake
}

// Init prepares the queue; call it once before the queue is shared between goroutines.
func (q *Queue) Init() { q.wakeCh() }

// Notify wakes this replica's idle workers (other replicas find the job at their next poll).
// Call it after the enqueuing transaction has committed.
func (q *Queue) Notify() {
	select {
	case q.wakeCh() <- struct{}{}:
	default:
	}
}

// backoff is the pause before automatic retry number attempt (1-based).
func (q *Queue) backoff(attempt int) time.Duration {
	base, maxd := cmp.Or(q.BackoffBase, DefaultBackoffBase), cmp.Or(q.BackoffMax, DefaultBackoffMax)
	d := base << min(attempt-1, 30)
	if d <= 0 || d > maxd {
		d = maxd
	}
	return d/2 + rand.N(d/2+1)
}

// NewJob is what Enqueue needs.
type NewJob struct {
	Kind         string
	Input        any // marshalled to JSON
	MaxAttempts  int // zero is DefaultMaxAttempts
	RetryOfJobID string
}

// Enqueue inserts a pending job owned by the scope's user. Inside an Atomic transaction (an
// idempotent request) it commits with that request's answer, and this replica's workers are
// woken after that commit.
func (q *Queue) Enqueue(ctx context.Context, s auth.Scope, n NewJob) (Job, error) {
	if s.WorkspaceID() == "" {
		return Job{}, problem.Wrap(errors.New("jobs: no workspace scope"), "internal error")
	}
	// No HTML escaping: a source's <, > and & stay one byte each.
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(n.Input); err != nil {
		return Job{}, problem.Wrap(err, "job input")
	}
	input := bytes.TrimSuffix(enc.Bytes(), []byte("\n"))
	maxIn := q.MaxInputBytes
	if maxIn <= 0 {
		maxIn = DefaultMaxInputBytes
	}
	if len(input) > maxIn {
		return Job{}, problem.New(problem.PayloadTooLarge, "the job input is larger than %d bytes", maxIn)
	}
	if n.MaxAttempts == 0 {
		n.MaxAttempts = DefaultMaxAttempts
	}
	if n.MaxAttempts < 1 || n.MaxAttempts > MaxMaxAttempts {
		return Job{}, problem.Invalid(problem.FieldError{Field: "max_attempts", Message: fmt.Sprintf("must be 1 to %d", MaxMaxAttempts)})
	}
	var retryOf *string
	if n.RetryOfJobID != "" {
		retryOf = &n.RetryOfJobID
	}
	var j Job
	err := q.DB.Tx(ctx, func(tx pgx.Tx) error {
		if err := tenancy.Writable(ctx, tx, s.WorkspaceID()); err != nil {
			return err
		}
		now := q.now()
		var err error
		j, err = scanJob(tx.QueryRow(ctx, `
			INSERT INTO mutation_jobs (workspace_id, id, kind, owner_id, input, status, max_attempts, retry_of_job_id, run_after, created_at, updated_at, traceparent)
			VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $8, $8, $9) RETURNING `+jobCols,
			s.WorkspaceID(), ids.New(IDPrefix), n.Kind, s.Principal().UserID, input, n.MaxAttempts, retryOf, now, tracing.StoredTraceparent(ctx)))
		return err
	})
	if err == nil {
		db.AfterCommit(ctx, q.Notify) // wake this replica's workers once the job is visible
	}
	return j, err
}

// Get returns a job of the scope's workspace.
func (q *Queue) Get(ctx context.Context, s auth.Scope, id string) (Job, error) {
	j, err := scanJob(q.DB.Q(ctx).QueryRow(ctx, `SELECT `+jobCols+` FROM mutation_jobs WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Job{}, problem.ErrNotFound()
	}
	return j, err
}

// Cancel cancels a job: a pending one at once, a running one cooperatively (its worker converges
// to canceled before any business write). Cancelling a canceled job answers it again; a
// succeeded or failed one is a 409 STATE_CONFLICT.
func (q *Queue) Cancel(ctx context.Context, s auth.Scope, id string) (Job, error) {
	var j Job
	err := q.DB.Tx(ctx, func(tx pgx.Tx) error {
		if err := tenancy.Writable(ctx, tx, s.WorkspaceID()); err != nil {
			return err
		}
		now := q.now()
		var err error
		j, err = scanJob(tx.QueryRow(ctx, `
			UPDATE mutation_jobs SET cancel_requested = true, updated_at = $3,
				status = CASE WHEN status = 'pending' THEN 'canceled' ELSE status END,
				finished_at = CASE WHEN status = 'pending' THEN $3 ELSE finished_at END,
				stage = CASE WHEN status = 'pending' THEN 'canceled' ELSE stage END
			WHERE workspace_id = $1 AND id = $2 AND status IN ('pending', 'running') RETURNING `+jobCols, s.WorkspaceID(), id, now))
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		j, err = scanJob(tx.QueryRow(ctx, `SELECT `+jobCols+` FROM mutation_jobs WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return problem.ErrNotFound()
		case err != nil:
			return err
		case j.Status == Canceled:
			return nil
		}
		return problem.New(problem.StateConflict, "the job is %s; only pending or running jobs can be cancelled", j.Status)
	})
	return j, err
}

// Retry creates a new job with the input of a failed or canceled one, linked to it by
// retry_of_job_id and owned by the caller; other states are a 409 STATE_CONFLICT.
func (q *Queue) Retry(ctx context.Context, s auth.Scope, id string) (Job, error) {
	old, err := q.Get(ctx, s, id)
	if err != nil {
		return Job{}, err
	}
	if old.Status != Failed && old.Status != Canceled {
		return Job{}, problem.New(problem.StateConflict, "the job is %s; only failed or canceled jobs can be retried", old.Status)
	}
	return q.Enqueue(ctx, s, NewJob{Kind: old.Kind, Input: old.Input, MaxAttempts: old.MaxAttempts, RetryOfJobID: old.ID})
}

// Stats describe the queue for health and metrics.
type Stats struct {
	Pending       int
	Running       int
	OldestPending time.Duration // age of the oldest runnable pending job; 0 when none
}

// Stats reads the queue's depth.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	var oldest *time.Time
	now := q.now()
	err := q.DB.ReadCommitted(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT count(*), min(run_after) FROM mutation_jobs WHERE status = 'pending' AND run_after <= $1`, now).
			Scan(&st.Pending, &oldest); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM mutation_jobs WHERE status = 'running'`).Scan(&st.Running)
	})
	if oldest != nil && now.After(*oldest) {
		st.OldestPending = now.Sub(*oldest)
	}
	return st, err
}

// A claim takes the oldest runnable pending jobs of workspaces that are active here and run
// fewer jobs than their cap ($5: overrides by workspace, JSON; $6: the default), at most a
// workspace's free slots from each, in one statement at READ COMMITTED. Its cost must not grow
// with the backlog, nor with how many workspaces are capped or fenced (BENCHMARKS.md, "Mutation
// jobs"): the running jobs are counted once per statement, grouped by workspace, from the small
// partial index of running rows (they are bounded by the cell's slots), and the workspaces at
// their cap are excluded as one array, never by a count per pending row. The pending rows are
// read by one of two paths, each bounded:
//
//   - claimSQL (first) reads only the head of the queue: the range of its $7 oldest runnable
//     jobs (claimHead), in which it locks the first $4 jobs of workspaces below their cap and
//     active here with SKIP LOCKED (the tenancy predicate is a primary-key probe per row read,
//     at most $7 of them): the common case, one short scan of one index range.
//   - claimByWorkspaceSQL (only when the head gave fewer jobs than asked, e.g. it is all jobs of
//     capped or fenced workspaces) walks the workspaces that have pending jobs, one index descent
//     each (a loose scan of mutation_jobs_pending_ws_idx), evaluates the tenancy predicate and
//     the cap once per workspace, picks the open ones with the oldest heads, and locks their
//     oldest jobs with SKIP LOCKED: its cost follows the number of workspaces with pending jobs,
//     not the backlog behind them.
//
// Both lock in a MATERIALIZED CTE on purpose: an UPDATE … WHERE … IN (SELECT … LIMIT n FOR UPDATE
// SKIP LOCKED) may rescan its subquery and take more than n. Rows a pick locked beyond a
// workspace's free slots are left pending (their locks end with the statement). Each literal
// holds the tenancy predicate and SKIP LOCKED together, so the dialect test sees that the locks
// skip only this queue's live rows. TestClaimCostIndependentOfBacklog checks the plans.
//
// The running count reads lease_owner (count(lease_owner), as count(*): it is never NULL) and the
// head's bound reads id on purpose: neither column is in the index scanned, so PostgreSQL reads
// those indexes with plain index scans, which mark the entries of rows that left the index's
// predicate (finished, claimed) as dead for every later scan; an index-only scan does not, and
// each claim would visit every job that ran since the last vacuum.
var (
	claimSQL = fmt.Sprintf(`
	WITH counts AS MATERIALIZED (
		SELECT workspace_id, count(lease_owner) AS running FROM mutation_jobs WHERE status = 'running' GROUP BY workspace_id),
	picked AS MATERIALIZED (
		SELECT workspace_id, id, run_after FROM mutation_jobs WHERE status = 'pending' AND run_after <= $3
		AND run_after <= COALESCE((SELECT run_after FROM mutation_jobs WHERE status = 'pending' AND run_after <= $3 AND id <> ''
			ORDER BY run_after OFFSET $7 LIMIT 1), $3)
		AND workspace_id <> ALL (ARRAY(SELECT workspace_id FROM counts WHERE running >= COALESCE(($5::JSONB ->> workspace_id)::INT8, $6::INT8)))
		AND %s
		ORDER BY run_after LIMIT $4 FOR UPDATE SKIP LOCKED),
	open AS (
		SELECT p.workspace_id, COALESCE(($5::JSONB ->> p.workspace_id)::INT8, $6::INT8) - COALESCE(c.running, 0) AS free
		FROM (SELECT DISTINCT workspace_id FROM picked) AS p LEFT JOIN counts AS c ON c.workspace_id = p.workspace_id)
	%s`, tenancy.ActiveSQL("mutation_jobs.workspace_id"), claimTail)

	claimByWorkspaceSQL = fmt.Sprintf(`
	WITH RECURSIVE heads (workspace_id, run_after) AS (
		(SELECT workspace_id, run_after FROM mutation_jobs WHERE status = 'pending' ORDER BY workspace_id, run_after LIMIT 1)
		UNION ALL
		SELECT nxt.workspace_id, nxt.run_after FROM heads, LATERAL (
			SELECT workspace_id, run_after FROM mutation_jobs WHERE status = 'pending' AND workspace_id > heads.workspace_id
			ORDER BY workspace_id, run_after LIMIT 1) AS nxt),
	counts AS MATERIALIZED (
		SELECT workspace_id, count(lease_owner) AS running FROM mutation_jobs WHERE status = 'running' GROUP BY workspace_id),
	open AS MATERIALIZED (
		SELECT h.workspace_id, COALESCE(($5::JSONB ->> h.workspace_id)::INT8, $6::INT8) - COALESCE(c.running, 0) AS free
		FROM heads AS h LEFT JOIN counts AS c ON c.workspace_id = h.workspace_id
		WHERE h.run_after <= $3 AND COALESCE(c.running, 0) < COALESCE(($5::JSONB ->> h.workspace_id)::INT8, $6::INT8) AND %s
		ORDER BY h.run_after LIMIT $4),
	picked AS MATERIALIZED (
		SELECT p.workspace_id, p.id, p.run_after FROM open, LATERAL (
			SELECT workspace_id, id, run_after FROM mutation_jobs WHERE status = 'pending' AND workspace_id = open.workspace_id
			AND run_after <= $3 ORDER BY run_after LIMIT $4 FOR UPDATE SKIP LOCKED) AS p)
	%s`, tenancy.ActiveSQL("h.workspace_id"), claimTail)
)

// claimTail keeps, of the rows a claim locked, at most each workspace's free slots (oldest
// first) and at most $4 in all, and starts them under owner's ($1) lease until $2.
var claimTail = fmt.Sprintf(`, taken AS (
		SELECT r.workspace_id, r.id FROM (
			SELECT workspace_id, id, run_after, row_number() OVER (PARTITION BY workspace_id ORDER BY run_after, id) AS k FROM picked) AS r
		JOIN open AS o ON o.workspace_id = r.workspace_id WHERE r.k <= o.free ORDER BY r.run_after LIMIT $4)
	UPDATE mutation_jobs SET status = 'running', lease_owner = $1, lease_until = $2, started_at = COALESCE(started_at, $3),
		updated_at = $3, stage = 'started', progress = 0
	FROM taken WHERE mutation_jobs.workspace_id = taken.workspace_id AND mutation_jobs.id = taken.id
	AND mutation_jobs.status = 'pending'
	RETURNING %s`, jobColsQualified)

// claimHead is how many of the queue's oldest runnable jobs claimSQL considers for n slots.
func claimHead(n int) int { return min(4*n+16, 1024) }

// Caps bounds how many jobs of one workspace run at once in the cell: Default for every
// workspace (0: no bound), Overrides by workspace ID.
type Caps struct {
	Default   int
	Overrides map[string]int
}

// claim takes up to n runnable pending jobs for owner under a lease, only of workspaces active
// here (tenancy.ActiveSQL): a workspace fenced for a move starts no new job, and jobs copied to
// a move's target wait until it owns the workspace. Only workspaces below their cap are picked,
// and no more of a workspace's jobs than it has free slots; replicas claiming at the same moment
// can overshoot a cap by their number. It is one statement and one round trip (claimSQL), and a
// second (claimByWorkspaceSQL) only when the head of the queue gave fewer than n.
func (q *Queue) claim(ctx context.Context, owner string, n int, lease time.Duration, caps Caps) ([]Job, error) {
	out, _, err := q.finishAndClaim(ctx, owner, nil, n, lease, caps)
	if err != nil || len(out) == n {
		return out, err
	}
	more, err := q.claimWalk(ctx, owner, n-len(out), lease, caps)
	return append(out, more...), err
}

// claimArgs are the arguments claimSQL and claimByWorkspaceSQL share.
func claimArgs(owner string, now time.Time, n int, lease time.Duration, caps Caps) []any {
	overrides, _ := json.Marshal(caps.Overrides)
	def := caps.Default
	if def <= 0 {
		def = math.MaxInt32
	}
	return []any{owner, now.Add(lease), now, n, overrides, def}
}

// claimWalk is the claim's second statement (claimByWorkspaceSQL), for when the head of the
// queue gave fewer than asked: up to n jobs, in one round trip.
func (q *Queue) claimWalk(ctx context.Context, owner string, n int, lease time.Duration, caps Caps) (out []Job, err error) {
	err = q.claimRC(ctx, []stmt{{claimByWorkspaceSQL, claimArgs(owner, q.now(), n, lease, caps), func(rows pgx.Rows) error {
		var err error // a retried statement reads its rows again
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
		return err
	}}})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// finishing is the outcome of a run that ended without committing, waiting to be written.
type finishing struct {
	job Job
	o   outcome
}

// finishAndClaim writes the outcomes of the runs in fin (jobs owner holds) with one statement
// (finishBatchSQL) and claims up to n jobs from the head of the queue (claimSQL) in the same READ
// COMMITTED transaction and the same round trip: the group commit of a pool's finishes, fused
// with the claim that refills the slots they free. The claim sees the finished jobs as no longer
// running (their workspaces' caps count them out). written maps the ID of each job whose outcome
// was written to the state written (a job no longer owner's is absent); it is nil when the
// round trip failed (nothing of it was written). When the head gave fewer than n, claimWalk
// finds the jobs of the workspaces behind it.
func (q *Queue) finishAndClaim(ctx context.Context, owner string, fin []finishing, n int, lease time.Duration, caps Caps) (out []Job, written map[string]string, err error) {
	now := q.now()
	var stmts []stmt
	if len(fin) > 0 {
		stmts = append(stmts, stmt{finishBatchSQL, finishBatchArgs(owner, now, fin), func(rows pgx.Rows) error {
			written = make(map[string]string, len(fin))
			for rows.Next() {
				var id, state string
				if err := rows.Scan(&id, &state); err != nil {
					return err
				}
				written[id] = state
			}
			return rows.Err()
		}})
	}
	if n > 0 {
		stmts = append(stmts, stmt{claimSQL, append(claimArgs(owner, now, n, lease, caps), claimHead(n)), func(rows pgx.Rows) error {
			var err error // a retried statement reads its rows again
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
			return err
		}})
	}
	if len(stmts) == 0 {
		return nil, nil, nil
	}
	if err := q.claimRC(ctx, stmts); err != nil {
		return nil, nil, err
	}
	if len(fin) > 0 && written == nil {
		written = map[string]string{}
	}
	return out, written, nil
}

// finishBatchSQL is finish for several jobs in one statement: each row is written only when its
// job is still running under owner's ($1) lease (a job rescued and claimed elsewhere meanwhile
// is left as it is, and is absent from what the statement returns), and a cancel request turns
// its outcome into canceled, as in finish. The rows come as parallel arrays (finishBatchArgs),
// one element per job. UPDATE … FROM unnest of several arrays is common to PostgreSQL and
// CockroachDB.
const finishBatchSQL = `
	UPDATE mutation_jobs SET
		status = CASE WHEN mutation_jobs.cancel_requested THEN 'canceled' ELSE f.status END,
		attempt_count = mutation_jobs.attempt_count + CASE WHEN mutation_jobs.cancel_requested OR f.status <> 'pending' THEN 0 ELSE 1 END,
		finished_at = CASE WHEN mutation_jobs.cancel_requested OR f.status <> 'pending' THEN $2::TIMESTAMPTZ END,
		stage = CASE WHEN mutation_jobs.cancel_requested THEN 'canceled' WHEN f.status = 'pending' THEN 'retry-wait'
			WHEN f.status = 'succeeded' THEN 'done' ELSE f.status END,
		progress = CASE WHEN f.status = 'succeeded' THEN 100 ELSE mutation_jobs.progress END,
		result = f.result::JSONB, error_code = f.code, error_summary = f.summary,
		run_after = f.run_after, lease_owner = '', lease_until = NULL, updated_at = $2::TIMESTAMPTZ
	FROM unnest($3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::TEXT[], $9::TIMESTAMPTZ[])
		AS f (workspace_id, id, status, result, code, summary, run_after)
	WHERE mutation_jobs.workspace_id = f.workspace_id AND mutation_jobs.id = f.id
	AND mutation_jobs.status = 'running' AND mutation_jobs.lease_owner = $1
	RETURNING mutation_jobs.id, mutation_jobs.status`

// finishBatchArgs are finishBatchSQL's arguments for the outcomes in fin, written at now.
func finishBatchArgs(owner string, now time.Time, fin []finishing) []any {
	ws, id, status, code, summary := make([]string, len(fin)), make([]string, len(fin)), make([]string, len(fin)), make([]string, len(fin)), make([]string, len(fin))
	result, runAfter := make([]*string, len(fin)), make([]time.Time, len(fin))
	for i, f := range fin {
		ws[i], id[i], status[i], code[i], summary[i] = f.job.WorkspaceID, f.job.ID, f.o.status, f.o.code, truncate(f.o.summary, 2000)
		if len(f.o.result) > 0 {
			r := string(f.o.result)
			result[i] = &r
		}
		runAfter[i] = now.Add(f.o.retryWait)
	}
	return []any{owner, now, ws, id, status, result, code, summary, runAfter}
}

// stmt is one statement of a claimRC transaction, with the function that reads its rows.
type stmt struct {
	sql  string
	args []any
	scan func(pgx.Rows) error
}

// claimRC runs its statements in their own READ COMMITTED transaction in one round trip, like
// db.DB.OneRC, and on PostgreSQL with generic plans (SET LOCAL plan_cache_mode): the statements
// are prepared (pgx caches them), and PostgreSQL otherwise plans them afresh at every execution
// (a custom plan for its parameters), which cost more than running them, and more the larger
// the table (BENCHMARKS.md, "Mutation jobs"). The plans do not depend on the parameters' values:
// each reads the same bounded index ranges (TestClaimCostIndependentOfBacklog checks the
// generic plans too). CockroachDB keeps its own plan cache for prepared statements and gets no
// SET. A serialization failure or deadlock (40001, 40P01) runs the whole transaction again, at
// most 30 times.
func (q *Queue) claimRC(ctx context.Context, stmts []stmt) error {
	for attempt := 1; ; attempt++ {
		err := q.claimOnce(ctx, stmts)
		if !db.IsRetryable(err) || attempt > 30 {
			return err
		}
		pause := min(2*time.Millisecond<<min(attempt-1, 10), 50*time.Millisecond)
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// genericPlans is the statement claimRC sends on PostgreSQL before its statements.
const genericPlans = "SET LOCAL plan_cache_mode = force_generic_plan"

func (q *Queue) claimOnce(ctx context.Context, stmts []stmt) (err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	if !q.DB.Cockroach {
		b.Queue(genericPlans)
	}
	for _, s := range stmts {
		b.Queue(s.sql, s.args...)
	}
	b.Queue("COMMIT")
	br := q.DB.Pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for range b.Len() - 1 - len(stmts) {
		if _, err = br.Exec(); err != nil {
			return err
		}
	}
	for _, s := range stmts {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		err = s.scan(rows)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return err
		}
	}
	_, err = br.Exec()
	return err
}

// renew extends the leases of owner's running jobs and reports which of them have a cancel
// request.
func (q *Queue) renew(ctx context.Context, owner string, lease time.Duration) (map[string]bool, error) {
	out := map[string]bool{}
	_, err := q.DB.OneRC(ctx, `
		UPDATE mutation_jobs SET lease_until = $2 WHERE status = 'running' AND lease_owner = $1
		RETURNING id, cancel_requested`, []any{owner, q.now().Add(lease)}, func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var cancel bool
			if err := rows.Scan(&id, &cancel); err != nil {
				return err
			}
			out[id] = cancel
		}
		return rows.Err()
	})
	return out, err
}

// progress records a running job's stage and progress.
func (q *Queue) progress(ctx context.Context, j Job, owner, stage string, pct int) (bool, error) {
	tag, err := q.DB.OneRC(ctx, `
		UPDATE mutation_jobs SET stage = $4, progress = $5, updated_at = $6
		WHERE workspace_id = $1 AND id = $2 AND status = 'running' AND lease_owner = $3`,
		[]any{j.WorkspaceID, j.ID, owner, stage, max(0, min(100, pct)), q.now()}, nil)
	return err == nil && tag.RowsAffected() == 1, err
}

// outcome is how a run ended, when it did not commit through Run.Commit.
type outcome struct {
	status    string // Succeeded, Failed, Canceled, or Pending (automatic retry)
	result    json.RawMessage
	code      string
	summary   string
	retryWait time.Duration
}

// finish records an outcome for a job owner holds, alone: finishBatchSQL with one row. A cancel
// request turns any outcome but a committed success into canceled. It reports the state
// written, or "" when the job was no longer owner's. A pool writes its outcomes in batches with
// its claims (finishAndClaim) and comes here only for the outcomes of a batch that failed.
func (q *Queue) finish(ctx context.Context, j Job, owner string, o outcome) (string, error) {
	var state string
	_, err := q.DB.OneRC(ctx, finishBatchSQL, finishBatchArgs(owner, q.now(), []finishing{{j, o}}),
		func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id, &state); err != nil {
					return err
				}
			}
			return rows.Err()
		})
	return state, err
}

// release returns owner's running jobs to the queue without counting an attempt (a graceful
// shutdown of the replica is not the job's failure).
func (q *Queue) release(ctx context.Context, owner string) (int, error) {
	tag, err := q.DB.Exec(ctx, `
		UPDATE mutation_jobs SET status = CASE WHEN cancel_requested THEN 'canceled' ELSE 'pending' END,
			finished_at = CASE WHEN cancel_requested THEN $2::TIMESTAMPTZ ELSE NULL END,
			stage = CASE WHEN cancel_requested THEN 'canceled' ELSE 'requeued' END,
			lease_owner = '', lease_until = NULL, run_after = $2, updated_at = $2
		WHERE status = 'running' AND lease_owner = $1`, owner, q.now())
	return int(tag.RowsAffected()), err
}

// requeue returns one job owner holds to the queue without counting an attempt (its workspace
// is being moved: nothing was written), to run again after wait; a cancel request cancels it.
func (q *Queue) requeue(ctx context.Context, j Job, owner string, wait time.Duration, stage string) (string, error) {
	var state string
	now := q.now()
	_, err := q.DB.OneRC(ctx, `
		UPDATE mutation_jobs SET status = CASE WHEN cancel_requested THEN 'canceled' ELSE 'pending' END,
			finished_at = CASE WHEN cancel_requested THEN $4::TIMESTAMPTZ ELSE NULL END,
			stage = CASE WHEN cancel_requested THEN 'canceled' ELSE $6::TEXT END,
			lease_owner = '', lease_until = NULL, run_after = $5, updated_at = $4
		WHERE workspace_id = $1 AND id = $2 AND status = 'running' AND lease_owner = $3
		RETURNING status`, []any{j.WorkspaceID, j.ID, owner, now, now.Add(wait), stage}, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&state); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return state, err
}

// rescue returns running jobs whose lease ended (their replica died) to the queue as an
// automatic retry, or fails them when no attempt is left, or cancels them when asked to. Only
// jobs of workspaces hosted here (active, or fenced while a move drains them) are touched: rows
// a move copied to its target are not this cell's until the flip.
func (q *Queue) rescue(ctx context.Context, limit int) ([]Job, error) {
	return q.rescueWhere(ctx, limit, "")
}

// RescueWorkspace is rescue for one workspace, whatever the state of its tenancy row: what a
// move's drain runs on the source so that the jobs of a replica that died are returned to the
// queue (and copied as pending) even when no replica of the source is left to rescue them.
func (q *Queue) RescueWorkspace(ctx context.Context, workspaceID string) ([]Job, error) {
	return q.rescueWhere(ctx, 100, workspaceID)
}

func (q *Queue) rescueWhere(ctx context.Context, limit int, workspaceID string) ([]Job, error) {
	var out []Job
	filter := tenancy.HostedSQL("mutation_jobs.workspace_id")
	if workspaceID != "" {
		filter = `workspace_id = $3`
	}
	err := q.DB.ReadCommitted(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		now := q.now()
		args := []any{now, limit}
		if workspaceID != "" {
			args = append(args, workspaceID)
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(`
			SELECT %s FROM mutation_jobs WHERE status = 'running' AND lease_until < $1 AND %s
			ORDER BY lease_until LIMIT $2 FOR UPDATE SKIP LOCKED`, jobCols, filter), args...)
		if err != nil {
			return err
		}
		expired, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Job, error) { return scanJob(r) })
		if err != nil {
			return err
		}
		for _, j := range expired {
			status, inc, finished, code, summary, wait := Pending, 1, (*time.Time)(nil), CodeWorkerLost, "the replica running the job stopped; retried", q.backoff(j.AttemptCount+1)
			switch {
			case j.CancelRequested:
				status, inc, finished, code, summary, wait = Canceled, 0, &now, "", "", 0
			case j.AttemptCount+1 >= j.MaxAttempts:
				status, inc, finished, summary, wait = Failed, 0, &now, "the replica running the job stopped and no attempt is left", 0
			}
			if _, err := tx.Exec(ctx, `
				UPDATE mutation_jobs SET status = $3, attempt_count = attempt_count + $4, finished_at = $5, stage = $6,
					error_code = $7, error_summary = $8, run_after = $9, lease_owner = '', lease_until = NULL, updated_at = $10
				WHERE workspace_id = $1 AND id = $2`,
				j.WorkspaceID, j.ID, status, inc, finished, stageOf(status), code, summary, now.Add(wait), now); err != nil {
				return err
			}
			j.Status = status
			out = append(out, j)
		}
		return nil
	})
	return out, err
}

func stageOf(status string) string {
	switch status {
	case Pending:
		return "retry-wait"
	case Succeeded:
		return "done"
	}
	return status
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…[truncated]"
}
