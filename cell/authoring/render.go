package authoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/design"
	"slidecells/cell/render"
	"slidecells/cell/snapshot"
	"slidecells/shared/digest"
	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
)

// MaxPinnedAssets bounds the assets one snapshot pins.
const MaxPinnedAssets = 64

// assetRef finds asset IDs in a module: content refers to assets by ID (the kit's Image and
// Figure take them), and every one it names is pinned by digest in the snapshot.
var assetRef = regexp.MustCompile(`\bast_[a-z2-7]{26}\b`)

// Target is what a snapshot renders.
type Target struct {
	Kind      string // snapshot.KindPage or snapshot.KindComponent
	ID, Key   string
	Version   int64
	DraftHash string
	ProjectID string // a page's project: its presentation (canvas, theme, style) applies
	Route     string
}

// BuildSnapshot fixes everything one render of a compiled module needs: the module, the
// theme/style stylesheet with the @font-face rules of the theme's bound families, the fonts and
// assets it references pinned by digest, the canvas, and the preview host build. It writes the
// derived objects to the blob store (content-addressed) and returns the manifest, not yet saved
// (the coordinator saves it when the request is new). A referenced asset that cannot be pinned
// fails with RENDER_INPUT_NOT_REPRODUCIBLE.
func (s *Service) BuildSnapshot(ctx context.Context, sc auth.Scope, t Target, fileType string, res *compile.Result, components map[string]string) (*snapshot.Manifest, error) {
	ws := sc.WorkspaceID()
	m := &snapshot.Manifest{Schema: snapshot.Schema, WorkspaceID: ws, FileType: fileType, Route: t.Route,
		Entity:    snapshot.Entity{Kind: t.Kind, ID: t.ID, Key: t.Key, Version: t.Version, DraftHash: t.DraftHash},
		Scenes:    []string{rc.DefaultScene},
		HostBuild: rc.PreviewHostBuild}
	moduleType := "text/javascript; charset=utf-8"
	if fileType == "html" {
		moduleType = "text/html; charset=utf-8"
	}
	key, err := s.Modules.PutModule(ctx, sc, res.Digest, res.Code)
	if err != nil {
		return nil, err
	}
	m.Module = snapshot.Object{Key: key, Digest: res.Digest, Bytes: int64(len(res.Code)), ContentType: moduleType}
	for _, d := range res.Dependencies {
		m.Components = append(m.Components, snapshot.Component{Key: d.Key, ID: components[d.Key], Version: d.Version, Digest: d.Hash})
	}
	pres, err := s.presentation(ctx, sc, t.ProjectID)
	if err != nil {
		return nil, err
	}
	if m.Presentation, err = json.Marshal(pres); err != nil {
		return nil, err
	}
	m.Canvas = snapshot.Canvas{Width: pres.PageWidth, Height: pres.PageHeight, DeviceScaleFactor: float64(design.RenderCanvas.DeviceScaleFactor)}
	css, fonts, err := s.stylesheet(ctx, sc, pres)
	if err != nil {
		return nil, err
	}
	cssDigest := digest.Bytes(css)
	cssKey, err := s.Modules.PutDerived(ctx, sc, cssDigest, ".css", "text/css; charset=utf-8", css)
	if err != nil {
		return nil, err
	}
	m.Styles = snapshot.Object{Key: cssKey, Digest: cssDigest, Bytes: int64(len(css)), ContentType: "text/css; charset=utf-8"}
	m.Fonts = fonts
	if m.Assets, err = s.pinAssets(ctx, sc, res.Code); err != nil {
		return nil, err
	}
	if m.InputDigest, err = m.ComputeInputDigest(); err != nil {
		return nil, err
	}
	return m, nil
}

// presentation is the project's presentation, or the defaults.
func (s *Service) presentation(ctx context.Context, sc auth.Scope, projectID string) (design.StylePresentation, error) {
	p := design.DefaultStylePresentation()
	if projectID == "" {
		return p, nil
	}
	raw, _, err := s.Store.GetPart(ctx, sc, projectID, content.PartConfiguration)
	if err != nil {
		return p, err
	}
	var cfg struct {
		Presentation *design.StylePresentation `json:"presentation"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &cfg) == nil && cfg.Presentation != nil && cfg.Presentation.PageWidth > 0 && cfg.Presentation.PageHeight > 0 {
		p = *cfg.Presentation
	}
	return p, nil
}

// stylesheet renders the theme's and the style's custom properties and the @font-face rules of
// the theme's bound families, whose font files it pins.
func (s *Service) stylesheet(ctx context.Context, sc auth.Scope, pres design.StylePresentation) ([]byte, []snapshot.Object, error) {
	var b strings.Builder
	var fonts []snapshot.Object
	vars := design.StyleCSSVariables(pres)
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	b.WriteString(":root {\n")
	for _, k := range names {
		fmt.Fprintf(&b, "  %s: %s;\n", k, vars[k])
	}
	b.WriteString("}\n")
	if pres.ThemeKey != nil && *pres.ThemeKey != "" {
		theme, found, err := s.themeByKey(ctx, sc, *pres.ThemeKey)
		if err != nil {
			return nil, nil, err
		}
		if found {
			typo := design.Typography(sc.WorkspaceID(), theme)
			_, css := design.ThemeCSS(theme, typo)
			b.WriteString(css)
			seen := map[string]bool{}
			for _, role := range []design.ThemeRoleFont{typo.Heading, typo.Body, typo.Code} {
				if role.FamilyID == "" || seen[role.FamilyID] {
					continue
				}
				seen[role.FamilyID] = true
				fam, err := s.Store.GetFontFamily(ctx, sc, role.FamilyID)
				if err != nil {
					return nil, nil, notReproducible("the theme's font family %s cannot be pinned", role.FamilyID)
				}
				files := map[string]design.FontFile{}
				for _, f := range fam.Faces {
					if !f.Enabled {
						continue
					}
					a, err := s.Store.GetAsset(ctx, sc, f.AssetID)
					if err != nil {
						continue // FontBundleCSS leaves a face without a live asset out
					}
					files[a.ID] = design.FontFile{ContentType: a.ContentType, URL: "blobs/" + a.SHA256}
					fonts = append(fonts, snapshot.Object{Key: a.BlobKey, Digest: "sha256:" + a.SHA256, Bytes: a.ByteSize, ContentType: a.ContentType})
				}
				b.Write(design.FontBundleCSS(fam, files))
			}
		}
	}
	b.WriteString("html, body { margin: 0; padding: 0; background: var(--page-background); }\n")
	return []byte(b.String()), fonts, nil
}

func (s *Service) themeByKey(ctx context.Context, sc auth.Scope, key string) (design.Theme, bool, error) {
	t, err := s.Store.ThemeByKey(ctx, sc, key)
	if problem.As(err).Code == problem.NotFound {
		return t, false, nil
	}
	return t, err == nil, err
}

// pinAssets pins every asset the module names.
func (s *Service) pinAssets(ctx context.Context, sc auth.Scope, code []byte) ([]snapshot.Asset, error) {
	found := assetRef.FindAll(code, -1)
	var out []snapshot.Asset
	seen := map[string]bool{}
	for _, id := range found {
		if seen[string(id)] {
			continue
		}
		seen[string(id)] = true
		if len(seen) > MaxPinnedAssets {
			return nil, notReproducible("the content names more than %d assets", MaxPinnedAssets)
		}
		a, err := s.Store.GetAsset(ctx, sc, string(id))
		if problem.As(err).Code == problem.NotFound {
			return nil, notReproducible("asset %s cannot be pinned: it does not exist in this workspace or is archived", id)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, snapshot.Asset{ID: a.ID, Object: snapshot.Object{Key: a.BlobKey, Digest: "sha256:" + a.SHA256, Bytes: a.ByteSize, ContentType: a.ContentType}})
	}
	slices.SortFunc(out, func(a, b snapshot.Asset) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func notReproducible(format string, args ...any) error {
	return problem.New(problem.RenderInputNotReproducible, format, args...)
}

// CancelRenderWork cancels the unfinished render requests a business owner started (a job's
// ID for its render check): the cancel is persisted first, then the renderer is told, so the
// slot comes back as soon as the renderer stops the attempt.
func (s *Service) CancelRenderWork(ctx context.Context, sc auth.Scope, owner string) error {
	if s == nil || s.Render == nil {
		return nil
	}
	_, err := s.Render.CancelOwner(ctx, sc, owner)
	return err
}

// RenderCheck is a render stage's conclusion.
type RenderCheck struct {
	// Status is passed, failed (content), or unavailable (the check could not run).
	Status   string
	Code     string // the render error code when failed or unavailable
	Message  string
	Findings []rc.Finding
	Request  render.Request
}

// renderCheck runs a diagnosis of the snapshot through the coordinator and waits for it, at
// most wait. "Unavailable" is never "passed" nor "source has errors".
//
// renew says whether a check that ended without success is run again under a new request (a
// user validating again); a job's retries pass false, so they re-link to the request they
// started and never renew its render budget. A deadline on ctx (a job's business deadline) is
// passed down as the request's deadline when it is stricter than the render stage's own.
func (s *Service) renderCheck(ctx context.Context, sc auth.Scope, owner, stage string, op rc.Operation, m *snapshot.Manifest, wait time.Duration, renew bool) RenderCheck {
	if s.Render == nil {
		return RenderCheck{Status: "unavailable", Code: string(rc.CodeServiceUnavailable), Message: "this cell has no render capacity configured"}
	}
	if h := s.Render.Health(ctx); !h.Available && h.Queued >= 0 {
		// Still submitted: a renderer may come back within the request's budget. But a cell
		// without any dispatchable renderer answers at once instead of holding the caller.
		if wait > 2*time.Second {
			wait = 2 * time.Second
		}
	}
	spec := render.Spec{Owner: owner, Stage: stage, Operation: op, Category: render.Interactive, Snapshot: m, Renew: renew}
	if dl, ok := ctx.Deadline(); ok {
		spec.Deadline = dl
	}
	req, err := s.Render.Submit(ctx, sc, spec)
	if err != nil {
		pe := problem.As(err)
		switch pe.Code {
		case problem.RenderQueueFull:
			return RenderCheck{Status: "unavailable", Code: string(rc.CodeQueueFull), Message: pe.Message}
		case problem.WorkspaceMoving:
			return RenderCheck{Status: "unavailable", Code: string(pe.Code), Message: pe.Message}
		}
		return RenderCheck{Status: "unavailable", Code: string(rc.CodeInternal), Message: "the render request could not be created"}
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err = s.Render.Wait(wctx, sc, req.ID)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return RenderCheck{Status: "unavailable", Code: string(rc.CodeInternal), Message: "the render request could not be read", Request: req}
	}
	switch req.State {
	case render.StateSucceeded:
		res, err := s.Render.Result(ctx, sc, req.ID)
		if err != nil || res.Diagnosis == nil {
			return RenderCheck{Status: "unavailable", Code: string(rc.CodeResultLost), Message: "the diagnosis could not be read", Request: req}
		}
		out := RenderCheck{Status: "passed", Findings: res.Diagnosis.Items, Request: req}
		if res.Diagnosis.Counts.Error > 0 {
			out.Status, out.Code, out.Message = "failed", string(rc.CodeContentError), fmt.Sprintf("%d error(s) in the rendered content", res.Diagnosis.Counts.Error)
		}
		return out
	case render.StateFailed:
		return failedCheck(req)
	case render.StateCancelled, render.StateExpired:
		return RenderCheck{Status: "unavailable", Code: req.ErrorCode, Message: req.ErrorMessage, Request: req}
	}
	code := rc.CodeServiceUnavailable
	if req.State == render.StateExecuting || s.Render.Health(ctx).Available {
		code = rc.CodeDeadlineExceeded
	}
	return RenderCheck{Status: "unavailable", Code: string(code), Message: "the render check did not finish in time; it goes on and a repeat returns its result", Request: req}
}

// failedCheck is the conclusion of a render request that failed. A content fault that ended the
// render (a page that never became ready within its content budget) and output beyond the
// contract's limits (a capture over 32 MiB, a diagnosis over 1 MiB: what the page renders is too
// large, so the same input fails the same way; render-execution.md: "no blind retry") are the
// content's outcome: the check failed, named in the findings too, where a client looks for it.
// Anything else is the check not running: unavailable.
func failedCheck(req render.Request) RenderCheck {
	code := rc.Code(req.ErrorCode)
	if code.Category() == rc.CategoryContent || code == rc.CodeOutputLimitExceeded {
		return RenderCheck{Status: "failed", Code: req.ErrorCode, Message: req.ErrorMessage, Request: req,
			Findings: []rc.Finding{{Severity: rc.SeverityError, Code: req.ErrorCode, Scene: rc.DefaultScene, Message: req.ErrorMessage}}}
	}
	return RenderCheck{Status: "unavailable", Code: req.ErrorCode, Message: req.ErrorMessage, Request: req}
}
