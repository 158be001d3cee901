package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/auth"
	"slidecells/cell/design"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// presetSchema documents each role's presets from the one preset table.
func presetSchema(s *huma.Schema) *huma.Schema {
	for _, role := range design.FontRoles {
		p := s.Properties[role+"_font_preset"]
		if p == nil {
			continue
		}
		p.Enum = nil
		for _, t := range design.PresetTokens(role) {
			p.Enum = append(p.Enum, t)
		}
		p.Description += fmt.Sprintf("; when neither is given on create: %s", design.DefaultPreset(role).Token)
	}
	return s
}

// ThemeFontBindings are the typography fields of a theme request (the wire shape of
// design.ThemeFontBindings): per role, a workspace font family or a platform preset, never both.
type ThemeFontBindings struct {
	HeadingFontFamilyID *string `json:"heading_font_family_id,omitempty" pattern:"^ffam_[a-z2-7]{26}$" doc:"binds a workspace font family to the heading role; excludes heading_font_preset"`
	HeadingFontPreset   *string `json:"heading_font_preset,omitempty" doc:"platform preset of the heading role; excludes heading_font_family_id"`
	BodyFontFamilyID    *string `json:"body_font_family_id,omitempty" pattern:"^ffam_[a-z2-7]{26}$" doc:"binds a workspace font family to the body role; excludes body_font_preset"`
	BodyFontPreset      *string `json:"body_font_preset,omitempty" doc:"platform preset of the body role; excludes body_font_family_id"`
	CodeFontFamilyID    *string `json:"code_font_family_id,omitempty" pattern:"^ffam_[a-z2-7]{26}$" doc:"binds a workspace font family to the code role; excludes code_font_preset"`
	CodeFontPreset      *string `json:"code_font_preset,omitempty" doc:"platform preset of the code role; excludes code_font_family_id"`
}

// ThemeScales are the theme fields besides typography (the wire shape of design.ThemeScales).
type ThemeScales struct {
	Colors  map[string]string `json:"colors,omitempty" doc:"color name (^[a-z][a-z0-9-]{0,31}$, at most 32) to CSS hex color (#rgb, #rgba, #rrggbb, #rrggbbaa); primary, background and text get defaults when absent; becomes --color-<name>"`
	Spacing []int             `json:"spacing,omitempty" maxItems:"16" doc:"spacing scale in px, 1 to 16 non-decreasing steps of 0..1024; becomes --space-<i>"`
	Radius  []int             `json:"radius,omitempty" maxItems:"16" doc:"corner radius scale in px, 1 to 16 non-decreasing steps of 0..9999; becomes --radius-<i>"`
}

// ThemeCreateBody creates a theme.
type ThemeCreateBody struct {
	Key  string `json:"key" pattern:"^[a-z][a-z0-9-]{0,63}$" doc:"unique among the workspace's live themes; styles refer to it; cannot be changed"`
	Name string `json:"name" minLength:"1" maxLength:"200"`
	ThemeScales
	ThemeFontBindings
}

// TransformSchema adds the preset enumerations from the preset table.
func (ThemeCreateBody) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	return presetSchema(s)
}

// ThemeUpdateBody changes a theme; absent fields keep their value. A role's binding changes only
// when one of its two fields is given.
type ThemeUpdateBody struct {
	Version int64   `json:"version" minimum:"1" doc:"the version you read"`
	Name    *string `json:"name,omitempty" minLength:"1" maxLength:"200"`
	ThemeScales
	ThemeFontBindings
}

// TransformSchema adds the preset enumerations from the preset table.
func (ThemeUpdateBody) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	return presetSchema(s)
}

// themeErr answers an unknown family binding at the fields that named it.
func themeErr(err error) error {
	var uf *design.UnknownFamilyError
	if errors.As(err, &uf) {
		return design.UnknownFamilyFields(uf.Roles)
	}
	return err
}

func (s *Server) registerThemes(st *store.Store) {
	RegisterKind(s, st, Kind[design.Theme, ThemeView]{Rows: store.Bind(st, store.Themes), Read: auth.DesignSystemRead, Write: auth.DesignSystemWrite,
		View: ThemeOf, CreateSummary: "Create a theme", UpdateSummary: "Change a theme (version-locked)"}, createTheme, updateTheme)
}

type createThemeIn = struct {
	Body ThemeCreateBody
}

func createTheme(ctx context.Context, st *store.Store, sc auth.Scope, in *createThemeIn) (design.Theme, error) {
	b := in.Body
	t, err := design.ThemeChange{Key: b.Key, Name: &b.Name, ThemeScales: design.ThemeScales(b.ThemeScales), ThemeFontBindings: design.ThemeFontBindings(b.ThemeFontBindings)}.NewTheme()
	if err != nil {
		return t, err
	}
	t, err = st.CreateTheme(ctx, sc, t)
	return t, themeErr(err)
}

type updateThemeIn = struct {
	ObjectID
	Body ThemeUpdateBody
}

func updateTheme(ctx context.Context, st *store.Store, sc auth.Scope, in *updateThemeIn) (design.Theme, error) {
	c := design.ThemeChange{Name: in.Body.Name, ThemeScales: design.ThemeScales(in.Body.ThemeScales), ThemeFontBindings: design.ThemeFontBindings(in.Body.ThemeFontBindings)}
	// Pure checks first; the bindings themselves are resolved against the stored theme.
	if _, errs := c.Check(); len(errs) > 0 {
		return design.Theme{}, problem.Invalid(errs...)
	}
	t, err := st.UpdateTheme(ctx, sc, in.ID(), in.Body.Version, c.Apply)
	return t, themeErr(err)
}
