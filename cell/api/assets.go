package api

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"slidecells/cell/auth"
	cblob "slidecells/cell/blob"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// Asset limits (docs/assets.md). The content limit is cblob.MaxBytes.
const (
	MaxAssetTags          = 32
	MaxAssetTagLen        = 64
	MaxAssetMetadataBytes = 16 << 10
	MaxAssetNameLen       = 255
)

// assetTagPattern is the tag charset: lower-case letters, digits and . _ : -, starting with a
// letter or digit. Tags are case-sensitive, so only one case is allowed.
var assetTagPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._:-]{0,63}$`)

// AssetView is an asset as the API shows it.
type AssetView struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	ContentType string         `json:"content_type" doc:"sniffed from the content; one of the allow-list"`
	Kind        string         `json:"kind" enum:"image,font,document"`
	ByteSize    int64          `json:"byte_size"`
	SHA256      string         `json:"sha256" doc:"hex SHA-256 of the content: the content's ETag and the If-Match baseline of a content replacement"`
	Tags        []string       `json:"tags"`
	Metadata    map[string]any `json:"metadata"`
	Version     int64          `json:"version" doc:"optimistic-lock baseline of metadata edits: send it back with PATCH"`
	ContentURL  string         `json:"content_url" doc:"this content, immutable: /api/v1/assets/{id}/content?sha256=…"`
	CreatedBy   string         `json:"created_by"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
}

func assetView(a store.Asset) AssetView {
	meta := map[string]any{}
	_ = json.Unmarshal(a.Metadata, &meta)
	tags := a.Tags
	if tags == nil {
		tags = []string{}
	}
	return AssetView{ID: a.ID, Name: a.Name, ContentType: a.ContentType, Kind: string(cblob.KindOf(a.ContentType)),
		ByteSize: a.ByteSize, SHA256: a.SHA256, Tags: tags, Metadata: meta, Version: a.Version,
		ContentURL: AssetContentURL(a.ID, a.SHA256), CreatedBy: a.CreatedBy, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// AssetContentURL is the immutable address of one content of an asset: the content endpoint
// pinned to a sha256. It answers only while that content is current (409 after a replacement)
// and is cacheable for a year; fonts and pages should reference assets by it.
func AssetContentURL(assetID, sha256 string) string {
	return "/api/v1/assets/" + assetID + "/content?sha256=" + sha256
}

// AssetPath names an asset.
type AssetPath struct {
	AssetID string `path:"asset_id" pattern:"^ast_[a-z2-7]{26}$" doc:"Asset ID (ast_…)"`
}

// AssetOutput is one asset.
type AssetOutput struct {
	Body AssetView
}

// AssetCreated is a new asset.
type AssetCreated struct {
	Status   int
	Location string `header:"Location"`
	Body     AssetView
}

// AssetList is a page of assets.
type AssetList struct {
	Body struct {
		Items      []AssetView `json:"items"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}
}

// AssetTagCount is one distinct tag.
type AssetTagCount struct {
	Tag   string `json:"tag"`
	Count int64  `json:"count" doc:"live assets carrying the tag"`
}

// AssetTagList is a page of the distinct tags of live assets.
type AssetTagList struct {
	Body struct {
		Items      []AssetTagCount `json:"items"`
		NextCursor string          `json:"next_cursor,omitempty"`
	}
}

// AssetPreview describes content without transferring it.
type AssetPreview struct {
	Body struct {
		AssetID     string `json:"asset_id"`
		Name        string `json:"name"`
		ContentType string `json:"content_type"`
		Kind        string `json:"kind" enum:"image,font,document"`
		ByteSize    int64  `json:"byte_size"`
		SHA256      string `json:"sha256"`
		Width       *int   `json:"width,omitempty" doc:"pixels (PNG, JPEG, GIF, WebP) or user units (SVG); absent when unknown"`
		Height      *int   `json:"height,omitempty"`
		ContentURL  string `json:"content_url" doc:"immutable address of this content; needs the same credential"`
	}
}

// AssetContentOutput streams an asset's bytes.
type AssetContentOutput struct {
	ContentType        string `header:"Content-Type"`
	ETag               string `header:"ETag" doc:"the quoted sha256 of the content"`
	CacheControl       string `header:"Cache-Control"`
	ContentDisposition string `header:"Content-Disposition"`
	NoSniff            string `header:"X-Content-Type-Options"`
	CSP                string `header:"Content-Security-Policy" doc:"sandboxed: served content never runs script on this origin"`
	Body               func(huma.Context)
}

// streamedBody gives a handler the request body as a stream: huma reads no body for an input
// without Body or RawBody, and this resolver hands over the reader instead.
type streamedBody struct{ r io.Reader }

// Resolve implements huma.Resolver.
func (b *streamedBody) Resolve(ctx huma.Context) []error {
	b.r = ctx.BodyReader()
	return nil
}

type assetUploadInput struct {
	WorkspaceHeader
	IdempotencyHeader
	ContentType string   `header:"Content-Type" doc:"declared media type; the content is sniffed and must agree (application/octet-stream lets the content decide)"`
	Name        string   `query:"name" maxLength:"255" doc:"asset name; default: the first 12 hex digits of the sha256 and an extension"`
	Tags        []string `query:"tags" maxItems:"32" doc:"comma-separated tags (a-z 0-9 . _ : -, at most 64 characters each)"`
	streamedBody
}

type assetReplaceInput struct {
	WorkspaceHeader
	IdempotencyHeader
	AssetPath
	ContentType string `header:"Content-Type" doc:"declared media type; the content is sniffed and must agree and keep the asset's kind"`
	IfMatch     string `header:"If-Match" doc:"required: the quoted sha256 you read (the content's ETag); a stale one is 409 VERSION_CONFLICT"`
	streamedBody
}

type archiveAsset struct {
	WorkspaceHeader
	IdempotencyHeader
	AssetPath
}

// assetBlobs is the asset content store of this cell.
func (s *Server) assetBlobs() *cblob.Store { return &cblob.Store{Bucket: s.Blobs} }

// AssetUpload is one file to store as a new asset (UploadAsset).
type AssetUpload struct {
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

// UploadAsset stores a file as a new asset of the scope's workspace: content-addressed blob
// first, then the row. It is what POST /api/v1/assets/content runs and what other resources
// (fonts) call to keep their files as assets. Errors are problem errors (413, 415, 422).
// Operations that call it with a request body must declare MaxBodyBytes: cblob.MaxBytes.
func (s *Server) UploadAsset(ctx context.Context, st *store.Store, sc auth.Scope, up AssetUpload) (store.Asset, error) {
	if err := checkAssetName("query.name", up.Name, true); err != nil {
		return store.Asset{}, err
	}
	tags, err := checkAssetTags("query.tags", up.Tags)
	if err != nil {
		return store.Asset{}, err
	}
	obj, err := s.assetBlobs().Put(ctx, sc, up.Body, cblob.PutOptions{Declared: up.ContentType, Kinds: up.Kinds})
	if err != nil {
		return store.Asset{}, err
	}
	name := up.Name
	if name == "" {
		name = defaultAssetName(obj.SHA256, obj.ContentType)
	}
	return st.CreateAsset(ctx, sc, store.NewAsset{Name: name, Tags: tags, Content: assetContent(obj)})
}

// OpenAssetContent returns a live asset of the workspace and a reader of its bytes; the caller
// closes the reader.
func (s *Server) OpenAssetContent(ctx context.Context, st *store.Store, sc auth.Scope, id string) (store.Asset, io.ReadCloser, error) {
	a, err := st.GetAsset(ctx, sc, id)
	if err != nil {
		return a, nil, err
	}
	rd, err := s.assetBlobs().Open(ctx, sc, a.BlobKey)
	if err != nil {
		return a, nil, err
	}
	return a, rd, nil
}

func assetContent(o cblob.Object) store.AssetContent {
	return store.AssetContent{ContentType: o.ContentType, ByteSize: o.Size, SHA256: o.SHA256, BlobKey: o.Key}
}

var assetExt = map[string]string{
	cblob.TypePNG: "png", cblob.TypeJPEG: "jpg", cblob.TypeGIF: "gif", cblob.TypeWebP: "webp", cblob.TypeAVIF: "avif",
	cblob.TypeSVG: "svg", cblob.TypeWOFF2: "woff2", cblob.TypeWOFF: "woff", cblob.TypeTTF: "ttf", cblob.TypeOTF: "otf",
	cblob.TypePDF: "pdf",
}

func defaultAssetName(sha, contentType string) string {
	return sha[:12] + "." + assetExt[contentType]
}

// checkAssetName rejects names that are empty (unless optional), too long, or hold control
// characters (which PostgreSQL cannot store or which break headers).
func checkAssetName(field, name string, optional bool) error {
	if name == "" && optional {
		return nil
	}
	if strings.TrimSpace(name) == "" || len([]rune(name)) > MaxAssetNameLen {
		return problem.Invalid(problem.FieldError{Field: field, Message: "give 1 to 255 characters, not only white space"})
	}
	if strings.ContainsFunc(name, unicode.IsControl) {
		return problem.Invalid(problem.FieldError{Field: field, Message: "control characters are not allowed"})
	}
	return nil
}

// checkAssetTags validates tags and returns them sorted without duplicates.
func checkAssetTags(field string, tags []string) ([]string, error) {
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

// checkAssetMetadata encodes metadata and bounds its size.
func checkAssetMetadata(field string, m map[string]any) (json.RawMessage, error) {
	if m == nil {
		m = map[string]any{}
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

// parseIfMatch reads a strong entity tag holding a sha256: "hex" (quotes optional).
func parseIfMatch(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", problem.Invalid(problem.FieldError{Field: "header.If-Match",
			Message: "required: the quoted sha256 of the content you read (its ETag)"})
	}
	h := strings.ToLower(strings.Trim(v, `"`))
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || strings.HasPrefix(v, "W/") {
		return "", problem.Invalid(problem.FieldError{Field: "header.If-Match",
			Message: "one strong entity tag holding a hex sha256; '*' and weak tags are not accepted"})
	}
	return h, nil
}

func staleContent(current string) error {
	return problem.New(problem.VersionConflict, "the asset's content changed since it was read (current sha256 %s); re-read before deciding", current)
}

func (s *Server) registerAssets(st *store.Store) {
	tags := []string{"assets"}
	read, write := []string{"asset:read"}, []string{"asset:write"}

	Register(s, Operation{ID: "upload-asset", Method: http.MethodPost, Path: "/api/v1/assets/content",
		Summary: "Upload a file as a new asset (raw body, streamed, content-addressed)",
		Tags:    tags, Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: CreateOnly,
		MaxBodyBytes: cblob.MaxBytes},
		func(ctx context.Context, in *assetUploadInput) (*AssetCreated, error) {
			a, err := s.UploadAsset(ctx, st, ScopeFrom(ctx), AssetUpload{Body: in.r, ContentType: in.ContentType, Name: in.Name, Tags: in.Tags})
			if err != nil {
				return nil, err
			}
			return &AssetCreated{Status: http.StatusCreated, Location: "/api/v1/assets/" + a.ID, Body: assetView(a)}, nil
		})
	s.documentRawBody("/api/v1/assets/content", http.MethodPost)
	s.documentCreated("/api/v1/assets/content")

	Register(s, Operation{ID: "list-assets", Method: http.MethodGet, Path: "/api/v1/assets", Summary: "List assets",
		Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ListQuery
			Tag  string `query:"tag" pattern:"^[a-z0-9][a-z0-9._:-]{0,63}$" doc:"only assets carrying this tag"`
			Kind string `query:"kind" enum:"image,font,document" doc:"only assets of this kind"`
		}) (*AssetList, error) {
			f := store.AssetFilter{Tag: in.Tag}
			if in.Kind != "" {
				f.ContentTypes = cblob.TypesOf(cblob.Kind(in.Kind))
			}
			as, err := st.ListAssets(ctx, ScopeFrom(ctx), f, in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &AssetList{}
			out.Body.Items, out.Body.NextCursor = paginate(as, in.Limit,
				func(a store.Asset) string { return a.ID },
				func(a store.Asset) AssetView { return assetView(a) })
			return out, nil
		})

	Register(s, Operation{ID: "list-asset-tags", Method: http.MethodGet, Path: "/api/v1/assets/tags",
		Summary: "Distinct tags of live assets, with counts", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ListQuery
		}) (*AssetTagList, error) {
			ts, err := st.AssetTags(ctx, ScopeFrom(ctx), in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &AssetTagList{}
			out.Body.Items, out.Body.NextCursor = paginate(ts, in.Limit,
				func(t store.TagCount) string { return t.Tag },
				func(t store.TagCount) AssetTagCount { return AssetTagCount{Tag: t.Tag, Count: t.Count} })
			return out, nil
		})

	Register(s, Operation{ID: "get-asset", Method: http.MethodGet, Path: "/api/v1/assets/{asset_id}", Summary: "Asset detail",
		Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			AssetPath
		}) (*AssetOutput, error) {
			a, err := st.GetAsset(ctx, ScopeFrom(ctx), in.AssetID)
			if err != nil {
				return nil, err
			}
			return &AssetOutput{Body: assetView(a)}, nil
		})

	Register(s, Operation{ID: "update-asset", Method: http.MethodPatch, Path: "/api/v1/assets/{asset_id}",
		Summary: "Rename, retag or change the metadata of an asset (version-locked)",
		Tags:    tags, Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			AssetPath
			Body struct {
				Version  int64           `json:"version" minimum:"1" doc:"the version you read"`
				Name     *string         `json:"name,omitempty" minLength:"1" maxLength:"255"`
				Tags     *[]string       `json:"tags,omitempty" maxItems:"32" doc:"replaces the whole list"`
				Metadata *map[string]any `json:"metadata,omitempty" doc:"replaces the whole object; at most 16 KiB of JSON"`
			}
		}) (*AssetOutput, error) {
			var c store.AssetChanges
			if in.Body.Name != nil {
				if err := checkAssetName("body.name", *in.Body.Name, false); err != nil {
					return nil, err
				}
				c.Name = in.Body.Name
			}
			if in.Body.Tags != nil {
				t, err := checkAssetTags("body.tags", *in.Body.Tags)
				if err != nil {
					return nil, err
				}
				c.Tags = &t
			}
			if in.Body.Metadata != nil {
				m, err := checkAssetMetadata("body.metadata", *in.Body.Metadata)
				if err != nil {
					return nil, err
				}
				c.Metadata = m
			}
			a, err := st.UpdateAsset(ctx, ScopeFrom(ctx), in.AssetID, in.Body.Version, c)
			if err != nil {
				return nil, err
			}
			return &AssetOutput{Body: assetView(a)}, nil
		})

	Register(s, Operation{ID: "get-asset-content", Method: http.MethodGet, Path: "/api/v1/assets/{asset_id}/content",
		Summary: "Download an asset's content", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			AssetPath
			SHA256      string `query:"sha256" pattern:"^[0-9a-f]{64}$" doc:"pin the content: answered only while it is current (else 409), and then cacheable as immutable"`
			IfNoneMatch string `header:"If-None-Match" doc:"the ETag you hold; 304 when it is current"`
		}) (*AssetContentOutput, error) {
			sc := ScopeFrom(ctx)
			a, err := st.GetAsset(ctx, sc, in.AssetID)
			if err != nil {
				return nil, err
			}
			if in.SHA256 != "" && in.SHA256 != a.SHA256 {
				return nil, staleContent(a.SHA256)
			}
			etag := `"` + a.SHA256 + `"`
			out := &AssetContentOutput{ContentType: a.ContentType, ETag: etag, NoSniff: "nosniff",
				CSP: "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; sandbox",
				// The path's content can be replaced, so it is revalidated (ETag → 304); a URL
				// pinned with ?sha256= names one content forever.
				CacheControl:       "private, no-cache",
				ContentDisposition: mime.FormatMediaType("inline", map[string]string{"filename": a.Name}),
			}
			if in.SHA256 != "" {
				out.CacheControl = "private, max-age=31536000, immutable"
			}
			if etagMatches(in.IfNoneMatch, a.SHA256) {
				out.Body = func(hc huma.Context) { hc.SetStatus(http.StatusNotModified) }
				return out, nil
			}
			rd, err := s.assetBlobs().Open(ctx, sc, a.BlobKey)
			if err != nil {
				return nil, err
			}
			out.Body = func(hc huma.Context) {
				defer rd.Close()
				hc.SetHeader("Content-Length", strconv.FormatInt(a.ByteSize, 10))
				hc.SetStatus(http.StatusOK)
				if hc.Method() == http.MethodHead {
					return
				}
				if _, err := io.Copy(hc.BodyWriter(), rd); err != nil {
					// The status is sent; a short body against Content-Length tells the client.
					s.Log.Warn("asset content not fully sent", zap.String("trace_id", TraceID(ctx)), zap.String("asset_id", a.ID), zap.Error(err))
				}
			}
			return out, nil
		})
	s.documentContentResponse("/api/v1/assets/{asset_id}/content")

	Register(s, Operation{ID: "replace-asset-content", Method: http.MethodPut, Path: "/api/v1/assets/{asset_id}/content",
		Summary: "Replace an asset's content (locked by its sha256 in If-Match)",
		Tags:    tags, Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: HashLock,
		MaxBodyBytes: cblob.MaxBytes},
		func(ctx context.Context, in *assetReplaceInput) (*AssetOutput, error) {
			sc := ScopeFrom(ctx)
			a, err := st.GetAsset(ctx, sc, in.AssetID)
			if err != nil {
				return nil, err
			}
			baseline, err := parseIfMatch(in.IfMatch)
			if err != nil {
				return nil, err
			}
			if baseline != a.SHA256 {
				return nil, staleContent(a.SHA256)
			}
			obj, err := s.assetBlobs().Put(ctx, sc, in.r, cblob.PutOptions{Declared: in.ContentType,
				Kinds: []cblob.Kind{cblob.KindOf(a.ContentType)}})
			if err != nil {
				return nil, err
			}
			if obj.SHA256 == a.SHA256 {
				return &AssetOutput{Body: assetView(a)}, nil // the same bytes: nothing changes
			}
			a, err = st.ReplaceAssetContent(ctx, sc, in.AssetID, baseline, assetContent(obj))
			if err != nil {
				return nil, err
			}
			return &AssetOutput{Body: assetView(a)}, nil
		})
	s.documentRawBody("/api/v1/assets/{asset_id}/content", http.MethodPut)

	Register(s, Operation{ID: "preview-asset-content", Method: http.MethodPost, Path: "/api/v1/assets/{asset_id}/content/preview",
		Summary: "Describe an asset's content (type, size, sha256, image dimensions); read-only, no body",
		Tags:    tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			AssetPath
		}) (*AssetPreview, error) {
			sc := ScopeFrom(ctx)
			a, rd, err := s.OpenAssetContent(ctx, st, sc, in.AssetID)
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			out := &AssetPreview{}
			b := &out.Body
			b.AssetID, b.Name, b.ContentType, b.Kind = a.ID, a.Name, a.ContentType, string(cblob.KindOf(a.ContentType))
			b.ByteSize, b.SHA256, b.ContentURL = a.ByteSize, a.SHA256, AssetContentURL(a.ID, a.SHA256)
			if w, h, ok := cblob.Dimensions(rd, a.ContentType); ok {
				b.Width, b.Height = &w, &h
			}
			return out, nil
		})

	Register(s, Operation{ID: "copy-asset", Method: http.MethodPost, Path: "/api/v1/assets/{asset_id}/copy",
		Summary: "Copy an asset: a new asset sharing the same content (no byte copy)",
		Tags:    tags, Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: CreateOnly},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			AssetPath
			Body *struct {
				Name *string `json:"name,omitempty" minLength:"1" maxLength:"255" doc:"name of the copy; default: the source's name"`
			}
		}) (*AssetCreated, error) {
			var name *string
			if in.Body != nil && in.Body.Name != nil {
				if err := checkAssetName("body.name", *in.Body.Name, false); err != nil {
					return nil, err
				}
				name = in.Body.Name
			}
			a, err := st.CopyAsset(ctx, ScopeFrom(ctx), in.AssetID, name)
			if err != nil {
				return nil, err
			}
			return &AssetCreated{Status: http.StatusCreated, Location: "/api/v1/assets/" + a.ID, Body: assetView(a)}, nil
		})

	s.documentCreated("/api/v1/assets/{asset_id}/copy")

	registerArchive(s, st, store.Assets, "asset", "asset:write", func(in *archiveAsset) string { return in.AssetID })
}

// etagMatches reports whether an If-None-Match list names the content's sha256 (or is "*").
func etagMatches(header, sha string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == `"`+sha+`"` {
			return true
		}
	}
	return false
}

// documentRawBody describes a raw-bytes request body in the OpenAPI document: huma derives
// nothing from an input that streams its body.
func (s *Server) documentRawBody(path, method string) {
	item := s.API.OpenAPI().Paths[path]
	if item == nil {
		return
	}
	op := item.Post
	if method == http.MethodPut {
		op = item.Put
	}
	if op == nil {
		return
	}
	content := map[string]*huma.MediaType{}
	for _, t := range append(cblob.AllowedTypes(), "application/octet-stream") {
		content[t] = &huma.MediaType{Schema: &huma.Schema{Type: "string", Format: "binary"}}
	}
	op.RequestBody = &huma.RequestBody{Required: true, Content: content,
		Description: "The file's bytes (not multipart), at most " + strconv.FormatInt(cblob.MaxBytes, 10) +
			" bytes. The media type is sniffed from the content and must be on the allow-list and agree with Content-Type."}
}

// documentCreated moves a POST operation's documented answer from 200 to the 201 it sends
// (huma documents the default status; the Status field of AssetCreated sets 201).
func (s *Server) documentCreated(path string) {
	item := s.API.OpenAPI().Paths[path]
	if item == nil || item.Post == nil || item.Post.Responses["200"] == nil {
		return
	}
	r := item.Post.Responses["200"]
	r.Description = "Created"
	item.Post.Responses["201"] = r
	delete(item.Post.Responses, "200")
}

// documentContentResponse describes the binary answer of a content download.
func (s *Server) documentContentResponse(path string) {
	item := s.API.OpenAPI().Paths[path]
	if item == nil || item.Get == nil || item.Get.Responses["200"] == nil {
		return
	}
	op := item.Get
	if op == nil {
		return
	}
	content := map[string]*huma.MediaType{}
	for _, t := range cblob.AllowedTypes() {
		content[t] = &huma.MediaType{Schema: &huma.Schema{Type: "string", Format: "binary"}}
	}
	op.Responses["200"].Content = content
	op.Responses["304"] = &huma.Response{Description: "Not Modified: the If-None-Match ETag is current"}
}
