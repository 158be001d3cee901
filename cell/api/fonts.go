package api

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	cblob "slidecells/cell/blob"
	"slidecells/cell/store"
	"slidecells/shared/digest"
	"slidecells/shared/problem"
)

// Editor-facing workspace font endpoints: families (list with faces, rename, delete), faces
// (create, read, update, delete) and the per-family @font-face bundle. They live outside /api/v1
// with the workspace in the path, as the specification lists them.

// maxFamilyName caps a font family name, in characters.
const maxFamilyName = 100

// fontFormats maps the content types of font assets (cblob.FontTypes, sniffed at upload) to
// the CSS format() hint of @font-face.
var fontFormats = map[string]string{
	cblob.TypeWOFF2: "woff2",
	cblob.TypeWOFF:  "woff",
	cblob.TypeTTF:   "truetype",
	cblob.TypeOTF:   "opentype",
}

// FontFaceView is a face as the API shows it.
type FontFaceView struct {
	ID           string    `json:"id"`
	FamilyID     string    `json:"family_id"`
	FontFamily   string    `json:"font_family" doc:"the family's name (derived; change it by renaming the family or moving the face)"`
	AssetID      string    `json:"asset_id" doc:"the uploaded font asset (woff2, woff, ttf or otf)"`
	FontWeight   string    `json:"font_weight" doc:"one weight (\"400\") or a range (\"100 900\")"`
	FontStyle    string    `json:"font_style" enum:"normal,italic,oblique"`
	FontDisplay  string    `json:"font_display" enum:"auto,block,swap,fallback,optional"`
	UnicodeRange string    `json:"unicode_range,omitempty" doc:"normalised, e.g. \"U+0000-00FF, U+0131\"; absent means all code points"`
	Enabled      bool      `json:"enabled" doc:"only enabled faces are in the family's bundle"`
	Version      int64     `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	CreatedBy    string    `json:"created_by"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// FontFamilyView is a workspace font family with all of its faces.
type FontFamilyView struct {
	ID        string         `json:"id"`
	Name      string         `json:"name" doc:"unique in the workspace, compared case-insensitively"`
	Version   int64          `json:"version" doc:"optimistic-lock baseline of a rename"`
	Faces     []FontFaceView `json:"faces" doc:"every face, enabled or not"`
	BundleURL string         `json:"bundle_url" doc:"the family's @font-face stylesheet (enabled faces only)"`
	CreatedBy string         `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

func fontWeightText(min, max int) string {
	if min == max {
		return strconv.Itoa(min)
	}
	return strconv.Itoa(min) + " " + strconv.Itoa(max)
}

func fontFaceView(f store.FontFace) FontFaceView {
	return FontFaceView{ID: f.ID, FamilyID: f.FamilyID, FontFamily: f.FamilyName, AssetID: f.AssetID,
		FontWeight: fontWeightText(f.WeightMin, f.WeightMax), FontStyle: f.Style, FontDisplay: f.Display,
		UnicodeRange: f.UnicodeRange, Enabled: f.Enabled, Version: f.Version, CreatedBy: f.CreatedBy,
		CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
}

func fontBundlePath(workspaceID, familyID string) string {
	return "/workspaces/" + workspaceID + "/font-families/" + familyID + "/bundle.css"
}

func fontFamilyView(workspaceID string, m store.FontFamily) FontFamilyView {
	v := FontFamilyView{ID: m.ID, Name: m.Name, Version: m.Version, Faces: []FontFaceView{},
		BundleURL: fontBundlePath(workspaceID, m.ID), CreatedBy: m.CreatedBy, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	for _, f := range m.Faces {
		v.Faces = append(v.Faces, fontFaceView(f))
	}
	return v
}

// FontWorkspacePath is the workspace of an editor-facing route; the pipeline authorizes it.
type FontWorkspacePath struct {
	WorkspaceID string `path:"workspace_id" pattern:"^ws_[a-z2-7]{26}$" doc:"Workspace ID (ws_…)"`
}

// FontFamilyPath names a font family of the workspace.
type FontFamilyPath struct {
	FontWorkspacePath
	FamilyID string `path:"family_id" pattern:"^ffam_[a-z2-7]{26}$" doc:"Font family ID (ffam_…)"`
}

// FontFacePath names a font face of the workspace.
type FontFacePath struct {
	FontWorkspacePath
	FontID string `path:"font_id" pattern:"^ffac_[a-z2-7]{26}$" doc:"Font face ID (ffac_…)"`
}

// FontFamilyOutput is one family.
type FontFamilyOutput struct {
	Body FontFamilyView
}

// FontFamilyList is a page of families, each with all its faces.
type FontFamilyList struct {
	Body struct {
		Items      []FontFamilyView `json:"items"`
		NextCursor string           `json:"next_cursor,omitempty"`
	}
}

// FontFaceOutput is one face.
type FontFaceOutput struct {
	Body FontFaceView
}

// FontFaceCreated is a new face.
type FontFaceCreated struct {
	Location string `header:"Location"`
	Body     FontFaceView
}

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

// FontFaceFields are the face descriptors shared by create and update.
type FontFaceFields struct {
	FontWeight   *string `json:"font_weight,omitempty" pattern:"^[0-9]{1,4}( [0-9]{1,4})?$" doc:"one weight \"400\" or a range \"100 900\" (minimum <= maximum), each 1..1000; default 400 on create"`
	FontStyle    *string `json:"font_style,omitempty" enum:"normal,italic,oblique" doc:"default normal on create"`
	FontDisplay  *string `json:"font_display,omitempty" enum:"auto,block,swap,fallback,optional" doc:"default swap on create"`
	UnicodeRange *string `json:"unicode_range,omitempty" maxLength:"1024" doc:"comma-separated U+XXXX, U+XXXX-YYYY or U+4?? ranges (at most 64, up to U+10FFFF); empty means all code points"`
	Enabled      *bool   `json:"enabled,omitempty" doc:"default true on create"`
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

var badFamilyChars = regexp.MustCompile(`[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]`)

// checkFamilyName trims a family name and reports what is wrong with it, if anything.
func checkFamilyName(name string) (string, string) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return name, "must not be empty"
	case utf8.RuneCountInString(name) > maxFamilyName:
		return name, fmt.Sprintf("must be at most %d characters", maxFamilyName)
	case badFamilyChars.MatchString(name):
		return name, "must not contain control or format characters"
	}
	return name, ""
}

// parseFontWeight reads "400" or "100 900".
func parseFontWeight(s string) (min, max int, msg string) {
	parts := strings.Split(s, " ")
	if len(parts) > 2 {
		return 0, 0, `must be one weight ("400") or two separated by one space ("100 900")`
	}
	var w [2]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p == "" || p[0] == '+' || p[0] == '-' {
			return 0, 0, `must be one weight ("400") or two separated by one space ("100 900")`
		}
		if n < 1 || n > 1000 {
			return 0, 0, fmt.Sprintf("weight %d is outside 1..1000", n)
		}
		w[i] = n
	}
	if len(parts) == 1 {
		return w[0], w[0], ""
	}
	if w[0] > w[1] {
		return 0, 0, fmt.Sprintf("the range minimum %d is above its maximum %d", w[0], w[1])
	}
	return w[0], w[1], ""
}

var unicodeRangeToken = regexp.MustCompile(`^[uU]\+([0-9a-fA-F?]{1,6})(?:-([0-9a-fA-F]{1,6}))?$`)

// maxUnicodeRanges caps the ranges of one face.
const maxUnicodeRanges = 64

// parseUnicodeRange validates a CSS unicode-range list and returns it normalised (upper case,
// ", " separated); "" stays "".
func parseUnicodeRange(s string) (string, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ""
	}
	tokens := strings.Split(s, ",")
	if len(tokens) > maxUnicodeRanges {
		return "", fmt.Sprintf("at most %d ranges", maxUnicodeRanges)
	}
	out := make([]string, 0, len(tokens))
	for _, tok := range tokens {
		tok = strings.TrimSpace(tok)
		m := unicodeRangeToken.FindStringSubmatch(tok)
		if m == nil {
			return "", fmt.Sprintf("%q is not a range of the form U+XXXX, U+XXXX-YYYY or U+4??", tok)
		}
		start, end := strings.ToUpper(m[1]), strings.ToUpper(m[2])
		if q := strings.IndexByte(start, '?'); q >= 0 {
			if end != "" || strings.Trim(start[q:], "?") != "" {
				return "", fmt.Sprintf("%q: wildcards (?) may only end a single value", tok)
			}
			lo, _ := strconv.ParseUint(strings.ReplaceAll(start, "?", "0"), 16, 32)
			hi, _ := strconv.ParseUint(strings.ReplaceAll(start, "?", "F"), 16, 32)
			if lo > unicode.MaxRune || hi > unicode.MaxRune {
				return "", fmt.Sprintf("%q goes beyond U+10FFFF", tok)
			}
			out = append(out, "U+"+start)
			continue
		}
		lo, _ := strconv.ParseUint(start, 16, 32)
		if lo > unicode.MaxRune {
			return "", fmt.Sprintf("%q goes beyond U+10FFFF", tok)
		}
		if end == "" {
			out = append(out, "U+"+start)
			continue
		}
		hi, _ := strconv.ParseUint(end, 16, 32)
		if hi > unicode.MaxRune {
			return "", fmt.Sprintf("%q goes beyond U+10FFFF", tok)
		}
		if lo > hi {
			return "", fmt.Sprintf("%q starts after it ends", tok)
		}
		out = append(out, "U+"+start+"-"+end)
	}
	return strings.Join(out, ", "), ""
}

// checkFaceFields validates the shared descriptors into p, collecting field errors. font_style
// and font_display are enumerations the request schema already restricts.
func checkFaceFields(f FontFaceFields, p *store.FontFacePatch) []problem.FieldError {
	var errs []problem.FieldError
	if f.FontWeight != nil {
		lo, hi, msg := parseFontWeight(*f.FontWeight)
		if msg != "" {
			errs = append(errs, problem.FieldError{Field: "body.font_weight", Message: msg})
		} else {
			p.WeightMin, p.WeightMax = &lo, &hi
		}
	}
	if f.UnicodeRange != nil {
		r, msg := parseUnicodeRange(*f.UnicodeRange)
		if msg != "" {
			errs = append(errs, problem.FieldError{Field: "body.unicode_range", Message: msg})
		} else {
			p.UnicodeRange = &r
		}
	}
	p.Style, p.Display, p.Enabled = f.FontStyle, f.FontDisplay, f.Enabled
	return errs
}

// checkFontAsset judges, inside the write, that the looked-up asset is a live font asset of the
// workspace: a 422 on body.asset_id when it is not (missing and foreign assets alike), other
// errors as they are.
func checkFontAsset(a store.Asset, err error) error {
	if err != nil {
		if problem.As(err).Code == problem.NotFound {
			return problem.Invalid(problem.FieldError{Field: "body.asset_id", Message: "no asset with this ID in the workspace"})
		}
		return err
	}
	if _, ok := fontFormats[a.ContentType]; !ok {
		return problem.Invalid(problem.FieldError{Field: "body.asset_id", Message: fmt.Sprintf("the asset is %s, not a font (%s)", a.ContentType, fontTypeList())})
	}
	return nil
}

func fontTypeList() string {
	out := append([]string(nil), cblob.FontTypes...)
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// cssString quotes s as a CSS string. Characters that could end the string, the declaration
// or an enclosing <style> element are escaped.
func cssString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '<' || r == '>' || r == '&' || r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\%x ", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// fontBundleCSS renders the @font-face rules of a family's enabled faces, ordered by weight,
// style and ID. A face whose asset is no longer a live font is left out with a comment.
func fontBundleCSS(ctx context.Context, st *store.Store, m store.FontFamily) ([]byte, error) {
	faces := append([]store.FontFace(nil), m.Faces...)
	sort.SliceStable(faces, func(i, j int) bool {
		a, b := faces[i], faces[j]
		if a.WeightMin != b.WeightMin {
			return a.WeightMin < b.WeightMin
		}
		if a.WeightMax != b.WeightMax {
			return a.WeightMax < b.WeightMax
		}
		if a.Style != b.Style {
			return a.Style < b.Style
		}
		return a.ID < b.ID
	})
	var b strings.Builder
	fmt.Fprintf(&b, "/* font family %s: enabled faces */\n", m.ID)
	for _, f := range faces {
		if !f.Enabled {
			continue
		}
		a, err := st.GetAsset(ctx, ScopeFrom(ctx), f.AssetID)
		if err != nil && problem.As(err).Code != problem.NotFound {
			return nil, err
		}
		format, ok := fontFormats[a.ContentType]
		if err != nil || !ok {
			fmt.Fprintf(&b, "/* face %s left out: its asset is not a live font */\n", f.ID)
			continue
		}
		fmt.Fprintf(&b, "@font-face {\n  font-family: %s;\n  src: url(%s) format(%s);\n  font-weight: %s;\n  font-style: %s;\n  font-display: %s;\n",
			cssString(m.Name), cssString(AssetContentURL(a.ID, a.SHA256)), cssString(format),
			fontWeightText(f.WeightMin, f.WeightMax), f.Style, f.Display)
		if f.UnicodeRange != "" {
			fmt.Fprintf(&b, "  unicode-range: %s;\n", f.UnicodeRange)
		}
		b.WriteString("}\n")
	}
	return []byte(b.String()), nil
}

func (s *Server) registerFonts(st *store.Store) {
	tags := []string{"fonts"}
	read := []string{"design-system:read"}
	write := []string{"design-system:write"}
	const families = "/workspaces/{workspace_id}/font-families"
	const faces = "/workspaces/{workspace_id}/fonts"

	Register(s, Operation{ID: "list-font-families", Method: http.MethodGet, Path: families,
		Summary: "List the workspace's font families, each with all its faces", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *struct {
			FontWorkspacePath
			ListQuery
		}) (*FontFamilyList, error) {
			ms, err := st.ListFontFamilies(ctx, ScopeFrom(ctx), in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &FontFamilyList{}
			out.Body.Items, out.Body.NextCursor = paginate(ms, in.Limit,
				func(m store.FontFamily) string { return m.ID },
				func(m store.FontFamily) FontFamilyView { return fontFamilyView(in.WorkspaceID, m) })
			return out, nil
		})
	Register(s, Operation{ID: "get-font-family", Method: http.MethodGet, Path: families + "/{family_id}",
		Summary: "One font family with all its faces", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *FontFamilyPath) (*FontFamilyOutput, error) {
			m, err := st.GetFontFamily(ctx, ScopeFrom(ctx), in.FamilyID)
			if err != nil {
				return nil, err
			}
			return &FontFamilyOutput{Body: fontFamilyView(in.WorkspaceID, m)}, nil
		})
	Register(s, Operation{ID: "rename-font-family", Method: http.MethodPatch, Path: families + "/{family_id}",
		Summary: "Rename a font family (unique per workspace, case-insensitively; version-locked)", Tags: tags,
		Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			FontFamilyPath
			IdempotencyHeader
			Body struct {
				Version int64  `json:"version" minimum:"1" doc:"the version you read"`
				Name    string `json:"name" minLength:"1" maxLength:"100"`
			}
		}) (*FontFamilyOutput, error) {
			name, msg := checkFamilyName(in.Body.Name)
			if msg != "" {
				return nil, problem.Invalid(problem.FieldError{Field: "body.name", Message: msg})
			}
			m, err := st.RenameFontFamily(ctx, ScopeFrom(ctx), in.FamilyID, in.Body.Version, name)
			if err != nil {
				return nil, err
			}
			return &FontFamilyOutput{Body: fontFamilyView(in.WorkspaceID, m)}, nil
		})
	Register(s, Operation{ID: "delete-font-family", Method: http.MethodDelete, Path: families + "/{family_id}",
		Summary: "Delete a font family without faces and theme bindings (the one hard delete the specification names)", Tags: tags,
		Access: InWorkspace, Scopes: write, Idempotency: KeyRequired},
		func(ctx context.Context, in *struct {
			FontFamilyPath
			IdempotencyHeader
		}) (*FontFamilyDeleted, error) {
			if err := st.DeleteFontFamily(ctx, ScopeFrom(ctx), in.FamilyID); err != nil {
				return nil, err
			}
			out := &FontFamilyDeleted{}
			out.Body.ID, out.Body.Deleted = in.FamilyID, true
			return out, nil
		})
	Register(s, Operation{ID: "get-font-family-bundle", Method: http.MethodGet, Path: families + "/{family_id}/bundle.css",
		Summary: "The family's @font-face stylesheet: every enabled face, with immutable content URLs", Tags: tags,
		Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *FontFamilyPath) (*FontBundle, error) {
			m, err := st.GetFontFamily(ctx, ScopeFrom(ctx), in.FamilyID)
			if err != nil {
				return nil, err
			}
			css, err := fontBundleCSS(ctx, st, m)
			if err != nil {
				return nil, err
			}
			return &FontBundle{ContentType: "text/css; charset=utf-8", CacheControl: "private, no-cache",
				ETag: `"` + digest.Bytes(css) + `"`, Body: css}, nil
		})
	if pi := s.API.OpenAPI().Paths[families+"/{family_id}/bundle.css"]; pi != nil && pi.Get != nil {
		if r := pi.Get.Responses["200"]; r != nil {
			r.Description = "text/css with one @font-face rule per enabled face"
			r.Content = map[string]*huma.MediaType{"text/css": {Schema: &huma.Schema{Type: huma.TypeString}}}
		}
	}

	Register(s, Operation{ID: "create-font-face", Method: http.MethodPost, Path: faces,
		Summary: "Add a font face; its family is found or created by name", Tags: tags,
		Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: CreateOnly},
		func(ctx context.Context, in *struct {
			FontWorkspacePath
			IdempotencyHeader
			Body FontFaceCreateBody
		}) (*FontFaceCreated, error) {
			var p store.FontFacePatch
			name, msg := checkFamilyName(in.Body.FamilyName)
			var errs []problem.FieldError
			if msg != "" {
				errs = append(errs, problem.FieldError{Field: "body.family_name", Message: msg})
			}
			errs = append(errs, checkFaceFields(in.Body.FontFaceFields, &p)...)
			if len(errs) > 0 {
				return nil, problem.Invalid(errs...)
			}
			f := store.FontFaceInput{FamilyName: name, AssetID: in.Body.AssetID, WeightMin: 400, WeightMax: 400,
				Style: "normal", Display: "swap", Enabled: true, CheckAsset: checkFontAsset}
			if p.WeightMin != nil {
				f.WeightMin, f.WeightMax = *p.WeightMin, *p.WeightMax
			}
			if p.Style != nil {
				f.Style = *p.Style
			}
			if p.Display != nil {
				f.Display = *p.Display
			}
			if p.UnicodeRange != nil {
				f.UnicodeRange = *p.UnicodeRange
			}
			if p.Enabled != nil {
				f.Enabled = *p.Enabled
			}
			face, err := st.CreateFontFace(ctx, ScopeFrom(ctx), f)
			if err != nil {
				return nil, err
			}
			return &FontFaceCreated{Location: "/workspaces/" + in.WorkspaceID + "/fonts/" + face.ID, Body: fontFaceView(face)}, nil
		})
	Register(s, Operation{ID: "get-font-face", Method: http.MethodGet, Path: faces + "/{font_id}",
		Summary: "One font face", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *FontFacePath) (*FontFaceOutput, error) {
			f, err := st.GetFontFace(ctx, ScopeFrom(ctx), in.FontID)
			if err != nil {
				return nil, err
			}
			return &FontFaceOutput{Body: fontFaceView(f)}, nil
		})
	Register(s, Operation{ID: "update-font-face", Method: http.MethodPatch, Path: faces + "/{font_id}",
		Summary: "Change a font face or move it to another family by name (version-locked)", Tags: tags,
		Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			FontFacePath
			IdempotencyHeader
			Body FontFaceUpdateBody
		}) (*FontFaceOutput, error) {
			sc := ScopeFrom(ctx)
			// The face must be the caller's before anything about the request is judged.
			if _, err := st.GetFontFace(ctx, sc, in.FontID); err != nil {
				return nil, err
			}
			var p store.FontFacePatch
			errs := checkFaceFields(in.Body.FontFaceFields, &p)
			if in.Body.FamilyName != nil {
				name, msg := checkFamilyName(*in.Body.FamilyName)
				if msg != "" {
					errs = append(errs, problem.FieldError{Field: "body.family_name", Message: msg})
				}
				p.FamilyName = &name
			}
			if len(errs) > 0 {
				return nil, problem.Invalid(errs...)
			}
			p.AssetID, p.CheckAsset = in.Body.AssetID, checkFontAsset
			f, err := st.UpdateFontFace(ctx, sc, in.FontID, in.Body.Version, p)
			if err != nil {
				return nil, err
			}
			return &FontFaceOutput{Body: fontFaceView(f)}, nil
		})
	Register(s, Operation{ID: "delete-font-face", Method: http.MethodDelete, Path: faces + "/{font_id}",
		Summary: "Delete a font face; the last face takes its family along unless a theme binds the family", Tags: tags,
		Access: InWorkspace, Scopes: write, Idempotency: KeyRequired},
		func(ctx context.Context, in *struct {
			FontFacePath
			IdempotencyHeader
		}) (*FontFaceDeleted, error) {
			famID, removed, err := st.DeleteFontFace(ctx, ScopeFrom(ctx), in.FontID)
			if err != nil {
				return nil, err
			}
			out := &FontFaceDeleted{}
			out.Body.ID, out.Body.Deleted, out.Body.FamilyID, out.Body.FamilyRemoved = in.FontID, true, famID, removed
			return out, nil
		})
}
