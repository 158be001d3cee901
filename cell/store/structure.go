package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Part is one structured, separately versioned part of a project.
type Part struct {
	column        string
	versionColumn string
	name          string
}

// Project parts; column names come only from here.
var (
	Configuration = Part{"configuration", "configuration_version", "configuration"}
	RouteTree     = Part{"route_tree", "route_tree_version", "route tree"}
	BuildAssets   = Part{"build_assets", "build_assets_version", "build assets"}
)

// GetPart returns a part's JSON and version.
func (st *Store) GetPart(ctx context.Context, s auth.Scope, projectID string, p Part) (json.RawMessage, int64, error) {
	if err := check(s); err != nil {
		return nil, 0, err
	}
	var raw []byte
	var v int64
	err := st.DB.Q(ctx).QueryRow(ctx, fmt.Sprintf(`SELECT %s, %s FROM projects WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`,
		p.column, p.versionColumn), s.WorkspaceID(), projectID).Scan(&raw, &v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, problem.ErrNotFound()
	}
	return raw, v, err
}

// PutPart replaces a part if its version baseline is current. check runs inside the
// transaction, after the project is known to exist, to validate references against the
// workspace's live objects.
func (st *Store) PutPart(ctx context.Context, s auth.Scope, projectID string, p Part, baseline int64, value any,
	check func(pgx.Tx) error) (int64, error) {
	return st.UpdatePart(ctx, s, projectID, p, baseline, func(tx pgx.Tx, _ json.RawMessage) (any, error) {
		if check != nil {
			if err := check(tx); err != nil {
				return nil, err
			}
		}
		return value, nil
	})
}

// UpdatePart reads a part, lets modify compute its new value from the current one, and writes
// it, all in one transaction and only if the version baseline is current.
func (st *Store) UpdatePart(ctx context.Context, s auth.Scope, projectID string, p Part, baseline int64,
	modify func(tx pgx.Tx, current json.RawMessage) (any, error)) (int64, error) {
	var v int64
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var current int64
		var raw []byte
		err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT %s, %s FROM projects WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL FOR UPDATE`,
			p.column, p.versionColumn), s.WorkspaceID(), projectID).Scan(&raw, &current)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.ErrNotFound()
		}
		if err != nil {
			return err
		}
		if current != baseline {
			return problem.New(problem.VersionConflict, "the project's %s changed since it was read (current version %d); re-read before deciding", p.name, current)
		}
		value, err := modify(tx, raw)
		if err != nil {
			return err
		}
		next, err := json.Marshal(value)
		if err != nil {
			return problem.Wrap(err, "cannot encode "+p.name)
		}
		return tx.QueryRow(ctx, fmt.Sprintf(`UPDATE projects SET %s = $3, %s = %s + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 RETURNING %s`, p.column, p.versionColumn, p.versionColumn, p.versionColumn),
			s.WorkspaceID(), projectID, next).Scan(&v)
	})
	return v, err
}

// Pages is the kind of pages.
var Pages = Kind{Name: "pages", Table: "pages", Prefix: ids.Page, LockColumn: "version"}

// PageSummary is a page as listed under its project.
type PageSummary struct {
	ID       string
	Key      string
	Title    string
	FileType string
	Version  int64
}

// ListProjectPages pages through a live project's live pages, ordered by key.
func (st *Store) ListProjectPages(ctx context.Context, s auth.Scope, projectID, afterKey string, limit int) ([]PageSummary, error) {
	if _, err := st.GetProject(ctx, s, projectID); err != nil {
		return nil, err
	}
	rows, err := st.DB.Q(ctx).Query(ctx, `SELECT id, key, title, file_type, version FROM pages
		WHERE workspace_id = $1 AND project_id = $2 AND archived_at IS NULL AND key > $3 ORDER BY key LIMIT $4`,
		s.WorkspaceID(), projectID, afterKey, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PageSummary, error) {
		var p PageSummary
		err := r.Scan(&p.ID, &p.Key, &p.Title, &p.FileType, &p.Version)
		return p, err
	})
}

// LivePages returns which of ids are live pages of the project, inside tx.
func LivePages(ctx context.Context, tx pgx.Tx, s auth.Scope, projectID string, ids []string) (map[string]bool, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM pages WHERE workspace_id = $1 AND project_id = $2 AND id = ANY($3) AND archived_at IS NULL`,
		s.WorkspaceID(), projectID, ids)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}
