package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Components is the kind of components. A component's draft is locked by its content hash;
// publishing freezes the draft as the next version.
var Components = sourced(Table[content.Component]{Kind: Kind{Name: "components", Prefix: ids.Component, LockColumn: "draft_hash"},
	cols: componentCols, scan: scanComponent}, "published_version", errComponentKey)

const componentCols = `id, key, title, description, tags, file_type, draft_source, draft_hash, published_version, metadata_version, created_by, created_at, updated_at`

func scanComponent(r pgx.Row) (content.Component, error) {
	var c content.Component
	err := r.Scan(&c.ID, &c.Key, &c.Title, &c.Description, &c.Tags, &c.FileType, &c.DraftSource, &c.DraftHash, &c.PublishedVersion,
		&c.MetadataVersion, &c.CreatedBy, &c.CreatedAt, &c.UpdatedAt)
	return c, err
}

// GetComponent returns a live component.
func (st *Store) GetComponent(ctx context.Context, s auth.Scope, id string) (content.Component, error) {
	return Components.Get(ctx, st, s, id)
}

func errComponentKey(key string) error {
	return problem.New(problem.NameConflict, "the workspace already has a live component with key %q", key)
}

// CheckNewComponent is the submission check of a component create: the key is free.
func (st *Store) CheckNewComponent(ctx context.Context, s auth.Scope, key string) error {
	return Components.keyFree(ctx, st, s, key, "")
}

// CheckComponentDraft is the submission check of a draft edit or a publish: the component is
// live and hash is its current draft hash (else 409 naming the current one). A missing hash is
// a field error naming content.DraftHashField.
func (st *Store) CheckComponentDraft(ctx context.Context, s auth.Scope, id, hash string) (content.Component, error) {
	c, err := st.GetComponent(ctx, s, id)
	if err == nil && hash == "" {
		return c, problem.Invalid(problem.FieldError{Field: content.DraftHashField, Message: "required: the draft_hash you read"})
	}
	if err == nil && c.DraftHash != hash {
		err = problem.ErrVersionConflict("component", "draft_hash", c.DraftHash)
	}
	return c, err
}

// CreateComponent inserts a component with its first draft (the commit of a component-create job).
func (st *Store) CreateComponent(ctx context.Context, s auth.Scope, key, title, fileType, source, hash string) (content.Component, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Component, error) {
		return Components.insert(ctx, tx, s, key, `key, title, file_type, draft_source, draft_hash`, key, title, fileType, source, hash)
	})
}

// EditComponentDraft replaces a live component's draft whose hash is baseline (the commit of a
// component-edit job); a concurrent edit that won makes it a 409.
func (st *Store) EditComponentDraft(ctx context.Context, s auth.Scope, id, baseline, fileType, source, hash string) (content.Component, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Component, error) {
		return Components.update(ctx, tx, s, Components.Kind, id, baseline, `draft_source = $4, draft_hash = $5, file_type = $6`, source, hash, fileType)
	})
}

// PublishComponent freezes a live component's draft, whose hash is baseline, as its next
// version with the compiled module and dependencies given.
func (st *Store) PublishComponent(ctx context.Context, s auth.Scope, id, baseline string, src content.NewSource) (content.Component, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Component, error) {
		c, err := Components.update(ctx, tx, s, Components.Kind, id, baseline, `published_version = published_version + 1`)
		if err != nil {
			return c, err
		}
		src.FileType, src.Source = c.FileType, c.DraftSource
		return c, Components.insertVersion(ctx, tx, s, id, c.PublishedVersion, src)
	})
}

func scanComponentSource(r pgx.Row) (content.ComponentSource, error) {
	var c content.ComponentSource
	err := r.Scan(&c.ID, &c.Key, &c.FileType, &c.Source, &c.Version)
	return c, err
}

// PublishedComponent returns the current published version of the live component with key;
// a component that does not exist or has never been published is a 404.
func (st *Store) PublishedComponent(ctx context.Context, s auth.Scope, key string) (content.ComponentSource, error) {
	return row(ctx, st.DB.Q(ctx), s, scanComponentSource, `SELECT c.id, c.key, v.file_type, v.source, v.version FROM components c
		JOIN component_versions v ON v.workspace_id = c.workspace_id AND v.component_id = c.id AND v.version = c.published_version
		WHERE c.workspace_id = $1 AND c.key = $2 AND c.archived_at IS NULL`, key)
}

// ComponentDraft returns a live component's draft source (what "current" means for a component).
func (st *Store) ComponentDraft(ctx context.Context, s auth.Scope, id string) (content.ComponentSource, error) {
	return row(ctx, st.DB.Q(ctx), s, scanComponentSource, `SELECT id, key, file_type, draft_source, published_version FROM components
		WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL`, id)
}
