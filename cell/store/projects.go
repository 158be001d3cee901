package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/shared/ids"
)

// Projects is the kind of projects.
var Projects = Table[content.Project]{Kind: Kind{Name: "projects", Prefix: ids.Project, LockColumn: "version"}, cols: projectCols, scan: scanProject}

const projectCols = `id, name, description, version, created_by, created_at, updated_at`

func scanProject(r pgx.Row) (content.Project, error) {
	var p content.Project
	err := r.Scan(&p.ID, &p.Name, &p.Description, &p.Version, &p.CreatedBy, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

// CreateProject inserts a project.
func (st *Store) CreateProject(ctx context.Context, s auth.Scope, name, description string) (content.Project, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Project, error) {
		return scanProject(tx.QueryRow(ctx, `
			INSERT INTO projects (workspace_id, id, name, description, created_by) VALUES ($1, $2, $3, $4, $5)
			RETURNING `+projectCols, s.WorkspaceID(), ids.New(ids.Project), name, description, s.Principal().UserID))
	})
}

// GetProject returns a live project of the workspace.
func (st *Store) GetProject(ctx context.Context, s auth.Scope, id string) (content.Project, error) {
	return Projects.Get(ctx, st, s, id)
}

// UpdateProject changes name and description if the version baseline is current.
func (st *Store) UpdateProject(ctx context.Context, s auth.Scope, id string, baseline int64, name, description *string) (content.Project, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Project, error) {
		return Projects.update(ctx, tx, s, Projects.Kind, id, baseline,
			`name = COALESCE($4, name), description = COALESCE($5, description), version = version + 1`, name, description)
	})
}
