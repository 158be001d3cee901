package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Page is a page row: its metadata and the number of its current source version.
type Page struct {
	ID              string
	ProjectID       string
	Key             string
	Title           string
	Description     string
	Tags            []string
	FileType        string
	Version         int64
	MetadataVersion int64
	CreatedBy       string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const pageCols = `id, project_id, key, title, description, tags, file_type, version, metadata_version, created_by, created_at, updated_at`

func scanPage(r pgx.Row) (Page, error) {
	var p Page
	err := r.Scan(&p.ID, &p.ProjectID, &p.Key, &p.Title, &p.Description, &p.Tags, &p.FileType, &p.Version, &p.MetadataVersion,
		&p.CreatedBy, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

// Dependency is a component a version was compiled with, at the version resolved.
type Dependency struct {
	ComponentID string `json:"component_id"`
	Key         string `json:"key"`
	Version     int64  `json:"version"`
	Depth       int    `json:"depth"`
}

// SourceVersion is one immutable version of a page's or component's source.
type SourceVersion struct {
	Version        int64
	FileType       string
	Source         string
	SourceDigest   string
	CompiledDigest string
	Dependencies   []Dependency
	JobID          string
	CreatedBy      string
	CreatedAt      time.Time
}

const versionCols = `version, file_type, source, source_digest, compiled_digest, dependencies, job_id, created_by, created_at`

func scanVersion(r pgx.Row) (SourceVersion, error) {
	var v SourceVersion
	var deps []byte
	err := r.Scan(&v.Version, &v.FileType, &v.Source, &v.SourceDigest, &v.CompiledDigest, &deps, &v.JobID, &v.CreatedBy, &v.CreatedAt)
	if err == nil {
		err = json.Unmarshal(deps, &v.Dependencies)
	}
	return v, err
}

// GetPage returns a live page.
func (st *Store) GetPage(ctx context.Context, s auth.Scope, id string) (Page, error) {
	return row(ctx, st.DB.Q(ctx), s, scanPage, `SELECT `+pageCols+` FROM pages
		WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`, id)
}

// ListPages pages through the workspace's live pages ordered by ID.
func (st *Store) ListPages(ctx context.Context, s auth.Scope, cursor string, limit int) ([]Page, error) {
	return rows(ctx, st.DB.Q(ctx), s, scanPage, `SELECT `+pageCols+` FROM pages
		WHERE workspace_id = $1 AND archived_at IS NULL AND id > $2 ORDER BY id LIMIT $3`, cursor, limit)
}

// PageVersion returns one version of a live page (0: the current one).
func (st *Store) PageVersion(ctx context.Context, s auth.Scope, pageID string, version int64) (SourceVersion, error) {
	return st.version(ctx, s, pageVersions, pageID, version)
}

// PageVersions pages through a live page's history, newest first, below before (0: from the top).
func (st *Store) PageVersions(ctx context.Context, s auth.Scope, pageID string, before int64, limit int) ([]SourceVersion, error) {
	return st.versions(ctx, s, pageVersions, pageID, before, limit)
}

// versioned names the tables of an object with immutable source versions; the names come only
// from this package.
type versioned struct{ table, versions, idCol, currentCol string }

var (
	pageVersions      = versioned{table: "pages", versions: "page_versions", idCol: "page_id", currentCol: "version"}
	componentVersions = versioned{table: "components", versions: "component_versions", idCol: "component_id", currentCol: "published_version"}
)

// version returns one version of a live object (0: its current one).
func (st *Store) version(ctx context.Context, s auth.Scope, k versioned, id string, version int64) (SourceVersion, error) {
	return row(ctx, st.DB.Q(ctx), s, scanVersion, `SELECT `+qualifiedVersionCols("v")+` FROM `+k.versions+` v
		JOIN `+k.table+` o ON o.workspace_id = v.workspace_id AND o.id = v.`+k.idCol+` AND o.archived_at IS NULL
		WHERE v.workspace_id = $1 AND v.`+k.idCol+` = $2 AND v.version = CASE WHEN $3::INT8 = 0 THEN o.`+k.currentCol+` ELSE $3::INT8 END`, id, version)
}

// versions pages through a live object's versions, newest first, below before (0: from the top).
func (st *Store) versions(ctx context.Context, s auth.Scope, k versioned, id string, before int64, limit int) ([]SourceVersion, error) {
	var live bool
	if err := st.DB.Q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+k.table+` WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL)`,
		s.WorkspaceID(), id).Scan(&live); err != nil || !live {
		if err == nil {
			err = problem.ErrNotFound()
		}
		return nil, err
	}
	return rows(ctx, st.DB.Q(ctx), s, scanVersion, `SELECT `+versionCols+` FROM `+k.versions+`
		WHERE workspace_id = $1 AND `+k.idCol+` = $2 AND ($3::INT8 = 0 OR version < $3::INT8) ORDER BY version DESC LIMIT $4`, id, before, limit)
}

func qualifiedVersionCols(alias string) string {
	return alias + `.version, ` + alias + `.file_type, ` + alias + `.source, ` + alias + `.source_digest, ` + alias + `.compiled_digest, ` +
		alias + `.dependencies, ` + alias + `.job_id, ` + alias + `.created_by, ` + alias + `.created_at`
}

// CheckNewPage is the submission check of a page create: the project is live and the key free.
// The commit checks both again.
func (st *Store) CheckNewPage(ctx context.Context, s auth.Scope, projectID, key string) error {
	if _, err := st.GetProject(ctx, s, projectID); err != nil {
		return err
	}
	var taken bool
	err := st.DB.Q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pages WHERE workspace_id = $1 AND project_id = $2 AND key = $3 AND archived_at IS NULL)`,
		s.WorkspaceID(), projectID, key).Scan(&taken)
	if err == nil && taken {
		return errPageKey(key)
	}
	return err
}

func errPageKey(key string) error {
	return problem.New(problem.NameConflict, "the project already has a live page with key %q", key)
}

// CheckPageBaseline is the submission check of a page edit: the page is live and version is its
// current version (else 409 VERSION_CONFLICT naming the current one). The commit checks again.
func (st *Store) CheckPageBaseline(ctx context.Context, s auth.Scope, pageID string, version int64) (Page, error) {
	p, err := st.GetPage(ctx, s, pageID)
	if err == nil && p.Version != version {
		err = problem.ErrVersionConflict("page", "version", p.Version)
	}
	return p, err
}

// NewSource is a compiled source to store as a version.
type NewSource struct {
	FileType       string
	Source         string
	SourceDigest   string
	CompiledDigest string
	Dependencies   []Dependency
	JobID          string
}

// CreatePage inserts a page of a live project with its first version (the business commit of a
// page-create job).
func (st *Store) CreatePage(ctx context.Context, s auth.Scope, projectID, key, title string, src NewSource) (Page, error) {
	var p Page
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var live bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM projects WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL)`,
			s.WorkspaceID(), projectID).Scan(&live); err != nil {
			return err
		}
		if !live {
			return problem.ErrNotFound()
		}
		id := ids.New(ids.Page)
		var err error
		p, err = scanPage(tx.QueryRow(ctx, `INSERT INTO pages (workspace_id, id, project_id, key, title, file_type, version, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, 1, $7) RETURNING `+pageCols, s.WorkspaceID(), id, projectID, key, title, src.FileType, s.Principal().UserID))
		if db.IsUniqueViolation(err) {
			return errPageKey(key)
		}
		if err != nil {
			return err
		}
		return insertVersion(ctx, tx, s, "page_versions", "page_id", id, 1, src)
	})
	return p, err
}

// EditPage writes the next version of a live page whose current version is baseline (the
// business commit of a page-edit job); a concurrent edit that won makes it a 409.
func (st *Store) EditPage(ctx context.Context, s auth.Scope, pageID string, baseline int64, src NewSource) (Page, error) {
	var p Page
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		p, err = scanPage(tx.QueryRow(ctx, `UPDATE pages SET version = version + 1, file_type = $4, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 AND version = $3 AND archived_at IS NULL RETURNING `+pageCols,
			s.WorkspaceID(), pageID, baseline, src.FileType))
		if err == pgx.ErrNoRows {
			return Locked(ctx, tx, Pages, s, pageID)
		}
		if err != nil {
			return err
		}
		return insertVersion(ctx, tx, s, "page_versions", "page_id", pageID, p.Version, src)
	})
	return p, err
}

// insertVersion stores one immutable source version; table and column come from this package.
func insertVersion(ctx context.Context, tx pgx.Tx, s auth.Scope, table, idCol, id string, version int64, src NewSource) error {
	deps, err := json.Marshal(src.Dependencies)
	if err != nil {
		return err
	}
	if src.Dependencies == nil {
		deps = []byte("[]")
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+table+` (workspace_id, `+idCol+`, version, file_type, source, source_digest, compiled_digest, dependencies, job_id, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		s.WorkspaceID(), id, version, src.FileType, src.Source, src.SourceDigest, src.CompiledDigest, deps, src.JobID, s.Principal().UserID)
	return err
}

// ComponentSource is what a compile needs of a component: its published source.
type ComponentSource struct {
	ID       string
	Key      string
	FileType string
	Source   string
	Version  int64
}

// PublishedComponent returns the current published version of the live component with key;
// a component that does not exist or has never been published is a 404.
func (st *Store) PublishedComponent(ctx context.Context, s auth.Scope, key string) (ComponentSource, error) {
	return row(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (ComponentSource, error) {
		var c ComponentSource
		err := r.Scan(&c.ID, &c.Key, &c.FileType, &c.Source, &c.Version)
		return c, err
	}, `SELECT c.id, c.key, v.file_type, v.source, v.version FROM components c
		JOIN component_versions v ON v.workspace_id = c.workspace_id AND v.component_id = c.id AND v.version = c.published_version
		WHERE c.workspace_id = $1 AND c.key = $2 AND c.archived_at IS NULL`, key)
}

// ComponentDraft returns a live component's draft source (what "current" means for a component).
func (st *Store) ComponentDraft(ctx context.Context, s auth.Scope, id string) (ComponentSource, error) {
	return row(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (ComponentSource, error) {
		var c ComponentSource
		err := r.Scan(&c.ID, &c.Key, &c.FileType, &c.Source, &c.Version)
		return c, err
	}, `SELECT id, key, file_type, draft_source, published_version FROM components
		WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`, id)
}

// UpdatePageMetadata changes title, description and tags of a live page whose metadata_version
// is baseline; its source is untouched (that changes only through jobs).
func (st *Store) UpdatePageMetadata(ctx context.Context, s auth.Scope, id string, baseline int64, title, description *string, tags []string) (Page, error) {
	var p Page
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		p, err = scanPage(tx.QueryRow(ctx, `UPDATE pages SET title = COALESCE($4, title), description = COALESCE($5, description),
			tags = COALESCE($6, tags), metadata_version = metadata_version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 AND metadata_version = $3 AND archived_at IS NULL RETURNING `+pageCols,
			s.WorkspaceID(), id, baseline, title, description, tags))
		if err == pgx.ErrNoRows {
			return Locked(ctx, tx, pageMetadata, s, id)
		}
		return err
	})
	return p, err
}

var pageMetadata = Kind{Name: "pages", Table: "pages", Prefix: ids.Page, LockColumn: "metadata_version"}
