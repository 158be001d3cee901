package design

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"slidecells/shared/problem"
)

// Theme limits and defaults. A theme always defines the colors of DefaultColors (the request may
// override them) and has a spacing and a radius scale.
const (
	MaxThemeColors = 32
	MaxScaleSteps  = 16
	MaxSpacingPx   = 1024
	MaxRadiusPx    = 9999
)

var (
	defaultColors   = map[string]string{"primary": "#2563eb", "background": "#ffffff", "text": "#111827"}
	defaultSpacing  = []int{0, 4, 8, 12, 16, 24, 32, 48, 64}
	defaultRadius   = []int{0, 2, 4, 8, 16}
	themeColorName  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	hexColor        = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$`)
	hexColorMessage = "must be a CSS hex color: #rgb, #rgba, #rrggbb or #rrggbbaa"
)

// NormalizeHex returns a CSS hex color in lower case with 6 or 8 digits ("#ABC" → "#aabbcc").
func NormalizeHex(s string) string {
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

// ThemeFontBindings are the typography fields of a theme request: per role, a workspace font
// family or a platform preset, never both.
type ThemeFontBindings struct {
	HeadingFontFamilyID *string `json:"heading_font_family_id,omitempty"`
	HeadingFontPreset   *string `json:"heading_font_preset,omitempty"`
	BodyFontFamilyID    *string `json:"body_font_family_id,omitempty"`
	BodyFontPreset      *string `json:"body_font_preset,omitempty"`
	CodeFontFamilyID    *string `json:"code_font_family_id,omitempty"`
	CodeFontPreset      *string `json:"code_font_preset,omitempty"`
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

// ThemeScales are the theme fields besides typography.
type ThemeScales struct {
	Colors  map[string]string `json:"colors,omitempty"`
	Spacing []int             `json:"spacing,omitempty"`
	Radius  []int             `json:"radius,omitempty"`
}

// ThemeChange is a theme create or update: absent fields take their default (create) or keep
// their value (update); a role's binding changes only when one of its two fields is given.
type ThemeChange struct {
	Key  string
	Name *string
	ThemeScales
	ThemeFontBindings
}

// Check validates the change on its own (what needs no stored theme) and returns the colors
// normalised (nil when not given).
func (c ThemeChange) Check() (map[string]string, []problem.FieldError) {
	var errs []problem.FieldError
	var colors map[string]string
	if c.Colors != nil {
		colors, errs = checkColors(c.Colors)
	}
	if c.Spacing != nil {
		errs = append(errs, checkScale("spacing", c.Spacing, MaxSpacingPx)...)
	}
	if c.Radius != nil {
		errs = append(errs, checkScale("radius", c.Radius, MaxRadiusPx)...)
	}
	_, e := resolveFonts(c.ThemeFontBindings, map[string]ThemeFont{})
	return colors, append(errs, e...)
}

// NewTheme is the theme a create makes: defaults laid under the request.
func (c ThemeChange) NewTheme() (Theme, error) {
	colors, errs := c.Check()
	if colors == nil {
		colors, _ = checkColors(nil)
	}
	t := Theme{Key: c.Key, Colors: colors, Spacing: defaultSpacing, Radius: defaultRadius}
	if c.Name != nil {
		t.Name = *c.Name
	}
	if c.Spacing != nil {
		t.Spacing = c.Spacing
	}
	if c.Radius != nil {
		t.Radius = c.Radius
	}
	t.Fonts, _ = resolveFonts(c.ThemeFontBindings, nil)
	if len(errs) > 0 {
		return t, problem.Invalid(errs...)
	}
	return t, nil
}

// Apply lays a checked change over a stored theme.
func (c ThemeChange) Apply(t *Theme) {
	colors, _ := c.Check()
	if c.Name != nil {
		t.Name = *c.Name
	}
	if colors != nil {
		t.Colors = colors
	}
	if c.Spacing != nil {
		t.Spacing = c.Spacing
	}
	if c.Radius != nil {
		t.Radius = c.Radius
	}
	t.Fonts, _ = resolveFonts(c.ThemeFontBindings, t.Fonts)
}

// checkColors validates colors and returns them normalised, with the defaults filled in.
func checkColors(in map[string]string) (map[string]string, []problem.FieldError) {
	var errs []problem.FieldError
	if len(in) > MaxThemeColors {
		errs = append(errs, problem.FieldError{Field: "colors", Message: fmt.Sprintf("at most %d colors", MaxThemeColors)})
	}
	out := map[string]string{}
	for k, v := range defaultColors {
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
			errs = append(errs, problem.FieldError{Field: "colors." + n, Message: "color names match ^[a-z][a-z0-9-]{0,31}$"})
		case !hexColor.MatchString(v):
			errs = append(errs, problem.FieldError{Field: "colors." + n, Message: hexColorMessage})
		default:
			out[n] = NormalizeHex(v)
		}
	}
	return out, errs
}

// checkScale validates a spacing or radius scale.
func checkScale(field string, in []int, max int) []problem.FieldError {
	if len(in) == 0 || len(in) > MaxScaleSteps {
		return []problem.FieldError{{Field: field, Message: fmt.Sprintf("give 1 to %d steps", MaxScaleSteps)}}
	}
	for i, v := range in {
		path := fmt.Sprintf("%s[%d]", field, i)
		if v < 0 || v > max {
			return []problem.FieldError{{Field: path, Message: fmt.Sprintf("must be within 0..%d px", max)}}
		}
		if i > 0 && v < in[i-1] {
			return []problem.FieldError{{Field: path, Message: "the scale must not decrease"}}
		}
	}
	return nil
}

// resolveFonts resolves the typography fields over base (the current bindings; nil on create,
// where a role with neither field gets its default preset).
func resolveFonts(b ThemeFontBindings, base map[string]ThemeFont) (map[string]ThemeFont, []problem.FieldError) {
	out := map[string]ThemeFont{}
	var errs []problem.FieldError
	for _, role := range FontRoles {
		fam, preset := b.role(role)
		famField, presetField := role+"_font_family_id", role+"_font_preset"
		switch {
		case fam != nil && preset != nil:
			msg := fmt.Sprintf("give either %s_font_family_id or %s_font_preset, not both", role, role)
			errs = append(errs, problem.FieldError{Field: famField, Message: msg}, problem.FieldError{Field: presetField, Message: msg})
		case fam != nil:
			out[role] = ThemeFont{FamilyID: *fam}
		case preset != nil:
			ok := false
			for _, t := range PresetTokens(role) {
				ok = ok || t == *preset
			}
			if !ok {
				errs = append(errs, problem.FieldError{Field: presetField,
					Message: fmt.Sprintf("the %s role accepts the presets %s", role, strings.Join(PresetTokens(role), ", "))})
			}
			out[role] = ThemeFont{Preset: *preset}
		case base != nil:
			out[role] = base[role]
		default:
			out[role] = ThemeFont{Preset: DefaultPreset(role).Token}
		}
	}
	return out, errs
}

// UnknownFamilyFields names the request fields of the roles whose family is not in the
// workspace.
func UnknownFamilyFields(roles []string) error {
	var fields []problem.FieldError
	for _, role := range roles {
		fields = append(fields, problem.FieldError{Field: role + "_font_family_id", Message: "no font family with this ID in the workspace"})
	}
	return problem.Invalid(fields...)
}

// ThemeRoleFont is a theme's typography for one role.
type ThemeRoleFont struct {
	Source        string `json:"source"`
	FamilyID      string `json:"family_id,omitempty"`
	FontFamily    string `json:"font_family,omitempty"`
	FontPreset    string `json:"font_preset,omitempty"`
	CSSFontFamily string `json:"css_font_family"`
	BundleURL     string `json:"bundle_url,omitempty"`
}

// ThemeTypography is a theme's typography by role.
type ThemeTypography struct {
	Heading ThemeRoleFont `json:"heading"`
	Body    ThemeRoleFont `json:"body"`
	Code    ThemeRoleFont `json:"code"`
}

// FontBundlePath is the address of a family's @font-face stylesheet.
func FontBundlePath(workspaceID, familyID string) string {
	return "/workspaces/" + workspaceID + "/font-families/" + familyID + "/bundle.css"
}

func roleFont(workspaceID, role string, f ThemeFont) ThemeRoleFont {
	if f.FamilyID != "" {
		return ThemeRoleFont{Source: "family", FamilyID: f.FamilyID, FontFamily: f.FamilyName,
			CSSFontFamily: CSSString(f.FamilyName) + ", " + DefaultPreset(role).Family,
			BundleURL:     FontBundlePath(workspaceID, f.FamilyID)}
	}
	css := DefaultPreset(role).Family
	for _, p := range FontPresets {
		if p.Token == f.Preset {
			css = p.Family
		}
	}
	return ThemeRoleFont{Source: "preset", FontPreset: f.Preset, CSSFontFamily: css}
}

// Typography is a stored theme's typography.
func Typography(workspaceID string, t Theme) ThemeTypography {
	return ThemeTypography{
		Heading: roleFont(workspaceID, "heading", t.Fonts["heading"]),
		Body:    roleFont(workspaceID, "body", t.Fonts["body"]),
		Code:    roleFont(workspaceID, "code", t.Fonts["code"]),
	}
}

// ThemeCSS renders a theme's custom properties and a :root rule declaring them in a fixed order.
func ThemeCSS(t Theme, typo ThemeTypography) (map[string]string, string) {
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
