package api

import (
	"context"
	"fmt"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/auth"
	"slidecells/cell/design"
	"slidecells/cell/store"
)

// StylePresentationFields are the presentation fields of a style request (the wire shape of
// design.StylePresentationFields), with their limits published from the canvas and the layout
// list so they are stated once. All are optional: absent ones take their default (create) or
// keep their value (update).
type StylePresentationFields struct {
	PageWidth         *int     `json:"page_width,omitempty" minimum:"1" doc:"page width in CSS px (default 1280)"`
	PageHeight        *int     `json:"page_height,omitempty" minimum:"1" doc:"page height in CSS px (default 720)"`
	AspectRatio       *string  `json:"aspect_ratio,omitempty" pattern:"^[1-9][0-9]{0,4}:[1-9][0-9]{0,4}$" doc:"W:H; when given it must equal page_width:page_height; the snapshot always carries the reduced ratio"`
	ThemeKey          *string  `json:"theme_key,omitempty" nullable:"true" pattern:"^[a-z][a-z0-9-]{0,63}$" doc:"key of a live theme of the workspace; null or absent for none"`
	DefaultLayout     *string  `json:"default_layout,omitempty" doc:"layout of new pages (default title-content)"`
	Background        *string  `json:"background,omitempty" pattern:"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$" doc:"page background, CSS hex color (default #ffffff); stored lower case with 6 or 8 digits"`
	FontScale         *float64 `json:"font_scale,omitempty" minimum:"0.5" maximum:"2" doc:"typography scale factor (default 1), rounded to 2 decimals"`
	StyleSpecMarkdown *string  `json:"style_spec_markdown,omitempty" doc:"free-form style guide in Markdown, at most 64 KiB (UTF-8 bytes)"`
}

// presentationFields is the domain's copy of the fields (nil when absent).
func presentationFields(p *StylePresentationFields) *design.StylePresentationFields {
	if p == nil {
		return nil
	}
	f := design.StylePresentationFields(*p)
	return &f
}

// TransformSchema takes the limits from the canvas and the layout list.
func (StylePresentationFields) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	return stylePresentationSchema(s)
}

func stylePresentationSchema(s *huma.Schema) *huma.Schema {
	side := float64(design.MaxPageSide())
	for _, k := range []string{"page_width", "page_height"} {
		if p := s.Properties[k]; p != nil {
			p.Maximum = &side
			p.Description += fmt.Sprintf("; 1..%d, and page_width × page_height ≤ %d", design.MaxPageSide(), design.MaxPagePixels())
		}
	}
	if p := s.Properties["default_layout"]; p != nil {
		p.Enum = nil
		for _, l := range design.StyleLayouts {
			p.Enum = append(p.Enum, l)
		}
	}
	if p := s.Properties["style_spec_markdown"]; p != nil {
		n := design.MaxStyleSpecBytes
		p.MaxLength = &n
	}
	return s
}

// StyleConfiguration is form A's wrapper.
type StyleConfiguration struct {
	Presentation StylePresentationFields `json:"presentation"`
}

// StyleCreateFormA is the nested form of a style creation.
type StyleCreateFormA struct {
	Name          string             `json:"name" minLength:"1" maxLength:"200"`
	Configuration StyleConfiguration `json:"configuration" doc:"form A: the presentation nested under configuration.presentation"`
}

// StyleCreateFormB is the flat form of a style creation.
type StyleCreateFormB struct {
	Name string `json:"name" minLength:"1" maxLength:"200"`
	StylePresentationFields
}

// TransformSchema applies the presentation limits to the flattened fields.
func (StyleCreateFormB) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	s.Description = "form B: the presentation fields at the top level"
	return stylePresentationSchema(s)
}

// StyleUpdateFormA is the nested form of a style update.
type StyleUpdateFormA struct {
	Version       int64              `json:"version" minimum:"1" doc:"the version you read"`
	Name          *string            `json:"name,omitempty" minLength:"1" maxLength:"200"`
	Configuration StyleConfiguration `json:"configuration" doc:"form A: presentation fields to change, nested under configuration.presentation"`
}

// StyleUpdateFormB is the flat form of a style update (also the form of a name-only update).
type StyleUpdateFormB struct {
	Version int64   `json:"version" minimum:"1" doc:"the version you read"`
	Name    *string `json:"name,omitempty" minLength:"1" maxLength:"200"`
	StylePresentationFields
}

// TransformSchema applies the presentation limits to the flattened fields.
func (StyleUpdateFormB) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	s.Description = "form B: presentation fields to change at the top level"
	return stylePresentationSchema(s)
}

// styleBody is a style request body parsed by design.StyleRequest, so that every problem gets
// its own field path.
type styleBody struct {
	req design.StyleRequest
}

// UnmarshalJSON keeps the raw object for Resolve.
func (b *styleBody) UnmarshalJSON(data []byte) error { return b.req.Unmarshal(data) }

func (b *styleBody) resolve(update bool) []error {
	var errs []error
	for _, fe := range b.req.Parse(update) {
		errs = append(errs, &huma.ErrorDetail{Location: fe.Field, Message: fe.Message})
	}
	return errs
}

// oneOfForms is the schema of a body that is form A or form B.
func oneOfForms[A, B any](r huma.Registry, description string) *huma.Schema {
	return &huma.Schema{Description: description, OneOf: []*huma.Schema{
		r.Schema(reflect.TypeFor[A](), true, reflect.TypeFor[A]().Name()),
		r.Schema(reflect.TypeFor[B](), true, reflect.TypeFor[B]().Name()),
	}}
}

// StyleCreateBody is either form of a style creation; see StyleCreateFormA and StyleCreateFormB.
type StyleCreateBody struct{ styleBody }

// Schema publishes both accepted forms.
func (StyleCreateBody) Schema(r huma.Registry) *huma.Schema {
	return oneOfForms[StyleCreateFormA, StyleCreateFormB](r, "a style: form A nests the presentation under configuration.presentation, form B puts the same fields at the top level; both normalise to the same snapshot")
}

// Resolve parses the body with a field path for every problem.
func (b *StyleCreateBody) Resolve(huma.Context) []error { return b.resolve(false) }

// StyleUpdateBody is either form of a style update; see StyleUpdateFormA and StyleUpdateFormB.
type StyleUpdateBody struct{ styleBody }

// Schema publishes both accepted forms.
func (StyleUpdateBody) Schema(r huma.Registry) *huma.Schema {
	return oneOfForms[StyleUpdateFormA, StyleUpdateFormB](r, "changes to a style: the version read, optionally a new name, and presentation fields to change in form A or form B (absent fields keep their value; theme_key null clears it)")
}

// Resolve parses the body with a field path for every problem.
func (b *StyleUpdateBody) Resolve(huma.Context) []error { return b.resolve(true) }

// Baseline is the version the update was read at (the body's version field).
func (b *StyleUpdateBody) Baseline() int64 { return b.req.Version() }

func (s *Server) registerStyles(st *store.Store) {
	RegisterKind(s, st, Kind[design.Style, StyleView]{Rows: store.Bind(st, store.Styles), Read: auth.DesignSystemRead, Write: auth.DesignSystemWrite,
		View: StyleOf, CreateSummary: "Create a style (two accepted body forms, one snapshot)",
		UpdateSummary: "Change a style's name or presentation fields (either body form; version-locked)"}, createStyle, updateStyle)
}

type createStyleIn = struct {
	Body StyleCreateBody
}

func createStyle(ctx context.Context, st *store.Store, sc auth.Scope, in *createStyleIn) (design.Style, error) {
	req := &in.Body.req
	y, err := req.NewStyle()
	if err != nil {
		return y, err
	}
	y, err = st.CreateStyle(ctx, sc, y)
	return y, req.StoreErr(err)
}

type updateStyleIn = struct {
	ObjectID
	Body StyleUpdateBody
}

func updateStyle(ctx context.Context, st *store.Store, sc auth.Scope, in *updateStyleIn) (design.Style, error) {
	req := &in.Body.req
	y, err := st.UpdateStyle(ctx, sc, in.ID(), req.Version(), req.Change)
	return y, req.StoreErr(err)
}
