package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// Theme limits and defaults. A theme always defines the colors of themeDefaultColors (the
// request may override them) and has a spacing and a radius scale.
const (
	maxThemeColors = 32
	maxScaleSteps  = 16
	maxSpacingPx   = 1024
	maxRadiusPx    = 9999
)

var (
	themeDefaultColors  = map[string]string{"primary": "#2563eb", "background": "#ffffff", "text": "#111827"}
	themeDefaultSpacing = []int{0, 4, 8, 12, 16, 24, 32, 48, 64}
	themeDefaultRadius  = []int{0, 2, 4, 8, 16}
	themeColorName      = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	hexColor            = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$`)
)

// normalizeHex returns a CSS hex color in lower case with 6 or 8 digits ("#ABC" → "#aabbcc").
func normalizeHex(s string) string {
	s = strings.ToLower(s)
	if len(s) == 4 || len(s) == 5 {
		var b strings.Builder
		b.WriteByte('#')
		for _, c := range s[1:] {
			b.WriteRune(c)
			b.WriteRune(c)
		}
		return b.String()
	}
	return s
}

// presetsFor lists the platform presets a role accepts, in table order.
func presetsFor(role string) []FontPreset {
	var out []FontPreset
	for _, p := range fontPresets {
		for _, r := range p.Roles {
			if r == role {
				out = append(out, p)
			}
		}
	}
	return out
}

// defaultPreset is the preset a role gets when a theme names nothing: the first portable
// preset of the role (it renders the same on every client).
func defaultPreset(role string) FontPreset {
	for _, p := range presetsFor(role) {
		if p.Portable {
			return p
		}
	}
	return presetsFor(role)[0]
}

func presetTokens(role string) []string {
	var out []string
	for _, p := range presetsFor(role) {
		out = append(out, p.Token)
	}
	return out
}

// ThemeFontBindings are the typography fields of a theme request: per role, a workspace font
// family or a platform preset, never both.
type ThemeFontBindings struct {
	HeadingFontFamilyID *string `json:"heading_font_family_id,omitempty" pattern:"^ffam_[a-z2-7]{26}$" doc:"binds a workspace font family to the heading role; excludes heading_font_preset"`
	HeadingFontPreset   *string `json:"heading_font_preset,omitempty" doc:"platform preset of the heading role; excludes heading_font_family_id"`
	BodyFontFamilyID    *string `json:"body_font_family_id,omitempty" pattern:"^ffam_[a-z2-7]{26}$" doc:"binds a workspace font family to the body role; excludes body_font_preset"`
	BodyFontPreset      *string `json:"body_font_preset,omitempty" doc:"platform preset of the body role; excludes body_font_family_id"`
	CodeFontFamilyID    *string `json:"code_font_family_id,omitempty" pattern:"^ffam_[a-z2-7]{26}$" doc:"binds a workspace font family to the code role; excludes code_font_preset"`
	CodeFontPreset      *string `json:"code_font_preset,omitempty" doc:"platform preset of the code role; excludes code_font_family_id"`
}

func (b ThemeFontBindings) role(role string) (family, preset *string) {
	switch role {
	case "heading":
		return b.HeadingFontFamilyID, b.HeadingFontPreset
	case "body":
		return b.BodyFontFamilyID, b.BodyFontPreset
	default:
		return b.CodeFontFamilyID, b.CodeFontPreset
	}
}

// presetSchema documents each role's presets from the one preset table (fontPresets).
func presetSchema(s *huma.Schema) *huma.Schema {
	for _, role := range store.FontRoles {
		p := s.Properties[role+"_font_preset"]
		if p == nil {
			continue
		}
		p.Enum = nil
		for _, t := range presetTokens(role) {
			p.Enum = append(p.Enum, t)
		}
		p.Description += fmt.Sprintf("; when neither is given on create: %s", defaultPreset(role).Token)
	}
	return s
}

// ThemeScales are the theme fields besides typography.
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

// ThemeRoleFont is a theme's typography for one role.
type ThemeRoleFont struct {
	Source        string `json:"source" enum:"family,preset"`
	FontFamilyID  string `json:"font_family_id,omitempty" doc:"the bound workspace font family"`
	FontFamily    string `json:"font_family,omitempty" doc:"the bound family's name"`
	FontPreset    string `json:"font_preset,omitempty" doc:"the preset token"`
	CSSFontFamily string `json:"css_font_family" doc:"the CSS font-family stack"`
	BundleURL     string `json:"bundle_url,omitempty" doc:"the bound family's @font-face stylesheet"`
}

// ThemeTypography is a theme's typography by role.
type ThemeTypography struct {
	Heading ThemeRoleFont `json:"heading"`
	Body    ThemeRoleFont `json:"body"`
	Code    ThemeRoleFont `json:"code"`
}

// ThemeView is a theme as the API shows it.
type ThemeView struct {
	ID           string            `json:"id"`
	Key          string            `json:"key"`
	Name         string            `json:"name"`
	Colors       map[string]string `json:"colors"`
	Spacing      []int             `json:"spacing"`
	Radius       []int             `json:"radius"`
	Typography   ThemeTypography   `json:"typography"`
	CSSVariables map[string]string `json:"css_variables" doc:"the theme as CSS custom properties"`
	CSS          string            `json:"css" doc:"a :root rule declaring css_variables"`
	Version      int64             `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	CreatedBy    string            `json:"created_by"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
}

func roleFont(workspaceID, role string, f store.ThemeFont) ThemeRoleFont {
	if f.FamilyID != "" {
		return ThemeRoleFont{Source: "family", FontFamilyID: f.FamilyID, FontFamily: f.FamilyName,
			CSSFontFamily: cssString(f.FamilyName) + ", " + defaultPreset(role).Family,
			BundleURL:     fontBundlePath(workspaceID, f.FamilyID)}
	}
	css := defaultPreset(role).Family
	for _, p := range fontPresets {
		if p.Token == f.Preset {
			css = p.Family
		}
	}
	return ThemeRoleFont{Source: "preset", FontPreset: f.Preset, CSSFontFamily: css}
}

// themeCSS renders a theme's custom properties and a :root rule declaring them in a fixed order.
func themeCSS(t store.Theme, typo ThemeTypography) (map[string]string, string) {
	vars := map[string]string{}
	var order []string
	add := func(k, v string) {
		vars[k] = v
		order = append(order, k)
	}
	names := make([]string, 0, len(t.Colors))
	for n := range t.Colors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add("--color-"+n, t.Colors[n])
	}
	for i, v := range t.Spacing {
		add("--space-"+strconv.Itoa(i), strconv.Itoa(v)+"px")
	}
	for i, v := range t.Radius {
		add("--radius-"+strconv.Itoa(i), strconv.Itoa(v)+"px")
	}
	add("--font-heading", typo.Heading.CSSFontFamily)
	add("--font-body", typo.Body.CSSFontFamily)
	add("--font-code", typo.Code.CSSFontFamily)
	var b strings.Builder
	b.WriteString(":root {\n")
	for _, k := range order {
		fmt.Fprintf(&b, "  %s: %s;\n", k, vars[k])
	}
	b.WriteString("}\n")
	return vars, b.String()
}

func themeView(workspaceID string, t store.Theme) ThemeView {
	typo := ThemeTypography{
		Heading: roleFont(workspaceID, "heading", t.Fonts["heading"]),
		Body:    roleFont(workspaceID, "body", t.Fonts["body"]),
		Code:    roleFont(workspaceID, "code", t.Fonts["code"]),
	}
	vars, css := themeCSS(t, typo)
	return ThemeView{ID: t.ID, Key: t.Key, Name: t.Name, Colors: t.Colors, Spacing: t.Spacing, Radius: t.Radius,
		Typography: typo, CSSVariables: vars, CSS: css, Version: t.Version, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// checkColors validates colors and returns them normalised, with the defaults filled in.
func checkColors(in map[string]string) (map[string]string, []problem.FieldError) {
	var errs []problem.FieldError
	if len(in) > maxThemeColors {
		errs = append(errs, problem.FieldError{Field: "body.colors", Message: fmt.Sprintf("at most %d colors", maxThemeColors)})
	}
	out := map[string]string{}
	for k, v := range themeDefaultColors {
		out[k] = v
	}
	names := make([]string, 0, len(in))
	for n := range in {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := in[n]
		switch {
		case !themeColorName.MatchString(n):
			errs = append(errs, problem.FieldError{Field: "body.colors." + n, Message: "color names match ^[a-z][a-z0-9-]{0,31}$"})
		case !hexColor.MatchString(v):
			errs = append(errs, problem.FieldError{Field: "body.colors." + n, Message: "must be a CSS hex color: #rgb, #rgba, #rrggbb or #rrggbbaa"})
		default:
			out[n] = normalizeHex(v)
		}
	}
	return out, errs
}

// checkScale validates a spacing or radius scale.
func checkScale(field string, in []int, max int) []problem.FieldError {
	if len(in) == 0 || len(in) > maxScaleSteps {
		return []problem.FieldError{{Field: "body." + field, Message: fmt.Sprintf("give 1 to %d steps", maxScaleSteps)}}
	}
	for i, v := range in {
		path := fmt.Sprintf("body.%s[%d]", field, i)
		if v < 0 || v > max {
			return []problem.FieldError{{Field: path, Message: fmt.Sprintf("must be within 0..%d px", max)}}
		}
		if i > 0 && v < in[i-1] {
			return []problem.FieldError{{Field: path, Message: "the scale must not decrease"}}
		}
	}
	return nil
}

// checkFonts resolves the typography fields over base (the current bindings; nil on create,
// where a role with neither field gets its default preset).
func checkFonts(b ThemeFontBindings, base map[string]store.ThemeFont) (map[string]store.ThemeFont, []problem.FieldError) {
	out := map[string]store.ThemeFont{}
	var errs []problem.FieldError
	for _, role := range store.FontRoles {
		fam, preset := b.role(role)
		famField, presetField := "body."+role+"_font_family_id", "body."+role+"_font_preset"
		switch {
		case fam != nil && preset != nil:
			msg := fmt.Sprintf("give either %s_font_family_id or %s_font_preset, not both", role, role)
			errs = append(errs, problem.FieldError{Field: famField, Message: msg}, problem.FieldError{Field: presetField, Message: msg})
		case fam != nil:
			out[role] = store.ThemeFont{FamilyID: *fam}
		case preset != nil:
			ok := false
			for _, t := range presetTokens(role) {
				ok = ok || t == *preset
			}
			if !ok {
				errs = append(errs, problem.FieldError{Field: presetField,
					Message: fmt.Sprintf("the %s role accepts the presets %s", role, strings.Join(presetTokens(role), ", "))})
			}
			out[role] = store.ThemeFont{Preset: *preset}
		case base != nil:
			out[role] = base[role]
		default:
			out[role] = store.ThemeFont{Preset: defaultPreset(role).Token}
		}
	}
	return out, errs
}

// themeStoreErr turns an unknown family binding into a 422 naming the fields.
func themeStoreErr(err error) error {
	var uf *store.UnknownFamilyError
	if errors.As(err, &uf) {
		var fields []problem.FieldError
		for _, role := range uf.Roles {
			fields = append(fields, problem.FieldError{Field: "body." + role + "_font_family_id", Message: "no font family with this ID in the workspace"})
		}
		return problem.Invalid(fields...)
	}
	return err
}

// ThemePath names a theme.
type ThemePath struct {
	ThemeID string `path:"theme_id" pattern:"^thm_[a-z2-7]{26}$" doc:"Theme ID (thm_…)"`
}

// ThemeOutput is one theme.
type ThemeOutput struct {
	Body ThemeView
}

// ThemeCreated is a new theme.
type ThemeCreated struct {
	Location string `header:"Location"`
	Body     ThemeView
}

// ThemeList is a page of themes.
type ThemeList struct {
	Body struct {
		Items      []ThemeView `json:"items"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}
}

type archiveTheme struct {
	WorkspaceHeader
	IdempotencyHeader
	ThemePath
}

func (s *Server) registerThemes(st *store.Store) {
	tags := []string{"themes"}
	Register(s, Operation{ID: "create-theme", Method: http.MethodPost, Path: "/api/v1/themes", Summary: "Create a theme",
		Tags: tags, Access: InWorkspace, Scopes: []string{"design-system:write"}, Idempotency: KeyRequired, Lock: CreateOnly},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			Body ThemeCreateBody
		}) (*ThemeCreated, error) {
			t := store.Theme{Key: in.Body.Key, Name: in.Body.Name, Spacing: themeDefaultSpacing, Radius: themeDefaultRadius}
			var errs, e []problem.FieldError
			t.Colors, e = checkColors(in.Body.Colors)
			errs = append(errs, e...)
			if in.Body.Spacing != nil {
				errs = append(errs, checkScale("spacing", in.Body.Spacing, maxSpacingPx)...)
				t.Spacing = in.Body.Spacing
			}
			if in.Body.Radius != nil {
				errs = append(errs, checkScale("radius", in.Body.Radius, maxRadiusPx)...)
				t.Radius = in.Body.Radius
			}
			t.Fonts, e = checkFonts(in.Body.ThemeFontBindings, nil)
			errs = append(errs, e...)
			if len(errs) > 0 {
				return nil, problem.Invalid(errs...)
			}
			out, err := st.CreateTheme(ctx, ScopeFrom(ctx), t)
			if err != nil {
				return nil, themeStoreErr(err)
			}
			return &ThemeCreated{Location: "/api/v1/themes/" + out.ID, Body: themeView(in.WorkspaceID, out)}, nil
		})
	Register(s, Operation{ID: "list-themes", Method: http.MethodGet, Path: "/api/v1/themes", Summary: "List themes",
		Tags: tags, Access: InWorkspace, Scopes: []string{"design-system:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ListQuery
		}) (*ThemeList, error) {
			ts, err := st.ListThemes(ctx, ScopeFrom(ctx), in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &ThemeList{}
			out.Body.Items, out.Body.NextCursor = paginate(ts, in.Limit,
				func(t store.Theme) string { return t.ID },
				func(t store.Theme) ThemeView { return themeView(in.WorkspaceID, t) })
			return out, nil
		})
	Register(s, Operation{ID: "get-theme", Method: http.MethodGet, Path: "/api/v1/themes/{theme_id}", Summary: "Theme detail",
		Tags: tags, Access: InWorkspace, Scopes: []string{"design-system:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ThemePath
		}) (*ThemeOutput, error) {
			t, err := st.GetTheme(ctx, ScopeFrom(ctx), in.ThemeID)
			if err != nil {
				return nil, err
			}
			return &ThemeOutput{Body: themeView(in.WorkspaceID, t)}, nil
		})
	Register(s, Operation{ID: "update-theme", Method: http.MethodPatch, Path: "/api/v1/themes/{theme_id}",
		Summary: "Change a theme (version-locked)", Tags: tags, Access: InWorkspace, Scopes: []string{"design-system:write"},
		Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			ThemePath
			Body ThemeUpdateBody
		}) (*ThemeOutput, error) {
			var errs, e []problem.FieldError
			var colors map[string]string
			if in.Body.Colors != nil {
				colors, e = checkColors(in.Body.Colors)
				errs = append(errs, e...)
			}
			if in.Body.Spacing != nil {
				errs = append(errs, checkScale("spacing", in.Body.Spacing, maxSpacingPx)...)
			}
			if in.Body.Radius != nil {
				errs = append(errs, checkScale("radius", in.Body.Radius, maxRadiusPx)...)
			}
			// Pure checks first; the bindings themselves are resolved against the stored theme.
			if _, e = checkFonts(in.Body.ThemeFontBindings, map[string]store.ThemeFont{}); len(e) > 0 {
				errs = append(errs, e...)
			}
			if len(errs) > 0 {
				return nil, problem.Invalid(errs...)
			}
			t, err := st.UpdateTheme(ctx, ScopeFrom(ctx), in.ThemeID, in.Body.Version, func(t *store.Theme) error {
				if in.Body.Name != nil {
					t.Name = *in.Body.Name
				}
				if colors != nil {
					t.Colors = colors
				}
				if in.Body.Spacing != nil {
					t.Spacing = in.Body.Spacing
				}
				if in.Body.Radius != nil {
					t.Radius = in.Body.Radius
				}
				fonts, _ := checkFonts(in.Body.ThemeFontBindings, t.Fonts)
				t.Fonts = fonts
				return nil
			})
			if err != nil {
				return nil, themeStoreErr(err)
			}
			return &ThemeOutput{Body: themeView(in.WorkspaceID, t)}, nil
		})
	registerArchive(s, st, store.Themes, "theme", "design-system:write", func(in *archiveTheme) string { return in.ThemeID })
}
