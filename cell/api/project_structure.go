package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/cell/store"
)

// ProjectConfigurationInput is what a client writes. Its presentation takes the same fields, with
// the same rules and defaults, as a style (absent fields take the style defaults).
type ProjectConfigurationInput struct {
	ProjectSettings
	Presentation *StylePresentationFields `json:"presentation,omitempty"`
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

// RouteTreeBody is read and written as a whole, with its version baseline.
type RouteTreeBody struct {
	Version   int64     `json:"version" minimum:"1" doc:"the route tree version you read"`
	RouteTree RouteTree `json:"route_tree"`
}

// BuildAssetsBody is read and written as a whole, with its version baseline.
type BuildAssetsBody struct {
	Version     int64        `json:"version" minimum:"1" doc:"the build assets version you read"`
	BuildAssets []BuildAsset `json:"build_assets" maxItems:"100"`
}

// PageSummaryView is a page in its project's list.
type PageSummaryView struct {
	ID       string `json:"id"`
	Key      string `json:"key"`
	Title    string `json:"title"`
	FileType string `json:"file_type"`
	Version  int64  `json:"version"`
}

// projectStructure are the project's versioned parts, apply-style and its pages.
type projectStructure struct {
	st *store.Store
	ps *content.Projects
}

// partOp declares the read or the versioned replacement of a project part.
func partOp(method, name, summary string, scopes ...auth.Permission) Operation {
	op := Op("get-project-"+name, method, "/api/v1/projects/{project_id}/"+name, summary, "projects", scopes...)
	if method != http.MethodGet {
		op.ID, op.Lock = "put-project-"+name, VersionLock
	}
	return op
}

func (s *Server) registerProjectStructure(st *store.Store) {
	h := &projectStructure{st: st, ps: &content.Projects{Store: st}}
	read, write := auth.ProjectRead, auth.ProjectWrite
	Scoped(s, partOp(http.MethodGet, "configuration", "Project configuration", read), h.getConfiguration)
	Scoped(s, partOp(http.MethodPut, "configuration", "Replace the project configuration (version-locked)", write), h.putConfiguration)
	apply := partOp(http.MethodPost, "apply-style", "Apply a style: its snapshot becomes the project's presentation (version-locked on the configuration)", write, auth.DesignSystemRead)
	apply.ID = "apply-project-style"
	Scoped(s, apply, h.applyStyle)
	Scoped(s, partOp(http.MethodGet, "route-tree", "Project route tree", read), h.getRouteTree)
	Scoped(s, partOp(http.MethodPut, "route-tree", "Replace the route tree (version-locked; every page must be a live page of the project)", write), h.putRouteTree)
	Scoped(s, partOp(http.MethodGet, "build-assets", "Assets the project's build ships", read), h.getBuildAssets)
	Scoped(s, partOp(http.MethodPut, "build-assets", "Set the assets the project's build ships (version-locked; each asset pinned by its content hash)", write, auth.AssetRead), h.putBuildAssets)
	pages := partOp(http.MethodGet, "pages", "Pages of the project", read, auth.PageRead)
	pages.ID = "list-project-pages"
	Scoped(s, pages, h.listPages)
}

func configuration(c content.ProjectConfiguration, v int64, err error) (*Single[ConfigurationBody], error) {
	return &Single[ConfigurationBody]{Body: ConfigurationBody{Version: v, Configuration: configurationWire(c)}}, err
}

func routeTree(t content.RouteTree, v int64, err error) (*Single[RouteTreeBody], error) {
	return &Single[RouteTreeBody]{Body: RouteTreeBody{Version: v, RouteTree: RouteTree{Routes: routesWire(t.Routes)}}}, err
}

func buildAssets(list []content.BuildAsset, v int64, err error) (*Single[BuildAssetsBody], error) {
	wire := mapSlice(list, func(a content.BuildAsset) BuildAsset { return BuildAsset(a) })
	return &Single[BuildAssetsBody]{Body: BuildAssetsBody{Version: v, BuildAssets: wire}}, err
}

func (h *projectStructure) getConfiguration(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[ConfigurationBody], error) {
	return configuration(h.ps.Configuration(ctx, sc, in.ID()))
}

type putConfigurationIn = struct {
	ObjectID
	Body ConfigurationInputBody
}

func (h *projectStructure) putConfiguration(ctx context.Context, sc auth.Scope, in *putConfigurationIn) (*Single[ConfigurationBody], error) {
	c := in.Body.Configuration
	return configuration(h.ps.PutConfiguration(ctx, sc, in.ID(), in.Body.Version, content.ProjectSettings(c.ProjectSettings), presentationFields(c.Presentation)))
}

type applyStyleIn = struct {
	ObjectID
	Body struct {
		StyleID string `json:"style_id" pattern:"^sty_[a-z2-7]{26}$"`
		Version int64  `json:"version" minimum:"1" doc:"the configuration version you read"`
	}
}

func (h *projectStructure) applyStyle(ctx context.Context, sc auth.Scope, in *applyStyleIn) (*Single[ConfigurationBody], error) {
	return configuration(h.ps.ApplyStyle(ctx, sc, in.ID(), in.Body.StyleID, in.Body.Version))
}

func (h *projectStructure) getRouteTree(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[RouteTreeBody], error) {
	return routeTree(h.ps.RouteTree(ctx, sc, in.ID()))
}

type putRouteTreeIn = struct {
	ObjectID
	Body RouteTreeBody
}

func (h *projectStructure) putRouteTree(ctx context.Context, sc auth.Scope, in *putRouteTreeIn) (*Single[RouteTreeBody], error) {
	return routeTree(h.ps.PutRouteTree(ctx, sc, in.ID(), in.Body.Version, content.RouteTree{Routes: routesOf(in.Body.RouteTree.Routes)}))
}

func (h *projectStructure) getBuildAssets(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[BuildAssetsBody], error) {
	return buildAssets(h.ps.BuildAssets(ctx, sc, in.ID()))
}

type putBuildAssetsIn = struct {
	ObjectID
	Body BuildAssetsBody
}

func (h *projectStructure) putBuildAssets(ctx context.Context, sc auth.Scope, in *putBuildAssetsIn) (*Single[BuildAssetsBody], error) {
	return buildAssets(h.ps.PutBuildAssets(ctx, sc, in.ID(), in.Body.Version,
		mapSlice(in.Body.BuildAssets, func(a BuildAsset) content.BuildAsset { return content.BuildAsset(a) })))
}

type listPagesIn = struct {
	ObjectID
	ListQuery
}

func (h *projectStructure) listPages(ctx context.Context, sc auth.Scope, in *listPagesIn) (*Page[PageSummaryView], error) {
	ps, err := h.st.ListProjectPages(ctx, sc, in.ID(), in.Position(), in.Limit+1)
	if err != nil {
		return nil, err
	}
	return paginate(ps, in.ListQuery, func(p content.PageSummary) string { return p.Key },
		plain(func(p content.PageSummary) PageSummaryView {
			return PageSummaryView{ID: p.ID, Key: p.Key, Title: p.Title, FileType: p.FileType, Version: p.Version}
		}))
}
