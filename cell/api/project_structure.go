package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	cblob "slidecells/cell/blob"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// ProjectSettings are the project-wide settings of a configuration.
type ProjectSettings struct {
	Title      string `json:"title,omitempty" maxLength:"200"`
	Locale     string `json:"locale,omitempty" pattern:"^[a-z]{2,3}(-[A-Z]{2})?$" doc:"BCP 47 language tag, e.g. en-US"`
	EntryRoute string `json:"entry_route,omitempty" maxLength:"200" pattern:"^/([a-z0-9-]+(/[a-z0-9-]+)*)?$" doc:"default entry route of previews"`
	Timezone   string `json:"timezone,omitempty" maxLength:"64" pattern:"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$"`
}

// ProjectConfigurationInput is what a client writes. Its presentation takes the same fields, with
// the same rules and defaults, as a style (absent fields take the style defaults).
type ProjectConfigurationInput struct {
	ProjectSettings
	Presentation *StylePresentationFields `json:"presentation,omitempty"`
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

// ConfigurationBody is a configuration read as a whole, with its version.
type ConfigurationBody struct {
	Version       int64                `json:"version" doc:"send it back as the baseline of the next write"`
	Configuration ProjectConfiguration `json:"configuration"`
}

// ConfigurationInputBody is a configuration written as a whole, with its version baseline.
type ConfigurationInputBody struct {
	Version       int64                     `json:"version" minimum:"1" doc:"the configuration version you read"`
	Configuration ProjectConfigurationInput `json:"configuration"`
}

// ConfigurationOutput is a project's configuration.
type ConfigurationOutput struct {
	Body ConfigurationBody
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

// RouteTreeBody is read and written as a whole, with its version baseline.
type RouteTreeBody struct {
	Version   int64     `json:"version" minimum:"1" doc:"the route tree version you read"`
	RouteTree RouteTree `json:"route_tree"`
}

// RouteTreeOutput is a project's route tree.
type RouteTreeOutput struct {
	Body RouteTreeBody
}

// Route tree limits beyond the schema's per-level caps.
const (
	maxRouteNodes = 500
	maxRouteDepth = 6
)

// BuildAsset is one asset a project's build ships, at a path of the built site.
type BuildAsset struct {
	AssetID string `json:"asset_id" pattern:"^ast_[a-z2-7]{26}$"`
	Role    string `json:"role" enum:"favicon,social-image,font,image,download" doc:"what the build does with it"`
	Path    string `json:"path" maxLength:"200" pattern:"^/assets/[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$" doc:"path in the built site, under /assets/"`
	// SHA256 and ContentURL are filled in by the backend: the build pins this content.
	SHA256     string `json:"sha256,omitempty" readOnly:"true"`
	ContentURL string `json:"content_url,omitempty" readOnly:"true"`
}

// BuildAssetsBody is read and written as a whole, with its version baseline.
type BuildAssetsBody struct {
	Version     int64        `json:"version" minimum:"1" doc:"the build assets version you read"`
	BuildAssets []BuildAsset `json:"build_assets" maxItems:"100"`
}

// BuildAssetsOutput is a project's build assets.
type BuildAssetsOutput struct {
	Body BuildAssetsBody
}

// roleKinds says which content each build role takes.
var roleKinds = map[string][]cblob.Kind{
	"favicon":      {cblob.KindImage},
	"social-image": {cblob.KindImage},
	"image":        {cblob.KindImage},
	"font":         {cblob.KindFont},
	"download":     {cblob.KindImage, cblob.KindFont, cblob.KindDocument},
}

// PageSummaryView is a page in its project's list.
type PageSummaryView struct {
	ID       string `json:"id"`
	Key      string `json:"key"`
	Title    string `json:"title"`
	FileType string `json:"file_type"`
	Version  int64  `json:"version"`
}

// ProjectPagesOutput is a page of a project's pages.
type ProjectPagesOutput struct {
	Body struct {
		Items      []PageSummaryView `json:"items"`
		NextCursor string            `json:"next_cursor,omitempty"`
	}
}

type projectIn struct {
	WorkspaceHeader
	ProjectPath
}

// registerProjectStructure adds project configuration, route tree, apply-style, build assets and
// the project's pages.
func (s *Server) registerProjectStructure(st *store.Store) {
	tags := []string{"projects"}
	read := []string{"project:read"}
	write := []string{"project:write"}
	Register(s, Operation{ID: "get-project-configuration", Method: http.MethodGet, Path: "/api/v1/projects/{project_id}/configuration",
		Summary: "Project configuration", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *projectIn) (*ConfigurationOutput, error) {
			raw, v, err := st.GetPart(ctx, ScopeFrom(ctx), in.ProjectID, store.Configuration)
			if err != nil {
				return nil, err
			}
			out := &ConfigurationOutput{}
			out.Body.Version = v
			if err := json.Unmarshal(raw, &out.Body.Configuration); err != nil {
				return nil, problem.Wrap(err, "stored configuration unreadable")
			}
			return out, nil
		})
	Register(s, Operation{ID: "put-project-configuration", Method: http.MethodPut, Path: "/api/v1/projects/{project_id}/configuration",
		Summary: "Replace the project configuration (version-locked)", Tags: tags, Access: InWorkspace, Scopes: write,
		Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			ProjectPath
			Body ConfigurationInputBody
		}) (*ConfigurationOutput, error) {
			cfg := ProjectConfiguration{ProjectSettings: in.Body.Configuration.ProjectSettings}
			const prefix = "body.configuration.presentation."
			var themeKey string
			if f := in.Body.Configuration.Presentation; f != nil {
				req := styleRequest{fields: *f, prefix: prefix, themeKeySet: f.ThemeKey != nil}
				if f.StyleSpecMarkdown != nil && len(*f.StyleSpecMarkdown) > maxStyleSpecBytes {
					return nil, problem.Invalid(problem.FieldError{Field: prefix + "style_spec_markdown", Message: fmt.Sprintf("at most %d bytes", maxStyleSpecBytes)})
				}
				pres, fe := req.apply(defaultStylePresentation())
				if len(fe) > 0 {
					return nil, problem.Invalid(fe...)
				}
				cfg.Presentation = &ProjectPresentation{StylePresentation: pres}
				themeKey = themeKeyOf(pres)
			}
			sc := ScopeFrom(ctx)
			v, err := st.PutPart(ctx, sc, in.ProjectID, store.Configuration, in.Body.Version, cfg, func(tx pgx.Tx) error {
				return checkProjectThemeKey(ctx, tx, sc, themeKey, prefix+"theme_key")
			})
			if err != nil {
				return nil, err
			}
			out := &ConfigurationOutput{}
			out.Body.Version, out.Body.Configuration = v, cfg
			return out, nil
		})
	Register(s, Operation{ID: "apply-project-style", Method: http.MethodPost, Path: "/api/v1/projects/{project_id}/apply-style",
		Summary: "Apply a style: its snapshot becomes the project's presentation (version-locked on the configuration)", Tags: tags,
		Access: InWorkspace, Scopes: []string{"project:write", "design-system:read"}, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			ProjectPath
			Body struct {
				StyleID string `json:"style_id" pattern:"^sty_[a-z2-7]{26}$"`
				Version int64  `json:"version" minimum:"1" doc:"the configuration version you read"`
			}
		}) (*ConfigurationOutput, error) {
			sc := ScopeFrom(ctx)
			// The project named by the path answers first, so a foreign project is the same 404
			// whatever the body says.
			if _, err := st.GetProject(ctx, sc, in.ProjectID); err != nil {
				return nil, err
			}
			style, err := st.GetStyle(ctx, sc, in.Body.StyleID)
			if problem.As(err).Code == problem.NotFound {
				return nil, problem.Invalid(problem.FieldError{Field: "body.style_id", Message: "not a live style of this workspace"})
			}
			if err != nil {
				return nil, err
			}
			snap, err := decodeSnapshot(style.Snapshot)
			if err != nil {
				return nil, problem.Wrap(err, "stored style snapshot unreadable")
			}
			var cfg ProjectConfiguration
			v, err := st.UpdatePart(ctx, sc, in.ProjectID, store.Configuration, in.Body.Version, func(tx pgx.Tx, current json.RawMessage) (any, error) {
				if err := json.Unmarshal(current, &cfg); err != nil {
					return nil, problem.Wrap(err, "stored configuration unreadable")
				}
				// The style's theme must still be live when it is applied.
				if err := checkProjectThemeKey(ctx, tx, sc, themeKeyOf(snap.Presentation), "body.style_id"); err != nil {
					return nil, err
				}
				cfg.Presentation = &ProjectPresentation{StylePresentation: snap.Presentation, StyleID: style.ID, StyleSnapshotDigest: style.SnapshotDigest}
				return cfg, nil
			})
			if err != nil {
				return nil, err
			}
			out := &ConfigurationOutput{}
			out.Body.Version, out.Body.Configuration = v, cfg
			return out, nil
		})
	Register(s, Operation{ID: "get-project-route-tree", Method: http.MethodGet, Path: "/api/v1/projects/{project_id}/route-tree",
		Summary: "Project route tree", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *projectIn) (*RouteTreeOutput, error) {
			raw, v, err := st.GetPart(ctx, ScopeFrom(ctx), in.ProjectID, store.RouteTree)
			if err != nil {
				return nil, err
			}
			out := &RouteTreeOutput{}
			out.Body.Version = v
			if err := json.Unmarshal(raw, &out.Body.RouteTree); err != nil {
				return nil, problem.Wrap(err, "stored route tree unreadable")
			}
			if out.Body.RouteTree.Routes == nil {
				out.Body.RouteTree.Routes = []RouteNode{}
			}
			return out, nil
		})
	Register(s, Operation{ID: "put-project-route-tree", Method: http.MethodPut, Path: "/api/v1/projects/{project_id}/route-tree",
		Summary: "Replace the route tree (version-locked; every page must be a live page of the project)", Tags: tags,
		Access: InWorkspace, Scopes: write, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			ProjectPath
			Body RouteTreeBody
		}) (*RouteTreeOutput, error) {
			tree := in.Body.RouteTree
			if tree.Routes == nil {
				tree.Routes = []RouteNode{}
			}
			refs, fe := checkRouteTree(tree)
			if len(fe) > 0 {
				return nil, problem.Invalid(fe...)
			}
			sc := ScopeFrom(ctx)
			v, err := st.PutPart(ctx, sc, in.ProjectID, store.RouteTree, in.Body.Version, tree, func(tx pgx.Tx) error {
				if len(refs) == 0 {
					return nil
				}
				ids := make([]string, 0, len(refs))
				for id := range refs {
					ids = append(ids, id)
				}
				live, err := store.LivePages(ctx, tx, sc, in.ProjectID, ids)
				if err != nil {
					return err
				}
				var missing []problem.FieldError
				for id, field := range refs {
					if !live[id] {
						missing = append(missing, problem.FieldError{Field: field, Message: "not a live page of this project"})
					}
				}
				if len(missing) > 0 {
					return problem.Invalid(missing...)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out := &RouteTreeOutput{}
			out.Body.Version, out.Body.RouteTree = v, tree
			return out, nil
		})
	Register(s, Operation{ID: "get-project-build-assets", Method: http.MethodGet, Path: "/api/v1/projects/{project_id}/build-assets",
		Summary: "Assets the project's build ships", Tags: tags, Access: InWorkspace, Scopes: read, ReadOnly: true},
		func(ctx context.Context, in *projectIn) (*BuildAssetsOutput, error) {
			raw, v, err := st.GetPart(ctx, ScopeFrom(ctx), in.ProjectID, store.BuildAssets)
			if err != nil {
				return nil, err
			}
			out := &BuildAssetsOutput{}
			out.Body.Version = v
			if err := json.Unmarshal(raw, &out.Body.BuildAssets); err != nil {
				return nil, problem.Wrap(err, "stored build assets unreadable")
			}
			if out.Body.BuildAssets == nil {
				out.Body.BuildAssets = []BuildAsset{}
			}
			return out, nil
		})
	Register(s, Operation{ID: "put-project-build-assets", Method: http.MethodPut, Path: "/api/v1/projects/{project_id}/build-assets",
		Summary: "Set the assets the project's build ships (version-locked; each asset pinned by its content hash)", Tags: tags,
		Access: InWorkspace, Scopes: []string{"project:write", "asset:read"}, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			ProjectPath
			Body BuildAssetsBody
		}) (*BuildAssetsOutput, error) {
			sc := ScopeFrom(ctx)
			list := in.Body.BuildAssets
			if list == nil {
				list = []BuildAsset{}
			}
			// Assets are read inside the write, so a concurrent archive or content replace is
			// either seen (422) or serialised after this write; the pinned hash is never stale at
			// commit.
			v, err := st.PutPart(ctx, sc, in.ProjectID, store.BuildAssets, in.Body.Version, list, func(tx pgx.Tx) error {
				var fe []problem.FieldError
				paths := map[string]int{}
				for i := range list {
					f := fmt.Sprintf("body.build_assets[%d]", i)
					if j, dup := paths[list[i].Path]; dup {
						fe = append(fe, problem.FieldError{Field: f + ".path", Message: fmt.Sprintf("same path as build_assets[%d]", j)})
					}
					paths[list[i].Path] = i
					a, err := store.GetAssetTx(ctx, tx, sc, list[i].AssetID)
					if problem.As(err).Code == problem.NotFound {
						fe = append(fe, problem.FieldError{Field: f + ".asset_id", Message: "not a live asset of this workspace"})
						continue
					}
					if err != nil {
						return err
					}
					if !slices.Contains(roleKinds[list[i].Role], cblob.KindOf(a.ContentType)) {
						fe = append(fe, problem.FieldError{Field: f + ".role", Message: fmt.Sprintf("a %s asset cannot be a %s", a.ContentType, list[i].Role)})
					}
					list[i].SHA256, list[i].ContentURL = a.SHA256, AssetContentURL(a.ID, a.SHA256)
				}
				if len(fe) > 0 {
					return problem.Invalid(fe...)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out := &BuildAssetsOutput{}
			out.Body.Version, out.Body.BuildAssets = v, list
			return out, nil
		})
	Register(s, Operation{ID: "list-project-pages", Method: http.MethodGet, Path: "/api/v1/projects/{project_id}/pages",
		Summary: "Pages of the project", Tags: tags, Access: InWorkspace, Scopes: []string{"project:read", "page:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ProjectPath
			ListQuery
		}) (*ProjectPagesOutput, error) {
			ps, err := st.ListProjectPages(ctx, ScopeFrom(ctx), in.ProjectID, in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &ProjectPagesOutput{}
			out.Body.Items, out.Body.NextCursor = paginate(ps, in.Limit,
				func(p store.PageSummary) string { return p.Key },
				func(p store.PageSummary) PageSummaryView {
					return PageSummaryView{ID: p.ID, Key: p.Key, Title: p.Title, FileType: p.FileType, Version: p.Version}
				})
			return out, nil
		})
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
	walk(t.Routes, "", "body.route_tree.routes", 1)
	if count > maxRouteNodes {
		fe = append(fe, problem.FieldError{Field: "body.route_tree.routes", Message: fmt.Sprintf("at most %d routes in all", maxRouteNodes)})
	}
	return refs, fe
}

// checkProjectThemeKey checks, inside the write, that a presentation's theme key names a live
// theme of the workspace.
func checkProjectThemeKey(ctx context.Context, tx pgx.Tx, sc auth.Scope, key, field string) error {
	if key == "" {
		return nil
	}
	err := store.CheckThemeKey(ctx, tx, sc, key)
	if errors.Is(err, store.ErrUnknownThemeKey) {
		return problem.Invalid(problem.FieldError{Field: field, Message: "theme " + key + " is not a live theme of this workspace"})
	}
	return err
}
