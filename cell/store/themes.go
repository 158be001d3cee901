package store

import (
	"context"
	"encoding/json"
	"errors"
	"maps"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/design"
	"slidecells/shared/db"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// Themes is the kind of themes.
var Themes = Table[design.Theme]{Kind: Kind{Name: "themes", Prefix: ids.Theme, LockColumn: "version"},
	cols: themeCols, from: themeFrom, scan: scanTheme, version: func(t design.Theme) int64 { return t.Version }}

func errThemeKey(key string) error {
	return problem.New(problem.NameConflict, "a theme with key %q already exists in this workspace", key)
}

const themeCols = `t.id, t.key, t.name, t.colors, t.spacing, t.radius,
	COALESCE(t.heading_font_family_id, ''), COALESCE(h.name, ''), COALESCE(t.heading_font_preset, ''),
	COALESCE(t.body_font_family_id, ''), COALESCE(b.name, ''), COALESCE(t.body_font_preset, ''),
	COALESCE(t.code_font_family_id, ''), COALESCE(c.name, ''), COALESCE(t.code_font_preset, ''),
	t.version, t.created_by, t.created_at, t.updated_at`

const themeFrom = ` FROM themes t
	LEFT JOIN font_families h ON h.workspace_id = t.workspace_id AND h.id = t.heading_font_family_id
	LEFT JOIN font_families b ON b.workspace_id = t.workspace_id AND b.id = t.body_font_family_id
	LEFT JOIN font_families c ON c.workspace_id = t.workspace_id AND c.id = t.code_font_family_id `

func scanTheme(r pgx.Row) (design.Theme, error) {
	var t design.Theme
	var colors, spacing, radius []byte
	var hf, hn, hp, bf, bn, bp, cf, cn, cp string
	err := r.Scan(&t.ID, &t.Key, &t.Name, &colors, &spacing, &radius, &hf, &hn, &hp, &bf, &bn, &bp, &cf, &cn, &cp,
		&t.Version, &t.CreatedBy, &t.CreatedAt, &t.UpdatedAt)
	if err != nil {
		return t, err
	}
	if err := errors.Join(json.Unmarshal(colors, &t.Colors), json.Unmarshal(spacing, &t.Spacing), json.Unmarshal(radius, &t.Radius)); err != nil {
		return t, problem.Wrap(err, "cannot decode theme")
	}
	t.Fonts = map[string]design.ThemeFont{
		"heading": {FamilyID: hf, FamilyName: hn, Preset: hp},
		"body":    {FamilyID: bf, FamilyName: bn, Preset: bp},
		"code":    {FamilyID: cf, FamilyName: cn, Preset: cp},
	}
	return t, nil
}

// GetTheme returns a live theme of the workspace.
func (st *Store) GetTheme(ctx context.Context, s auth.Scope, id string) (design.Theme, error) {
	return Themes.Get(ctx, st, s, id)
}

// ThemeByKey returns the live theme with key, or the one 404.
func (st *Store) ThemeByKey(ctx context.Context, s auth.Scope, key string) (design.Theme, error) {
	return row(ctx, st.DB.Q(ctx), s, scanTheme, Themes.selectLive(` AND t.key = $2`), key)
}

// checkThemeFamilies returns an *UnknownFamilyError when a bound family is not in the workspace.
func checkThemeFamilies(ctx context.Context, tx pgx.Tx, s auth.Scope, t design.Theme) error {
	var missing []string
	for _, role := range design.FontRoles {
		id := t.Fonts[role].FamilyID
		if id == "" {
			continue
		}
		ok, err := familyExists(ctx, tx, s, id)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, role)
		}
	}
	if len(missing) > 0 {
		return &design.UnknownFamilyError{Roles: missing}
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func themeArgs(t design.Theme) ([]any, error) {
	colors, err1 := json.Marshal(t.Colors)
	spacing, err2 := json.Marshal(t.Spacing)
	radius, err3 := json.Marshal(t.Radius)
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, problem.Wrap(err, "cannot encode theme")
	}
	args := []any{colors, spacing, radius}
	for _, role := range design.FontRoles {
		f := t.Fonts[role]
		args = append(args, nullable(f.FamilyID), nullable(f.Preset))
	}
	return args, nil
}

// CreateTheme inserts a theme. Its key must be free among the workspace's live themes (409
// NAME_CONFLICT) and its bound families must exist (*UnknownFamilyError).
func (st *Store) CreateTheme(ctx context.Context, s auth.Scope, t design.Theme) (design.Theme, error) {
	args, err := themeArgs(t)
	if err != nil {
		return design.Theme{}, err
	}
	return written(ctx, st, s, func(tx pgx.Tx) (design.Theme, error) {
		if ok, err := themeKeyExists(ctx, tx, s, t.Key); err != nil || ok {
			if ok {
				return design.Theme{}, errThemeKey(t.Key)
			}
			return design.Theme{}, err
		}
		if err := checkThemeFamilies(ctx, tx, s, t); err != nil {
			return design.Theme{}, err
		}
		id := ids.New(ids.Theme)
		_, err := tx.Exec(ctx, `INSERT INTO themes (workspace_id, id, key, name, colors, spacing, radius,
			heading_font_family_id, heading_font_preset, body_font_family_id, body_font_preset, code_font_family_id, code_font_preset,
			created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
			append(append([]any{s.WorkspaceID(), id, t.Key, t.Name}, args...), s.Principal().UserID)...)
		if db.IsUniqueViolation(err) {
			return design.Theme{}, errThemeKey(t.Key)
		}
		if err != nil {
			return design.Theme{}, err
		}
		return Themes.get(ctx, tx, s, id, false)
	})
}

// UpdateTheme applies change to a live theme if the version baseline is current, in one
// transaction: the theme is read, changed, its bound families checked, and written. The key is
// not changeable (styles refer to it).
func (st *Store) UpdateTheme(ctx context.Context, s auth.Scope, id string, baseline int64, change func(*design.Theme)) (design.Theme, error) {
	return written(ctx, st, s, func(tx pgx.Tx) (design.Theme, error) {
		cur, err := Themes.locked(ctx, tx, s, id, baseline)
		if err != nil {
			return cur, err
		}
		next := cur
		next.Fonts = maps.Clone(cur.Fonts)
		change(&next)
		if err := checkThemeFamilies(ctx, tx, s, next); err != nil {
			return cur, err
		}
		args, err := themeArgs(next)
		if err != nil {
			return cur, err
		}
		if _, err := tx.Exec(ctx, `UPDATE themes SET name = $3, colors = $4, spacing = $5, radius = $6,
			heading_font_family_id = $7, heading_font_preset = $8, body_font_family_id = $9, body_font_preset = $10,
			code_font_family_id = $11, code_font_preset = $12, version = version + 1, updated_at = now()
			WHERE workspace_id = $1 AND id = $2`, append([]any{s.WorkspaceID(), id, next.Name}, args...)...); err != nil {
			return cur, err
		}
		return Themes.get(ctx, tx, s, id, false)
	})
}

// themeKeyExists reports whether a live theme of the workspace has the key.
func themeKeyExists(ctx context.Context, q querier, s auth.Scope, key string) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM themes WHERE workspace_id = $1 AND key = $2 AND archived_at IS NULL`,
		s.WorkspaceID(), key).Scan(&n)
	return n > 0, err
}
