package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	cblob "slidecells/cell/blob"
	"slidecells/cell/design"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// checkFaceAsset reads a face's asset inside the write, so an asset archived or replaced
// concurrently is seen (or the write retries).
func checkFaceAsset(ctx context.Context, tx pgx.Tx, s auth.Scope, id string) error {
	a, err := Assets.get(ctx, tx, s, id, false)
	if problem.As(err).Code == problem.NotFound {
		return &design.FaceAssetError{Missing: true}
	}
	if err != nil {
		return err
	}
	if cblob.KindOf(a.ContentType) != cblob.KindFont {
		return &design.FaceAssetError{ContentType: a.ContentType}
	}
	return nil
}

const faceCols = `f.id, f.family_id, m.name, f.asset_id, f.weight_min, f.weight_max, f.font_style, f.font_display,
	f.unicode_range, f.enabled, f.version, f.created_by, f.created_at, f.updated_at`

const faceFrom = ` FROM font_faces f JOIN font_families m ON m.workspace_id = f.workspace_id AND m.id = f.family_id `

func scanFace(r pgx.Row) (design.FontFace, error) {
	var f design.FontFace
	err := r.Scan(&f.ID, &f.FamilyID, &f.FamilyName, &f.AssetID, &f.WeightMin, &f.WeightMax, &f.Style, &f.Display,
		&f.UnicodeRange, &f.Enabled, &f.Version, &f.CreatedBy, &f.CreatedAt, &f.UpdatedAt)
	return f, err
}

const familyCols = `id, name, version, created_by, created_at, updated_at`

func scanFamily(r pgx.Row) (design.FontFamily, error) {
	var m design.FontFamily
	err := r.Scan(&m.ID, &m.Name, &m.Version, &m.CreatedBy, &m.CreatedAt, &m.UpdatedAt)
	return m, err
}

// ListFontFamilies pages through the workspace's families ordered by ID, after cursor, each
// with all of its faces.
func (st *Store) ListFontFamilies(ctx context.Context, s auth.Scope, cursor string, limit int) ([]design.FontFamily, error) {
	fams, err := rows(ctx, st.DB.Q(ctx), s, scanFamily, `SELECT `+familyCols+` FROM font_families
		WHERE workspace_id = $1 AND id > $2 ORDER BY id LIMIT $3`, cursor, limit)
	if err != nil {
		return nil, err
	}
	return withFaces(ctx, st.DB.Q(ctx), s, fams)
}

// withFaces fills in each family's faces, ordered by face ID.
func withFaces(ctx context.Context, q querier, s auth.Scope, fams []design.FontFamily) ([]design.FontFamily, error) {
	famIDs := make([]string, len(fams))
	for i, m := range fams {
		famIDs[i] = m.ID
	}
	list, err := rows(ctx, q, s, scanFace, `SELECT `+faceCols+faceFrom+`
		WHERE f.workspace_id = $1 AND f.family_id = ANY($2) ORDER BY f.family_id, f.id`, famIDs)
	if err != nil {
		return nil, err
	}
	for i := range fams {
		fams[i].Faces = []design.FontFace{}
		for _, f := range list {
			if f.FamilyID == fams[i].ID {
				fams[i].Faces = append(fams[i].Faces, f)
			}
		}
	}
	return fams, nil
}

// GetFontFamily returns a family of the workspace with all its faces.
func (st *Store) GetFontFamily(ctx context.Context, s auth.Scope, id string) (design.FontFamily, error) {
	return getFamily(ctx, st.DB.Q(ctx), s, id)
}

func getFamily(ctx context.Context, q querier, s auth.Scope, id string) (design.FontFamily, error) {
	m, err := row(ctx, q, s, scanFamily, `SELECT `+familyCols+` FROM font_families WHERE workspace_id = $1 AND id = $2`, id)
	if err != nil {
		return m, err
	}
	fams, err := withFaces(ctx, q, s, []design.FontFamily{m})
	if err != nil {
		return m, err
	}
	return fams[0], nil
}

func errFamilyName(name string) error {
	return problem.New(problem.NameConflict, "a font family named %q already exists in this workspace (names are compared case-insensitively)", name)
}

// RenameFontFamily renames a family if the version baseline is current. Names are unique per
// workspace, case-insensitively: a clash is a 409 NAME_CONFLICT.
func (st *Store) RenameFontFamily(ctx context.Context, s auth.Scope, id string, baseline int64, name string) (design.FontFamily, error) {
	var m design.FontFamily
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		current, err := lockFamily(ctx, tx, s, id)
		if err == nil {
			err = stale("font family", current, baseline)
		}
		if err != nil {
			return err
		}
		var clash string
		err = tx.QueryRow(ctx, `SELECT id FROM font_families WHERE workspace_id = $1 AND name_key = $2 AND id <> $3`,
			s.WorkspaceID(), design.FamilyNameKey(name), id).Scan(&clash)
		if err == nil {
			return errFamilyName(name)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE font_families SET name = $3, name_key = $4, version = version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), id, name, design.FamilyNameKey(name)); err != nil {
			if db.IsUniqueViolation(err) {
				return errFamilyName(name)
			}
			return err
		}
		m, err = getFamily(ctx, tx, s, id)
		return err
	})
	return m, err
}

// lockFamily locks a family of the workspace for a write and returns its version.
func lockFamily(ctx context.Context, tx pgx.Tx, s auth.Scope, id string) (int64, error) {
	return row(ctx, tx, s, func(r pgx.Row) (v int64, err error) {
		err = r.Scan(&v)
		return v, err
	}, `SELECT version FROM font_families WHERE workspace_id = $1 AND id = $2 FOR UPDATE`, id)
}

// familyBound reports whether a live theme binds the family for any role.
func familyBound(ctx context.Context, tx pgx.Tx, s auth.Scope, familyID string) (bool, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM themes WHERE workspace_id = $1 AND archived_at IS NULL
		AND (heading_font_family_id = $2 OR body_font_family_id = $2 OR code_font_family_id = $2)`,
		s.WorkspaceID(), familyID).Scan(&n)
	return n > 0, err
}

// DeleteFontFamily removes a family that has no faces and no binding from a live theme;
// otherwise it is a 409 STATE_CONFLICT. This is the one hard delete of the design system, the
// one the specification names for font families.
func (st *Store) DeleteFontFamily(ctx context.Context, s auth.Scope, id string) error {
	return st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		if _, err := lockFamily(ctx, tx, s, id); err != nil {
			return err
		}
		var faces int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM font_faces WHERE workspace_id = $1 AND family_id = $2`,
			s.WorkspaceID(), id).Scan(&faces); err != nil {
			return err
		}
		if faces > 0 {
			return problem.New(problem.StateConflict, "the font family still has %d face(s); delete them first", faces)
		}
		bound, err := familyBound(ctx, tx, s, id)
		if err != nil {
			return err
		}
		if bound {
			return problem.New(problem.StateConflict, "a theme binds this font family; bind the theme to another family or a preset first")
		}
		_, err = tx.Exec(ctx, `DELETE FROM font_families WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), id)
		return err
	})
}

// familyByName finds the family with that name (case-insensitively) or creates it, and returns
// its ID.
func familyByName(ctx context.Context, tx pgx.Tx, s auth.Scope, name string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM font_families WHERE workspace_id = $1 AND name_key = $2`,
		s.WorkspaceID(), design.FamilyNameKey(name)).Scan(&id)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return id, err
	}
	id = ids.New(ids.FontFamily)
	_, err = tx.Exec(ctx, `INSERT INTO font_families (workspace_id, id, name, name_key, created_by) VALUES ($1, $2, $3, $4, $5)`,
		s.WorkspaceID(), id, name, design.FamilyNameKey(name), s.Principal().UserID)
	return id, err
}

// removeIfOrphan deletes a family left without faces unless a live theme binds it, and reports
// whether it did.
func removeIfOrphan(ctx context.Context, tx pgx.Tx, s auth.Scope, familyID string) (bool, error) {
	var faces int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM font_faces WHERE workspace_id = $1 AND family_id = $2`,
		s.WorkspaceID(), familyID).Scan(&faces); err != nil {
		return false, err
	}
	if faces > 0 {
		return false, nil
	}
	bound, err := familyBound(ctx, tx, s, familyID)
	if err != nil || bound {
		return false, err
	}
	_, err = tx.Exec(ctx, `DELETE FROM font_families WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), familyID)
	return err == nil, err
}

func getFace(ctx context.Context, q querier, s auth.Scope, id string) (design.FontFace, error) {
	return row(ctx, q, s, scanFace, `SELECT `+faceCols+faceFrom+` WHERE f.workspace_id = $1 AND f.id = $2`, id)
}

// GetFontFace returns a face of the workspace.
func (st *Store) GetFontFace(ctx context.Context, s auth.Scope, id string) (design.FontFace, error) {
	return getFace(ctx, st.DB.Q(ctx), s, id)
}

// CreateFontFace adds a face to the family named in.FamilyName, creating the family when the
// workspace has none of that name, in one transaction.
func (st *Store) CreateFontFace(ctx context.Context, s auth.Scope, in design.FontFaceInput) (design.FontFace, error) {
	var f design.FontFace
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		if err := checkFaceAsset(ctx, tx, s, in.AssetID); err != nil {
			return err
		}
		famID, err := familyByName(ctx, tx, s, in.FamilyName)
		if err != nil {
			return err
		}
		id := ids.New(ids.FontFace)
		if _, err := tx.Exec(ctx, `INSERT INTO font_faces (workspace_id, id, family_id, asset_id, weight_min, weight_max,
			font_style, font_display, unicode_range, enabled, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			s.WorkspaceID(), id, famID, in.AssetID, in.WeightMin, in.WeightMax, in.Style, in.Display, in.UnicodeRange,
			in.Enabled, s.Principal().UserID); err != nil {
			return err
		}
		f, err = getFace(ctx, tx, s, id)
		return err
	})
	return f, err
}

// UpdateFontFace changes a face if the version baseline is current. A move to another family
// (p.FamilyName) finds or creates the target and removes the old family when it is left without
// faces and no live theme binds it.
func (st *Store) UpdateFontFace(ctx context.Context, s auth.Scope, id string, baseline int64, p design.FontFacePatch) (design.FontFace, error) {
	var f design.FontFace
	err := st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		cur, err := getFace(ctx, tx, s, id)
		if err == nil {
			err = stale("font face", cur.Version, baseline)
		}
		if err != nil {
			return err
		}
		if p.AssetID != nil {
			if err := checkFaceAsset(ctx, tx, s, *p.AssetID); err != nil {
				return err
			}
		}
		famID := cur.FamilyID
		if p.FamilyName != nil {
			if famID, err = familyByName(ctx, tx, s, *p.FamilyName); err != nil {
				return err
			}
		}
		next := cur
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = *v
			}
		}
		set(&next.AssetID, p.AssetID)
		set(&next.Style, p.Style)
		set(&next.Display, p.Display)
		set(&next.UnicodeRange, p.UnicodeRange)
		if p.WeightMin != nil && p.WeightMax != nil {
			next.WeightMin, next.WeightMax = *p.WeightMin, *p.WeightMax
		}
		if p.Enabled != nil {
			next.Enabled = *p.Enabled
		}
		if _, err := tx.Exec(ctx, `UPDATE font_faces SET family_id = $3, asset_id = $4, weight_min = $5, weight_max = $6,
			font_style = $7, font_display = $8, unicode_range = $9, enabled = $10, version = version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), id, famID, next.AssetID, next.WeightMin, next.WeightMax,
			next.Style, next.Display, next.UnicodeRange, next.Enabled); err != nil {
			return err
		}
		if famID != cur.FamilyID {
			if _, err := removeIfOrphan(ctx, tx, s, cur.FamilyID); err != nil {
				return err
			}
		}
		f, err = getFace(ctx, tx, s, id)
		return err
	})
	return f, err
}

// DeleteFontFace removes a face. When it was the family's last face and no live theme binds the
// family, the family is removed too; familyRemoved says so.
func (st *Store) DeleteFontFace(ctx context.Context, s auth.Scope, id string) (familyID string, familyRemoved bool, err error) {
	err = st.WriteTx(ctx, s, func(tx pgx.Tx) error {
		familyRemoved = false
		err := tx.QueryRow(ctx, `DELETE FROM font_faces WHERE workspace_id = $1 AND id = $2 RETURNING family_id`,
			s.WorkspaceID(), id).Scan(&familyID)
		if errors.Is(err, pgx.ErrNoRows) {
			return problem.ErrNotFound()
		}
		if err != nil {
			return err
		}
		familyRemoved, err = removeIfOrphan(ctx, tx, s, familyID)
		return err
	})
	return familyID, familyRemoved, err
}

// familyExists reports whether the workspace has the family. It reads in tx so that a theme
// binding and a family removal cannot pass each other.
func familyExists(ctx context.Context, tx pgx.Tx, s auth.Scope, id string) (bool, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM font_families WHERE workspace_id = $1 AND id = $2`, s.WorkspaceID(), id).Scan(&n)
	return n > 0, err
}
