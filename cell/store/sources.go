package store

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/shared/db"
	"slidecells/shared/ids"
)

// Sourced is a kind whose source lives in immutable versions, one table of them per kind:
// pages (the current version is the row's version) and components (published versions; the
// draft is in the row). Their histories, version reads, version inserts and metadata edits
// are one implementation, parameterised by the kind.
type Sourced[T Row] struct {
	Table[T]
	versions   string // the versions table
	idCol      string // its column naming the object
	currentCol string // the object's column naming its current version
	metadata   Kind   // the same table, locked by metadata_version
	// taken is the 409 of a key a live object of the kind already has.
	taken func(key string) error
}

// sourced declares a Sourced kind of table with its versions in table_versions.
func sourced[T Row](t Table[T], currentCol string, taken func(string) error) Sourced[T] {
	meta := t.Kind
	meta.LockColumn = "metadata_version"
	return Sourced[T]{Table: t, versions: t.Singular() + "_versions", idCol: t.Singular() + "_id", currentCol: currentCol, metadata: meta, taken: taken}
}

const versionCols = `v.version, v.file_type, v.source, v.source_digest, v.compiled_digest, v.dependencies, v.job_id, v.created_by, v.created_at`

func scanVersion(r pgx.Row) (content.SourceVersion, error) {
	var v content.SourceVersion
	var deps []byte
	err := r.Scan(&v.Version, &v.FileType, &v.Source, &v.SourceDigest, &v.CompiledDigest, &deps, &v.JobID, &v.CreatedBy, &v.CreatedAt)
	if err == nil {
		err = json.Unmarshal(deps, &v.Dependencies)
	}
	return v, err
}

// Version returns one version of a live object (0: its current one).
func (k Sourced[T]) Version(ctx context.Context, st *Store, s auth.Scope, id string, version int64) (content.SourceVersion, error) {
	return row(ctx, st.DB.Q(ctx), s, scanVersion, `SELECT `+versionCols+` FROM `+k.versions+` v
		JOIN `+k.Name+` o ON o.workspace_id = v.workspace_id AND o.id = v.`+k.idCol+` AND o.archived_at IS NULL
		WHERE v.workspace_id = $1 AND v.`+k.idCol+` = $2 AND v.version = CASE WHEN $3::INT8 = 0 THEN o.`+k.currentCol+` ELSE $3::INT8 END`, id, version)
}

// Versions pages through a live object's versions, newest first, below before (0: from the
// top).
func (k Sourced[T]) Versions(ctx context.Context, st *Store, s auth.Scope, id string, before int64, limit int) ([]content.SourceVersion, error) {
	if _, err := k.Get(ctx, st, s, id); err != nil {
		return nil, err
	}
	return rows(ctx, st.DB.Q(ctx), s, scanVersion, `SELECT `+versionCols+` FROM `+k.versions+` v
		WHERE v.workspace_id = $1 AND v.`+k.idCol+` = $2 AND ($3::INT8 = 0 OR v.version < $3::INT8) ORDER BY v.version DESC LIMIT $4`, id, before, limit)
}

// insertVersion stores one immutable version of the object id.
func (k Sourced[T]) insertVersion(ctx context.Context, tx pgx.Tx, s auth.Scope, id string, version int64, src content.NewSource) error {
	deps, err := json.Marshal(src.Dependencies)
	if err != nil {
		return err
	}
	if src.Dependencies == nil {
		deps = []byte("[]")
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+k.versions+` (workspace_id, `+k.idCol+`, version, file_type, source, source_digest, compiled_digest, dependencies, job_id, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		s.WorkspaceID(), id, version, src.FileType, src.Source, src.SourceDigest, src.CompiledDigest, deps, src.JobID, s.Principal().UserID)
	return err
}

// UpdateMetadata changes title, description and tags of a live object whose metadata_version
// is baseline; its source is untouched (that changes only through jobs).
func (k Sourced[T]) UpdateMetadata(ctx context.Context, st *Store, s auth.Scope, id string, baseline int64, title, description *string, tags []string) (T, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (T, error) {
		return k.update(ctx, tx, s, k.metadata, id, baseline, `title = COALESCE($4, title), description = COALESCE($5, description),
			tags = COALESCE($6, tags), metadata_version = metadata_version + 1`, title, description, tags)
	})
}

// keyFree checks that no live object of the kind has key where scope (a condition over $3 on)
// holds; a taken key is the kind's 409.
func (k Sourced[T]) keyFree(ctx context.Context, st *Store, s auth.Scope, key string, scope string, args ...any) error {
	var n int
	err := st.DB.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM `+k.Name+` WHERE workspace_id = $1 AND key = $2 AND archived_at IS NULL`+scope,
		append([]any{s.WorkspaceID(), key}, args...)...).Scan(&n)
	if err == nil && n > 0 {
		return k.taken(key)
	}
	return err
}

// insert adds an object of the kind in the scope's workspace, with a new ID and its creator,
// and returns it: columns name the values that follow (from $4). A live object with the same
// key is the kind's 409.
func (k Sourced[T]) insert(ctx context.Context, tx pgx.Tx, s auth.Scope, key, columns string, values ...any) (T, error) {
	marks := make([]string, len(values))
	for i := range marks {
		marks[i] = "$" + strconv.Itoa(i+4)
	}
	r, err := k.scan(tx.QueryRow(ctx, `INSERT INTO `+k.Name+` (workspace_id, id, created_by, `+columns+`)
		VALUES ($1, $2, $3, `+strings.Join(marks, ", ")+`) RETURNING `+k.cols,
		append([]any{s.WorkspaceID(), ids.New(k.Prefix), s.Principal().UserID}, values...)...))
	if db.IsUniqueViolation(err) {
		return r, k.taken(key)
	}
	return r, err
}
