package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Components is the kind of components. A component's draft is locked by its content hash;
// publishing freezes the draft as the next version.
var Components = Kind{Name: "components", Table: "components", Prefix: ids.Component, LockColumn: "draft_hash"}

// Component is a component row: its key, metadata, draft and last published version.
type Component struct {
	ID               string
	Key              string
	Title            string
	Description      string
	Tags             []string
	FileType         string
	DraftSource      string
	DraftHash        string
	PublishedVersion int64
	MetadataVersion  int64
	CreatedBy        string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

const componentCols = `id, key, title, description, tags, file_type, draft_source, draft_hash, published_version, metadata_version, created_by, created_at, updated_at`

func scanComponent(r pgx.Row) (Component, error) {
	var c Component
	err := r.Scan(&c.ID, &c.Key, &c.Title, &c.Description, &c.Tags, &c.FileType, &c.DraftSource, &c.DraftHash, &c.PublishedVersion,
		&c.MetadataVersion, &c.CreatedBy, &c.CreatedAt, &c.UpdatedAt)
	return c, err
}

// GetComponent returns a live component.
func (st *Store) GetComponent(ctx context.Context, s auth.Scope, id string) (Component, error) {
	return row(ctx, st.DB.Q(ctx), s, scanComponent, `SELECT `+componentCols+` FROM components
		WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`, id)
}

// ListComponents pages through live components ordered by ID.
func (st *Store) ListComponents(ctx context.Context, s auth.Scope, cursor string, limit int) ([]Component, error) {
	return rows(ctx, st.DB.Q(ctx), s, scanComponent, `SELECT `+componentCols+` FROM components
		WHERE workspace_id = $1 AND archived_at IS NULL AND id > $2 ORDER BY id LIMIT $3`, cursor, limit)
}

// ComponentVersion returns one published version of a live component (0: the latest).
func (st *Store) ComponentVersion(ctx context.Context, s auth.Scope, id string, version int64) (SourceVersion, error) {
	return st.version(ctx, s, componentVersions, id, version)
}

// ComponentVersions pages through a live component's published versions, newest first.
func (st *Store) ComponentVersions(ctx context.Context, s auth.Scope, id string, before int64, limit int) ([]SourceVersion, error) {
	return st.versions(ctx, s, componentVersions, id, before, limit)
}

func errComponentKey(key string) error {
	return problem.New(problem.NameConflict, "the workspace already has a live component with key %q", key)
}

// CheckNewComponent is the submission check of a component create: the key is free.
func (st *Store) CheckNewComponent(ctx context.Context, s auth.Scope, key string) error {
	var taken bool
	err := st.DB.Q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM components WHERE workspace_id = $1 AND key = $2 AND archived_at IS NULL)`,
		s.WorkspaceID(), key).Scan(&taken)
	if err == nil && taken {
		return errComponentKey(key)
	}
	return err
}

// CheckComponentDraft is the submission check of a draft edit or a publish: the component is
// live and hash is its current draft hash (else 409 naming the current one).
func (st *Store) CheckComponentDraft(ctx context.Context, s auth.Scope, id, hash string) (Component, error) {
	c, err := st.GetComponent(ctx, s, id)
	if err == nil && hash == "" {
		return c, problem.Invalid(problem.FieldError{Field: "header.If-Match", Message: "required: the draft_hash you read"})
	}
	if err == nil && c.DraftHash != hash {
		err = problem.ErrVersionConflict("component", "draft_hash", c.DraftHash)
	}
	return c, err
}

// CreateComponent inserts a component with its first draft (the commit of a component-create job).
func (st *Store) CreateComponent(ctx context.Context, s auth.Scope, key, title, fileType, source, hash string) (Component, error) {
	var c Component
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		c, err = scanComponent(tx.QueryRow(ctx, `INSERT INTO components (workspace_id, id, key, title, file_type, draft_source, draft_hash, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+componentCols,
			s.WorkspaceID(), ids.New(ids.Component), key, title, fileType, source, hash, s.Principal().UserID))
		if db.IsUniqueViolation(err) {
			return errComponentKey(key)
		}
		return err
	})
	return c, err
}

// EditComponentDraft replaces a live component's draft whose hash is baseline (the commit of a
// component-edit job); a concurrent edit that won makes it a 409.
func (st *Store) EditComponentDraft(ctx context.Context, s auth.Scope, id, baseline, fileType, source, hash string) (Component, error) {
	var c Component
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		c, err = scanComponent(tx.QueryRow(ctx, `UPDATE components SET draft_source = $4, draft_hash = $5, file_type = $6, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 AND draft_hash = $3 AND archived_at IS NULL RETURNING `+componentCols,
			s.WorkspaceID(), id, baseline, source, hash, fileType))
		if errors.Is(err, pgx.ErrNoRows) {
			return Locked(ctx, tx, Components, s, id)
		}
		return err
	})
	return c, err
}

// PublishComponent freezes a live component's draft, whose hash is baseline, as its next
// version with the compiled module and dependencies given.
func (st *Store) PublishComponent(ctx context.Context, s auth.Scope, id, baseline string, src NewSource) (Component, error) {
	var c Component
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		c, err = scanComponent(tx.QueryRow(ctx, `UPDATE components SET published_version = published_version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 AND draft_hash = $3 AND archived_at IS NULL RETURNING `+componentCols,
			s.WorkspaceID(), id, baseline))
		if errors.Is(err, pgx.ErrNoRows) {
			return Locked(ctx, tx, Components, s, id)
		}
		if err != nil {
			return err
		}
		src.FileType, src.Source = c.FileType, c.DraftSource
		return insertVersion(ctx, tx, s, "component_versions", "component_id", id, c.PublishedVersion, src)
	})
	return c, err
}

// UpdateComponentMetadata changes title, description and tags of a live component whose
// metadata_version is baseline.
func (st *Store) UpdateComponentMetadata(ctx context.Context, s auth.Scope, id string, baseline int64, title, description *string, tags []string) (Component, error) {
	var c Component
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		var err error
		c, err = scanComponent(tx.QueryRow(ctx, `UPDATE components SET title = COALESCE($4, title), description = COALESCE($5, description),
			tags = COALESCE($6, tags), metadata_version = metadata_version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2 AND metadata_version = $3 AND archived_at IS NULL RETURNING `+componentCols,
			s.WorkspaceID(), id, baseline, title, description, tags))
		if errors.Is(err, pgx.ErrNoRows) {
			return Locked(ctx, tx, componentMetadata, s, id)
		}
		return err
	})
	return c, err
}

var componentMetadata = Kind{Name: "components", Table: "components", Prefix: ids.Component, LockColumn: "metadata_version"}
