package db

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/cockroach-go/v2/crdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Retry policy of Tx. CockroachDB's client loop retries at once and up to 50 times; under
// contention that turns into a stampede, so each retry first waits a jittered, growing pause.
const (
	DefaultMaxRetries = 30
	retryBaseDelay    = 2 * time.Millisecond
	retryMaxDelay     = 50 * time.Millisecond
)

// Querier is what a pool and a transaction both offer.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type ambientKey struct{}

// ambient is the transaction of an Atomic call, carried in the context so that every Tx and Q
// made with that context joins it.
type ambient struct {
	tx    pgx.Tx
	after []func()
	// doom is set when a statement failed in a way that only a restart of the whole transaction
	// can cure (a serialization failure, a failed savepoint); Atomic then restarts or fails.
	doom error
}

func ambientFrom(ctx context.Context) *ambient {
	a, _ := ctx.Value(ambientKey{}).(*ambient)
	return a
}

// InAtomic reports whether ctx carries an Atomic transaction.
func InAtomic(ctx context.Context) bool { return ambientFrom(ctx) != nil }

// Q returns what a read should run on: the Atomic transaction carried by ctx, so that it sees
// that transaction's own writes, or else the pool.
//
// On the pool each statement is its own implicit transaction, and one that fails with a
// serialization failure or a deadlock (IsRetryable) was rolled back as a whole: Q runs it again,
// at most StatementTries times in all, after the jittered pause of Tx's retries (see
// poolQuerier). Inside Atomic such a failure dooms the transaction, so Atomic runs it again as a
// whole, as it does for a Tx inside (see ambientQuerier): a conflict on a read never reaches an
// answer while a retry can still cure it.
func (d *DB) Q(ctx context.Context) Querier {
	if a := ambientFrom(ctx); a != nil {
		return ambientQuerier{a}
	}
	return poolQuerier{d}
}

// Atomic runs fn in one serializable transaction, retried as a whole like Tx. Every Tx made
// with the context fn receives runs inside that transaction, and Q with that context reads
// through it, so work composed of several store calls, and whatever fn records beside it,
// commits together or not at all.
//
// A Tx inside that fails rolls the whole transaction back, not just its own statements: Atomic
// then returns a *RolledBack carrying that failure whatever fn returns, and fn's later Tx calls
// fail at once. (No savepoints: they would cost two round trips per write, and an answer
// reporting a failed write should leave nothing changed anyway.)
//
// fn may run more than once; effects outside the database must be safe to repeat.
func (d *DB) Atomic(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if ambientFrom(ctx) != nil {
		return errors.New("db: Atomic inside Atomic")
	}
	var last *ambient
	err := d.Tx(ctx, func(tx pgx.Tx) error {
		a := &ambient{tx: tx}
		last = a
		err := fn(context.WithValue(ctx, ambientKey{}, a), tx)
		if a.doom != nil {
			return a.doom
		}
		return err
	})
	if err == nil && last != nil {
		for _, f := range last.after {
			f()
		}
	}
	return err
}

// AfterCommit runs f once the Atomic transaction ctx carries has committed (not at all if it
// rolls back; the hooks of a restarted attempt are dropped with it), or at once when ctx carries
// none. It is for signals that must not run ahead of the data, such as waking the workers of a
// job just enqueued.
func AfterCommit(ctx context.Context, f func()) {
	if a := ambientFrom(ctx); a != nil {
		a.after = append(a.after, f)
		return
	}
	f()
}

// RolledBack is Atomic's error when a Tx inside it failed: the transaction was rolled back.
type RolledBack struct{ Err error }

func (e *RolledBack) Error() string { return "rolled back: " + e.Err.Error() }
func (e *RolledBack) Unwrap() error { return e.Err }

// nested runs fn in the ambient transaction.
func (a *ambient) nested(ctx context.Context, fn func(pgx.Tx) error) error {
	if a.doom != nil {
		return a.doom
	}
	if err := fn(a.tx); err != nil {
		if IsRetryable(err) {
			a.doom = err // the whole transaction restarts
		} else {
			a.doom = &RolledBack{Err: err}
		}
		return err
	}
	return nil
}

// IsRetryable reports whether err asks for the transaction to run again: a serialization
// failure (40001, CockroachDB's restarts included) or a deadlock (40P01).
func IsRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// retryable makes a deadlock look like the serialization failure the crdb loop retries.
func retryable(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		c := *pe
		c.Code = "40001"
		return &c
	}
	return err
}

type opKey struct{}

// WithOperation names the operation that transactions made with ctx serve, for OnRetry.
func WithOperation(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// Operation is the name given by WithOperation, or "".
func Operation(ctx context.Context) string {
	s, _ := ctx.Value(opKey{}).(string)
	return s
}

// retrying wraps a transaction body with the retry pause, the OnRetry report and the deadlock
// mapping, and bounds the number of retries.
func (d *DB) retrying(ctx context.Context, fn func(pgx.Tx) error) (context.Context, func(pgx.Tx) error) {
	run := 0
	return crdb.WithMaxRetries(ctx, d.maxRetries()), func(tx pgx.Tx) error {
		if run > 0 {
			if err := d.beforeRetry(ctx, run); err != nil {
				return err
			}
		}
		run++
		return retryable(fn(tx))
	}
}

// beforeRetry reports retry number run (1-based) to OnRetry and waits its jittered, growing
// pause, or until ctx ends.
func (d *DB) beforeRetry(ctx context.Context, run int) error {
	if d.OnRetry != nil {
		d.OnRetry(ctx)
	}
	delay := min(retryBaseDelay<<min(run-1, 10), retryMaxDelay)
	t := time.NewTimer(delay/2 + rand.N(delay/2+1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ReadCommitted runs fn in a READ COMMITTED transaction, retried like Tx. It is for short
// bookkeeping whose correctness rests on row locks and unique keys rather than on
// serializability (idempotency claims, sweeps): at SERIALIZABLE such statements would take
// predicate locks that make unrelated requests abort each other. On a CockroachDB cluster that
// has READ COMMITTED disabled the transaction silently runs SERIALIZABLE, which is also correct.
func (d *DB) ReadCommitted(ctx context.Context, fn func(pgx.Tx) error) error {
	return d.tx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
}

// OneRC runs one statement in its own READ COMMITTED transaction, in a single round trip (BEGIN,
// the statement and COMMIT are sent as one pipeline), for the hot compare-and-set statements of
// queues. rows, when not nil, reads the statement's result rows. A restart CockroachDB may ask
// for is retried like Tx.
func (d *DB) OneRC(ctx context.Context, sql string, args []any, rows func(pgx.Rows) error) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	for attempt := 0; ; attempt++ {
		var err error
		tag, err = d.oneRC(ctx, sql, args, rows)
		if !IsRetryable(err) || attempt >= d.maxRetries() {
			return tag, err
		}
		if err := d.beforeRetry(ctx, attempt+1); err != nil {
			return tag, err
		}
	}
}

func (d *DB) maxRetries() int { return cmp.Or(max(d.MaxRetries, 0), DefaultMaxRetries) }

func (d *DB) oneRC(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) (tag pgconn.CommandTag, err error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := d.Pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err = br.Exec(); err != nil {
		return tag, err
	}
	if scan != nil {
		r, qerr := br.Query()
		if qerr != nil {
			return tag, qerr
		}
		err = scan(r)
		r.Close()
		if err == nil {
			err = r.Err()
		}
		tag = r.CommandTag()
	} else {
		tag, err = br.Exec()
	}
	if err != nil {
		return tag, err
	}
	_, err = br.Exec()
	return tag, err
}

// Defer queues a writing statement to run at the end of tx, right before its COMMIT and in the
// same round trip (on PostgreSQL; elsewhere it runs at once). Its failure fails the commit, and
// a serialization failure restarts the transaction like any other. Use it for a transaction's
// last statements whose results nothing reads.
func Defer(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	if t, ok := tx.(*pgTx); ok && t.begun && !t.released {
		t.deferred = append(t.deferred, &pgx.QueuedQuery{SQL: sql, Arguments: args})
		return nil
	}
	_, err := tx.Exec(ctx, sql, args...)
	return err
}
