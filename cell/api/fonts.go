package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/cell/design"
	"slidecells/cell/store"
	"slidecells/shared/digest"
	"slidecells/shared/problem"
)

// Editor-facing workspace font endpoints: families (list with faces, rename, delete), faces
// (create, read, update, delete) and the per-family @font-face bundle. They live outside /api/v1
// with the workspace in the path, as the specification lists them.

// FontFamilyDeleted reports a removed family.
type FontFamilyDeleted struct {
	Body struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
}

// FontFaceDeleted reports a removed face and whether its family went with it.
type FontFaceDeleted struct {
	Body struct {
		ID            string `json:"id"`
		Deleted       bool   `json:"deleted"`
		FamilyID      string `json:"family_id"`
		FamilyRemoved bool   `json:"family_removed" doc:"true when this was the family's last face and no theme binds the family"`
	}
}

// FontBundle is a family's @font-face stylesheet.
type FontBundle struct {
	ContentType  string `header:"Content-Type"`
	CacheControl string `header:"Cache-Control"`
	ETag         string `header:"ETag"`
	Body         []byte
}

// FontWeight is a face's font_weight in a request: a JSON number (400) or the string of one
// weight or a range ("400", "100 900").
type FontWeight string

// UnmarshalJSON accepts a number or a string.
func (w *FontWeight) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] != '"' {
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			return err
		}
		s = n.String()
	} else if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*w = FontWeight(s)
	return nil
}

// Schema publishes both forms.
func (FontWeight) Schema(huma.Registry) *huma.Schema {
	lo, hi := 1.0, 1000.0
	return &huma.Schema{
		Description: "one weight as a number (400) or a string (\"400\"), or a range \"100 900\" (minimum <= maximum), each 1..1000; default 400 on create",
		OneOf: []*huma.Schema{
			{Type: huma.TypeInteger, Minimum: &lo, Maximum: &hi},
			{Type: huma.TypeString, Pattern: "^[0-9]{1,4}( [0-9]{1,4})?$"},
		},
	}
}

// FontFaceFields are the face descriptors shared by create and update.
type FontFaceFields struct {
	FontWeight   *FontWeight `json:"font_weight,omitempty"`
	FontStyle    *string     `json:"font_style,omitempty" enum:"normal,italic,oblique" doc:"default normal on create"`
	FontDisplay  *string     `json:"font_display,omitempty" enum:"auto,block,swap,fallback,optional" doc:"default swap on create"`
	UnicodeRange *string     `json:"unicode_range,omitempty" maxLength:"1024" doc:"comma-separated U+XXXX, U+XXXX-YYYY or U+4?? ranges (at most 64, up to U+10FFFF); empty means all code points"`
	Enabled      *bool       `json:"enabled,omitempty" doc:"default true on create"`
}

func (f FontFaceFields) descriptors(familyName *string) design.FaceDescriptors {
	return design.FaceDescriptors{FamilyName: familyName, FontWeight: (*string)(f.FontWeight), FontStyle: f.FontStyle,
		FontDisplay: f.FontDisplay, UnicodeRange: f.UnicodeRange, Enabled: f.Enabled}
}

// FontFaceCreateBody creates a face.
type FontFaceCreateBody struct {
	FamilyName string `json:"family_name" minLength:"1" maxLength:"100" doc:"the family is found (case-insensitively) or created by this name"`
	AssetID    string `json:"asset_id" pattern:"^ast_[a-z2-7]{26}$" doc:"an uploaded font asset of the workspace (woff2, woff, ttf, otf)"`
	FontFaceFields
}

// FontFaceUpdateBody changes a face; absent fields keep their value.
type FontFaceUpdateBody struct {
	Version    int64   `json:"version" minimum:"1" doc:"the version you read"`
	FamilyName *string `json:"family_name,omitempty" minLength:"1" maxLength:"100" doc:"moves the face to this family (found or created by name)"`
	AssetID    *string `json:"asset_id,omitempty" pattern:"^ast_[a-z2-7]{26}$"`
	FontFaceFields
}

// fonts are the font family and face operations.
type fonts struct {
	st     *store.Store
	assets *content.Assets
}

const (
	fontFamiliesPath = "/workspaces/{workspace_id}/font-families"
	fontFacesPath    = "/workspaces/{workspace_id}/fonts"
)

func fontOp(id, method, path, summary string, scope auth.Permission) Operation {
	return Op(id, method, path, summary, "fonts", scope)
}

func (s *Server) registerFonts(st *store.Store) {
	h := &fonts{st: st, assets: s.assets(st)}
	read, write := auth.DesignSystemRead, auth.DesignSystemWrite
	family, face := fontFamiliesPath+"/{family_id}", fontFacesPath+"/{font_id}"
	Scoped(s, fontOp("list-font-families", http.MethodGet, fontFamiliesPath, "List the workspace's font families, each with all its faces", read), h.listFamilies)
	Scoped(s, fontOp("get-font-family", http.MethodGet, family, "One font family with all its faces", read), h.getFamily)
	rename := fontOp("rename-font-family", http.MethodPatch, family, "Rename a font family (unique per workspace, case-insensitively; version-locked)", write)
	rename.Lock = VersionLock
	Scoped(s, rename, h.renameFamily)
	Scoped(s, fontOp("delete-font-family", http.MethodDelete, family, "Delete a font family without faces and theme bindings (the one hard delete the specification names)", write), h.deleteFamily)
	bundle := fontOp("get-font-family-bundle", http.MethodGet, family+"/bundle.css", "The family's @font-face stylesheet: every enabled face, with immutable content URLs", read)
	bundle.Produces = &Media{Types: []string{"text/css"}, Description: "text/css with one @font-face rule per enabled face"}
	Scoped(s, bundle, h.bundle)
	create := fontOp("create-font-face", http.MethodPost, fontFacesPath, "Add a font face; its family is found or created by name", write)
	create.Lock = CreateOnly
	Scoped(s, create, h.createFace)
	Scoped(s, fontOp("get-font-face", http.MethodGet, face, "One font face", read), h.getFace)
	update := fontOp("update-font-face", http.MethodPatch, face, "Change a font face or move it to another family by name (version-locked)", write)
	update.Lock = VersionLock
	Scoped(s, update, h.updateFace)
	Scoped(s, fontOp("delete-font-face", http.MethodDelete, face, "Delete a font face; the last face takes its family along unless a theme binds the family", write), h.deleteFace)
}

func (h *fonts) listFamilies(ctx context.Context, sc auth.Scope, in *ListQuery) (*Page[FontFamilyView], error) {
	ms, err := h.st.ListFontFamilies(ctx, sc, in.Position(), in.Limit+1)
	if err != nil {
		return nil, err
	}
	return paginate(ms, *in, func(m design.FontFamily) string { return m.ID },
		func(m design.FontFamily) (FontFamilyView, error) { return FamilyOf(sc, m) })
}

func (h *fonts) getFamily(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[FontFamilyView], error) {
	return one(sc, FamilyOf)(h.st.GetFontFamily(ctx, sc, in.ID()))
}

type renameFamilyIn = struct {
	ObjectID
	Body struct {
		Version int64  `json:"version" minimum:"1" doc:"the version you read"`
		Name    string `json:"name" minLength:"1" maxLength:"100"`
	}
}

func (h *fonts) renameFamily(ctx context.Context, sc auth.Scope, in *renameFamilyIn) (*Single[FontFamilyView], error) {
	name, msg := design.CheckFamilyName(in.Body.Name)
	if msg != "" {
		return nil, problem.Invalid(problem.FieldError{Field: "body.name", Message: msg})
	}
	return one(sc, FamilyOf)(h.st.RenameFontFamily(ctx, sc, in.ID(), in.Body.Version, name))
}

func (h *fonts) deleteFamily(ctx context.Context, sc auth.Scope, in *ObjectID) (*FontFamilyDeleted, error) {
	if err := h.st.DeleteFontFamily(ctx, sc, in.ID()); err != nil {
		return nil, err
	}
	out := &FontFamilyDeleted{}
	out.Body.ID, out.Body.Deleted = in.ID(), true
	return out, nil
}

func (h *fonts) bundle(ctx context.Context, sc auth.Scope, in *ObjectID) (*FontBundle, error) {
	css, err := h.assets.FontBundle(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	return &FontBundle{ContentType: "text/css; charset=utf-8", CacheControl: "private, no-cache",
		ETag: `"` + digest.Bytes(css) + `"`, Body: css}, nil
}

type createFaceIn = struct {
	Body FontFaceCreateBody
}

func (h *fonts) createFace(ctx context.Context, sc auth.Scope, in *createFaceIn) (*Created[FontFaceView], error) {
	f, err := in.Body.descriptors(&in.Body.FamilyName).NewFace(in.Body.AssetID)
	if err != nil {
		return nil, err
	}
	face, err := h.st.CreateFontFace(ctx, sc, f)
	if err != nil {
		return nil, design.FaceErr(err)
	}
	v, _ := FaceOf(sc, face)
	return &Created[FontFaceView]{Location: "/workspaces/" + sc.WorkspaceID() + "/fonts/" + face.ID, Body: v}, nil
}

func (h *fonts) getFace(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[FontFaceView], error) {
	return one(sc, FaceOf)(h.st.GetFontFace(ctx, sc, in.ID()))
}

type updateFaceIn = struct {
	ObjectID
	Body FontFaceUpdateBody
}

func (h *fonts) updateFace(ctx context.Context, sc auth.Scope, in *updateFaceIn) (*Single[FontFaceView], error) {
	// The face must be the caller's before anything about the request is judged.
	if _, err := h.st.GetFontFace(ctx, sc, in.ID()); err != nil {
		return nil, err
	}
	p, errs := in.Body.descriptors(in.Body.FamilyName).Check()
	if len(errs) > 0 {
		return nil, problem.Invalid(errs...)
	}
	p.AssetID = in.Body.AssetID
	f, err := h.st.UpdateFontFace(ctx, sc, in.ID(), in.Body.Version, p)
	return one(sc, FaceOf)(f, design.FaceErr(err))
}

func (h *fonts) deleteFace(ctx context.Context, sc auth.Scope, in *ObjectID) (*FontFaceDeleted, error) {
	famID, removed, err := h.st.DeleteFontFace(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	out := &FontFaceDeleted{}
	out.Body.ID, out.Body.Deleted, out.Body.FamilyID, out.Body.FamilyRemoved = in.ID(), true, famID, removed
	return out, nil
}
