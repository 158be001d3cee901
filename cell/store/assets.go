package store

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/shared/ids"
)

// Assets is the kind of assets. Metadata edits are version-locked.
var Assets = Table[content.Asset]{Kind: Kind{Name: "assets", Prefix: ids.Asset, LockColumn: "version"}, cols: assetCols, scan: scanAsset}

// assetContent is the same table seen by a content replacement, which is locked by hash.
var assetContent = Kind{Name: "assets", Prefix: ids.Asset, LockColumn: "sha256"}

const assetCols = `id, name, content_type, byte_size, sha256, blob_key, tags, metadata, version, created_by, created_at, updated_at`

func scanAsset(r pgx.Row) (content.Asset, error) {
	var a content.Asset
	err := r.Scan(&a.ID, &a.Name, &a.ContentType, &a.ByteSize, &a.SHA256, &a.BlobKey, &a.Tags, &a.Metadata,
		&a.Version, &a.CreatedBy, &a.CreatedAt, &a.UpdatedAt)
	if a.Tags == nil {
		a.Tags = []string{}
	}
	return a, err
}

func metadataOrEmpty(m json.RawMessage) []byte {
	if len(m) == 0 {
		return []byte("{}")
	}
	return m
}

func tagsOrEmpty(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}

// GetAsset returns a live asset of the workspace, or the one 404.
func (st *Store) GetAsset(ctx context.Context, s auth.Scope, id string) (content.Asset, error) {
	return Assets.Get(ctx, st, s, id)
}

// CreateAsset inserts an asset row for content already in the blob store.
func (st *Store) CreateAsset(ctx context.Context, s auth.Scope, n content.NewAsset) (content.Asset, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Asset, error) {
		return scanAsset(tx.QueryRow(ctx, `
			INSERT INTO assets (workspace_id, id, name, content_type, byte_size, sha256, blob_key, tags, metadata, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			RETURNING `+assetCols, s.WorkspaceID(), ids.New(ids.Asset), n.Name, n.Content.ContentType, n.Content.ByteSize,
			n.Content.SHA256, n.Content.BlobKey, tagsOrEmpty(n.Tags), metadataOrEmpty(n.Metadata), s.Principal().UserID))
	})
}

// ReplaceAssetContent points a live asset at new content if its current sha256 is still the
// baseline; a stale baseline is a 409 naming the current hash. The old blob is left in place.
func (st *Store) ReplaceAssetContent(ctx context.Context, s auth.Scope, id, baselineSHA256 string, c content.AssetContent) (content.Asset, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Asset, error) {
		return Assets.update(ctx, tx, s, assetContent, id, baselineSHA256,
			`content_type = $4, byte_size = $5, sha256 = $6, blob_key = $7, version = version + 1`, c.ContentType, c.ByteSize, c.SHA256, c.BlobKey)
	})
}

// UpdateAsset edits name, tags and metadata if the version baseline is current.
func (st *Store) UpdateAsset(ctx context.Context, s auth.Scope, id string, baseline int64, c content.AssetChanges) (content.Asset, error) {
	var tags []string
	if c.Tags != nil {
		tags = tagsOrEmpty(*c.Tags)
	}
	var meta []byte
	if c.Metadata != nil {
		meta = metadataOrEmpty(c.Metadata)
	}
	return written(ctx, st, s, func(tx pgx.Tx) (content.Asset, error) {
		return Assets.update(ctx, tx, s, Assets.Kind, id, baseline,
			`name = COALESCE($4, name), tags = COALESCE($5, tags), metadata = COALESCE($6, metadata), version = version + 1`, c.Name, tags, meta)
	})
}

// CopyAsset makes a new asset row that references the same blob as a live source asset (content
// addressing makes a byte copy unnecessary). Tags and metadata are copied; name, when not nil,
// replaces the source's name.
func (st *Store) CopyAsset(ctx context.Context, s auth.Scope, id string, name *string) (content.Asset, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (content.Asset, error) {
		return row(ctx, tx, s, scanAsset, `
			INSERT INTO assets (workspace_id, id, name, content_type, byte_size, sha256, blob_key, tags, metadata, created_by)
			SELECT workspace_id, $3, COALESCE($4, name), content_type, byte_size, sha256, blob_key, tags, metadata, $5
			FROM assets WHERE workspace_id = $1 AND id = $2 AND archived_at IS NULL
			RETURNING `+assetCols, id, ids.New(ids.Asset), name, s.Principal().UserID)
	})
}

// ListAssets pages through live assets ordered by ID, after cursor.
func (st *Store) ListAssets(ctx context.Context, s auth.Scope, f content.AssetFilter, cursor string, limit int) ([]content.Asset, error) {
	types := f.ContentTypes
	if len(types) == 0 {
		types = nil
	}
	return rows(ctx, st.DB.Q(ctx), s, scanAsset, `SELECT `+assetCols+` FROM assets
		WHERE workspace_id = $1 AND archived_at IS NULL AND id > $2
		  AND ($4 = '' OR $4 = ANY(tags))
		  AND ($5::TEXT[] IS NULL OR content_type = ANY($5::TEXT[]))
		ORDER BY id LIMIT $3`, cursor, limit, f.Tag, types)
}

// AssetTags lists the distinct tags of the workspace's live assets, ordered by tag, after cursor.
func (st *Store) AssetTags(ctx context.Context, s auth.Scope, cursor string, limit int) ([]content.TagCount, error) {
	return rows(ctx, st.DB.Q(ctx), s, func(r pgx.Row) (content.TagCount, error) {
		var tc content.TagCount
		err := r.Scan(&tc.Tag, &tc.Count)
		return tc, err
	}, `SELECT t.tag, count(*) FROM assets, unnest(assets.tags) AS t(tag)
		WHERE assets.workspace_id = $1 AND assets.archived_at IS NULL AND t.tag > $2
		GROUP BY t.tag ORDER BY t.tag LIMIT $3`, cursor, limit)
}
