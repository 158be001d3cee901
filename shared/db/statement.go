package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// StatementTries bounds how often Q runs one statement on the pool that fails with a
// serialization failure or a deadlock (IsRetryable), the first run included. Each retry first
// waits the jittered, growing pause of Tx's retries (2 ms, 4 ms, 8 ms, halved to doubled by the
// jitter), so a statement that keeps conflicting answers within some 15 ms more.
const StatementTries = 4

// again reports whether a statement on the pool that failed with err at its run-th run (1-based)
// runs again: err is a serialization failure or a deadlock, runs are left and ctx is live. It
// waits the retry pause (and reports the retry to OnRetry) before it says yes.
//
// Running the statement again is safe: outside a transaction a statement is its own implicit
// transaction, and one that failed that way was rolled back whole, nothing of it committed; it
// is what PostgreSQL and CockroachDB ask a client to do (CockroachDB retries such implicit
// transactions itself only while it has sent no result yet).
func (d *DB) again(ctx context.Context, run int, err error) bool {
	if run >= StatementTries || !IsRetryable(err) || ctx.Err() != nil {
		return false
	}
	return d.beforeRetry(ctx, run) == nil
}

// poolQuerier runs single statements on the pool, again when they fail retryably (see again).
// Exec and QueryRow's Scan return the last run's result; Query runs again only while no row has
// reached the caller, so a caller never sees a row twice.
type poolQuerier struct{ d *DB }

func (q poolQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	for run := 1; ; run++ {
		tag, err := q.d.Pool.Exec(ctx, sql, args...)
		if !q.d.again(ctx, run, err) {
			return tag, err
		}
	}
}

func (q poolQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &retriedRow{q: q, ctx: ctx, sql: sql, args: args}
}

func (q poolQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	for run := 1; ; run++ {
		rows, err := q.d.Pool.Query(ctx, sql, args...)
		if err == nil {
			return &retriedRows{Rows: rows, q: q, ctx: ctx, sql: sql, args: args, run: run}, nil
		}
		if rows != nil {
			rows.Close()
		}
		if !q.d.again(ctx, run, err) {
			return failedRows{err}, err
		}
	}
}

// retriedRow is QueryRow's answer on the pool: Scan runs the statement, again when it fails
// retryably. (pgx's own QueryRow sends the statement at once; nothing here reads the time it
// runs, only its result.)
type retriedRow struct {
	q    poolQuerier
	ctx  context.Context
	sql  string
	args []any
}

func (r *retriedRow) Scan(dest ...any) error {
	for run := 1; ; run++ {
		err := r.q.d.Pool.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
		if !r.q.d.again(r.ctx, run, err) {
			return err
		}
	}
}

// retriedRows are Query's rows on the pool. A statement's errors mostly arrive with its rows,
// not from Query: when the first Next finds none because the statement failed retryably, the
// statement runs again in its place; once a row has reached the caller, a failure is the
// caller's (it has seen part of a result that was rolled back).
type retriedRows struct {
	pgx.Rows
	q       poolQuerier
	ctx     context.Context
	sql     string
	args    []any
	run     int
	started bool
}

func (r *retriedRows) Next() bool {
	for {
		if r.Rows.Next() {
			r.started = true
			return true
		}
		if r.started {
			return false
		}
		err := r.Rows.Err()
		if !r.q.d.again(r.ctx, r.run, err) {
			return false
		}
		r.Rows.Close()
		r.run++
		rows, err := r.q.d.Pool.Query(r.ctx, r.sql, r.args...)
		if err != nil {
			if rows != nil {
				rows.Close()
			}
			rows = failedRows{err}
		}
		r.Rows = rows
	}
}

// failedRows are the rows of a statement that could not be sent.
type failedRows struct{ err error }

func (r failedRows) Close()                                       {}
func (r failedRows) Err() error                                   { return r.err }
func (r failedRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r failedRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r failedRows) Next() bool                                   { return false }
func (r failedRows) Scan(...any) error                            { return r.err }
func (r failedRows) Values() ([]any, error)                       { return nil, r.err }
func (r failedRows) RawValues() [][]byte                          { return nil }
func (r failedRows) Conn() *pgx.Conn                              { return nil }
func (r failedRows) TypeMap() *pgtype.Map                         { return nil }

// ambientQuerier runs statements in an Atomic transaction. A statement that fails retryably
// dooms the transaction, as a failed Tx inside does, so that Atomic runs it again as a whole
// whatever its fn then answers (a read's caller that turns the failure into an error answer
// has that answer thrown away with the attempt). Once doomed so, statements fail at once with
// that failure: the transaction is aborted anyway.
type ambientQuerier struct{ a *ambient }

// note dooms the transaction when err asks for it to run again.
func (a *ambient) note(err error) {
	if a.doom == nil && IsRetryable(err) {
		a.doom = err
	}
}

// restarting is the failure that doomed the transaction to run again, or nil.
func (a *ambient) restarting() error {
	if IsRetryable(a.doom) {
		return a.doom
	}
	return nil
}

func (q ambientQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := q.a.restarting(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := q.a.tx.Exec(ctx, sql, args...)
	q.a.note(err)
	return tag, err
}

func (q ambientQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := q.a.restarting(); err != nil {
		return errRow{err}
	}
	return notedRow{q.a.tx.QueryRow(ctx, sql, args...), q.a}
}

func (q ambientQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := q.a.restarting(); err != nil {
		return failedRows{err}, err
	}
	rows, err := q.a.tx.Query(ctx, sql, args...)
	q.a.note(err)
	if err != nil {
		return rows, err
	}
	return notedRows{rows, q.a}, nil
}

type notedRow struct {
	pgx.Row
	a *ambient
}

func (r notedRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	r.a.note(err)
	return err
}

type notedRows struct {
	pgx.Rows
	a *ambient
}

func (r notedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.a.note(r.Rows.Err())
	return false
}

func (r notedRows) Err() error {
	err := r.Rows.Err()
	r.a.note(err)
	return err
}
