package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/zap"

	"slidecells/cell/auth"
	cblob "slidecells/cell/blob"
	"slidecells/cell/content"
	"slidecells/cell/store"
)

// AssetTagCount is one distinct tag.
type AssetTagCount struct {
	Tag   string `json:"tag"`
	Count int64  `json:"count" doc:"live assets carrying the tag"`
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

// StreamedBody gives a handler the request body as a stream: huma reads no body for an input
// without Body or RawBody, and this resolver hands over the reader instead.
type StreamedBody struct{ r io.Reader }

// Resolve implements huma.Resolver.
func (b *StreamedBody) Resolve(ctx huma.Context) []error {
	b.r = ctx.BodyReader()
	return nil
}

// rawAsset is the documented raw body of uploads and replacements.
var rawAsset = &Media{Types: append(cblob.AllowedTypes(), "application/octet-stream"),
	Description: "The file's bytes (not multipart), at most " + strconv.FormatInt(cblob.MaxBytes, 10) +
		" bytes. The media type is sniffed from the content and must be on the allow-list and agree with Content-Type."}

// assets returns the cell's asset service.
func (s *Server) assets(st *store.Store) *content.Assets {
	return &content.Assets{Store: st, Blobs: &cblob.Store{Bucket: s.Blobs}}
}

// assetOps are the asset operations.
type assetOps struct {
	s    *Server
	st   *store.Store
	svc  *content.Assets
	kind Kind[content.Asset, AssetView]
}

func (s *Server) registerAssets(st *store.Store) {
	h := &assetOps{s: s, st: st, svc: s.assets(st), kind: Kind[content.Asset, AssetView]{Rows: store.Bind(st, store.Assets),
		Read: auth.AssetRead, Write: auth.AssetWrite, View: AssetOf, OwnList: true}}
	k := h.kind
	h.kind.Register(s)
	list := k.op("list-assets", http.MethodGet, k.collection(), "List assets", k.Read)
	Scoped(s, list, h.list)
	tags := k.op("list-asset-tags", http.MethodGet, k.collection()+"/tags", "Distinct tags of live assets, with counts", k.Read)
	Scoped(s, tags, h.listTags)
	Scoped(s, k.UpdateOp("Rename, retag or change the metadata of an asset (version-locked)"), h.update)

	upload := k.CreateOp("Upload a file as a new asset (raw body, streamed, content-addressed)")
	upload.ID, upload.Path, upload.MaxBodyBytes, upload.RawBody = "upload-asset", k.collection()+"/content", cblob.MaxBytes, rawAsset
	Scoped(s, upload, h.upload)
	get := k.op("get-asset-content", http.MethodGet, k.item()+"/content", "Download an asset's content", k.Read)
	get.Produces = &Media{Types: cblob.AllowedTypes()}
	get.Also = map[int]string{http.StatusNotModified: "Not Modified: the If-None-Match ETag is current"}
	Scoped(s, get, h.content)
	replace := k.op("replace-asset-content", http.MethodPut, k.item()+"/content", "Replace an asset's content (locked by its sha256 in If-Match)", k.Write)
	replace.Lock, replace.MaxBodyBytes, replace.RawBody = HashLock, cblob.MaxBytes, rawAsset
	Scoped(s, replace, h.replace)
	preview := k.op("preview-asset-content", http.MethodPost, k.item()+"/content/preview", "Describe an asset's content (type, size, sha256, image dimensions); read-only, no body", k.Read)
	preview.ReadOnly, preview.Idempotency = true, NoIdempotency
	Scoped(s, preview, h.preview)
	cp := k.CreateOp("Copy an asset: a new asset sharing the same content (no byte copy)")
	cp.ID, cp.Path = "copy-asset", k.item()+"/copy"
	Scoped(s, cp, h.copy)
}

type listAssetsIn = struct {
	ListQuery
	Tag  string `query:"tag" pattern:"^[a-z0-9][a-z0-9._:-]{0,63}$" doc:"only assets carrying this tag"`
	Kind string `query:"kind" enum:"image,font,document" doc:"only assets of this kind"`
}

func (h *assetOps) list(ctx context.Context, sc auth.Scope, in *listAssetsIn) (*Page[AssetView], error) {
	f := content.AssetFilter{Tag: in.Tag}
	if in.Kind != "" {
		f.ContentTypes = cblob.TypesOf(cblob.Kind(in.Kind))
	}
	as, err := h.st.ListAssets(ctx, sc, f, in.Position(), in.Limit+1)
	return h.kind.Page(sc, as, in.ListQuery, err)
}

func (h *assetOps) listTags(ctx context.Context, sc auth.Scope, in *ListQuery) (*Page[AssetTagCount], error) {
	ts, err := h.st.AssetTags(ctx, sc, in.Position(), in.Limit+1)
	if err != nil {
		return nil, err
	}
	return paginate(ts, *in, func(t content.TagCount) string { return t.Tag },
		plain(func(t content.TagCount) AssetTagCount { return AssetTagCount{Tag: t.Tag, Count: t.Count} }))
}

type updateAssetIn = struct {
	ObjectID
	Body struct {
		Version  int64           `json:"version" minimum:"1" doc:"the version you read"`
		Name     *string         `json:"name,omitempty" minLength:"1" maxLength:"255"`
		Tags     *[]string       `json:"tags,omitempty" maxItems:"32" doc:"replaces the whole list"`
		Metadata *map[string]any `json:"metadata,omitempty" doc:"replaces the whole object; at most 16 KiB of JSON"`
	}
}

func (h *assetOps) update(ctx context.Context, sc auth.Scope, in *updateAssetIn) (*Single[AssetView], error) {
	c, err := content.Changes(in.Body.Name, in.Body.Tags, in.Body.Metadata)
	if err != nil {
		return nil, err
	}
	a, err := h.st.UpdateAsset(ctx, sc, in.ID(), in.Body.Version, c)
	return h.kind.One(sc)(a, err)
}

type uploadAssetIn = struct {
	ContentType string   `header:"Content-Type" doc:"declared media type; the content is sniffed and must agree (application/octet-stream lets the content decide)"`
	Name        string   `query:"name" maxLength:"255" doc:"asset name; default: the first 12 hex digits of the sha256 and an extension"`
	Tags        []string `query:"tags" maxItems:"32" doc:"comma-separated tags (a-z 0-9 . _ : -, at most 64 characters each)"`
	StreamedBody
}

func (h *assetOps) upload(ctx context.Context, sc auth.Scope, in *uploadAssetIn) (*Created[AssetView], error) {
	a, err := h.svc.Upload(ctx, sc, content.Upload{Body: in.r, ContentType: in.ContentType, Name: in.Name, Tags: in.Tags})
	return h.kind.Created(sc, a, fieldsAt("query.", err)) // the upload's name and tags are query parameters
}

type assetContentIn = struct {
	ObjectID
	SHA256      string `query:"sha256" pattern:"^[0-9a-f]{64}$" doc:"pin the content: answered only while it is current (else 409), and then cacheable as immutable"`
	IfNoneMatch string `header:"If-None-Match" doc:"the ETag you hold; 304 when it is current"`
}

func (h *assetOps) content(ctx context.Context, sc auth.Scope, in *assetContentIn) (*AssetContentOutput, error) {
	a, err := h.svc.Pinned(ctx, sc, in.ID(), in.SHA256)
	if err != nil {
		return nil, err
	}
	out := &AssetContentOutput{ContentType: a.ContentType, ETag: `"` + a.SHA256 + `"`, NoSniff: "nosniff",
		CSP: "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; sandbox",
		// The path's content can be replaced, so it is revalidated (ETag → 304); a URL
		// pinned with ?sha256= names one content forever.
		CacheControl:       "private, no-cache",
		ContentDisposition: contentDisposition(a.Name),
	}
	if in.SHA256 != "" {
		out.CacheControl = "private, max-age=31536000, immutable"
	}
	if content.ETagMatches(in.IfNoneMatch, a.SHA256) {
		out.Body = func(hc huma.Context) { hc.SetStatus(http.StatusNotModified) }
		return out, nil
	}
	rd, err := h.svc.Blobs.Open(ctx, sc, a.BlobKey)
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
			h.s.Log.Warn("asset content not fully sent", zap.String("trace_id", TraceID(ctx)), zap.String("asset_id", a.ID), zap.Error(err))
		}
	}
	return out, nil
}

type replaceAssetIn = struct {
	ObjectID
	ContentType string `header:"Content-Type" doc:"declared media type; the content is sniffed and must agree and keep the asset's kind"`
	IfMatch     string `header:"If-Match" required:"true" doc:"the quoted sha256 you read (the content's ETag); a stale one is 409 VERSION_CONFLICT"`
	StreamedBody
}

func (h *assetOps) replace(ctx context.Context, sc auth.Scope, in *replaceAssetIn) (*Single[AssetView], error) {
	a, err := h.svc.Replace(ctx, sc, in.ID(), in.IfMatch, in.r, in.ContentType)
	return h.kind.One(sc)(a, fieldAt(err, content.BaselineField, "header.If-Match"))
}

func (h *assetOps) preview(ctx context.Context, sc auth.Scope, in *ObjectID) (*AssetPreview, error) {
	a, rd, err := h.svc.Open(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	out := &AssetPreview{}
	b := &out.Body
	b.AssetID, b.Name, b.ContentType, b.Kind = a.ID, a.Name, a.ContentType, string(cblob.KindOf(a.ContentType))
	b.ByteSize, b.SHA256, b.ContentURL = a.ByteSize, a.SHA256, content.ContentURLOf(a)
	if w, h, ok := cblob.Dimensions(rd, a.ContentType); ok {
		b.Width, b.Height = &w, &h
	}
	return out, nil
}

type copyAssetIn = struct {
	ObjectID
	Body *struct {
		Name *string `json:"name,omitempty" minLength:"1" maxLength:"255" doc:"name of the copy; default: the source's name"`
	}
}

func (h *assetOps) copy(ctx context.Context, sc auth.Scope, in *copyAssetIn) (*Created[AssetView], error) {
	var name *string
	if in.Body != nil && in.Body.Name != nil {
		if err := content.CheckName("name", *in.Body.Name, false); err != nil {
			return nil, err
		}
		name = in.Body.Name
	}
	a, err := h.st.CopyAsset(ctx, sc, in.ID(), name)
	return h.kind.Created(sc, a, err)
}
