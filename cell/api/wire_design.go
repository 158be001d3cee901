package api

import (
	"slidecells/cell/design"
)

// The design system's value shapes as the API shows them, with their schema tags; each converts
// from design's struct of the same name.

// StylePresentation is the normalised presentation of a style snapshot: every field present.
type StylePresentation struct {
	PageWidth         int     `json:"page_width"`
	PageHeight        int     `json:"page_height"`
	AspectRatio       string  `json:"aspect_ratio" doc:"page_width:page_height, reduced"`
	ThemeKey          *string `json:"theme_key" doc:"null when the style names no theme"`
	DefaultLayout     string  `json:"default_layout"`
	Background        string  `json:"background"`
	FontScale         float64 `json:"font_scale"`
	StyleSpecMarkdown string  `json:"style_spec_markdown"`
}

// StyleSnapshot is what a style stores: the same whichever form the request used.
type StyleSnapshot struct {
	Schema       string            `json:"schema" doc:"snapshot format, style-snapshot.v1"`
	Presentation StylePresentation `json:"presentation"`
}

func snapshotWire(s design.StyleSnapshot) StyleSnapshot {
	return StyleSnapshot{Schema: s.Schema, Presentation: StylePresentation(s.Presentation)}
}

// ThemeRoleFont is a theme's typography for one role.
type ThemeRoleFont struct {
	Source        string `json:"source" enum:"family,preset"`
	FamilyID      string `json:"family_id,omitempty" doc:"the bound workspace font family (ffam_…)"`
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

func typographyWire(t design.ThemeTypography) ThemeTypography {
	return ThemeTypography{Heading: ThemeRoleFont(t.Heading), Body: ThemeRoleFont(t.Body), Code: ThemeRoleFont(t.Code)}
}

// FontPreset is a platform font preset.
type FontPreset struct {
	Token    string   `json:"token"`
	Roles    []string `json:"roles"`
	Family   string   `json:"family" doc:"the CSS font-family stack the preset stands for"`
	Portable bool     `json:"portable" doc:"true when it renders the same on every client (fonts shipped by the platform)"`
}
