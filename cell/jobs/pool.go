package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"slidecells/cell/auth"
	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
	"slidecells/shared/loop"
)

// Handler does one job kind's work. It reports progress through r, checks r.CancelRequested
// between stages, and makes its business writes through r.Commit (at most once). Its error is a
// *Failure (kept on the job; retried automatically when Retryable and attempts remain),
// ErrCanceled, or anything else (an infrastructure failure, retried as CodeInternal).
type Handler func(ctx context.Context, r *Run) (json.RawMessage, error)

// Pool defaults.
const (
	DefaultSlots         = 4
	DefaultLease         = 30 * time.Second
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultShutdownGrace = 10 * time.Second
)

// Pool runs jobs in one replica: it claims up to Slots jobs at a time, runs their handlers,
// renews their leases, rescues jobs whose lease ended anywhere, and on shutdown returns unfinished
// jobs to the queue.
type Pool struct {
	Queue    *Queue
	Handlers map[string]Handler
	// Slots bounds the jobs this replica runs at once; zero is DefaultSlots.
	Slots int
	// Lease is how long a claim lasts without renewal; renewed every Lease/3. Zero is
	// DefaultLease.
	Lease time.Duration
	// PollInterval is how often an idle pool looks for jobs enqueued by other replicas; jobs
	// enqueued here wake it at once (Queue.Notify). Zero is DefaultPollInterval.
	PollInterval time.Duration
	// ShutdownGrace is how long running jobs may finish when the pool stops, before they are
	// interrupted and returned to the queue. Zero is DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// Owner names this replica's leases; empty is a fresh random name.
	Owner string
	// Authorize checks, inside Run.Commit's transaction and before the business writes, that
	// the job's owner may still make them (current membership and role; an expired token does
	// not matter: accepted jobs outlive it), and returns the workspace scope the writes run
	// under. An error that is a *Failure fails the job with its code.
	Authorize func(ctx context.Context, j Job) (auth.Scope, error)
	// WorkspaceConcurrency bounds the jobs of one workspace running at once in the cell (all
	// replicas together, up to claims racing); 0 is no bound. WorkspaceOverrides, when set,
	// gives per-workspace caps instead (the directory's, through its cache).
	WorkspaceConcurrency int
	WorkspaceOverrides   func(ctx context.Context) (map[string]int, error)
	// Observe, when set, is told each state a job enters in this pool (running, and the state
	// each run ends in), for metrics.
	Observe func(kind, state string)
	Log     *zap.Logger

	mu   sync.Mutex
	runs map[string]*Run
	// writes makes the lease renewal and a batch of outcomes take turns: each locks several of
	// this pool's running jobs, in orders of their own, so run side by side they could deadlock
	// (PostgreSQL would abort one after deadlock_timeout, a second's stall of the replica).
	writes sync.Mutex
	// beforeWrite, when set (by tests only), is called before each round trip that writes
	// outcomes, with writes held.
	beforeWrite func()
}

func (p *Pool) slots() int { return cmp.Or(p.Slots, DefaultSlots) }

// caps are the per-workspace caps now; an override lookup that fails keeps the default for
// every workspace.
func (p *Pool) caps(ctx context.Context) Caps {
	c := Caps{Default: p.WorkspaceConcurrency}
	if p.WorkspaceOverrides != nil {
		if o, err := p.WorkspaceOverrides(ctx); err == nil {
			c.Overrides = o
		}
	}
	return c
}

func (p *Pool) lease() time.Duration { return cmp.Or(p.Lease, DefaultLease) }

func (p *Pool) poll() time.Duration { return cmp.Or(p.PollInterval, DefaultPollInterval) }

func (p *Pool) observe(kind, state string) {
	if p.Observe != nil {
		p.Observe(kind, state)
	}
}

func (p *Pool) log() *zap.Logger {
	if p.Log != nil {
		return p.Log
	}
	return zap.NewNop()
}

// Run runs the pool until ctx ends, then lets running jobs finish for ShutdownGrace, interrupts
// the rest and returns them to the queue.
//
// One loop claims for every slot and writes the outcomes of the runs that ended without
// committing (failures, cancels, successes without a Commit), all of them since its last write
// in one statement sent with the claim that refills their slots, in one round trip and one
// transaction (Queue.finishAndClaim): the first outcome goes out at once, those that come while
// a round trip is in flight ride the next one; no timer waits for more. A job whose outcome is
// not written when the process dies stays running under its lease, which ends, and the rescuer
// returns it to the queue (TestCrashBeforeOutcomeWritten).
func (p *Pool) Run(ctx context.Context) error {
	if p.Owner == "" {
		p.Owner = ids.New("wrk")
	}
	p.Queue.Init()
	p.runs = map[string]*Run{}
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	ends := make(chan ended, p.slots())
	// Leases are renewed every third of their length and expired ones rescued every half.
	var maint sync.WaitGroup
	maint.Go(func() { loop.Every(ctx, p.lease()/3, nil, p.renew) })
	maint.Go(func() { loop.Every(ctx, p.lease()/2, nil, p.rescue) })

	busy := 0
	var pend []ended // runs whose outcome is still to be written
	ending := false  // a run just ended: others may be about to
	take := func(e ended) {
		busy--
		ending = true
		if e.o != nil {
			pend = append(pend, e)
		}
	}
	for ctx.Err() == nil {
		// Take every run ended meanwhile, so that one round trip writes their outcomes and one
		// claim fills their slots (jobs that end while a claim runs would otherwise cost a
		// claim and a finish each). Runs that are about to end (runnable goroutines) get the
		// processor first, so that they ride this round trip rather than the next one (not
		// after a wake-up: a job waits).
		if ending {
			runtime.Gosched()
		}
		for drained := false; !drained; {
			select {
			case e := <-ends:
				take(e)
			default:
				drained = true
			}
		}
		ending = false
		if n := p.slots() - busy; n > 0 {
			caps := p.caps(ctx)
			jobs, ok := p.exchange(ctx, &pend, n, caps)
			for _, j := range jobs {
				busy++
				p.start(work, j, ends)
			}
			if got := len(jobs); ok && got < n {
				// The head of the queue gave fewer: its jobs run while the workspaces behind it
				// are walked.
				more, err := p.Queue.claimWalk(ctx, p.Owner, n-got, p.lease(), caps)
				if err != nil && ctx.Err() == nil {
					p.log().Warn("claiming jobs failed", zap.Error(err))
				}
				for _, j := range more {
					busy++
					p.start(work, j, ends)
				}
				jobs = append(jobs, more...)
			}
			if len(jobs) == n {
				// There may be more: claim again as soon as a slot frees.
				select {
				case e := <-ends:
					take(e)
				case <-ctx.Done():
				}
				continue
			}
		}
		t := time.NewTimer(p.poll())
		select {
		case <-p.Queue.wakeCh():
		case e := <-ends:
			take(e)
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	// Shutdown: let running jobs finish for a while (their outcomes are written as they come),
	// then interrupt and requeue them.
	grace := p.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	graceT := time.NewTimer(grace)
	defer graceT.Stop()
	for busy > 0 || len(pend) > 0 {
		if len(pend) > 0 {
			p.exchange(context.WithoutCancel(ctx), &pend, 0, Caps{})
			continue
		}
		select {
		case e := <-ends:
			take(e)
		case <-graceT.C:
			stopWork()
		}
	}
	maint.Wait()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := p.Queue.release(rctx, p.Owner); err != nil || n > 0 {
		p.log().Info("returned unfinished jobs to the queue", zap.Int("jobs", n), zap.Error(err))
	}
	return nil
}

// ended is a run that ended: its slot is free, and o, when set, is the outcome to write.
type ended struct {
	run *Run
	o   *outcome
}

// exchange writes the outcomes in *pend and claims up to n jobs (none: n = 0) from the head of the
// queue in one round trip, then empties *pend; ok reports that the round trip succeeded. When it
// fails because ctx ended (the pool stops), *pend is kept for the shutdown to write; when it
// fails otherwise, each outcome is written on its own (one bad row does not hold back the
// others), and one that cannot be is left to the rescuer.
func (p *Pool) exchange(ctx context.Context, pend *[]ended, n int, caps Caps) (jobs []Job, ok bool) {
	fin := make([]finishing, len(*pend))
	for i, e := range *pend {
		fin[i] = finishing{job: e.run.Job, o: *e.o}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if len(fin) > 0 {
		p.writes.Lock()
		if p.beforeWrite != nil {
			p.beforeWrite()
		}
	}
	jobs, written, err := p.Queue.finishAndClaim(fctx, p.Owner, fin, n, p.lease(), caps)
	if len(fin) > 0 {
		p.writes.Unlock()
	}
	if err != nil {
		if ctx.Err() != nil && n > 0 {
			return nil, false
		}
		p.log().Warn("claiming jobs (and writing the outcomes of ended ones) failed", zap.Int("outcomes", len(fin)), zap.Error(err))
	}
	if written == nil && len(fin) > 0 {
		written = map[string]string{}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, f := range fin {
			state, err := p.Queue.finish(wctx, f.job, p.Owner, f.o)
			if err != nil {
				p.log().Warn("recording a job's outcome failed; the rescuer will take it", zap.String("job_id", f.job.ID), zap.Error(err))
				continue
			}
			if state != "" {
				written[f.job.ID] = state
			}
		}
	}
	for _, f := range fin {
		p.recorded(f, written[f.job.ID])
	}
	*pend = (*pend)[:0]
	return jobs, err == nil
}

// recorded is told the state an outcome wrote ("" when the job was no longer this pool's).
func (p *Pool) recorded(f finishing, state string) {
	if state != "" {
		p.observe(f.job.Kind, state)
	}
	if state == Pending {
		go func() {
			// Wake a worker when the backoff ends (other replicas poll).
			time.Sleep(f.o.retryWait)
			p.Queue.Notify()
		}()
	}
}

// renew renews this pool's leases and marks the runs that lost theirs (rescued elsewhere) or
// were cancelled.
func (p *Pool) renew(ctx context.Context) {
	started := time.Now()
	p.writes.Lock()
	cancels, err := p.Queue.renew(ctx, p.Owner, p.lease())
	p.writes.Unlock()
	if err != nil {
		p.log().Warn("renewing job leases failed", zap.Error(err))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, r := range p.runs {
		if cancel, ok := cancels[id]; ok && cancel {
			r.cancel.Store(true)
		} else if !ok && r.claimedAt.Before(started) {
			r.lost.Store(true) // rescued elsewhere: stop before any write
		}
	}
}

// rescue returns jobs whose lease ended, of any replica, to the queue (or fails them when no
// attempt is left).
func (p *Pool) rescue(ctx context.Context) {
	jobs, err := p.Queue.rescue(ctx, 100)
	if err != nil {
		p.log().Warn("rescuing jobs failed", zap.Error(err))
	}
	for _, j := range jobs {
		p.observe(j.Kind, j.Status)
		p.log().Info("rescued a job whose lease ended", zap.String("workspace_id", j.WorkspaceID),
			zap.String("job_id", j.ID), zap.String("state", j.Status))
		if j.Status == Pending {
			p.Queue.Notify()
		}
	}
}

func (p *Pool) start(ctx context.Context, j Job, ends chan<- ended) {
	r := &Run{Job: j, pool: p, claimedAt: time.Now()}
	r.cancel.Store(j.CancelRequested)
	p.mu.Lock()
	p.runs[j.ID] = r
	p.mu.Unlock()
	p.observe(j.Kind, Running)
	go func() {
		o := p.execute(ctx, r)
		p.mu.Lock()
		delete(p.runs, j.ID)
		p.mu.Unlock()
		ends <- ended{run: r, o: o} // never blocks: one element per slot
	}()
}

// execute runs a job and returns the outcome to write, or nil when there is none (it committed,
// it is no longer this pool's, it went back to the queue, or the pool stops).
func (p *Pool) execute(ctx context.Context, r *Run) *outcome {
	j := r.Job
	ctx, span := traceRun(ctx, j)
	spanOutcome := "shutdown"
	defer func() { endRun(span, spanOutcome) }()
	o := outcome{status: Succeeded}
	result, err := p.call(ctx, r)
	switch {
	case r.committed.Load():
		p.observe(j.Kind, Succeeded)
		spanOutcome = Succeeded
		return nil
	case errors.Is(err, ErrLeaseLost) || r.lost.Load():
		spanOutcome = "lease_lost"
		return nil // the job is someone else's now
	case errors.Is(err, ErrFenced):
		spanOutcome = "requeued"
		p.requeue(ctx, r)
		return nil
	case errors.Is(err, ErrCanceled) || r.cancel.Load():
		o = outcome{status: Canceled}
	case ctx.Err() != nil:
		return nil // shutdown: Run returns the job to the queue
	case err == nil && len(result) > 0 && !json.Valid(result):
		// Not storable: fail the job here rather than the write of every outcome it rides with.
		p.log().Warn("job result is not JSON", zap.String("workspace_id", j.WorkspaceID), zap.String("job_id", j.ID), logging.Trace(ctx))
		o = outcome{status: Failed, code: CodeInternal, summary: "the job's result is not JSON"}
		spanOutcome = Failed + ":" + CodeInternal
	case err == nil:
		o.result = result
	default:
		var f *Failure
		if !errors.As(err, &f) {
			f = &Failure{Code: CodeInternal, Summary: "the job failed unexpectedly; it is retried while attempts remain", Retryable: true}
			p.log().Warn("job failed", zap.String("workspace_id", j.WorkspaceID), zap.String("job_id", j.ID), logging.Trace(ctx), zap.Error(err))
		}
		o = outcome{status: Failed, code: f.Code, summary: f.Summary}
		spanOutcome = Failed + ":" + f.Code
		if f.Retryable && j.AttemptCount+1 < j.MaxAttempts {
			o.status, o.retryWait = Pending, p.Queue.backoff(j.AttemptCount+1)
		}
	}
	if o.status == Succeeded || o.status == Canceled {
		spanOutcome = o.status
	}
	return &o
}

// FencedRetry is how long a job whose workspace is being moved waits before it is claimed again
// (by then the workspace is active again here, or the job runs on the new owner).
const FencedRetry = time.Second

// requeue gives a job whose workspace is fenced for a move back to the queue, attempt unused.
func (p *Pool) requeue(ctx context.Context, r *Run) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	state, err := p.Queue.requeue(fctx, r.Job, p.Owner, FencedRetry, "waiting-for-move")
	if err != nil {
		p.log().Warn("requeueing a job of a moving workspace failed; the rescuer will take it", zap.String("job_id", r.Job.ID), zap.Error(err))
		return
	}
	if state != "" {
		p.observe(r.Job.Kind, state)
		p.log().Info("job requeued: its workspace is being moved", zap.String("workspace_id", r.Job.WorkspaceID), zap.String("job_id", r.Job.ID))
	}
}

// call runs the handler, turning a panic into a non-retried failure.
func (p *Pool) call(ctx context.Context, r *Run) (res json.RawMessage, err error) {
	h := p.Handlers[r.Job.Kind]
	if h == nil {
		return nil, Fail(CodeKindUnknown, "no handler for job kind %q", r.Job.Kind)
	}
	if r.cancel.Load() {
		return nil, ErrCanceled
	}
	defer func() {
		if v := recover(); v != nil {
			p.log().Error("job handler panicked", zap.String("job_id", r.Job.ID), logging.Trace(ctx), zap.Any("panic", v))
			err = Fail(CodePanicked, "the job handler failed: %v", v)
		}
	}()
	return h(ctx, r)
}

// Run is one execution of a job, given to its Handler.
type Run struct {
	Job       Job
	pool      *Pool
	claimedAt time.Time
	cancel    atomic.Bool
	lost      atomic.Bool
	committed atomic.Bool
}

// CancelRequested reports whether a cancel was requested (seen at the last lease renewal);
// handlers check it between stages. Commit checks it again in its transaction.
func (r *Run) CancelRequested() bool { return r.cancel.Load() }

// Progress records the stage the job is in and a 0–100 progress, visible to clients polling
// the job. It returns ErrLeaseLost when the job is no longer this run's.
func (r *Run) Progress(ctx context.Context, stage string, pct int) error {
	ok, err := r.pool.Queue.progress(ctx, r.Job, r.pool.Owner, stage, pct)
	if err == nil && !ok {
		r.lost.Store(true)
		return ErrLeaseLost
	}
	return err
}

// Commit makes the job's business writes and finishes it as succeeded, in one serializable
// transaction that first rechecks that the job is still this run's and not cancelled (ErrCanceled
// / ErrLeaseLost: nothing is written), that the workspace is writable here (tenancy.Writable;
// ErrFenced while a move fences it: nothing is written, the job returns to the queue with its
// attempt unused) and the owner's permission (Pool.Authorize, which gives the scope fn writes
// under). fn's writes through the given context join the transaction; its result
// is stored on the job. A *Failure from fn rolls everything back and fails the job like a
// handler error.
func (r *Run) Commit(ctx context.Context, fn func(ctx context.Context, s auth.Scope, tx pgx.Tx) (json.RawMessage, error)) error {
	if r.committed.Load() {
		return errors.New("jobs: Commit called twice")
	}
	q := r.pool.Queue
	j := r.Job
	err := q.DB.Atomic(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var status, owner string
		var cancel bool
		err := tx.QueryRow(ctx, `SELECT status, lease_owner, cancel_requested FROM mutation_jobs
			WHERE workspace_id = $1 AND id = $2 FOR UPDATE`, j.WorkspaceID, j.ID).Scan(&status, &owner, &cancel)
		if err != nil {
			return err
		}
		if status != Running || owner != r.pool.Owner {
			return ErrLeaseLost
		}
		if cancel {
			return ErrCanceled
		}
		if err := tenancy.Writable(ctx, tx, j.WorkspaceID); err != nil {
			if tenancy.NotWritable(err) {
				return fmt.Errorf("%w: %w", ErrFenced, err)
			}
			return err
		}
		if r.pool.Authorize == nil {
			return errors.New("jobs: Pool.Authorize is not set")
		}
		scope, err := r.pool.Authorize(ctx, j)
		if err != nil {
			return err
		}
		result, err := fn(ctx, scope, tx)
		if err != nil {
			return err
		}
		// The job's success goes out with the COMMIT, in its round trip (the row is locked
		// above; nothing reads the statement's result, and its failure fails the commit).
		now := q.now()
		return db.Defer(ctx, tx, `
			UPDATE mutation_jobs SET status = 'succeeded', result = $3, stage = 'done', progress = 100, finished_at = $4,
				lease_owner = '', lease_until = NULL, error_code = '', error_summary = '', updated_at = $4
			WHERE workspace_id = $1 AND id = $2`, j.WorkspaceID, j.ID, nullJSON(result), now)
	})
	switch {
	case err == nil:
		r.committed.Store(true)
		return nil
	case errors.Is(err, ErrCanceled):
		r.cancel.Store(true)
	case errors.Is(err, ErrLeaseLost):
		r.lost.Store(true)
	}
	return err
}

// Scope authorizes the job's owner now (Pool.Authorize) and returns the workspace scope that
// the run's reads (before its Commit) go through.
func (r *Run) Scope(ctx context.Context) (auth.Scope, error) {
	if r.pool.Authorize == nil {
		return auth.Scope{}, errors.New("jobs: Pool.Authorize is not set")
	}
	return r.pool.Authorize(ctx, r.Job)
}
