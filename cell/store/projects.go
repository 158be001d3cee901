package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/shared/ids"
)

// Projects is the kind of projects.
var Projects = Kind{Name: "projects", Table: "projects", Prefix: ids.Project, LockColumn: "version"}

// Project is a project row.
type Project struct {
	ID          string
	Name        string
	Description string
	Version     int64
	CreatedBy   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

const projectCols = `id, name, description, version, created_by, created_at, updated_at`

func scanProject(r pgx.Row) (Project, error) {
	var p Project
	err := r.Scan(&p.ID, &p.Name, &p.Description, &p.Version, &p.CreatedBy, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

// CreateProject inserts a project.
func (st *Store) CreateProject(ctx context.Context, s auth.Scope, name, description string) (Project, error) {
	var p Project
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		p, err = scanProject(tx.QueryRow(ctx, `
			INSERT INTO projects (workspace_id, id, name, description, created_by) VALUES ($1, $2, $3, $4, $5)
			RETURNING `+projectCols, s.WorkspaceID(), ids.New(ids.Project), name, description, s.Principal().UserID))
		return err
	})
	return p, err
}

// GetProject returns a live project of the workspace.
func (st *Store) GetProject(ctx context.Context, s auth.Scope, id string) (Project, error) {
	return row(ctx, st.DB.Q(ctx), s, scanProject, `SELECT `+projectCols+` FROM projects
		WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`, id)
}

// ListProjects pages through live projects ordered by ID, after cursor.
func (st *Store) ListProjects(ctx context.Context, s auth.Scope, cursor string, limit int) ([]Project, error) {
	return rows(ctx, st.DB.Q(ctx), s, scanProject, `SELECT `+projectCols+` FROM projects
		WHERE workspace_id = $1 AND archived_at IS NULL AND id > $2 ORDER BY id LIMIT $3`, cursor, limit)
}

// UpdateProject changes name and description if the version baseline is current.
func (st *Store) UpdateProject(ctx context.Context, s auth.Scope, id string, baseline int64, name, description *string) (Project, error) {
	var p Project
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		p, err = scanProject(tx.QueryRow(ctx, `
			UPDATE projects SET name = COALESCE($4, name), description = COALESCE($5, description),
			       version = version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 AND version = $3 AND archived_at IS NULL
			RETURNING `+projectCols, s.WorkspaceID(), id, baseline, name, description))
		if errors.Is(err, pgx.ErrNoRows) {
			return Locked(ctx, tx, Projects, s, id)
		}
		return err
	})
	return p, err
}
