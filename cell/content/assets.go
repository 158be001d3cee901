package content

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"slidecells/cell/auth/scope"
	cblob "slidecells/cell/blob"
	"slidecells/cell/design"
	"slidecells/shared/problem"
	"slidecells/shared/textrule"
)

// Asset limits (docs/assets.md). The content limit is cblob.MaxBytes.
const (
	MaxAssetTags          = 32
	MaxAssetTagLen        = 64
	MaxAssetMetadataBytes = 16 << 10
	MaxAssetNameLen       = 255
	// MaxMetadataDepth bounds how deep metadata nests (the object itself is level 1), and
	// MaxMetadataKeyLen the characters of one of its keys: a standard JSON parser in a client
	// must be able to read every answer that returns it.
	MaxMetadataDepth  = 8
	MaxMetadataKeyLen = 128
)

// assetTagPattern is the tag charset: lower-case letters, digits and . _ : -, starting with a
// letter or digit. Tags are case-sensitive, so only one case is allowed.
var assetTagPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._:-]{0,63}$`)

// Assets is the asset service of one cell: rows in the store, bytes in the blob store.
type Assets struct {
	Store AssetStore
	Blobs *cblob.Store
}

// ContentURL is the immutable address of one content of an asset: the content endpoint pinned
// to a sha256. It answers only while that content is current (409 after a replacement) and is
// cacheable for a year; fonts and pages should reference assets by it.
func ContentURL(assetID, sha256 string) string {
	return "/api/v1/assets/" + assetID + "/content?sha256=" + sha256
}

// ContentURLOf is ContentURL of an asset row.
func ContentURLOf(a Asset) string { return ContentURL(a.ID, a.SHA256) }

// Upload is one file to store as a new asset.
type Upload struct {
	// Body is read to its end, never more than cblob.MaxBytes (+1) bytes.
	Body io.Reader
	// ContentType is the declared media type; "" or application/octet-stream let the content
	// decide. The stored type is always the sniffed one.
	ContentType string
	// Name of the asset; "" makes one from the digest.
	Name string
	// Tags of the asset, checked and normalized (sorted, without duplicates).
	Tags []string
	// Kinds restricts the content (fonts pass []cblob.Kind{cblob.KindFont}); nil accepts the
	// whole allow-list.
	Kinds []cblob.Kind
}

// Upload stores a file as a new asset of the scope's workspace: content-addressed blob first,
// then the row. It is what POST /api/v1/assets/content runs and what other resources call to
// keep their files as assets. Errors are problem errors (413, 415, 422). Operations that call it
// with a request body must declare MaxBodyBytes: cblob.MaxBytes.
func (as *Assets) Upload(ctx context.Context, sc scope.Scope, up Upload) (Asset, error) {
	if err := CheckName("name", up.Name, true); err != nil {
		return Asset{}, err
	}
	tags, err := CheckTags("tags", up.Tags)
	if err != nil {
		return Asset{}, err
	}
	obj, err := as.Blobs.Put(ctx, sc, up.Body, cblob.PutOptions{Declared: up.ContentType, Kinds: up.Kinds})
	if err != nil {
		return Asset{}, err
	}
	name := up.Name
	if name == "" {
		name = obj.SHA256[:12] + "." + assetExt[obj.ContentType]
	}
	return as.Store.CreateAsset(ctx, sc, NewAsset{Name: name, Tags: tags, Content: contentOf(obj)})
}

// Open returns a live asset of the workspace and a reader of its bytes; the caller closes the
// reader.
func (as *Assets) Open(ctx context.Context, sc scope.Scope, id string) (Asset, io.ReadCloser, error) {
	a, err := as.Store.GetAsset(ctx, sc, id)
	if err != nil {
		return a, nil, err
	}
	rd, err := as.Blobs.Open(ctx, sc, a.BlobKey)
	if err != nil {
		return a, nil, err
	}
	return a, rd, nil
}

// Pinned returns a live asset whose content is still sha256 (any content when sha256 is "");
// a replaced content is a 409 naming the current one.
func (as *Assets) Pinned(ctx context.Context, sc scope.Scope, id, sha256 string) (Asset, error) {
	a, err := as.Store.GetAsset(ctx, sc, id)
	if err == nil && sha256 != "" && sha256 != a.SHA256 {
		err = staleContent(a.SHA256)
	}
	return a, err
}

// Replace puts new content under a live asset if ifMatch (the quoted sha256 the caller read)
// is current; the content must keep the asset's kind. The same bytes change nothing.
func (as *Assets) Replace(ctx context.Context, sc scope.Scope, id, ifMatch string, body io.Reader, declared string) (Asset, error) {
	a, err := as.Store.GetAsset(ctx, sc, id)
	if err != nil {
		return a, err
	}
	baseline, err := ParseIfMatch(ifMatch)
	if err != nil {
		return a, err
	}
	if baseline != a.SHA256 {
		return a, staleContent(a.SHA256)
	}
	obj, err := as.Blobs.Put(ctx, sc, body, cblob.PutOptions{Declared: declared, Kinds: []cblob.Kind{cblob.KindOf(a.ContentType)}})
	if err != nil || obj.SHA256 == a.SHA256 {
		return a, err
	}
	return as.Store.ReplaceAssetContent(ctx, sc, id, baseline, contentOf(obj))
}

// Changes are the checked metadata edits of an update request; nil fields are absent.
func Changes(name *string, tags *[]string, metadata *map[string]any) (AssetChanges, error) {
	var c AssetChanges
	if name != nil {
		if err := CheckName("name", *name, false); err != nil {
			return c, err
		}
		c.Name = name
	}
	if tags != nil {
		t, err := CheckTags("tags", *tags)
		if err != nil {
			return c, err
		}
		c.Tags = &t
	}
	if metadata != nil {
		m, err := checkMetadata("metadata", *metadata)
		if err != nil {
			return c, err
		}
		c.Metadata = m
	}
	return c, nil
}

// FontBundle renders a family's @font-face stylesheet from its enabled faces' live assets.
func (as *Assets) FontBundle(ctx context.Context, sc scope.Scope, familyID string) ([]byte, error) {
	m, err := as.Store.GetFontFamily(ctx, sc, familyID)
	if err != nil {
		return nil, err
	}
	live := map[string]design.FontFile{}
	for _, f := range m.Faces {
		if !f.Enabled {
			continue
		}
		a, err := as.Store.GetAsset(ctx, sc, f.AssetID)
		if err != nil && problem.As(err).Code != problem.NotFound {
			return nil, err
		}
		if err == nil {
			live[a.ID] = design.FontFile{ContentType: a.ContentType, URL: ContentURLOf(a)}
		}
	}
	return design.FontBundleCSS(m, live), nil
}

func contentOf(o cblob.Object) AssetContent {
	return AssetContent{ContentType: o.ContentType, ByteSize: o.Size, SHA256: o.SHA256, BlobKey: o.Key}
}

var assetExt = map[string]string{
	cblob.TypePNG: "png", cblob.TypeJPEG: "jpg", cblob.TypeGIF: "gif", cblob.TypeWebP: "webp", cblob.TypeAVIF: "avif",
	cblob.TypeSVG: "svg", cblob.TypeWOFF2: "woff2", cblob.TypeWOFF: "woff", cblob.TypeTTF: "ttf", cblob.TypeOTF: "otf",
	cblob.TypePDF: "pdf",
}

// CheckName rejects names that are empty (unless optional), too long, or break the name rule
// (shared/textrule: control, bidirectional, zero-width characters, invalid UTF-8).
func CheckName(field, name string, optional bool) error {
	if name == "" && optional {
		return nil
	}
	if strings.TrimSpace(name) == "" || len([]rune(name)) > MaxAssetNameLen {
		return problem.Invalid(problem.FieldError{Field: field, Message: "give 1 to 255 characters, not only white space"})
	}
	if _, msg := textrule.Name(name); msg != "" { // control, bidi, zero-width, invalid UTF-8
		return problem.Invalid(problem.FieldError{Field: field, Message: msg})
	}
	return nil
}

// CheckTags validates tags and returns them sorted without duplicates.
func CheckTags(field string, tags []string) ([]string, error) {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if !assetTagPattern.MatchString(t) {
			return nil, problem.Invalid(problem.FieldError{Field: field,
				Message: "tag " + strconv.Quote(t) + ": use 1-64 of a-z, 0-9, '.', '_', ':', '-', starting with a letter or digit"})
		}
		out = append(out, t)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxAssetTags {
		return nil, problem.Invalid(problem.FieldError{Field: field, Message: "at most 32 tags"})
	}
	return out, nil
}

// checkMetadata encodes metadata and bounds its size.
func checkMetadata(field string, m map[string]any) (json.RawMessage, error) {
	if m == nil {
		m = map[string]any{}
	}
	if fe := checkStructure(field, m, 1); fe != nil {
		return nil, problem.Invalid(*fe)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, problem.Invalid(problem.FieldError{Field: field, Message: "not encodable as JSON"})
	}
	if len(b) > MaxAssetMetadataBytes {
		return nil, problem.Invalid(problem.FieldError{Field: field, Message: "at most 16384 bytes of JSON"})
	}
	if strings.Contains(string(b), `\u0000`) {
		return nil, problem.Invalid(problem.FieldError{Field: field, Message: "NUL characters are not allowed"})
	}
	return b, nil
}

// checkStructure bounds the depth and the key lengths of a free-form JSON value at field.
func checkStructure(field string, v any, depth int) *problem.FieldError {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxMetadataDepth {
			return &problem.FieldError{Field: field, Message: fmt.Sprintf("nests deeper than %d levels", MaxMetadataDepth)}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if utf8.RuneCountInString(k) > MaxMetadataKeyLen {
				return &problem.FieldError{Field: field, Message: fmt.Sprintf("has a key longer than %d characters", MaxMetadataKeyLen)}
			}
			if _, msg := textrule.Name(k); msg != "" && k != "" {
				return &problem.FieldError{Field: field, Message: "a key " + msg}
			}
			if fe := checkStructure(field+"."+k, x[k], depth+1); fe != nil {
				return fe
			}
		}
	case []any:
		if depth > MaxMetadataDepth {
			return &problem.FieldError{Field: field, Message: fmt.Sprintf("nests deeper than %d levels", MaxMetadataDepth)}
		}
		for i, e := range x {
			if fe := checkStructure(field+"["+strconv.Itoa(i)+"]", e, depth+1); fe != nil {
				return fe
			}
		}
	}
	return nil
}

// BaselineField is the field a content replacement's baseline errors name: the asset's
// sha256, as the caller read it (cell/api answers it at the request's If-Match header).
const BaselineField = "sha256"

// ParseIfMatch reads a strong entity tag holding a sha256: "hex" (quotes optional). Its errors
// name BaselineField.
func ParseIfMatch(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", problem.Invalid(problem.FieldError{Field: BaselineField,
			Message: "required: the quoted sha256 of the content you read (its ETag)"})
	}
	h := strings.ToLower(strings.Trim(v, `"`))
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || strings.HasPrefix(v, "W/") {
		return "", problem.Invalid(problem.FieldError{Field: BaselineField,
			Message: "one strong entity tag holding a hex sha256; '*' and weak tags are not accepted"})
	}
	return h, nil
}

func staleContent(current string) error {
	return problem.ErrVersionConflict("asset's content", "sha256", current)
}

// ETagMatches reports whether an If-None-Match list names the content's sha256 (or is "*").
func ETagMatches(header, sha string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == `"`+sha+`"` {
			return true
		}
	}
	return false
}
