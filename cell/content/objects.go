package content

import (
	"encoding/json"
	"slidecells/cell/object"
	"time"
)

// The content objects as the cell stores them: projects, pages, components with their source
// versions, and assets. cell/store reads and writes them; the rules that make them live here.

// Project is a project as stored.
type Project struct {
	object.Object
	Name        string
	Description string
	Version     int64
	object.Stamps
}

// Page is a page as stored: its metadata and the number of its current source version.
type Page struct {
	object.Object
	ProjectID string
	Labels
	FileType        string
	Version         int64
	MetadataVersion int64
	object.Stamps
}

// DraftHashField is the field a component draft's baseline errors name: its draft_hash, as the
// caller read it (cell/api answers it at the request's If-Match header).
const DraftHashField = "draft_hash"

// Component is a component as stored: its key, metadata, draft and last published version.
type Component struct {
	object.Object
	Labels
	FileType         string
	DraftSource      string
	DraftHash        string
	PublishedVersion int64
	MetadataVersion  int64
	object.Stamps
}

// ComponentSource is what a compile needs of a component: its published source.
type ComponentSource struct {
	ID       string
	Key      string
	FileType string
	Source   string
	Version  int64
}

// Asset is an asset as stored. The bytes are in the cell's blob store under BlobKey (see cell/blob);
// SHA256 is the lower-case hex digest of those bytes and the content's lock baseline.
type Asset struct {
	object.Object
	Name        string
	ContentType string // canonical, sniffed from the bytes (cell/blob allow-list)
	ByteSize    int64
	SHA256      string
	BlobKey     string
	Tags        []string
	Metadata    json.RawMessage // a JSON object
	Version     int64
	object.Stamps
}

// AssetContent is stored content as cell/blob reports it, ready to be referenced by a row.
type AssetContent struct {
	ContentType string
	ByteSize    int64
	SHA256      string
	BlobKey     string
}

// NewAsset is what CreateAsset inserts.
type NewAsset struct {
	Name     string
	Content  AssetContent
	Tags     []string
	Metadata json.RawMessage // nil is {}
}

// AssetChanges are the metadata edits of UpdateAsset; nil leaves a field as it is.
type AssetChanges struct {
	Name     *string
	Tags     *[]string       // replaces the whole list
	Metadata json.RawMessage // replaces the whole object; nil keeps it
}

// AssetFilter narrows ListAssets; empty fields do not filter.
type AssetFilter struct {
	Tag          string
	ContentTypes []string // any of these
}

// TagCount is one distinct tag of live assets and how many live assets carry it.
type TagCount struct {
	Tag   string
	Count int64
}

// Labels name and describe a page or a component: its key and its metadata.
type Labels struct {
	Key         string   `json:"key"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// Dependency is a component a version was compiled with, at the version resolved.
type Dependency struct {
	ComponentID string `json:"component_id"`
	Key         string `json:"key"`
	Version     int64  `json:"version"`
	Depth       int    `json:"depth"`
}

// NewSource is a compiled source to store as a version.
type NewSource struct {
	FileType       string
	Source         string
	SourceDigest   string
	CompiledDigest string
	Dependencies   []Dependency
	JobID          string
}

// SourceVersion is one immutable version of a page's or component's source.
type SourceVersion struct {
	Version int64
	NewSource
	CreatedBy string
	CreatedAt time.Time
}

// Refs are the references a part's new value makes; WritePart reads them inside the write.
type Refs struct {
	ThemeKey string   // a theme key; "" for none
	Pages    []string // page IDs of the project
	Assets   []string // asset IDs of the workspace
}

// Live is what WritePart found of Refs, read in the write transaction: whether the theme key
// is live, which pages are live pages of the project, and the live assets by ID.
type Live struct {
	ThemeKey bool
	Pages    map[string]bool
	Assets   map[string]Asset
}

// PageSummary is a page as listed under its project.
type PageSummary struct {
	ID       string
	Key      string
	Title    string
	FileType string
	Version  int64
}
