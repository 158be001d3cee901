package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/shared/ids"
)

// Styles is the kind of styles.
var Styles = Kind{Name: "styles", Table: "styles", Prefix: ids.Style, LockColumn: "version"}

// Style is a style row: a name and one normalised presentation snapshot.
type Style struct {
	ID             string
	Name           string
	Snapshot       json.RawMessage // canonical JSON, as normalised by the API
	SnapshotDigest string
	ThemeKey       string // the snapshot's theme reference, "" for none
	Version        int64
	CreatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// ErrUnknownThemeKey is returned when a style names a theme key no live theme of the workspace
// has.
var ErrUnknownThemeKey = errors.New("store: unknown theme key")

const styleCols = `id, name, snapshot, snapshot_digest, COALESCE(theme_key, ''), version, created_by, created_at, updated_at`

func scanStyle(r pgx.Row) (Style, error) {
	var y Style
	var snap []byte
	err := r.Scan(&y.ID, &y.Name, &snap, &y.SnapshotDigest, &y.ThemeKey, &y.Version, &y.CreatedBy, &y.CreatedAt, &y.UpdatedAt)
	y.Snapshot = snap
	return y, err
}

func getStyle(ctx context.Context, q querier, s auth.Scope, id string, lock bool) (Style, error) {
	return row(ctx, q, s, scanStyle, `SELECT `+styleCols+` FROM styles WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`+
		forUpdate(lock, ` FOR UPDATE`), id)
}

// GetStyle returns a live style of the workspace.
func (st *Store) GetStyle(ctx context.Context, s auth.Scope, id string) (Style, error) {
	return getStyle(ctx, st.DB.Q(ctx), s, id, false)
}

// ListStyles pages through live styles ordered by ID, after cursor.
func (st *Store) ListStyles(ctx context.Context, s auth.Scope, cursor string, limit int) ([]Style, error) {
	return rows(ctx, st.DB.Q(ctx), s, scanStyle, `SELECT `+styleCols+` FROM styles
		WHERE workspace_id = $1 AND archived_at IS NULL AND id > $2 ORDER BY id LIMIT $3`, cursor, limit)
}

func checkThemeKey(ctx context.Context, tx pgx.Tx, s auth.Scope, key string) error {
	if key == "" {
		return nil
	}
	ok, err := themeKeyExists(ctx, tx, s, key)
	if err == nil && !ok {
		err = ErrUnknownThemeKey
	}
	return err
}

// CreateStyle inserts a style. A theme key must belong to a live theme of the workspace
// (ErrUnknownThemeKey).
func (st *Store) CreateStyle(ctx context.Context, s auth.Scope, y Style) (Style, error) {
	var out Style
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		if err := checkThemeKey(ctx, tx, s, y.ThemeKey); err != nil {
			return err
		}
		id := ids.New(ids.Style)
		if _, err := tx.Exec(ctx, `INSERT INTO styles (workspace_id, id, name, snapshot, snapshot_digest, theme_key, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, s.WorkspaceID(), id, y.Name, []byte(y.Snapshot), y.SnapshotDigest,
			nullable(y.ThemeKey), s.Principal().UserID); err != nil {
			return err
		}
		var err error
		out, err = getStyle(ctx, tx, s, id, false)
		return err
	})
	return out, err
}

// UpdateStyle applies change to a live style if the version baseline is current, in one
// transaction. change gets the current style and returns the new name, snapshot, digest and
// theme key; a theme key that changed must belong to a live theme.
func (st *Store) UpdateStyle(ctx context.Context, s auth.Scope, id string, baseline int64, change func(Style) (Style, error)) (Style, error) {
	var out Style
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		cur, err := getStyle(ctx, tx, s, id, true)
		if err == nil {
			err = stale("style", cur.Version, baseline)
		}
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		if next.ThemeKey != cur.ThemeKey {
			if err := checkThemeKey(ctx, tx, s, next.ThemeKey); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE styles SET name = $3, snapshot = $4, snapshot_digest = $5, theme_key = $6,
			version = version + 1, updated_at = now() WHERE workspace_id = $1 AND id = $2`,
			s.WorkspaceID(), id, next.Name, []byte(next.Snapshot), next.SnapshotDigest, nullable(next.ThemeKey)); err != nil {
			return err
		}
		out, err = getStyle(ctx, tx, s, id, false)
		return err
	})
	return out, err
}
