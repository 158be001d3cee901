package design

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

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
// within its physical pixel budget (RenderCanvas).
const (
	styleSnapshotSchema  = "style-snapshot.v1"
	MaxStyleSpecBytes    = 64 << 10
	minFontScale         = 0.5
	maxFontScale         = 2.0
	defaultStyleLayout   = "title-content"
	defaultStyleBG       = "#ffffff"
	maxStyleName         = 200
	formAPrefix          = "configuration.presentation."
	formBPrefix          = ""
	styleThemeKeyPattern = `^[a-z][a-z0-9-]{0,63}$`
)

// StyleLayouts are the accepted default_layout values.
var StyleLayouts = []string{"blank", "title", "title-content", "two-column", "section", "image"}

var styleThemeKey = regexp.MustCompile(styleThemeKeyPattern)

// StylePresentationFields are the presentation fields of a style request; all are optional and
// absent ones take their default (create) or keep their value (update).
type StylePresentationFields struct {
	PageWidth         *int     `json:"page_width,omitempty"`
	PageHeight        *int     `json:"page_height,omitempty"`
	AspectRatio       *string  `json:"aspect_ratio,omitempty"`
	ThemeKey          *string  `json:"theme_key,omitempty"`
	DefaultLayout     *string  `json:"default_layout,omitempty"`
	Background        *string  `json:"background,omitempty"`
	FontScale         *float64 `json:"font_scale,omitempty"`
	StyleSpecMarkdown *string  `json:"style_spec_markdown,omitempty"`
}

// StyleRequest is a parsed style body: which form, the name and version, and the presentation
// fields that were given. Parsing is by hand so that every problem gets its own field path.
type StyleRequest struct {
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

// PresentationRequest is a request of presentation fields only (a project configuration's),
// with their field paths under prefix.
func PresentationRequest(f StylePresentationFields, prefix string) *StyleRequest {
	return &StyleRequest{fields: f, prefix: prefix, themeKeySet: f.ThemeKey != nil}
}

// Name is the requested name; nil when not given.
func (r *StyleRequest) Name() *string { return r.name }

// Version is the requested version baseline (updates).
func (r *StyleRequest) Version() int64 { return r.version }

// Prefix is the field path prefix of the presentation fields ("" or the form A prefix).
func (r *StyleRequest) Prefix() string { return r.prefix }

// StyleCSSVariables are a presentation's CSS custom properties.
func StyleCSSVariables(p StylePresentation) map[string]string {
	return map[string]string{
		"--page-width":      strconv.Itoa(p.PageWidth) + "px",
		"--page-height":     strconv.Itoa(p.PageHeight) + "px",
		"--page-background": p.Background,
		"--font-scale":      strconv.FormatFloat(p.FontScale, 'f', -1, 64),
	}
}

// Unmarshal keeps the raw JSON object of a body for Parse.
func (r *StyleRequest) Unmarshal(data []byte) error {
	r.decoded = true
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(&r.raw)
}

func fieldErr(path, msg string) problem.FieldError {
	return problem.FieldError{Field: path, Message: msg}
}

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

// Parse reads the raw body. update selects the update shape (version, optional name, optional
// presentation).
func (r *StyleRequest) Parse(update bool) []problem.FieldError {
	if !r.decoded || r.raw == nil {
		return nil // not a JSON object: the schema validation already says so
	}
	var errs []problem.FieldError
	var top []string
	_, hasConfig := r.raw["configuration"]
	for _, k := range sortedKeys(r.raw) {
		switch {
		case k == "name" || k == "configuration" || (update && k == "version"):
		case presentationKeys[k]:
			top = append(top, k)
		default:
			errs = append(errs, fieldErr(k, "unknown field"))
		}
	}
	// name and version
	if v, ok := r.raw["name"]; ok {
		var name string
		if err := json.Unmarshal(v, &name); err != nil {
			errs = append(errs, fieldErr("name", "must be a string"))
		} else if n := utf8.RuneCountInString(name); n < 1 || n > maxStyleName {
			errs = append(errs, fieldErr("name", fmt.Sprintf("must be 1 to %d characters", maxStyleName)))
		} else {
			r.name = &name
		}
	} else if !update {
		errs = append(errs, fieldErr("name", "required"))
	}
	if update {
		v, ok := r.raw["version"]
		if err := json.Unmarshal(v, &r.version); !ok || err != nil || r.version < 1 {
			errs = append(errs, fieldErr("version", "required: the version you read (an integer >= 1)"))
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
			return append(errs, fieldErr("configuration", "must be an object with a presentation object"))
		}
		for _, k := range sortedKeys(cfg) {
			if k != "presentation" {
				errs = append(errs, fieldErr("configuration."+k, "unknown field"))
			}
		}
		if err := json.Unmarshal(cfg["presentation"], &pres); err != nil || pres == nil {
			return append(errs, fieldErr("configuration.presentation", "must be an object"))
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
func (r *StyleRequest) decodePresentation(pres map[string]json.RawMessage) []problem.FieldError {
	var errs []problem.FieldError
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
		if n < 1 || n > MaxPageSide() {
			bad(k, fmt.Sprintf("must be within 1..%d CSS px (the canvas' physical side limit is %d px at device scale %d)",
				MaxPageSide(), RenderCanvas.MaxSidePixels, RenderCanvas.DeviceScaleFactor))
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
				for _, l := range StyleLayouts {
					found = found || l == s
				}
				if !found {
					bad(k, fmt.Sprintf("must be one of %v", StyleLayouts))
				} else {
					f.DefaultLayout = &s
				}
			}
		case "background":
			if s, ok := str(k); ok {
				if !hexColor.MatchString(s) {
					bad(k, "must be a CSS hex color: #rgb, #rgba, #rrggbb or #rrggbbaa")
				} else {
					s = NormalizeHex(s)
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
				if len(s) > MaxStyleSpecBytes {
					bad(k, fmt.Sprintf("must be at most %d bytes (64 KiB)", MaxStyleSpecBytes))
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

// StylePresentation is the normalised presentation of a style snapshot: every field present.
type StylePresentation struct {
	PageWidth         int     `json:"page_width"`
	PageHeight        int     `json:"page_height"`
	AspectRatio       string  `json:"aspect_ratio"`
	ThemeKey          *string `json:"theme_key"`
	DefaultLayout     string  `json:"default_layout"`
	Background        string  `json:"background"`
	FontScale         float64 `json:"font_scale"`
	StyleSpecMarkdown string  `json:"style_spec_markdown"`
}

// StyleSnapshot is what a style stores: the same whichever form the request used.
type StyleSnapshot struct {
	Schema       string            `json:"schema"`
	Presentation StylePresentation `json:"presentation"`
}

func DefaultStylePresentation() StylePresentation {
	return StylePresentation{PageWidth: RenderCanvas.Width, PageHeight: RenderCanvas.Height, DefaultLayout: defaultStyleLayout,
		Background: defaultStyleBG, FontScale: 1}
}

// Apply lays the request's fields over base and checks what involves several fields.
func (r *StyleRequest) Apply(base StylePresentation) (StylePresentation, []problem.FieldError) {
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
	if p.PageWidth*p.PageHeight > MaxPagePixels() {
		errs = append(errs, problem.FieldError{Field: r.prefix + "page_height", Message: fmt.Sprintf(
			"page_width × page_height is %d; at device scale %d the canvas allows at most %d CSS px² (%d physical pixels)",
			p.PageWidth*p.PageHeight, RenderCanvas.DeviceScaleFactor, MaxPagePixels(), RenderCanvas.MaxPhysicalPixels)})
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
func EncodeSnapshot(p StylePresentation) (json.RawMessage, string, error) {
	b, err := digest.Canonical(StyleSnapshot{Schema: styleSnapshotSchema, Presentation: p})
	if err != nil {
		return nil, "", problem.Wrap(err, "cannot encode the style snapshot")
	}
	return b, digest.Bytes(b), nil
}

func DecodeSnapshot(raw json.RawMessage) (StyleSnapshot, error) {
	var snap StyleSnapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		return snap, problem.Wrap(err, "cannot decode the style snapshot")
	}
	return snap, nil
}

func ThemeKeyOf(p StylePresentation) string {
	if p.ThemeKey == nil {
		return ""
	}
	return *p.ThemeKey
}

// NewStyle is the style a create makes: the request laid over the default presentation.
func (r *StyleRequest) NewStyle() (Style, error) {
	if r.name == nil { // not a parsed object (the API's schema check answers that first)
		return Style{}, problem.Invalid(fieldErr("name", "required"))
	}
	p, errs := r.Apply(DefaultStylePresentation())
	if len(errs) > 0 {
		return Style{}, problem.Invalid(errs...)
	}
	snap, dg, err := EncodeSnapshot(p)
	return Style{Name: *r.name, Snapshot: snap, SnapshotDigest: dg, ThemeKey: ThemeKeyOf(p)}, err
}

// Change lays an update request over a stored style (the store runs it inside the write).
func (r *StyleRequest) Change(cur Style) (Style, error) {
	snap, err := DecodeSnapshot(cur.Snapshot)
	if err != nil {
		return cur, err
	}
	p, errs := r.Apply(snap.Presentation)
	if len(errs) > 0 {
		return cur, problem.Invalid(errs...)
	}
	next := cur
	if r.name != nil {
		next.Name = *r.name
	}
	next.ThemeKey = ThemeKeyOf(p)
	next.Snapshot, next.SnapshotDigest, err = EncodeSnapshot(p)
	return next, err
}

// StoreErr answers an unknown theme key at the field the request used.
func (r *StyleRequest) StoreErr(err error) error {
	if errors.Is(err, ErrUnknownThemeKey) {
		return problem.Invalid(problem.FieldError{Field: r.prefix + "theme_key", Message: "no live theme with this key in the workspace"})
	}
	return err
}
