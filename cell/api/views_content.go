package api

import (
	"encoding/json"
	"slidecells/cell/content"

	"slidecells/cell/auth/scope"
	cblob "slidecells/cell/blob"
	"slidecells/cell/object"
)

// The content objects as the API shows them.

// ProjectView is a project as the API shows it.
type ProjectView struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     int64  `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	object.Stamps
}

// ProjectOf shows a stored project.
func ProjectOf(_ scope.Scope, p content.Project) (ProjectView, error) {
	return ProjectView{ID: p.ID, Name: p.Name, Description: p.Description, Version: p.Version,
		Stamps: p.Stamps}, nil
}

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
	object.Stamps
}

// AssetOf shows a stored asset.
func AssetOf(_ scope.Scope, a content.Asset) (AssetView, error) {
	meta := map[string]any{}
	_ = json.Unmarshal(a.Metadata, &meta)
	tags := a.Tags
	if tags == nil {
		tags = []string{}
	}
	return AssetView{ID: a.ID, Name: a.Name, ContentType: a.ContentType, Kind: string(cblob.KindOf(a.ContentType)),
		ByteSize: a.ByteSize, SHA256: a.SHA256, Tags: tags, Metadata: meta, Version: a.Version,
		ContentURL: content.ContentURLOf(a), Stamps: a.Stamps}, nil
}
