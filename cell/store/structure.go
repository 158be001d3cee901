package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/shared/problem"
)

// part is where a project part (content.Part) is stored; column names come only from here.
type part struct {
	column        string
	versionColumn string
	name          string
}

var parts = map[content.Part]part{
	content.PartConfiguration: {"configuration", "configuration_version", "configuration"},
	content.PartRouteTree:     {"route_tree", "route_tree_version", "route tree"},
	content.PartBuildAssets:   {"build_assets", "build_assets_version", "build assets"},
}

// columns are a part's columns; a part this package does not know is an internal error.
func columns(name content.Part) (part, error) {
	p, ok := parts[name]
	if !ok {
		return p, problem.Wrap(fmt.Errorf("store: unknown project part %q", name), "internal error")
	}
	return p, nil
}

// GetPart returns a part's JSON and version.
func (st *Store) GetPart(ctx context.Context, s auth.Scope, projectID string, name content.Part) (json.RawMessage, int64, error) {
	p, err := columns(name)
	if err != nil {
		return nil, 0, err
	}
	type value struct {
		raw     []byte
		version int64
	}
	got, err := row(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (p value, err error) {
		err = r.Scan(&p.raw, &p.version)
		return p, err
	},
		fmt.Sprintf(`SELECT %s, %s FROM projects WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`, p.column, p.versionColumn), projectID)
	return got.raw, got.version, err
}

// WritePart replaces a part in one transaction, only if its version baseline is current: the
// project is read under lock (404, then 409 on a stale baseline), the references are read, and
// value computes the new value from the current one and what is live (its error aborts the
// write). value is a pure function: the composed check is this transaction.
func (st *Store) WritePart(ctx context.Context, s auth.Scope, projectID string, name content.Part, baseline int64, refs content.Refs,
	value func(current json.RawMessage, live content.Live) (any, error)) (int64, error) {
	p, err := columns(name)
	if err != nil {
		return 0, err
	}
	var v int64
	err = st.WriteTx(ctx, s, func(tx pgx.Tx) error {
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
		if err := stale("project's "+p.name, current, baseline); err != nil {
			return err
		}
		live, err := readRefs(ctx, tx, s, projectID, refs)
		if err != nil {
			return err
		}
		nv, err := value(raw, live)
		if err != nil {
			return err
		}
		next, err := json.Marshal(nv)
		if err != nil {
			return problem.Wrap(err, "cannot encode "+p.name)
		}
		return tx.QueryRow(ctx, fmt.Sprintf(`UPDATE projects SET %s = $3, %s = %s + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 RETURNING %s`, p.column, p.versionColumn, p.versionColumn, p.versionColumn),
			s.WorkspaceID(), projectID, next).Scan(&v)
	})
	return v, err
}

func readRefs(ctx context.Context, tx pgx.Tx, s auth.Scope, projectID string, refs content.Refs) (content.Live, error) {
	live := content.Live{Pages: map[string]bool{}, Assets: map[string]content.Asset{}}
	var err error
	if refs.ThemeKey != "" {
		if live.ThemeKey, err = themeKeyExists(ctx, tx, s, refs.ThemeKey); err != nil {
			return live, err
		}
	}
	if len(refs.Pages) > 0 {
		if live.Pages, err = livePages(ctx, tx, s, projectID, refs.Pages); err != nil {
			return live, err
		}
	}
	for _, id := range refs.Assets {
		a, err := Assets.get(ctx, tx, s, id, false)
		if problem.As(err).Code == problem.NotFound {
			continue
		}
		if err != nil {
			return live, err
		}
		live.Assets[id] = a
	}
	return live, nil
}

// ListProjectPages pages through a live project's live pages, ordered by key.
func (st *Store) ListProjectPages(ctx context.Context, s auth.Scope, projectID, afterKey string, limit int) ([]content.PageSummary, error) {
	if _, err := st.GetProject(ctx, s, projectID); err != nil {
		return nil, err
	}
	return rows(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (content.PageSummary, error) {
		var p content.PageSummary
		err := r.Scan(&p.ID, &p.Key, &p.Title, &p.FileType, &p.Version)
		return p, err
	}, `SELECT id, key, title, file_type, version FROM pages
		WHERE workspace_id = $1 AND project_id = $2 AND archived_at IS NULL AND key > $3 ORDER BY key LIMIT $4`, projectID, afterKey, limit)
}

// livePages returns which of ids are live pages of the project, inside tx.
func livePages(ctx context.Context, tx pgx.Tx, s auth.Scope, projectID string, ids []string) (map[string]bool, error) {
	found, err := rows(ctx, tx, s, func(r pgx.Row) (id string, err error) {
		err = r.Scan(&id)
		return id, err
	},
		`SELECT id FROM pages WHERE workspace_id = $1 AND project_id = $2 AND id = ANY($3) AND archived_at IS NULL`, projectID, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}
