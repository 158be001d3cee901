package content

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"slidecells/cell/auth/scope"
	cblob "slidecells/cell/blob"
	"slidecells/cell/design"
	"slidecells/shared/problem"
)

// ProjectSettings are the project-wide settings of a configuration.
type ProjectSettings struct {
	Title      string `json:"title,omitempty"`
	Locale     string `json:"locale,omitempty"`
	EntryRoute string `json:"entry_route,omitempty"`
	Timezone   string `json:"timezone,omitempty"`
}

// ProjectPresentation is the normalised presentation of a project: every field present, and
// the style it came from when apply-style wrote it.
type ProjectPresentation struct {
	design.StylePresentation
	StyleID             string `json:"style_id,omitempty"`
	StyleSnapshotDigest string `json:"style_snapshot_digest,omitempty"`
}

// ProjectConfiguration is a project's stored configuration.
type ProjectConfiguration struct {
	ProjectSettings
	Presentation *ProjectPresentation `json:"presentation,omitempty"`
}

// RouteNode is one route of a project's route tree.
type RouteNode struct {
	Segment  string      `json:"segment"`
	PageID   string      `json:"page_id,omitempty"`
	Title    string      `json:"title,omitempty"`
	Children []RouteNode `json:"children,omitempty"`
}

// RouteTree is a project's route tree.
type RouteTree struct {
	Routes []RouteNode `json:"routes"`
}

// Route tree limits beyond the schema's per-level caps.
const (
	maxRouteNodes = 500
	maxRouteDepth = 6
)

// BuildAsset is one asset a project's build ships, at a path of the built site.
type BuildAsset struct {
	AssetID string `json:"asset_id"`
	Role    string `json:"role"`
	Path    string `json:"path"`
	// SHA256 and ContentURL are filled in by the backend: the build pins this content.
	SHA256     string `json:"sha256,omitempty"`
	ContentURL string `json:"content_url,omitempty"`
}

// roleKinds says which content each build role takes.
var roleKinds = map[string][]cblob.Kind{
	"favicon":      {cblob.KindImage},
	"social-image": {cblob.KindImage},
	"image":        {cblob.KindImage},
	"font":         {cblob.KindFont},
	"download":     {cblob.KindImage, cblob.KindFont, cblob.KindDocument},
}

// Projects are the project structure writes: each part is written whole, version-locked, and
// its references are judged inside the write.
type Projects struct {
	Store ProjectStore
}

// Configuration reads a project's configuration.
func (ps *Projects) Configuration(ctx context.Context, sc scope.Scope, projectID string) (ProjectConfiguration, int64, error) {
	var cfg ProjectConfiguration
	v, err := ps.read(ctx, sc, projectID, PartConfiguration, &cfg)
	return cfg, v, err
}

// RouteTree reads a project's route tree.
func (ps *Projects) RouteTree(ctx context.Context, sc scope.Scope, projectID string) (RouteTree, int64, error) {
	var t RouteTree
	v, err := ps.read(ctx, sc, projectID, PartRouteTree, &t)
	if t.Routes == nil {
		t.Routes = []RouteNode{}
	}
	return t, v, err
}

// BuildAssets reads a project's build assets.
func (ps *Projects) BuildAssets(ctx context.Context, sc scope.Scope, projectID string) ([]BuildAsset, int64, error) {
	list := []BuildAsset{}
	v, err := ps.read(ctx, sc, projectID, PartBuildAssets, &list)
	if list == nil {
		list = []BuildAsset{}
	}
	return list, v, err
}

func (ps *Projects) read(ctx context.Context, sc scope.Scope, projectID string, p Part, into any) (int64, error) {
	raw, v, err := ps.Store.GetPart(ctx, sc, projectID, p)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return 0, problem.Wrap(err, "stored "+p.Name()+" unreadable")
	}
	return v, nil
}

// PutConfiguration replaces a configuration; its presentation takes the same fields, rules and
// defaults as a style, and its theme key must name a live theme.
func (ps *Projects) PutConfiguration(ctx context.Context, sc scope.Scope, projectID string, baseline int64,
	settings ProjectSettings, pres *design.StylePresentationFields) (ProjectConfiguration, int64, error) {
	cfg := ProjectConfiguration{ProjectSettings: settings}
	const prefix = "configuration.presentation."
	var themeKey string
	if pres != nil {
		if pres.StyleSpecMarkdown != nil && len(*pres.StyleSpecMarkdown) > design.MaxStyleSpecBytes {
			return cfg, 0, problem.Invalid(problem.FieldError{Field: prefix + "style_spec_markdown", Message: fmt.Sprintf("at most %d bytes", design.MaxStyleSpecBytes)})
		}
		p, fe := design.PresentationRequest(*pres, prefix).Apply(design.DefaultStylePresentation())
		if len(fe) > 0 {
			return cfg, 0, problem.Invalid(fe...)
		}
		cfg.Presentation = &ProjectPresentation{StylePresentation: p}
		themeKey = design.ThemeKeyOf(p)
	}
	v, err := ps.Store.WritePart(ctx, sc, projectID, PartConfiguration, baseline, Refs{ThemeKey: themeKey},
		func(_ json.RawMessage, live Live) (any, error) {
			return cfg, liveTheme(live, themeKey, prefix+"theme_key")
		})
	return cfg, v, err
}

// ApplyStyle makes a style's snapshot the project's presentation. The project named answers
// first, so a foreign project is the same 404 whatever the style; the style's theme must still
// be live when it is applied.
func (ps *Projects) ApplyStyle(ctx context.Context, sc scope.Scope, projectID, styleID string, baseline int64) (ProjectConfiguration, int64, error) {
	var cfg ProjectConfiguration
	if _, err := ps.Store.GetProject(ctx, sc, projectID); err != nil {
		return cfg, 0, err
	}
	style, err := ps.Store.GetStyle(ctx, sc, styleID)
	if problem.As(err).Code == problem.NotFound {
		return cfg, 0, problem.Invalid(problem.FieldError{Field: "style_id", Message: "not a live style of this workspace"})
	}
	if err != nil {
		return cfg, 0, err
	}
	snap, err := design.DecodeSnapshot(style.Snapshot)
	if err != nil {
		return cfg, 0, err
	}
	themeKey := design.ThemeKeyOf(snap.Presentation)
	v, err := ps.Store.WritePart(ctx, sc, projectID, PartConfiguration, baseline, Refs{ThemeKey: themeKey},
		func(current json.RawMessage, live Live) (any, error) {
			if err := json.Unmarshal(current, &cfg); err != nil {
				return nil, problem.Wrap(err, "stored configuration unreadable")
			}
			cfg.Presentation = &ProjectPresentation{StylePresentation: snap.Presentation, StyleID: style.ID, StyleSnapshotDigest: style.SnapshotDigest}
			return cfg, liveTheme(live, themeKey, "style_id")
		})
	return cfg, v, err
}

func liveTheme(live Live, key, field string) error {
	if key == "" || live.ThemeKey {
		return nil
	}
	return problem.Invalid(problem.FieldError{Field: field, Message: "theme " + key + " is not a live theme of this workspace"})
}

// PutRouteTree replaces a route tree; every page it names must be a live page of the project.
func (ps *Projects) PutRouteTree(ctx context.Context, sc scope.Scope, projectID string, baseline int64, tree RouteTree) (RouteTree, int64, error) {
	if tree.Routes == nil {
		tree.Routes = []RouteNode{}
	}
	refs, fe := checkRouteTree(tree)
	if len(fe) > 0 {
		return tree, 0, problem.Invalid(fe...)
	}
	pages := make([]string, 0, len(refs))
	for id := range refs {
		pages = append(pages, id)
	}
	v, err := ps.Store.WritePart(ctx, sc, projectID, PartRouteTree, baseline, Refs{Pages: pages},
		func(_ json.RawMessage, live Live) (any, error) {
			var missing []problem.FieldError
			for id, field := range refs {
				if !live.Pages[id] {
					missing = append(missing, problem.FieldError{Field: field, Message: "not a live page of this project"})
				}
			}
			if len(missing) > 0 {
				return nil, problem.Invalid(missing...)
			}
			return tree, nil
		})
	return tree, v, err
}

// PutBuildAssets sets the assets a build ships. Assets are read inside the write, so a
// concurrent archive or content replace is either seen (422) or serialised after this write;
// the pinned hash is never stale at commit.
func (ps *Projects) PutBuildAssets(ctx context.Context, sc scope.Scope, projectID string, baseline int64, list []BuildAsset) ([]BuildAsset, int64, error) {
	if list == nil {
		list = []BuildAsset{}
	}
	assetIDs := make([]string, len(list))
	for i, b := range list {
		assetIDs[i] = b.AssetID
	}
	v, err := ps.Store.WritePart(ctx, sc, projectID, PartBuildAssets, baseline, Refs{Assets: assetIDs},
		func(_ json.RawMessage, live Live) (any, error) {
			var fe []problem.FieldError
			paths := map[string]int{}
			for i := range list {
				f := fmt.Sprintf("build_assets[%d]", i)
				if j, dup := paths[list[i].Path]; dup {
					fe = append(fe, problem.FieldError{Field: f + ".path", Message: fmt.Sprintf("same path as build_assets[%d]", j)})
				}
				paths[list[i].Path] = i
				a, ok := live.Assets[list[i].AssetID]
				if !ok {
					fe = append(fe, problem.FieldError{Field: f + ".asset_id", Message: "not a live asset of this workspace"})
					continue
				}
				if !slices.Contains(roleKinds[list[i].Role], cblob.KindOf(a.ContentType)) {
					fe = append(fe, problem.FieldError{Field: f + ".role", Message: fmt.Sprintf("a %s asset cannot be a %s", a.ContentType, list[i].Role)})
				}
				list[i].SHA256, list[i].ContentURL = a.SHA256, ContentURL(a.ID, a.SHA256)
			}
			if len(fe) > 0 {
				return nil, problem.Invalid(fe...)
			}
			return list, nil
		})
	return list, v, err
}

// checkRouteTree validates what the schema cannot: total size, depth, unique full paths, one
// root. It returns the referenced page IDs with their field paths.
func checkRouteTree(t RouteTree) (map[string]string, []problem.FieldError) {
	refs := map[string]string{}
	seen := map[string]string{}
	var fe []problem.FieldError
	count := 0
	var walk func(nodes []RouteNode, parent, field string, depth int)
	walk = func(nodes []RouteNode, parent, field string, depth int) {
		for i, n := range nodes {
			f := fmt.Sprintf("%s[%d]", field, i)
			count++
			if depth > maxRouteDepth {
				fe = append(fe, problem.FieldError{Field: f, Message: fmt.Sprintf("routes nest at most %d deep", maxRouteDepth)})
				continue
			}
			if n.Segment == "" && (depth > 1 || parent != "") {
				fe = append(fe, problem.FieldError{Field: f + ".segment", Message: "only a top-level route may be the root (empty segment)"})
			}
			full := parent + "/" + n.Segment
			if parent == "" && n.Segment == "" {
				full = "/"
			}
			if prev, dup := seen[full]; dup {
				fe = append(fe, problem.FieldError{Field: f + ".segment", Message: "route " + full + " is already defined at " + prev})
			}
			seen[full] = f
			if n.PageID != "" {
				refs[n.PageID] = f + ".page_id"
			}
			next := full
			if full == "/" {
				next = ""
			}
			walk(n.Children, next, f+".children", depth+1)
		}
	}
	walk(t.Routes, "", "route_tree.routes", 1)
	if count > maxRouteNodes {
		fe = append(fe, problem.FieldError{Field: "route_tree.routes", Message: fmt.Sprintf("at most %d routes in all", maxRouteNodes)})
	}
	return refs, fe
}
