package api

import (
	"slidecells/cell/content"
)

// The project parts as the API reads and writes them: the wire shapes of content's objects, with
// their schema tags. Go converts between a wire shape and its domain struct when their fields are
// the same (tags aside); nested shapes convert with the functions below.

// ProjectSettings are the project-wide settings of a configuration.
type ProjectSettings struct {
	Title      string `json:"title,omitempty" maxLength:"200"`
	Locale     string `json:"locale,omitempty" pattern:"^[a-z]{2,3}(-[A-Z]{2})?$" doc:"BCP 47 language tag, e.g. en-US"`
	EntryRoute string `json:"entry_route,omitempty" maxLength:"200" pattern:"^/([a-z0-9-]+(/[a-z0-9-]+)*)?$" doc:"default entry route of previews"`
	Timezone   string `json:"timezone,omitempty" maxLength:"64" pattern:"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$"`
}

// ProjectPresentation is the normalised presentation of a project: every field present, and
// the style it came from when apply-style wrote it.
type ProjectPresentation struct {
	StylePresentation
	StyleID             string `json:"style_id,omitempty" doc:"the applied style, when apply-style wrote this presentation"`
	StyleSnapshotDigest string `json:"style_snapshot_digest,omitempty" doc:"digest of the applied style snapshot"`
}

// ProjectConfiguration is a project's stored configuration.
type ProjectConfiguration struct {
	ProjectSettings
	Presentation *ProjectPresentation `json:"presentation,omitempty"`
}

// configurationWire shows a stored configuration.
func configurationWire(c content.ProjectConfiguration) ProjectConfiguration {
	out := ProjectConfiguration{ProjectSettings: ProjectSettings(c.ProjectSettings)}
	if p := c.Presentation; p != nil {
		out.Presentation = &ProjectPresentation{StylePresentation: StylePresentation(p.StylePresentation),
			StyleID: p.StyleID, StyleSnapshotDigest: p.StyleSnapshotDigest}
	}
	return out
}

// RouteNode is one route of a project's route tree.
type RouteNode struct {
	Segment  string      `json:"segment" maxLength:"64" pattern:"^([a-z0-9-]+)?$" doc:"path segment; empty only for the root"`
	PageID   string      `json:"page_id,omitempty" pattern:"^pg_[a-z2-7]{26}$"`
	Title    string      `json:"title,omitempty" maxLength:"200"`
	Children []RouteNode `json:"children,omitempty" maxItems:"100"`
}

// RouteTree is a project's route tree.
type RouteTree struct {
	Routes []RouteNode `json:"routes" maxItems:"100"`
}

// routesWire shows route nodes; routesOf reads them.
func routesWire(ns []content.RouteNode) []RouteNode {
	return mapSlice(ns, func(n content.RouteNode) RouteNode {
		return RouteNode{Segment: n.Segment, PageID: n.PageID, Title: n.Title, Children: routesWire(n.Children)}
	})
}

func routesOf(ns []RouteNode) []content.RouteNode {
	return mapSlice(ns, func(n RouteNode) content.RouteNode {
		return content.RouteNode{Segment: n.Segment, PageID: n.PageID, Title: n.Title, Children: routesOf(n.Children)}
	})
}

// BuildAsset is one asset a project's build ships, at a path of the built site.
type BuildAsset struct {
	AssetID string `json:"asset_id" pattern:"^ast_[a-z2-7]{26}$"`
	Role    string `json:"role" enum:"favicon,social-image,font,image,download" doc:"what the build does with it"`
	Path    string `json:"path" maxLength:"200" pattern:"^/assets/[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$" doc:"path in the built site, under /assets/"`
	// SHA256 and ContentURL are filled in by the backend: the build pins this content.
	SHA256     string `json:"sha256,omitempty" readOnly:"true"`
	ContentURL string `json:"content_url,omitempty" readOnly:"true"`
}

// mapSlice maps a slice, keeping nil as nil (a JSON null stays null, an empty list stays []).
func mapSlice[F, T any](in []F, f func(F) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}
