package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Pages is the kind of pages. Their source is locked by version, and only mutation jobs change
// it; their metadata is locked by metadata_version.
var Pages = sourced(Table[content.Page]{Kind: Kind{Name: "pages", Prefix: ids.Page, LockColumn: "version"}, cols: pageCols, scan: scanPage},
	"version", errPageKey)

const pageCols = `id, project_id, key, title, description, tags, file_type, version, metadata_version, created_by, created_at, updated_at`

func scanPage(r pgx.Row) (content.Page, error) {
	var p content.Page
	err := r.Scan(&p.ID, &p.ProjectID, &p.Key, &p.Title, &p.Description, &p.Tags, &p.FileType, &p.Version, &p.MetadataVersion,
		&p.CreatedBy, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

// GetPage returns a live page.
func (st *Store) GetPage(ctx context.Context, s auth.Scope, id string) (content.Page, error) {
	return Pages.Get(ctx, st, s, id)
}

// PageVersion returns one version of a live page (0: the current one).
func (st *Store) PageVersion(ctx context.Context, s auth.Scope, pageID string, version int64) (content.SourceVersion, error) {
	return Pages.Version(ctx, st, s, pageID, version)
}

// CheckNewPage is the submission check of a page create: the project is live and the key free.
// The commit checks both again.
func (st *Store) CheckNewPage(ctx context.Context, s auth.Scope, projectID, key string) error {
	if _, err := st.GetProject(ctx, s, projectID); err != nil {
		return err
	}
	return Pages.keyFree(ctx, st, s, key, ` AND project_id = $3`, projectID)
}

func errPageKey(key string) error {
	return problem.New(problem.NameConflict, "the project already has a live page with key %q", key)
}

// CheckPageBaseline is the submission check of a page edit: the page is live and version is its
// current version (else 409 VERSION_CONFLICT naming the current one). The commit checks again.
func (st *Store) CheckPageBaseline(ctx context.Context, s auth.Scope, pageID string, version int64) (content.Page, error) {
	p, err := st.GetPage(ctx, s, pageID)
	if err == nil && p.Version != version {
		err = problem.ErrVersionConflict("page", "version", p.Version)
	}
	return p, err
}

// CreatePage inserts a page of a live project with its first version (the business commit of a
// page-create job).
func (st *Store) CreatePage(ctx context.Context, s auth.Scope, projectID, key, title string, src content.NewSource) (content.Page, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Page, error) {
		if _, err := Projects.get(ctx, tx, s, projectID, false); err != nil {
			return content.Page{}, err
		}
		p, err := Pages.insert(ctx, tx, s, key, `project_id, key, title, file_type, version`, projectID, key, title, src.FileType, 1)
		if err != nil {
			return p, err
		}
		return p, Pages.insertVersion(ctx, tx, s, p.ID, 1, src)
	})
}

// EditPage writes the next version of a live page whose current version is baseline (the
// business commit of a page-edit job); a concurrent edit that won makes it a 409.
func (st *Store) EditPage(ctx context.Context, s auth.Scope, pageID string, baseline int64, src content.NewSource) (content.Page, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Page, error) {
		p, err := Pages.update(ctx, tx, s, Pages.Kind, pageID, baseline, `version = version + 1, file_type = $4`, src.FileType)
		if err != nil {
			return p, err
		}
		return p, Pages.insertVersion(ctx, tx, s, pageID, p.Version, src)
	})
}
