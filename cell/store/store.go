// Package store is the cell's workspace-scoped storage. Every function takes an auth.Scope,
// which only authorization can make, and every query is bound to its workspace: a query that
// is not scoped to an authorized workspace cannot be written with this package.
//
// It also holds the shared mechanisms of all content: optimistic locking (a version or hash
// baseline; a stale one is a 409, never a silent overwrite) and archive-only removal (archived
// rows leave default queries; there is no hard delete and no restore).
//
// The objects it stores are the domain packages' (cell/design, cell/content, cell/catalog,
// cell/object): this package imports them and only reads and writes SQL.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/tenancy"
	"slidecells/shared/db"
	"slidecells/shared/problem"
)

// Store is one cell's database.
type Store struct {
	DB *db.DB
}

// Kind describes one table of workspace-owned objects. Table and column names come only from
// the kinds of this package, never from input.
type Kind struct {
	Name   string // the table, and the kind's plural API name, e.g. "projects"
	Prefix string // ID prefix
	// LockColumn is the optimistic-lock baseline column: "version" or a hash column.
	LockColumn string
}

// ErrNoScope guards against a zero Scope reaching a query.
var ErrNoScope = errors.New("store: no authorized workspace scope")

func check(s auth.Scope) error {
	if s.WorkspaceID() == "" {
		return problem.Wrap(ErrNoScope, "internal error")
	}
	return nil
}

// WriteTx runs fn in a retrying transaction after checking, inside it, that this cell may
// write for the workspace (tenancy.Writable, the write fence): a workspace fenced for a move
// takes no more writes (503 WORKSPACE_MOVING), one that moved away answers 421.
func (st *Store) WriteTx(ctx context.Context, s auth.Scope, fn func(pgx.Tx) error) error {
	if err := check(s); err != nil {
		return err
	}
	return st.DB.Tx(ctx, func(tx pgx.Tx) error {
		if err := tenancy.Writable(ctx, tx, s.WorkspaceID()); err != nil {
			return err
		}
		return fn(tx)
	})
}

// Locked interprets a conditional UPDATE that matched no row: 404 when the object is absent or
// archived, 409 VERSION_CONFLICT (naming the current baseline) when the baseline was stale.
func Locked(ctx context.Context, q pgx.Tx, k Kind, s auth.Scope, id string) error {
	var current string
	err := q.QueryRow(ctx, fmt.Sprintf(`SELECT %s::TEXT FROM %s WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`,
		k.LockColumn, k.Name), s.WorkspaceID(), id).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) {
		return problem.ErrNotFound()
	}
	if err != nil {
		return err
	}
	return problem.ErrVersionConflict(k.Singular(), k.LockColumn, current)
}

// Singular is the kind's singular name, e.g. "project".
func (k Kind) Singular() string {
	if n := len(k.Name); n > 1 && k.Name[n-1] == 's' {
		return k.Name[:n-1]
	}
	return k.Name
}

// MaxArchiveBatch caps one batch archive.
const MaxArchiveBatch = 100

// Archive archives every listed object of one kind in one transaction, all or nothing: if any
// ID is absent, archived already, or of another workspace, nothing changes and the answer is 404.
func (st *Store) Archive(ctx context.Context, s auth.Scope, k Kind, ids []string) error {
	if len(ids) == 0 || len(ids) > MaxArchiveBatch {
		return problem.Invalid(problem.FieldError{Field: "ids", Message: fmt.Sprintf("give 1 to %d IDs", MaxArchiveBatch)})
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return problem.Invalid(problem.FieldError{Field: "ids", Message: "IDs must be unique"})
		}
		seen[id] = true
	}
	return st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, fmt.Sprintf(`
			UPDATE %s SET archived_at = now(), updated_at = now()
			WHERE workspace_id = $1 AND id = ANY($2) AND archived_at IS NULL`, k.Name), s.WorkspaceID(), ids)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(len(ids)) {
			return errAbort
		}
		return nil
	})
}

// errAbort rolls a batch back; it becomes the one 404 answer.
var errAbort = problem.ErrNotFound()

// stale is the one optimistic-lock check of a row read under lock: a 409 naming the current
// version when the baseline is not it.
func stale(what string, current, baseline int64) error {
	if current != baseline {
		return problem.ErrVersionConflict(what, "version", current)
	}
	return nil
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// row reads one row of the scope's workspace ($1 is its ID, args follow): no row is the one 404.
func row[T any](ctx context.Context, q querier, s auth.Scope, scan func(pgx.Row) (T, error), sql string, args ...any) (T, error) {
	if err := check(s); err != nil {
		var zero T
		return zero, err
	}
	t, err := scan(q.QueryRow(ctx, sql, append([]any{s.WorkspaceID()}, args...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, problem.ErrNotFound()
	}
	return t, err
}

// rows reads the rows of the scope's workspace ($1 is its ID, args follow).
func rows[T any](ctx context.Context, q querier, s auth.Scope, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	if err := check(s); err != nil {
		return nil, err
	}
	rs, err := q.Query(ctx, sql, append([]any{s.WorkspaceID()}, args...)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rs, func(r pgx.CollectableRow) (T, error) { return scan(r) })
}

// forUpdate locks the row read when a write reads it.
func forUpdate(lock bool, clause string) string {
	if lock {
		return clause
	}
	return ""
}
