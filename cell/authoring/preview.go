package authoring

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/render"
	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// maxModuleBytes bounds a stored module read back for a render.
const maxModuleBytes = 8 << 20

// pageSnapshot fixes the current version of a page as a render snapshot.
func (s *Service) pageSnapshot(ctx context.Context, sc auth.Scope, pageID, route string) (*snapshot.Manifest, error) {
	p, err := s.Store.GetPage(ctx, sc, pageID)
	if err != nil {
		return nil, err
	}
	v, err := s.Store.PageVersion(ctx, sc, pageID, 0)
	if err != nil {
		return nil, err
	}
	res := &compile.Result{Digest: v.CompiledDigest}
	code, err := s.Modules.ReadDerived(ctx, sc, v.CompiledDigest, ".js", maxModuleBytes)
	ids := map[string]string{}
	if err == nil {
		res.Code = code
		for _, d := range v.Dependencies {
			res.Dependencies = append(res.Dependencies, compile.Dependency{Key: d.Key, Version: d.Version, Depth: d.Depth})
			ids[d.Key] = d.ComponentID
		}
	} else {
		// The stored module is gone (a blob store restored without it): compile the version
		// again against the published components.
		if res, ids, err = s.compilePage(ctx, sc, v.FileType, v.Source); err != nil {
			return nil, err
		}
		if !res.OK() {
			return nil, problem.New(problem.RenderContentError, "the page's current version no longer compiles: %s", diagnostics(res))
		}
	}
	return s.BuildSnapshot(ctx, sc, Target{Kind: snapshot.KindPage, ID: p.ID, Key: p.Key, Version: v.Version, ProjectID: p.ProjectID, Route: route},
		v.FileType, res, ids)
}

// Screenshot is a page's current screenshot, produced through the preview queue (a background
// page.capture). Equal inputs return the same render request and its result, so a repeat costs
// nothing; a change of page, theme, asset or environment makes a new one. The caller closes
// the reader.
func (s *Service) Screenshot(ctx context.Context, sc auth.Scope, pageID string) (render.Result, io.ReadCloser, error) {
	if _, err := s.Store.GetPage(ctx, sc, pageID); err != nil {
		return render.Result{}, nil, err // the page decides first: a foreign or missing one is 404
	}
	if s.Render == nil {
		return render.Result{}, nil, problem.New(problem.RenderServiceUnavailable, "this cell has no render capacity configured")
	}
	m, err := s.pageSnapshot(ctx, sc, pageID, "")
	if err != nil {
		return render.Result{}, nil, err
	}
	req, err := s.Render.Submit(ctx, sc, render.Spec{Owner: "screenshot:" + pageID, Stage: "screenshot", Operation: rc.OpPageCapture,
		Category: render.Background, Snapshot: m, Renew: true})
	if err != nil {
		return render.Result{}, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, cmp.Or(s.RenderWait, DefaultRenderWait))
	defer cancel()
	req, err = s.Render.Wait(wctx, sc, req.ID)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return render.Result{}, nil, err
	}
	if req.State != render.StateSucceeded {
		return render.Result{}, nil, renderFailure(req, s.Render.Health(ctx).Available)
	}
	res, err := s.Render.Result(ctx, sc, req.ID)
	if err != nil {
		return res, nil, err
	}
	rd, err := s.Modules.Bucket.NewReader(ctx, res.ArtifactKey, nil)
	if err != nil || !strings.HasPrefix(res.ArtifactKey, "ws/"+sc.WorkspaceID()+"/") {
		return res, nil, problem.Wrap(errors.Join(err, errors.New("render result unreadable")), "the screenshot could not be read")
	}
	return res, rd, nil
}

// renderFailure is the public answer of a render stage that did not succeed.
func renderFailure(req render.Request, available bool) error {
	msg := cmp.Or(req.ErrorMessage, "the render did not finish")
	switch {
	case !render.Terminal(req.State) && req.State != render.StateExecuting && !available:
		// Still waiting for a renderer (an executing one that stopped answering is a render
		// that did not finish in time: 504 below, never "cancelled").
		return problem.New(problem.RenderServiceUnavailable, "no renderer is available; the screenshot waits in the queue within its deadline — ask again")
	case !render.Terminal(req.State):
		return problem.New(problem.RenderDeadlineExceeded, "the screenshot is not ready yet; it goes on — ask again")
	}
	switch rc.Code(req.ErrorCode).Category() {
	case rc.CategoryContent:
		return problem.New(problem.RenderContentError, "%s", msg)
	case rc.CategoryTimeout:
		return problem.New(problem.RenderDeadlineExceeded, "%s", msg)
	case rc.CategoryCancellation:
		return problem.New(problem.RenderCancelled, "%s", msg)
	case rc.CategoryInput:
		return problem.New(problem.RenderInputNotReproducible, "%s", msg)
	case rc.CategoryInfrastructure, rc.CategoryCapacity, rc.CategoryConfiguration:
		return problem.New(problem.RenderServiceUnavailable, "%s (%s)", msg, req.ErrorCode)
	}
	return problem.New(problem.RenderFailed, "%s (%s)", msg, cmp.Or(req.ErrorCode, "unknown"))
}

// PreviewArtifact is a short-lived preview of a page a browser opens directly (cell/api shows
// it as its PreviewArtifact).
type PreviewArtifact struct {
	PreviewURL  string    `json:"preview_url"`
	ExpiresAt   time.Time `json:"expires_at"`
	ArtifactID  string    `json:"artifact_id"`
	PageID      string    `json:"page_id"`
	Route       string    `json:"route,omitempty"`
	InputDigest string    `json:"input_digest"`
}

// Previews signs preview URLs: the public base the router answers on, the signer, and how
// long a URL lives.
type Previews struct {
	PublicBase *url.URL
	Signer     *ticket.Signer
	TTL        time.Duration
}

// PreviewPage fixes the page's current version as a preview snapshot and signs a URL for it.
func (s *Service) PreviewPage(ctx context.Context, sc auth.Scope, pageID, route string) (PreviewArtifact, error) {
	if _, err := s.Store.GetPage(ctx, sc, pageID); err != nil {
		return PreviewArtifact{}, err
	}
	pv := s.Previews
	if pv == nil || pv.Signer == nil || pv.PublicBase == nil {
		return PreviewArtifact{}, problem.New(problem.RenderServiceUnavailable, "previews are not configured on this cell")
	}
	m, err := s.pageSnapshot(ctx, sc, pageID, route)
	if err != nil {
		return PreviewArtifact{}, err
	}
	now := time.Now().UTC()
	ttl := cmp.Or(pv.TTL, 15*time.Minute)
	m.Ref, m.Owner, m.CreatedAt, m.ExpiresAt = ids.New(ids.Snapshot), "preview:"+sc.Principal().UserID, now, now.Add(ttl)
	if err := snapshot.Save(ctx, s.Modules.Bucket, m); err != nil {
		return PreviewArtifact{}, problem.Wrap(err, "the preview could not be saved")
	}
	path := strings.TrimSuffix(pv.PublicBase.Path, "/") + "/preview/w/" + sc.WorkspaceID() + "/snapshots/" + m.Ref
	tok, err := pv.Signer.Sign(&ticket.PreviewAccess{WorkspaceID: sc.WorkspaceID(), SnapshotRef: m.Ref,
		Origin: pv.PublicBase.Scheme + "://" + pv.PublicBase.Host, Path: path, IssuedAt: now, ExpiresAt: m.ExpiresAt})
	if err != nil {
		return PreviewArtifact{}, problem.Wrap(err, "the preview could not be signed")
	}
	u := url.URL{Scheme: pv.PublicBase.Scheme, Host: pv.PublicBase.Host, Path: path, RawQuery: url.Values{"access": {tok}}.Encode()}
	return PreviewArtifact{PreviewURL: u.String(), ExpiresAt: m.ExpiresAt, ArtifactID: m.Ref, PageID: pageID, Route: route, InputDigest: m.InputDigest}, nil
}

// PreviewProject previews a project's route (its default entry when route is empty).
func (s *Service) PreviewProject(ctx context.Context, sc auth.Scope, projectID, route string) (PreviewArtifact, error) {
	ps := &content.Projects{Store: s.Store}
	if _, err := s.Store.GetProject(ctx, sc, projectID); err != nil {
		return PreviewArtifact{}, err
	}
	if route == "" {
		cfg, _, err := ps.Configuration(ctx, sc, projectID)
		if err != nil {
			return PreviewArtifact{}, err
		}
		route = cmp.Or(cfg.EntryRoute, "/")
	}
	tree, _, err := ps.RouteTree(ctx, sc, projectID)
	if err != nil {
		return PreviewArtifact{}, err
	}
	pageID := findRoute(tree.Routes, "", route)
	if pageID == "" {
		return PreviewArtifact{}, problem.Invalid(problem.FieldError{Field: "route", Message: "no route " + route + " with a page in the project's route tree"})
	}
	return s.PreviewPage(ctx, sc, pageID, route)
}

// findRoute walks the route tree for path ("/" is the root segment, "/a/b" nested segments).
func findRoute(nodes []content.RouteNode, parent, path string) string {
	for _, n := range nodes {
		p := parent + "/" + n.Segment
		if n.Segment == "" {
			p = parent
		}
		if cmp.Or(p, "/") == path && n.PageID != "" {
			return n.PageID
		}
		if id := findRoute(n.Children, p, path); id != "" {
			return id
		}
	}
	return ""
}
