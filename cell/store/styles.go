package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/design"
	"slidecells/shared/ids"
)

// Styles is the kind of styles.
var Styles = Table[design.Style]{Kind: Kind{Name: "styles", Prefix: ids.Style, LockColumn: "version"},
	cols: styleCols, scan: scanStyle, version: func(y design.Style) int64 { return y.Version }}

const styleCols = `id, name, snapshot, snapshot_digest, COALESCE(theme_key, ''), version, created_by, created_at, updated_at`

func scanStyle(r pgx.Row) (design.Style, error) {
	var y design.Style
	var snap []byte
	err := r.Scan(&y.ID, &y.Name, &snap, &y.SnapshotDigest, &y.ThemeKey, &y.Version, &y.CreatedBy, &y.CreatedAt, &y.UpdatedAt)
	y.Snapshot = snap
	return y, err
}

// GetStyle returns a live style of the workspace.
func (st *Store) GetStyle(ctx context.Context, s auth.Scope, id string) (design.Style, error) {
	return Styles.Get(ctx, st, s, id)
}

func checkThemeKey(ctx context.Context, tx pgx.Tx, s auth.Scope, key string) error {
	if key == "" {
		return nil
	}
	ok, err := themeKeyExists(ctx, tx, s, key)
	if err == nil && !ok {
		err = design.ErrUnknownThemeKey
	}
	return err
}

// CreateStyle inserts a style. A theme key must belong to a live theme of the workspace
// (ErrUnknownThemeKey).
func (st *Store) CreateStyle(ctx context.Context, s auth.Scope, y design.Style) (design.Style, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (design.Style, error) {
		if err := checkThemeKey(ctx, tx, s, y.ThemeKey); err != nil {
			return design.Style{}, err
		}
		id := ids.New(ids.Style)
		if _, err := tx.Exec(ctx, `INSERT INTO styles (workspace_id, id, name, snapshot, snapshot_digest, theme_key, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, s.WorkspaceID(), id, y.Name, []byte(y.Snapshot), y.SnapshotDigest,
			nullable(y.ThemeKey), s.Principal().UserID); err != nil {
			return design.Style{}, err
		}
		return Styles.get(ctx, tx, s, id, false)
	})
}

// UpdateStyle applies change to a live style if the version baseline is current, in one
// transaction. change gets the current style and returns the new name, snapshot, digest and
// theme key; a theme key that changed must belong to a live theme.
func (st *Store) UpdateStyle(ctx context.Context, s auth.Scope, id string, baseline int64, change func(design.Style) (design.Style, error)) (design.Style, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (design.Style, error) {
		cur, err := Styles.locked(ctx, tx, s, id, baseline)
		if err != nil {
			return cur, err
		}
		next, err := change(cur)
		if err != nil {
			return cur, err
		}
		if next.ThemeKey != cur.ThemeKey {
			if err := checkThemeKey(ctx, tx, s, next.ThemeKey); err != nil {
				return cur, err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE styles SET name = $3, snapshot = $4, snapshot_digest = $5, theme_key = $6,
			version = version + 1, updated_at = now() WHERE workspace_id = $1 AND id = $2`,
			s.WorkspaceID(), id, next.Name, []byte(next.Snapshot), next.SnapshotDigest, nullable(next.ThemeKey)); err != nil {
			return cur, err
		}
		return Styles.get(ctx, tx, s, id, false)
	})
}
