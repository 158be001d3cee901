// Package snapshot is the RenderSnapshot (render-execution.md, "RenderSnapshot"): the immutable,
// persisted description of everything one render of a page or component needs — the compiled
// module with its component closure already bundled in, the theme/style/font CSS, the font
// files and assets it references pinned by digest, the scenes, the canvas and the preview host
// build — and the input digest that identifies it.
//
// A snapshot is written once to the cell's blob store, as a JSON manifest at ManifestKey next
// to the content-addressed objects it lists, and never changed. The render coordinator creates
// it after authorization; the preview host reads it to build the preview document and serves
// only the objects the manifest lists, so a snapshot reference can never reach bytes of another
// snapshot or workspace. In-process caches are rebuilt from the manifest; the blob store is the
// source of truth.
//
// # Document layout the preview host serves (paths below the document path D)
//
//	D                      the preview document (HTML), needs the artifact's preview access
//	D/module.js            Module (an ES module; for file type html, Module is the document body)
//	D/styles.css           Styles (theme and style custom properties, @font-face rules)
//	D/blobs/<sha256 hex>   a font or asset the manifest lists (Fonts, Assets), by its digest
//
// Styles refer to fonts with the relative URL "blobs/<hex>" (resolved against D/styles.css),
// and the runtime resolves an asset ID to "D/blobs/<hex>" through Assets.
package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"slidecells/shared/digest"
	"slidecells/shared/ids"
)

// Schema versions the manifest.
const Schema = "render-snapshot.v1"

// MaxManifestBytes bounds a manifest on read.
const MaxManifestBytes = 1 << 20

// Entity kinds.
const (
	KindPage      = "page"
	KindComponent = "component"
)

// Manifest is one snapshot.
type Manifest struct {
	Schema      string `json:"schema"`
	Ref         string `json:"ref"` // the snapshot_ref of execution requests: "snap_<id>"
	WorkspaceID string `json:"workspace_id"`
	// Owner is the logical business owner (a job, a validation, a screenshot request).
	Owner  string `json:"owner"`
	Entity Entity `json:"entity"`
	// FileType is the module's: tsx, jsx (an ES module whose default export is mounted) or
	// html (a document body, inserted as is).
	FileType string `json:"file_type"`
	Route    string `json:"route,omitempty"`
	Module   Object `json:"module"`
	// Components is the bundled dependency closure, for identity; their code is in Module.
	Components []Component `json:"components"`
	// Scenes are the component scenes to run, "default" first; ["default"] for pages.
	Scenes []string `json:"scenes"`
	// Styles is one CSS file: theme and style custom properties and the @font-face rules.
	Styles Object   `json:"styles"`
	Fonts  []Object `json:"fonts"`
	Assets []Asset  `json:"assets"`
	// Presentation is the style snapshot (page size, theme key, ...) the runtime may read.
	Presentation json.RawMessage `json:"presentation,omitempty"`
	HostBuild    string          `json:"host_build"`
	Canvas       Canvas          `json:"canvas"`
	InputDigest  string          `json:"input_digest"`
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
}

// Entity is what the snapshot renders.
type Entity struct {
	Kind string `json:"kind"` // page | component
	ID   string `json:"id,omitempty"`
	Key  string `json:"key,omitempty"` // component key
	// Version is the page or component version rendered, 0 for a source not saved.
	Version   int64  `json:"version,omitempty"`
	DraftHash string `json:"draft_hash,omitempty"`
}

// Object is one content-addressed blob the snapshot uses.
type Object struct {
	Key         string `json:"key"`
	Digest      string `json:"digest"` // sha256:<hex>
	Bytes       int64  `json:"bytes"`
	ContentType string `json:"content_type"`
}

// Hex is the digest's hex part, the name the preview host serves it under.
func (o Object) Hex() string { return strings.TrimPrefix(o.Digest, "sha256:") }

// Asset is an asset the module references by ID, pinned to its content.
type Asset struct {
	ID string `json:"id"`
	Object
}

// Component is one bundled component, with the version identity that went into the bundle.
type Component struct {
	Key     string `json:"key"`
	ID      string `json:"id"`
	Version int64  `json:"version,omitempty"` // 0: the draft
	Digest  string `json:"digest"`
}

// Canvas is the fixed viewport, in CSS pixels, and the device scale factor.
type Canvas struct {
	Width             int     `json:"width"`
	Height            int     `json:"height"`
	DeviceScaleFactor float64 `json:"device_scale_factor"`
}

// ManifestKey is where a snapshot's manifest lives.
func ManifestKey(workspaceID, ref string) string {
	return "ws/" + workspaceID + "/snapshots/" + ref + ".json"
}

// ComputeInputDigest is the input_digest: the hash of source (module), dependencies,
// theme/style (styles and presentation), immutable assets and fonts, scenes and route. The
// canvas belongs to the render digest, not here.
func (m *Manifest) ComputeInputDigest() (string, error) {
	type named struct {
		ID     string `json:"id,omitempty"`
		Digest string `json:"digest"`
	}
	fonts := make([]named, len(m.Fonts))
	for i, f := range m.Fonts {
		fonts[i] = named{Digest: f.Digest}
	}
	assets := make([]named, len(m.Assets))
	for i, a := range m.Assets {
		assets[i] = named{ID: a.ID, Digest: a.Digest}
	}
	return digest.JSON(struct {
		Schema       string          `json:"schema"`
		Entity       string          `json:"entity"`
		FileType     string          `json:"file_type"`
		Route        string          `json:"route"`
		Module       string          `json:"module"`
		Components   []Component     `json:"components"`
		Scenes       []string        `json:"scenes"`
		Styles       string          `json:"styles"`
		Presentation json.RawMessage `json:"presentation,omitempty"`
		Fonts        []named         `json:"fonts"`
		Assets       []named         `json:"assets"`
		HostBuild    string          `json:"host_build"`
	}{Schema, m.Entity.Kind, m.FileType, m.Route, m.Module.Digest, m.Components, m.Scenes, m.Styles.Digest,
		m.Presentation, fonts, assets, m.HostBuild})
}

// Check verifies a manifest read back: schema, identity, that every object lies in the
// manifest's workspace, and the input digest.
func (m *Manifest) Check(workspaceID, ref string) error {
	if m.Schema != Schema {
		return fmt.Errorf("snapshot %s: schema %q is not %q", ref, m.Schema, Schema)
	}
	if m.Ref != ref || m.WorkspaceID != workspaceID || !ids.Valid(ids.Snapshot, ref) {
		return fmt.Errorf("snapshot %s: identity does not match its key", ref)
	}
	for _, o := range m.objects() {
		if !strings.HasPrefix(o.Key, "ws/"+workspaceID+"/") || !digest.Valid(o.Digest) {
			return fmt.Errorf("snapshot %s: object %q outside its workspace or without a digest", ref, o.Key)
		}
	}
	d, err := m.ComputeInputDigest()
	if err != nil || d != m.InputDigest {
		return fmt.Errorf("snapshot %s: input digest does not match its content", ref)
	}
	return nil
}

// objects are every object the manifest lists: module, styles, fonts and assets.
func (m *Manifest) objects() []Object {
	objs := append([]Object{m.Module, m.Styles}, m.Fonts...)
	for _, a := range m.Assets {
		objs = append(objs, a.Object)
	}
	return objs
}

// Object returns the object the manifest lists under hex (module, styles, a font or an asset).
func (m *Manifest) Object(hex string) (Object, bool) {
	for _, o := range m.objects() {
		if o.Hex() == hex {
			return o, true
		}
	}
	return Object{}, false
}

// ErrNotFound is returned by Load for a snapshot that does not exist.
var ErrNotFound = errors.New("snapshot not found")

// Save writes the manifest once. A manifest is immutable: writing an existing ref is an error.
func Save(ctx context.Context, b *gcblob.Bucket, m *Manifest) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	key := ManifestKey(m.WorkspaceID, m.Ref)
	if ok, err := b.Exists(ctx, key); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("snapshot %s exists; snapshots are never overwritten", m.Ref)
	}
	return b.WriteAll(ctx, key, data, &gcblob.WriterOptions{ContentType: "application/json"})
}

// Load reads and checks a manifest.
func Load(ctx context.Context, b *gcblob.Bucket, workspaceID, ref string) (*Manifest, error) {
	if !ids.Valid(ids.Snapshot, ref) {
		return nil, ErrNotFound
	}
	r, err := b.NewReader(ctx, ManifestKey(workspaceID, ref), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if r.Size() > MaxManifestBytes {
		return nil, fmt.Errorf("snapshot %s: manifest of %d bytes over the limit", ref, r.Size())
	}
	var m Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", ref, err)
	}
	if err := m.Check(workspaceID, ref); err != nil {
		return nil, err
	}
	return &m, nil
}
