// Package db opens connection pools, runs retrying transactions and applies migrations.
//
// CockroachDB is the production engine and PostgreSQL the local one; the same SQL runs on both.
// Every multi-statement transaction goes through Tx, which runs crdbpgxv5.ExecuteTx. On
// PostgreSQL the CockroachDB savepoint protocol is translated so that a serialization failure
// anywhere, including at COMMIT, restarts the whole transaction on a fresh snapshot instead of
// being lost (see pgRestartTx).
package db

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	crdbpgxv5 "github.com/cockroachdb/cockroach-go/v2/crdb/crdbpgxv5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is a pool plus the engine it talks to.
type DB struct {
	Pool      *pgxpool.Pool
	Cockroach bool
	// MaxRetries bounds how often Tx runs a transaction again after a serialization failure;
	// zero is DefaultMaxRetries.
	MaxRetries int
	// OnRetry, when set, is called before each retry of a transaction (for a metric; the
	// context carries the operation named by WithOperation).
	OnRetry func(ctx context.Context)
}

// Options tune a pool. Zero values take the defaults.
type Options struct {
	MaxConns        int32         // default 16
	ConnectTimeout  time.Duration // default 3s
	ApplicationName string
	// IdleInTransaction, when set, makes the server end a session whose transaction stays idle
	// that long (a frozen or partitioned client), so the locks it holds are freed.
	IdleInTransaction time.Duration
}

// Open connects to url and detects the engine. It fails if the server cannot be reached.
func Open(ctx context.Context, url string, o Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", errors.New(redactURLError(err)))
	}
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 3 * time.Second
	}
	cfg.MaxConns = o.MaxConns
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	if o.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.ApplicationName
	}
	if o.IdleInTransaction > 0 {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(o.IdleInTransaction.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var version string
	if err := pool.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return &DB{Pool: pool, Cockroach: strings.Contains(version, "CockroachDB")}, nil
}

// Close closes the pool.
func (d *DB) Close() { d.Pool.Close() }

// redactURLError keeps a parse error from echoing a password.
func redactURLError(err error) string {
	s := err.Error()
	if i := strings.Index(s, "://"); i >= 0 {
		return "cannot parse the connection string"
	}
	return s
}

// Tx runs fn in a serializable transaction through crdbpgxv5.ExecuteTx, retrying it on
// serialization failures and deadlocks with a short jittered pause, at most MaxRetries times.
// fn must have no side effects outside the database, since it may run more than once, and must
// return database errors unwrapped or wrapped with %w.
//
// Inside an Atomic call (ctx carries its transaction) fn runs in that transaction under a
// savepoint instead, and a retry restarts the Atomic call as a whole.
func (d *DB) Tx(ctx context.Context, fn func(pgx.Tx) error) error {
	if a := ambientFrom(ctx); a != nil {
		return a.nested(ctx, fn)
	}
	return d.tx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}, fn)
}

func (d *DB) tx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	ctx, fn = d.retrying(ctx, fn)
	if d.Cockroach {
		return crdbpgxv5.ExecuteTx(ctx, d.Pool, opts, fn)
	}
	return crdbpgxv5.ExecuteTx(ctx, pgRestartConn{d.Pool}, opts, fn)
}

// Exec runs one writing statement as its own retried transaction (a lone statement can fail
// with a serialization error too), or inside the Atomic transaction ctx carries.
func (d *DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := d.Tx(ctx, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// IsUniqueViolation reports whether err is a unique-constraint violation.
func IsUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// IsForeignKeyViolation reports whether err is a foreign-key violation.
func IsForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

// pgRestartConn begins pgRestartTx transactions so that crdbpgxv5.ExecuteTx works on PostgreSQL.
type pgRestartConn struct{ pool *pgxpool.Pool }

func (c pgRestartConn) Begin(ctx context.Context) (pgx.Tx, error) {
	return c.BeginTx(ctx, pgx.TxOptions{})
}

func (c pgRestartConn) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := c.pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &pgRestartTx{Tx: tx, pool: c.pool, opts: opts}, nil
}

// pgRestartTx maps CockroachDB's client-side retry protocol onto PostgreSQL:
//
//   - SAVEPOINT cockroach_restart: nothing to do.
//   - RELEASE SAVEPOINT cockroach_restart: the real COMMIT, so a serialization failure at commit
//     reaches the retry loop (crdb ignores the error of its own later Commit call).
//   - ROLLBACK TO SAVEPOINT cockroach_restart: roll back and begin again, because PostgreSQL keeps
//     the old snapshot across a savepoint rollback and the retry would fail forever.
type pgRestartTx struct {
	pgx.Tx
	pool      *pgxpool.Pool
	opts      pgx.TxOptions
	committed bool
}

const (
	spStart    = "SAVEPOINT cockroach_restart"
	spRelease  = "RELEASE SAVEPOINT cockroach_restart"
	spRollback = "ROLLBACK TO SAVEPOINT cockroach_restart"
)

func (t *pgRestartTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	switch sql {
	case spStart:
		return pgconn.CommandTag{}, nil
	case spRelease:
		if err := t.Tx.Commit(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		t.committed = true
		return pgconn.CommandTag{}, nil
	case spRollback:
		_ = t.Tx.Rollback(ctx)
		tx, err := t.pool.BeginTx(ctx, t.opts)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		t.Tx = tx
		return pgconn.CommandTag{}, nil
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *pgRestartTx) Commit(ctx context.Context) error {
	if t.committed {
		return nil
	}
	return t.Tx.Commit(ctx)
}

func (t *pgRestartTx) Rollback(ctx context.Context) error {
	if t.committed {
		return nil
	}
	return t.Tx.Rollback(ctx)
}
