package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/store"
	"slidecells/shared/digest"
	"slidecells/shared/problem"
)

// A style is a name plus one presentation snapshot. Create and update accept the presentation in
// two forms that normalise to the same snapshot:
//
//	form A: {"name": …, "configuration": {"presentation": {…}}}
//	form B: {"name": …, <the same presentation fields at the top level>}
//
// A body that mixes them, or (on create) has neither, is a 422.

// Presentation limits and defaults. Page sizes are CSS pixels on the render canvas: with the
// canvas' device scale factor each side must stay within its physical side limit and the page
// within its physical pixel budget (see standards.go, canvas).
const (
	styleSnapshotSchema  = "style-snapshot.v1"
	maxStyleSpecBytes    = 64 << 10
	minFontScale         = 0.5
	maxFontScale         = 2.0
	defaultStyleLayout   = "title-content"
	defaultStyleBG       = "#ffffff"
	maxStyleName         = 200
	formAPrefix          = "body.configuration.presentation."
	formBPrefix          = "body."
	styleThemeKeyPattern = `^[a-z][a-z0-9-]{0,63}$`
)

// styleLayouts are the accepted default_layout values.
var styleLayouts = []string{"blank", "title", "title-content", "two-column", "section", "image"}

var styleThemeKey = regexp.MustCompile(styleThemeKeyPattern)

func maxPageSide() int { return canvas.MaxSidePixels / canvas.DeviceScaleFactor }

func maxPagePixels() int {
	return canvas.MaxPhysicalPixels / (canvas.DeviceScaleFactor * canvas.DeviceScaleFactor)
}

// StylePresentationFields are the presentation fields of a style request; all are optional and
// absent ones take their default (create) or keep their value (update).
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

// TransformSchema takes the limits from the canvas and the layout list, so they are stated once.
func (StylePresentationFields) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	return stylePresentationSchema(s)
}

func stylePresentationSchema(s *huma.Schema) *huma.Schema {
	side := float64(maxPageSide())
	for _, k := range []string{"page_width", "page_height"} {
		if p := s.Properties[k]; p != nil {
			p.Maximum = &side
			p.Description += fmt.Sprintf("; 1..%d, and page_width × page_height ≤ %d", maxPageSide(), maxPagePixels())
		}
	}
	if p := s.Properties["default_layout"]; p != nil {
		p.Enum = nil
		for _, l := range styleLayouts {
			p.Enum = append(p.Enum, l)
		}
	}
	if p := s.Properties["style_spec_markdown"]; p != nil {
		n := maxStyleSpecBytes
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

// styleRequest is a parsed style body: which form, the name and version, and the presentation
// fields that were given. Parsing is by hand so that every problem gets its own field path.
type styleRequest struct {
	decoded bool
	raw     map[string]json.RawMessage

	form    string // "A", "B", or "" (an update without presentation fields)
	prefix  string // field path prefix of the presentation fields
	name    *string
	version int64
	fields  StylePresentationFields
	// themeKeySet is true when theme_key was given, even as null (which clears it).
	themeKeySet bool
}

func (r *styleRequest) unmarshal(data []byte) error {
	r.decoded = true
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(&r.raw)
}

func fieldErr(path, msg string) error { return &huma.ErrorDetail{Location: path, Message: msg} }

// presentationKeys are the JSON names of the presentation fields, read from the Go type.
var presentationKeys = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[StylePresentationFields]()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}()

func sortedKeys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parse reads the raw body. update selects the update shape (version, optional name, optional
// presentation).
func (r *styleRequest) parse(update bool) []error {
	if !r.decoded || r.raw == nil {
		return nil // not a JSON object: the schema validation already says so
	}
	var errs []error
	var top []string
	_, hasConfig := r.raw["configuration"]
	for _, k := range sortedKeys(r.raw) {
		switch {
		case k == "name" || k == "configuration" || (update && k == "version"):
		case presentationKeys[k]:
			top = append(top, k)
		default:
			errs = append(errs, fieldErr("body."+k, "unknown field"))
		}
	}
	// name and version
	if v, ok := r.raw["name"]; ok {
		var name string
		if err := json.Unmarshal(v, &name); err != nil {
			errs = append(errs, fieldErr("body.name", "must be a string"))
		} else if n := utf8.RuneCountInString(name); n < 1 || n > maxStyleName {
			errs = append(errs, fieldErr("body.name", fmt.Sprintf("must be 1 to %d characters", maxStyleName)))
		} else {
			r.name = &name
		}
	} else if !update {
		errs = append(errs, fieldErr("body.name", "required"))
	}
	if update {
		v, ok := r.raw["version"]
		if err := json.Unmarshal(v, &r.version); !ok || err != nil || r.version < 1 {
			errs = append(errs, fieldErr("body.version", "required: the version you read (an integer >= 1)"))
		}
	}
	// form
	var pres map[string]json.RawMessage
	switch {
	case hasConfig && len(top) > 0:
		msg := fmt.Sprintf("use one form: configuration.presentation (form A) or top-level presentation fields (form B), not both; top-level fields given: %v", top)
		return append(errs, fieldErr("body", msg))
	case hasConfig:
		r.form, r.prefix = "A", formAPrefix
		var cfg map[string]json.RawMessage
		if err := json.Unmarshal(r.raw["configuration"], &cfg); err != nil || cfg == nil {
			return append(errs, fieldErr("body.configuration", "must be an object with a presentation object"))
		}
		for _, k := range sortedKeys(cfg) {
			if k != "presentation" {
				errs = append(errs, fieldErr("body.configuration."+k, "unknown field"))
			}
		}
		if err := json.Unmarshal(cfg["presentation"], &pres); err != nil || pres == nil {
			return append(errs, fieldErr("body.configuration.presentation", "must be an object"))
		}
		for _, k := range sortedKeys(pres) {
			if !presentationKeys[k] {
				errs = append(errs, fieldErr(formAPrefix+k, "unknown field"))
			}
		}
	case len(top) > 0:
		r.form, r.prefix = "B", formBPrefix
		pres = r.raw
	case !update:
		return append(errs, fieldErr("body", "the presentation is missing: send configuration.presentation (form A) or the presentation fields at the top level (form B)"))
	default:
		return errs
	}
	return append(errs, r.decodePresentation(pres)...)
}

// decodePresentation reads and checks each presentation field on its own.
func (r *styleRequest) decodePresentation(pres map[string]json.RawMessage) []error {
	var errs []error
	f := &r.fields
	bad := func(k, msg string) { errs = append(errs, fieldErr(r.prefix+k, msg)) }
	str := func(k string) (string, bool) {
		var s string
		if err := json.Unmarshal(pres[k], &s); err != nil || string(pres[k]) == "null" {
			bad(k, "must be a string")
			return "", false
		}
		return s, true
	}
	side := func(k string) *int {
		n, err := strconv.Atoi(string(pres[k]))
		if err != nil {
			bad(k, "must be an integer")
			return nil
		}
		if n < 1 || n > maxPageSide() {
			bad(k, fmt.Sprintf("must be within 1..%d CSS px (the canvas' physical side limit is %d px at device scale %d)",
				maxPageSide(), canvas.MaxSidePixels, canvas.DeviceScaleFactor))
			return nil
		}
		return &n
	}
	for _, k := range sortedKeys(pres) {
		switch k {
		case "page_width":
			f.PageWidth = side(k)
		case "page_height":
			f.PageHeight = side(k)
		case "aspect_ratio":
			if s, ok := str(k); ok {
				if _, _, ok := parseRatio(s); !ok {
					bad(k, `must be "W:H" with positive integers, e.g. "16:9"`)
				} else {
					f.AspectRatio = &s
				}
			}
		case "theme_key":
			r.themeKeySet = true
			if string(pres[k]) == "null" {
				break
			}
			if s, ok := str(k); ok {
				if !styleThemeKey.MatchString(s) {
					bad(k, "must be a theme key: "+styleThemeKeyPattern)
				} else {
					f.ThemeKey = &s
				}
			}
		case "default_layout":
			if s, ok := str(k); ok {
				found := false
				for _, l := range styleLayouts {
					found = found || l == s
				}
				if !found {
					bad(k, fmt.Sprintf("must be one of %v", styleLayouts))
				} else {
					f.DefaultLayout = &s
				}
			}
		case "background":
			if s, ok := str(k); ok {
				if !hexColor.MatchString(s) {
					bad(k, "must be a CSS hex color: #rgb, #rgba, #rrggbb or #rrggbbaa")
				} else {
					s = normalizeHex(s)
					f.Background = &s
				}
			}
		case "font_scale":
			x, err := strconv.ParseFloat(string(pres[k]), 64)
			if err != nil {
				bad(k, "must be a number")
			} else if x = math.Round(x*100) / 100; x < minFontScale || x > maxFontScale {
				bad(k, fmt.Sprintf("must be within %.1f..%.1f", minFontScale, maxFontScale))
			} else {
				f.FontScale = &x
			}
		case "style_spec_markdown":
			if s, ok := str(k); ok {
				if len(s) > maxStyleSpecBytes {
					bad(k, fmt.Sprintf("must be at most %d bytes (64 KiB)", maxStyleSpecBytes))
				} else {
					f.StyleSpecMarkdown = &s
				}
			}
		}
	}
	return errs
}

func parseRatio(s string) (int, int, bool) {
	w, h, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(w)
	b, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || a < 1 || b < 1 {
		return 0, 0, false
	}
	return a, b, true
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func reducedRatio(w, h int) string {
	g := gcd(w, h)
	return strconv.Itoa(w/g) + ":" + strconv.Itoa(h/g)
}

// StyleCreateBody is either form of a style creation; see StyleCreateFormA and StyleCreateFormB.
type StyleCreateBody struct {
	req styleRequest
}

// Schema publishes both accepted forms.
func (StyleCreateBody) Schema(r huma.Registry) *huma.Schema {
	return &huma.Schema{
		Description: "a style: form A nests the presentation under configuration.presentation, form B puts the same fields at the top level; both normalise to the same snapshot",
		OneOf: []*huma.Schema{
			r.Schema(reflect.TypeFor[StyleCreateFormA](), true, "StyleCreateFormA"),
			r.Schema(reflect.TypeFor[StyleCreateFormB](), true, "StyleCreateFormB"),
		},
	}
}

// UnmarshalJSON keeps the raw object for Resolve.
func (b *StyleCreateBody) UnmarshalJSON(data []byte) error { return b.req.unmarshal(data) }

// Resolve parses the body with a field path for every problem.
func (b *StyleCreateBody) Resolve(huma.Context) []error { return b.req.parse(false) }

// StyleUpdateBody is either form of a style update; see StyleUpdateFormA and StyleUpdateFormB.
type StyleUpdateBody struct {
	req styleRequest
}

// Schema publishes both accepted forms.
func (StyleUpdateBody) Schema(r huma.Registry) *huma.Schema {
	return &huma.Schema{
		Description: "changes to a style: the version read, optionally a new name, and presentation fields to change in form A or form B (absent fields keep their value; theme_key null clears it)",
		OneOf: []*huma.Schema{
			r.Schema(reflect.TypeFor[StyleUpdateFormA](), true, "StyleUpdateFormA"),
			r.Schema(reflect.TypeFor[StyleUpdateFormB](), true, "StyleUpdateFormB"),
		},
	}
}

// UnmarshalJSON keeps the raw object for Resolve.
func (b *StyleUpdateBody) UnmarshalJSON(data []byte) error { return b.req.unmarshal(data) }

// Resolve parses the body with a field path for every problem.
func (b *StyleUpdateBody) Resolve(huma.Context) []error { return b.req.parse(true) }

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

func defaultStylePresentation() StylePresentation {
	return StylePresentation{PageWidth: canvas.Width, PageHeight: canvas.Height, DefaultLayout: defaultStyleLayout,
		Background: defaultStyleBG, FontScale: 1}
}

// apply lays the request's fields over base and checks what involves several fields.
func (r *styleRequest) apply(base StylePresentation) (StylePresentation, []problem.FieldError) {
	p, f := base, r.fields
	if f.PageWidth != nil {
		p.PageWidth = *f.PageWidth
	}
	if f.PageHeight != nil {
		p.PageHeight = *f.PageHeight
	}
	if r.themeKeySet {
		p.ThemeKey = f.ThemeKey
	}
	if f.DefaultLayout != nil {
		p.DefaultLayout = *f.DefaultLayout
	}
	if f.Background != nil {
		p.Background = *f.Background
	}
	if f.FontScale != nil {
		p.FontScale = *f.FontScale
	}
	if f.StyleSpecMarkdown != nil {
		p.StyleSpecMarkdown = *f.StyleSpecMarkdown
	}
	var errs []problem.FieldError
	if p.PageWidth*p.PageHeight > maxPagePixels() {
		errs = append(errs, problem.FieldError{Field: r.prefix + "page_height", Message: fmt.Sprintf(
			"page_width × page_height is %d; at device scale %d the canvas allows at most %d CSS px² (%d physical pixels)",
			p.PageWidth*p.PageHeight, canvas.DeviceScaleFactor, maxPagePixels(), canvas.MaxPhysicalPixels)})
	}
	p.AspectRatio = reducedRatio(p.PageWidth, p.PageHeight)
	if f.AspectRatio != nil {
		w, h, _ := parseRatio(*f.AspectRatio)
		if reducedRatio(w, h) != p.AspectRatio {
			errs = append(errs, problem.FieldError{Field: r.prefix + "aspect_ratio",
				Message: fmt.Sprintf("%s does not match page_width:page_height (%s)", *f.AspectRatio, p.AspectRatio)})
		}
	}
	return p, errs
}

// encodeSnapshot returns the canonical JSON of a snapshot and its digest.
func encodeSnapshot(p StylePresentation) (json.RawMessage, string, error) {
	b, err := digest.Canonical(StyleSnapshot{Schema: styleSnapshotSchema, Presentation: p})
	if err != nil {
		return nil, "", problem.Wrap(err, "cannot encode the style snapshot")
	}
	return b, digest.Bytes(b), nil
}

// StyleView is a style as the API shows it.
type StyleView struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Snapshot       StyleSnapshot     `json:"snapshot" doc:"the normalised presentation; identical for both request forms"`
	SnapshotDigest string            `json:"snapshot_digest" doc:"sha256 of the snapshot's canonical JSON"`
	CSSVariables   map[string]string `json:"css_variables" doc:"the style as CSS custom properties"`
	Version        int64             `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	CreatedBy      string            `json:"created_by"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

func decodeSnapshot(raw json.RawMessage) (StyleSnapshot, error) {
	var snap StyleSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		return snap, problem.Wrap(err, "cannot decode the style snapshot")
	}
	return snap, nil
}

func styleView(y store.Style) (StyleView, error) {
	snap, err := decodeSnapshot(y.Snapshot)
	if err != nil {
		return StyleView{}, err
	}
	p := snap.Presentation
	vars := map[string]string{
		"--page-width":      strconv.Itoa(p.PageWidth) + "px",
		"--page-height":     strconv.Itoa(p.PageHeight) + "px",
		"--page-background": p.Background,
		"--font-scale":      strconv.FormatFloat(p.FontScale, 'f', -1, 64),
	}
	return StyleView{ID: y.ID, Name: y.Name, Snapshot: snap, SnapshotDigest: y.SnapshotDigest, CSSVariables: vars,
		Version: y.Version, CreatedBy: y.CreatedBy, CreatedAt: y.CreatedAt, UpdatedAt: y.UpdatedAt}, nil
}

func themeKeyOf(p StylePresentation) string {
	if p.ThemeKey == nil {
		return ""
	}
	return *p.ThemeKey
}

// styleStoreErr turns an unknown theme key into a 422 at the field the request used.
func styleStoreErr(err error, prefix string) error {
	if errors.Is(err, store.ErrUnknownThemeKey) {
		return problem.Invalid(problem.FieldError{Field: prefix + "theme_key", Message: "no live theme with this key in the workspace"})
	}
	return err
}

// StylePath names a style.
type StylePath struct {
	StyleID string `path:"style_id" pattern:"^sty_[a-z2-7]{26}$" doc:"Style ID (sty_…)"`
}

// StyleOutput is one style.
type StyleOutput struct {
	Body StyleView
}

// StyleCreated is a new style.
type StyleCreated struct {
	Location string `header:"Location"`
	Body     StyleView
}

// StyleList is a page of styles.
type StyleList struct {
	Body struct {
		Items      []StyleView `json:"items"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}
}

type archiveStyle struct {
	WorkspaceHeader
	IdempotencyHeader
	StylePath
}

func (s *Server) registerStyles(st *store.Store) {
	tags := []string{"styles"}
	Register(s, Operation{ID: "create-style", Method: http.MethodPost, Path: "/api/v1/styles",
		Summary: "Create a style (two accepted body forms, one snapshot)", Tags: tags, Access: InWorkspace,
		Scopes: []string{"design-system:write"}, Idempotency: KeyRequired, Lock: CreateOnly},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			Body StyleCreateBody
		}) (*StyleCreated, error) {
			req := &in.Body.req
			p, errs := req.apply(defaultStylePresentation())
			if len(errs) > 0 {
				return nil, problem.Invalid(errs...)
			}
			snap, dg, err := encodeSnapshot(p)
			if err != nil {
				return nil, err
			}
			y, err := st.CreateStyle(ctx, ScopeFrom(ctx), store.Style{Name: *req.name, Snapshot: snap, SnapshotDigest: dg, ThemeKey: themeKeyOf(p)})
			if err != nil {
				return nil, styleStoreErr(err, req.prefix)
			}
			v, err := styleView(y)
			if err != nil {
				return nil, err
			}
			return &StyleCreated{Location: "/api/v1/styles/" + y.ID, Body: v}, nil
		})
	Register(s, Operation{ID: "list-styles", Method: http.MethodGet, Path: "/api/v1/styles", Summary: "List styles",
		Tags: tags, Access: InWorkspace, Scopes: []string{"design-system:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ListQuery
		}) (*StyleList, error) {
			ys, err := st.ListStyles(ctx, ScopeFrom(ctx), in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &StyleList{}
			views := make([]StyleView, 0, len(ys))
			for _, y := range ys {
				v, err := styleView(y)
				if err != nil {
					return nil, err
				}
				views = append(views, v)
			}
			out.Body.Items, out.Body.NextCursor = paginate(views, in.Limit,
				func(v StyleView) string { return v.ID }, func(v StyleView) StyleView { return v })
			return out, nil
		})
	Register(s, Operation{ID: "get-style", Method: http.MethodGet, Path: "/api/v1/styles/{style_id}", Summary: "Style detail",
		Tags: tags, Access: InWorkspace, Scopes: []string{"design-system:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			StylePath
		}) (*StyleOutput, error) {
			y, err := st.GetStyle(ctx, ScopeFrom(ctx), in.StyleID)
			if err != nil {
				return nil, err
			}
			v, err := styleView(y)
			if err != nil {
				return nil, err
			}
			return &StyleOutput{Body: v}, nil
		})
	Register(s, Operation{ID: "update-style", Method: http.MethodPatch, Path: "/api/v1/styles/{style_id}",
		Summary: "Change a style's name or presentation fields (either body form; version-locked)", Tags: tags,
		Access: InWorkspace, Scopes: []string{"design-system:write"}, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			StylePath
			Body StyleUpdateBody
		}) (*StyleOutput, error) {
			req := &in.Body.req
			y, err := st.UpdateStyle(ctx, ScopeFrom(ctx), in.StyleID, req.version, func(cur store.Style) (store.Style, error) {
				snap, err := decodeSnapshot(cur.Snapshot)
				if err != nil {
					return cur, err
				}
				p, errs := req.apply(snap.Presentation)
				if len(errs) > 0 {
					return cur, problem.Invalid(errs...)
				}
				next := cur
				if req.name != nil {
					next.Name = *req.name
				}
				next.ThemeKey = themeKeyOf(p)
				next.Snapshot, next.SnapshotDigest, err = encodeSnapshot(p)
				return next, err
			})
			if err != nil {
				return nil, styleStoreErr(err, req.prefix)
			}
			v, err := styleView(y)
			if err != nil {
				return nil, err
			}
			return &StyleOutput{Body: v}, nil
		})
	registerArchive(s, st, store.Styles, "style", "design-system:write", func(in *archiveStyle) string { return in.StyleID })
}
