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

	probe probe // Ping's own connection
}

// Options tune a pool. Zero values take the defaults.
type Options struct {
	MaxConns        int32         // default 16
	ConnectTimeout  time.Duration // default 3s
	ApplicationName string
	// IdleInTransaction, when set, makes the server end a session whose transaction stays idle
	// that long (a frozen or partitioned client), so the locks it holds are freed.
	IdleInTransaction time.Duration
	// RuntimeParams are further session settings (e.g. timezone=UTC), sent at connect.
	RuntimeParams map[string]string
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
	for k, v := range o.RuntimeParams {
		cfg.ConnConfig.RuntimeParams[k] = v
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

// Close closes the pool and Ping's connection.
func (d *DB) Close() {
	d.closeProbe()
	d.Pool.Close()
}

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
// Inside an Atomic call (ctx carries its transaction) fn runs directly in that transaction, with
// no savepoint: a failure of fn rolls the whole Atomic transaction back (see Atomic), and a
// retry restarts the Atomic call as a whole.
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

// Snapshot runs fn in a read-only transaction that reads one consistent snapshot taken after
// every transaction that was writing when it began has ended: on PostgreSQL SERIALIZABLE READ
// ONLY DEFERRABLE (it waits for a snapshot no running transaction can invalidate, then never
// fails); on CockroachDB a SERIALIZABLE READ ONLY transaction, whose reads wait for the intents
// of transactions still writing below its timestamp and push later ones above it. A write that
// committed before the snapshot is in it; one that had read something the caller changed
// before calling (a fence row) can no longer commit unseen. Retried like Tx.
func (d *DB) Snapshot(ctx context.Context, fn func(pgx.Tx) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly}
	if !d.Cockroach {
		opts.DeferrableMode = pgx.Deferrable
	}
	return d.tx(ctx, opts, fn)
}

// ReadOnly runs fn in a read-only transaction that reads one snapshot without waiting for
// anything (REPEATABLE READ on PostgreSQL; CockroachDB runs it serializable): for long reads
// whose consistency with later writes does not matter, such as a move's copy before its fence.
func (d *DB) ReadOnly(ctx context.Context, fn func(pgx.Tx) error) error {
	return d.tx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
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

// pgRestartConn begins pgTx transactions so that crdbpgxv5.ExecuteTx works on PostgreSQL.
type pgRestartConn struct{ pool *pgxpool.Pool }

func (c pgRestartConn) Begin(ctx context.Context) (pgx.Tx, error) {
	return c.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx takes a connection but sends no BEGIN yet: it goes out with the transaction's first
// statement (in the same round trip when that is a batch).
func (c pgRestartConn) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pgTx{conn: conn, begin: beginSQL(opts)}, nil
}

func beginSQL(o pgx.TxOptions) string {
	s := "BEGIN"
	if o.IsoLevel != "" {
		s += " ISOLATION LEVEL " + string(o.IsoLevel)
	}
	if o.AccessMode != "" {
		s += " " + string(o.AccessMode)
	}
	if o.DeferrableMode != "" {
		s += " " + string(o.DeferrableMode)
	}
	return s
}

// pgTx is a transaction on one pooled connection that maps CockroachDB's client-side retry
// protocol onto PostgreSQL:
//
//   - SAVEPOINT cockroach_restart: nothing to do.
//   - RELEASE SAVEPOINT cockroach_restart: the real COMMIT, so a serialization failure at commit
//     reaches the retry loop (crdb ignores the error of its own later Commit call).
//   - ROLLBACK TO SAVEPOINT cockroach_restart: roll back and begin again (lazily), because
//     PostgreSQL keeps the old snapshot across a savepoint rollback and the retry would fail
//     forever.
//
// BEGIN is sent lazily with the first statement: a transaction whose first step is a batch (an
// idempotent request's key lock) saves a round trip.
type pgTx struct {
	conn     *pgxpool.Conn
	begin    string
	begun    bool
	released bool
	deferred []*pgx.QueuedQuery
}

const (
	spStart    = "SAVEPOINT cockroach_restart"
	spRelease  = "RELEASE SAVEPOINT cockroach_restart"
	spRollback = "ROLLBACK TO SAVEPOINT cockroach_restart"
)

func (t *pgTx) start(ctx context.Context) error {
	if t.released {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, t.begin); err != nil {
		return err
	}
	t.begun = true
	return nil
}

// end sends COMMIT or ROLLBACK when a transaction is open; the connection stays for a restart.
// A COMMIT goes out in one round trip with the statements Defer queued, which run first.
func (t *pgTx) end(ctx context.Context, sql string) error {
	deferred := t.deferred
	t.deferred = nil
	if t.released || !t.begun {
		return nil
	}
	t.begun = false
	if sql != "COMMIT" || len(deferred) == 0 {
		tag, err := t.conn.Exec(ctx, sql)
		if err == nil && sql == "COMMIT" && tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return err
	}
	b := &pgx.Batch{QueuedQueries: deferred}
	b.Queue("COMMIT")
	br := t.conn.SendBatch(ctx, b)
	var err error
	for range deferred {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A deferred statement failed: the pipeline skipped the COMMIT; end the transaction.
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
	}
	return err
}

func (t *pgTx) release() {
	if !t.released {
		t.released = true
		t.conn.Release()
	}
}

func (t *pgTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	switch sql {
	case spStart:
		return pgconn.CommandTag{}, nil
	case spRelease:
		return pgconn.CommandTag{}, t.end(ctx, "COMMIT")
	case spRollback:
		return pgconn.CommandTag{}, t.end(ctx, "ROLLBACK")
	}
	if err := t.start(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pgTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pgTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.start(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pgTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.released {
		return errBatch{pgx.ErrTxClosed}
	}
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	withBegin := &pgx.Batch{}
	withBegin.Queue(t.begin)
	withBegin.QueuedQueries = append(withBegin.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, withBegin)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return errBatch{err}
	}
	t.begun = true
	return br
}

func (t *pgTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.start(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *pgTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Conn().Prepare(ctx, name, sql)
}

func (t *pgTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pgTx) Conn() *pgx.Conn { return t.conn.Conn() }

// Begin would start a savepoint; nothing here uses them (Atomic composes without).
func (t *pgTx) Begin(ctx context.Context) (pgx.Tx, error) {
	return nil, errors.New("db: nested transactions are not supported")
}

// Commit ends the transaction (crdb calls it after RELEASE, which committed already) and gives
// the connection back.
func (t *pgTx) Commit(ctx context.Context) error {
	err := t.end(ctx, "COMMIT")
	t.release()
	return err
}

// Rollback ends the transaction and gives the connection back.
func (t *pgTx) Rollback(ctx context.Context) error {
	err := t.end(ctx, "ROLLBACK")
	t.release()
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
