package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
)

// The preview operations: a page screenshot through the preview queue, and short-lived preview
// URLs a browser opens through the public host. Both fix a render snapshot of the page's current
// version; neither changes business data, so neither has idempotency semantics.

type previewAPI struct{ svc *authoring.Service }

func (s *Server) registerPreview(svc *authoring.Service) {
	h := &previewAPI{svc: svc}
	shot := Operation{ID: "get-page-screenshot", Method: http.MethodGet, Path: "/api/v1/pages/{page_id}/screenshot", Tags: []string{"pages"},
		ReadOnly: true, Scopes: []auth.Permission{auth.PreviewRun},
		Summary: "The page's screenshot (PNG of the page's canvas at the render device scale), produced through the preview queue"}
	shot.Produces = &Media{Types: []string{"image/png"}, Description: "the PNG; its size is the canvas times the device scale factor"}
	Scoped(s, shot, h.screenshot)
	Scoped(s, Operation{ID: "create-page-preview", Method: http.MethodPost, Path: "/api/v1/pages/{page_id}/preview-artifact", Tags: []string{"pages"},
		ReadOnly: true, Scopes: []auth.Permission{auth.PageRead, auth.PreviewRun}, MaxBodyBytes: 4 << 10,
		Summary: "A short-lived preview URL of the page's current version"}, h.page)
	Scoped(s, Operation{ID: "create-project-preview", Method: http.MethodPost, Path: "/api/v1/projects/{project_id}/preview-artifact", Tags: []string{"projects"},
		ReadOnly: true, Scopes: []auth.Permission{auth.ProjectRead, auth.PreviewRun}, MaxBodyBytes: 4 << 10,
		Summary: "A short-lived preview URL of a project route (its default entry when no route is given)"}, h.project)
}

// ScreenshotOutput streams a screenshot.
type ScreenshotOutput struct {
	ContentType  string `header:"Content-Type"`
	CacheControl string `header:"Cache-Control"`
	ETag         string `header:"ETag" doc:"the quoted SHA-256 of the PNG"`
	NoSniff      string `header:"X-Content-Type-Options"`
	Width        int    `header:"X-Image-Width" doc:"pixels"`
	Height       int    `header:"X-Image-Height" doc:"pixels"`
	Body         func(huma.Context)
}

func (h *previewAPI) screenshot(ctx context.Context, sc auth.Scope, in *ObjectID) (*ScreenshotOutput, error) {
	res, rd, err := h.svc.Screenshot(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	return &ScreenshotOutput{ContentType: "image/png", CacheControl: "private, no-cache", ETag: `"` + res.ArtifactSHA256 + `"`,
		NoSniff: "nosniff", Width: res.Width, Height: res.Height,
		Body: func(hc huma.Context) {
			defer rd.Close()
			hc.SetHeader("Content-Length", strconv.FormatInt(res.Bytes, 10))
			hc.SetStatus(http.StatusOK)
			_, _ = io.Copy(hc.BodyWriter(), rd)
		}}, nil
}

type pagePreviewIn = struct {
	ObjectID
}

func (h *previewAPI) page(ctx context.Context, sc auth.Scope, in *pagePreviewIn) (*Single[PreviewArtifactResponse], error) {
	return previewOf(h.svc.PreviewPage(ctx, sc, in.ID(), ""))
}

type projectPreviewIn = struct {
	ObjectID
	Body *struct {
		Route string `json:"route,omitempty" maxLength:"200" pattern:"^/([a-z0-9-]+(/[a-z0-9-]+)*)?$" doc:"entry route path; the project's default entry when omitted"`
	} `required:"false"`
}

func (h *previewAPI) project(ctx context.Context, sc auth.Scope, in *projectPreviewIn) (*Single[PreviewArtifactResponse], error) {
	route := ""
	if in.Body != nil {
		route = in.Body.Route
	}
	return previewOf(h.svc.PreviewProject(ctx, sc, in.ID(), route))
}
