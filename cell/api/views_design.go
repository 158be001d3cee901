package api

import (
	"slidecells/cell/auth/scope"
	"slidecells/cell/design"
	"slidecells/cell/object"
)

// The design system's objects as the API shows them.

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
	object.Stamps
}

// ThemeOf shows a stored theme, with its typography and CSS.
func ThemeOf(sc scope.Scope, t design.Theme) (ThemeView, error) {
	typo := design.Typography(sc.WorkspaceID(), t)
	vars, css := design.ThemeCSS(t, typo)
	return ThemeView{ID: t.ID, Key: t.Key, Name: t.Name, Colors: t.Colors, Spacing: t.Spacing, Radius: t.Radius,
		Typography: typographyWire(typo), CSSVariables: vars, CSS: css, Version: t.Version, Stamps: t.Stamps}, nil
}

// StyleView is a style as the API shows it.
type StyleView struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Snapshot       StyleSnapshot     `json:"snapshot" doc:"the normalised presentation; identical for both request forms"`
	SnapshotDigest string            `json:"snapshot_digest" doc:"sha256 of the snapshot's canonical JSON"`
	CSSVariables   map[string]string `json:"css_variables" doc:"the style as CSS custom properties"`
	Version        int64             `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	object.Stamps
}

// StyleOf shows a stored style.
func StyleOf(_ scope.Scope, y design.Style) (StyleView, error) {
	snap, err := design.DecodeSnapshot(y.Snapshot)
	if err != nil {
		return StyleView{}, err
	}
	return StyleView{ID: y.ID, Name: y.Name, Snapshot: snapshotWire(snap), SnapshotDigest: y.SnapshotDigest,
		CSSVariables: design.StyleCSSVariables(snap.Presentation),
		Version:      y.Version, Stamps: y.Stamps}, nil
}

// FontFaceView is a face as the API shows it.
type FontFaceView struct {
	ID           string `json:"id"`
	FamilyID     string `json:"family_id"`
	FontFamily   string `json:"font_family" doc:"the family's name (derived; change it by renaming the family or moving the face)"`
	AssetID      string `json:"asset_id" doc:"the uploaded font asset (woff2, woff, ttf or otf)"`
	FontWeight   string `json:"font_weight" doc:"one weight (\"400\") or a range (\"100 900\")"`
	FontStyle    string `json:"font_style" enum:"normal,italic,oblique"`
	FontDisplay  string `json:"font_display" enum:"auto,block,swap,fallback,optional"`
	UnicodeRange string `json:"unicode_range,omitempty" doc:"normalised, e.g. \"U+0000-00FF, U+0131\"; absent means all code points"`
	Enabled      bool   `json:"enabled" doc:"only enabled faces are in the family's bundle"`
	Version      int64  `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	object.Stamps
}

// FontFamilyView is a workspace font family with all of its faces.
type FontFamilyView struct {
	ID        string         `json:"id"`
	FamilyID  string         `json:"family_id" doc:"the family's ID (the same as id), as the specification names it"`
	Name      string         `json:"name" doc:"unique in the workspace, compared case-insensitively"`
	Version   int64          `json:"version" doc:"optimistic-lock baseline of a rename"`
	Faces     []FontFaceView `json:"faces" doc:"every face, enabled or not"`
	BundleURL string         `json:"bundle_url" doc:"the family's @font-face stylesheet (enabled faces only)"`
	object.Stamps
}

// FaceOf shows a stored face.
func FaceOf(_ scope.Scope, f design.FontFace) (FontFaceView, error) {
	return FontFaceView{ID: f.ID, FamilyID: f.FamilyID, FontFamily: f.FamilyName, AssetID: f.AssetID,
		FontWeight: design.FontWeightText(f.WeightMin, f.WeightMax), FontStyle: f.Style, FontDisplay: f.Display,
		UnicodeRange: f.UnicodeRange, Enabled: f.Enabled, Version: f.Version, Stamps: f.Stamps}, nil
}

// FamilyOf shows a stored family with its faces.
func FamilyOf(sc scope.Scope, m design.FontFamily) (FontFamilyView, error) {
	v := FontFamilyView{ID: m.ID, FamilyID: m.ID, Name: m.Name, Version: m.Version, Faces: []FontFaceView{},
		BundleURL: design.FontBundlePath(sc.WorkspaceID(), m.ID), Stamps: m.Stamps}
	for _, f := range m.Faces {
		fv, _ := FaceOf(sc, f)
		v.Faces = append(v.Faces, fv)
	}
	return v, nil
}
