package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
)

// Row is the row type of a Table: a domain type embedding object.Object.
type Row interface{ ObjectID() string }

// Table is a kind with its row type: the columns a read selects and how a row is scanned. The
// reads every standard kind has (one live row, a page of live rows by ID) and the
// version-locked update are written once, here.
type Table[T Row] struct {
	Kind
	cols string // select list; over from's aliases when from is set
	from string // a FROM clause whose main table is aliased t; "" is the table itself
	scan func(pgx.Row) (T, error)
	// version is a row's version, for kinds edited read-modify-write (locked).
	version func(T) int64
}

// ID is a row's ID (the cursor of lists).
func (t Table[T]) ID(r T) string { return r.ObjectID() }

// selectLive starts a read of the scope's live rows ($1): the select list, the FROM clause and
// the conditions; rest follows with its own " AND …".
func (t Table[T]) selectLive(rest string) string {
	if t.from == "" {
		return `SELECT ` + t.cols + ` FROM ` + t.Name + ` WHERE workspace_id = $1 AND archived_at IS NULL` + rest
	}
	return `SELECT ` + t.cols + t.from + ` WHERE t.workspace_id = $1 AND t.archived_at IS NULL` + rest
}

// get reads one live row ($2 its ID), locked for the write in progress when lock is set.
func (t Table[T]) get(ctx context.Context, q querier, s auth.Scope, id string, lock bool) (T, error) {
	sql := t.selectLive(` AND id = $2`) + forUpdate(lock, ` FOR UPDATE`)
	if t.from != "" {
		sql = t.selectLive(` AND t.id = $2`) + forUpdate(lock, ` FOR UPDATE OF t`)
	}
	return row(ctx, q, s, t.scan, sql, id)
}

// Get returns a live row of the workspace, or the one 404.
func (t Table[T]) Get(ctx context.Context, st *Store, s auth.Scope, id string) (T, error) {
	return t.get(ctx, st.DB.Q(ctx), s, id, false)
}

// List pages through the workspace's live rows ordered by ID, after cursor.
func (t Table[T]) List(ctx context.Context, st *Store, s auth.Scope, cursor string, limit int) ([]T, error) {
	sql := t.selectLive(` AND id > $2 ORDER BY id LIMIT $3`)
	if t.from != "" {
		sql = t.selectLive(` AND t.id > $2 ORDER BY t.id LIMIT $3`)
	}
	return rows(ctx, st.DB.Q(ctx), s, t.scan, sql, cursor, limit)
}

// locked reads a live row for a read-modify-write, locked, and checks its version baseline: a
// stale one is a 409 naming the current version.
func (t Table[T]) locked(ctx context.Context, tx pgx.Tx, s auth.Scope, id string, baseline int64) (T, error) {
	cur, err := t.get(ctx, tx, s, id, true)
	if err == nil {
		err = stale(t.Singular(), t.version(cur), baseline)
	}
	return cur, err
}

// update changes a live row whose lock column (lock's: a kind of the same table) is baseline
// and returns it: set assigns from $4 on (args), $1 is the workspace, $2 the ID, $3 the
// baseline. A row that did not match is Locked's 404 or 409.
func (t Table[T]) update(ctx context.Context, tx pgx.Tx, s auth.Scope, lock Kind, id string, baseline any, set string, args ...any) (T, error) {
	r, err := t.scan(tx.QueryRow(ctx, `UPDATE `+t.Name+` SET `+set+`, updated_at = now()
		WHERE workspace_id = $1 AND id = $2 AND `+lock.LockColumn+` = $3 AND archived_at IS NULL RETURNING `+t.cols,
		append([]any{s.WorkspaceID(), id, baseline}, args...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, Locked(ctx, tx, lock, s, id)
	}
	return r, err
}

// written runs fn in a WriteTx and returns the row it wrote once committed.
func written[T any](ctx context.Context, st *Store, s auth.Scope, fn func(pgx.Tx) (T, error)) (T, error) {
	var out T
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// Bound is a Table bound to a store: the reads and the archive of the kind's live rows, as
// cell/api's resource layer uses them (it names no row type of this package).
type Bound[T Row] struct {
	t  Table[T]
	st *Store
}

// Bind binds a table to a store.
func Bind[T Row](st *Store, t Table[T]) Bound[T] { return Bound[T]{t: t, st: st} }

// Plural is the kind's plural name, e.g. "projects" (its table and its collection's path).
func (b Bound[T]) Plural() string { return b.t.Name }

// Singular is the kind's singular name, e.g. "project".
func (b Bound[T]) Singular() string { return b.t.Singular() }

// ID is a row's ID (the cursor of lists).
func (b Bound[T]) ID(r T) string { return r.ObjectID() }

// Get returns a live row of the workspace, or the one 404.
func (b Bound[T]) Get(ctx context.Context, s auth.Scope, id string) (T, error) {
	return b.t.Get(ctx, b.st, s, id)
}

// List pages through the workspace's live rows ordered by ID, after cursor.
func (b Bound[T]) List(ctx context.Context, s auth.Scope, cursor string, limit int) ([]T, error) {
	return b.t.List(ctx, b.st, s, cursor, limit)
}

// Archive archives live rows of the workspace, all or nothing (Store.Archive).
func (b Bound[T]) Archive(ctx context.Context, s auth.Scope, ids []string) error {
	return b.st.Archive(ctx, s, b.t.Kind, ids)
}
