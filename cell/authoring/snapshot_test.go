package authoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/blob"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/design"
	"slidecells/cell/snapshot"
	"slidecells/cell/store"
	"slidecells/shared/digest"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// pngOf is a small PNG whose bytes depend on seed.
func pngOf(t *testing.T, seed byte) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 2, 2))
	img.Pix[0] = seed
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (f *fixture) assets() *content.Assets {
	return &content.Assets{Store: f.svc.Store, Blobs: f.svc.Modules}
}

// uploadImage stores a PNG as an asset of sc's workspace.
func (f *fixture) uploadImage(t *testing.T, sc auth.Scope, seed byte) content.Asset {
	t.Helper()
	a, err := f.assets().Upload(context.Background(), sc, content.Upload{Body: bytes.NewReader(pngOf(t, seed)), ContentType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// uploadFont stores a file with a WOFF2 signature as a font asset of sc's workspace.
func (f *fixture) uploadFont(t *testing.T, sc auth.Scope) content.Asset {
	t.Helper()
	a, err := f.assets().Upload(context.Background(), sc, content.Upload{Body: strings.NewReader("wOF2" + ids.New("font")),
		ContentType: "font/woff2", Kinds: []blob.Kind{blob.KindFont}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// compiled compiles a page source of sc's workspace; it must compile.
func (f *fixture) compiled(t *testing.T, sc auth.Scope, fileType, source string) (*compile.Result, map[string]string) {
	t.Helper()
	res, comps, err := f.svc.compilePage(context.Background(), sc, fileType, source)
	if err != nil || !res.OK() {
		t.Fatalf("compile: %v %+v", err, res)
	}
	return res, comps
}

// usingAssets is a page naming the asset IDs.
func usingAssets(assetIDs ...string) string {
	var b strings.Builder
	b.WriteString("export default function P() { return <div>")
	for _, id := range assetIDs {
		fmt.Fprintf(&b, "<img data-asset=%q />", id)
	}
	b.WriteString("</div> }\n")
	return b.String()
}

// brand gives project A a 1920×1080 presentation with theme "brand", whose body role is bound
// to a family of one enabled and one disabled face; it returns the two font assets.
func (f *fixture) brand(t *testing.T) (enabled, disabled content.Asset, themeID string) {
	t.Helper()
	ctx := context.Background()
	enabled, disabled = f.uploadFont(t, f.a), f.uploadFont(t, f.a)
	var famID string
	for _, c := range []struct {
		asset  content.Asset
		weight int
		on     bool
	}{{enabled, 400, true}, {disabled, 700, false}} {
		face, err := f.svc.Store.CreateFontFace(ctx, f.a, design.FontFaceInput{FamilyName: "Brand Sans", FaceFields: design.FaceFields{
			AssetID: c.asset.ID, WeightMin: c.weight, WeightMax: c.weight, Style: "normal", Display: "swap", Enabled: c.on}})
		if err != nil {
			t.Fatal(err)
		}
		famID = face.FamilyID
	}
	name := "Brand"
	th, err := design.ThemeChange{Key: "brand", Name: &name, ThemeFontBindings: design.ThemeFontBindings{BodyFontFamilyID: &famID}}.NewTheme()
	if err != nil {
		t.Fatal(err)
	}
	if th, err = f.svc.Store.CreateTheme(ctx, f.a, th); err != nil {
		t.Fatal(err)
	}
	w, h, key := 1920, 1080, "brand"
	if _, _, err := (&content.Projects{Store: f.svc.Store}).PutConfiguration(ctx, f.a, f.prjA, 1, content.ProjectSettings{},
		&design.StylePresentationFields{PageWidth: &w, PageHeight: &h, ThemeKey: &key}); err != nil {
		t.Fatal(err)
	}
	return enabled, disabled, th.ID
}

func pinned(a content.Asset) snapshot.Object {
	return snapshot.Object{Key: a.BlobKey, Digest: "sha256:" + a.SHA256, Bytes: a.ByteSize, ContentType: a.ContentType}
}

// TestBuildSnapshot: the snapshot of a page fixes the module, the project's presentation and
// canvas, a stylesheet with the @font-face rules of the theme's enabled faces, those fonts and
// every asset the module names pinned by digest; it passes its own Check once it has a ref, and
// equal inputs give an equal input digest.
func TestBuildSnapshot(t *testing.T) {
	f, ctx := setup(t)
	font, offFont, _ := f.brand(t)
	img1, img2 := f.uploadImage(t, f.a, 1), f.uploadImage(t, f.a, 2)
	res, comps := f.compiled(t, f.a, "tsx", usingAssets(img2.ID, img1.ID, img2.ID))
	target := Target{Kind: snapshot.KindPage, ID: ids.New(ids.Page), Key: "intro", Version: 2, ProjectID: f.prjA, Route: "/intro"}
	m, err := f.svc.BuildSnapshot(ctx, f.a, target, "tsx", res, comps)
	if err != nil {
		t.Fatal(err)
	}
	ws := f.a.WorkspaceID()
	if m.Schema != snapshot.Schema || m.WorkspaceID != ws || m.FileType != "tsx" || m.Route != "/intro" || m.HostBuild != rc.PreviewHostBuild ||
		m.Entity != (snapshot.Entity{Kind: snapshot.KindPage, ID: target.ID, Key: "intro", Version: 2}) ||
		len(m.Scenes) != 1 || m.Scenes[0] != rc.DefaultScene || m.Ref != "" {
		t.Fatalf("manifest %+v", m)
	}
	if m.Module != (snapshot.Object{Key: blob.ModuleKey(ws, res.Digest), Digest: res.Digest, Bytes: int64(len(res.Code)), ContentType: "text/javascript; charset=utf-8"}) {
		t.Fatalf("module %+v", m.Module)
	}
	if m.Canvas != (snapshot.Canvas{Width: 1920, Height: 1080, DeviceScaleFactor: float64(design.RenderCanvas.DeviceScaleFactor)}) {
		t.Fatalf("canvas %+v", m.Canvas)
	}
	var pres design.StylePresentation
	if err := json.Unmarshal(m.Presentation, &pres); err != nil || pres.PageWidth != 1920 || pres.ThemeKey == nil || *pres.ThemeKey != "brand" {
		t.Fatalf("presentation %s %v", m.Presentation, err)
	}
	if len(m.Fonts) != 1 || m.Fonts[0] != pinned(font) {
		t.Fatalf("fonts %+v, want only the enabled face's %+v", m.Fonts, pinned(font))
	}
	first, second := img1, img2
	if second.ID < first.ID {
		first, second = second, first
	}
	if len(m.Assets) != 2 || m.Assets[0] != (snapshot.Asset{ID: first.ID, Object: pinned(first)}) || m.Assets[1] != (snapshot.Asset{ID: second.ID, Object: pinned(second)}) {
		t.Fatalf("assets %+v", m.Assets)
	}
	// The stylesheet is stored by its content address, and refers to the pinned font.
	r, err := f.svc.Modules.Bucket.NewReader(ctx, m.Styles.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	css, _ := io.ReadAll(r)
	_ = r.Close()
	if digest.Bytes(css) != m.Styles.Digest || int64(len(css)) != m.Styles.Bytes || m.Styles.Key != blob.DerivedKey(ws, m.Styles.Digest, ".css") {
		t.Fatalf("styles %+v do not match the stored %d bytes", m.Styles, len(css))
	}
	for _, want := range []string{":root {", "@font-face", `url("blobs/` + font.SHA256 + `")`} {
		if !strings.Contains(string(css), want) {
			t.Fatalf("stylesheet lacks %q:\n%s", want, css)
		}
	}
	if strings.Contains(string(css), offFont.SHA256) {
		t.Fatalf("the disabled face is in the stylesheet:\n%s", css)
	}
	if d, err := m.ComputeInputDigest(); err != nil || d != m.InputDigest {
		t.Fatalf("input digest %s, computed %s %v", m.InputDigest, d, err)
	}
	m.Ref = ids.New(ids.Snapshot)
	if err := m.Check(ws, m.Ref); err != nil {
		t.Fatalf("the built snapshot fails its check: %v", err)
	}
	again, err := f.svc.BuildSnapshot(ctx, f.a, target, "tsx", res, comps)
	if err != nil || again.InputDigest != m.InputDigest {
		t.Fatalf("equal inputs: %s then %s (%v)", m.InputDigest, again.InputDigest, err)
	}
}

// TestBuildSnapshotInputChanges: a change to a pinned input (an asset's content, the theme)
// changes the input digest.
func TestBuildSnapshotInputChanges(t *testing.T) {
	f, ctx := setup(t)
	_, _, themeID := f.brand(t)
	img := f.uploadImage(t, f.a, 1)
	res, comps := f.compiled(t, f.a, "tsx", usingAssets(img.ID))
	target := Target{Kind: snapshot.KindPage, Key: "intro", ProjectID: f.prjA}
	build := func() *snapshot.Manifest {
		t.Helper()
		m, err := f.svc.BuildSnapshot(ctx, f.a, target, "tsx", res, comps)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := build()

	obj, err := f.svc.Modules.Put(ctx, f.a, bytes.NewReader(pngOf(t, 9)), blob.PutOptions{Declared: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	replaced, err := f.svc.Store.ReplaceAssetContent(ctx, f.a, img.ID, img.SHA256, content.AssetContent{ContentType: obj.ContentType, ByteSize: obj.Size, SHA256: obj.SHA256, BlobKey: obj.Key})
	if err != nil {
		t.Fatal(err)
	}
	afterAsset := build()
	if afterAsset.InputDigest == base.InputDigest || afterAsset.Assets[0].Digest != "sha256:"+replaced.SHA256 {
		t.Fatalf("asset replaced: digest %s (was %s), pinned %+v", afterAsset.InputDigest, base.InputDigest, afterAsset.Assets)
	}

	// Archiving the theme leaves the project's theme key naming nothing: no theme CSS, no fonts.
	if err := f.svc.Store.Archive(ctx, f.a, store.Themes.Kind, []string{themeID}); err != nil {
		t.Fatal(err)
	}
	afterTheme := build()
	if afterTheme.InputDigest == afterAsset.InputDigest || len(afterTheme.Fonts) != 0 || afterTheme.Styles.Digest == afterAsset.Styles.Digest {
		t.Fatalf("theme archived: digest %s, fonts %+v", afterTheme.InputDigest, afterTheme.Fonts)
	}
}

// TestBuildSnapshotRefusals: an asset the snapshot cannot pin (another workspace's, one that
// does not exist, an archived one, or more than MaxPinnedAssets) fails with
// RENDER_INPUT_NOT_REPRODUCIBLE naming it; another workspace's project is the one 404.
func TestBuildSnapshotRefusals(t *testing.T) {
	f, ctx := setup(t)
	mine, theirs, archived := f.uploadImage(t, f.a, 1), f.uploadImage(t, f.b, 2), f.uploadImage(t, f.a, 3)
	if err := f.svc.Store.Archive(ctx, f.a, store.Assets.Kind, []string{archived.ID}); err != nil {
		t.Fatal(err)
	}
	// MaxPinnedAssets rows (their bytes do not matter to the pinning).
	many := []string{}
	for i := range MaxPinnedAssets {
		sum := digest.Bytes([]byte(fmt.Sprint("asset ", i)))
		sha := strings.TrimPrefix(sum, "sha256:")
		a, err := f.svc.Store.CreateAsset(ctx, f.a, content.NewAsset{Name: fmt.Sprintf("a%d.png", i),
			Content: content.AssetContent{ContentType: "image/png", ByteSize: 1, SHA256: sha, BlobKey: blob.Key(f.a.WorkspaceID(), sha)}})
		if err != nil {
			t.Fatal(err)
		}
		many = append(many, a.ID)
	}
	missing := ids.New(ids.Asset)
	for _, c := range []struct {
		name    string
		project string
		assets  []string
		code    problem.Code
		names   string // in the message
	}{
		{"the workspace's asset", f.prjA, []string{mine.ID}, "", ""},
		{"exactly the limit", f.prjA, many, "", ""},
		{"another workspace's asset", f.prjA, []string{mine.ID, theirs.ID}, problem.RenderInputNotReproducible, theirs.ID},
		{"an asset that does not exist", f.prjA, []string{missing}, problem.RenderInputNotReproducible, missing},
		{"an archived asset", f.prjA, []string{archived.ID}, problem.RenderInputNotReproducible, archived.ID},
		{"one over the limit", f.prjA, append([]string{mine.ID}, many...), problem.RenderInputNotReproducible, fmt.Sprintf("more than %d assets", MaxPinnedAssets)},
		{"another workspace's project", f.prjB, []string{mine.ID}, problem.NotFound, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, comps := f.compiled(t, f.a, "tsx", usingAssets(c.assets...))
			m, err := f.svc.BuildSnapshot(ctx, f.a, Target{Kind: snapshot.KindPage, ProjectID: c.project}, "tsx", res, comps)
			if code(err) != c.code {
				t.Fatalf("want %q, got %v", c.code, err)
			}
			if c.code == "" {
				if len(m.Assets) != len(c.assets) {
					t.Fatalf("%d assets pinned, want %d", len(m.Assets), len(c.assets))
				}
				return
			}
			if m != nil || !strings.Contains(problem.As(err).Message, c.names) {
				t.Fatalf("manifest %v, message %q (want it to name %s)", m, problem.As(err).Message, c.names)
			}
		})
	}
}

// TestBuildSnapshotHTML: an html page's module is the document body, served as html, on the
// default canvas when the page has no project.
func TestBuildSnapshotHTML(t *testing.T) {
	f, _ := setup(t)
	res, comps := f.compiled(t, f.a, "html", "<main><h1>Hello</h1></main>")
	m, err := f.svc.BuildSnapshot(context.Background(), f.a, Target{Kind: snapshot.KindPage}, "html", res, comps)
	if err != nil {
		t.Fatal(err)
	}
	if m.Module.ContentType != "text/html; charset=utf-8" || m.FileType != "html" ||
		m.Canvas.Width != design.RenderCanvas.Width || m.Canvas.Height != design.RenderCanvas.Height || len(m.Fonts) != 0 || len(m.Assets) != 0 {
		t.Fatalf("manifest %+v", m)
	}
}

// TestValidateWithoutRenderer: a validation is valid only when every stage passed. Without a
// renderer the render stage is unavailable and the answer says so, never "passed" and never
// "source has errors"; a source that does not compile fails at the compile stage and skips the
// render; an asset that cannot be pinned fails the render stage as input.
func TestValidateWithoutRenderer(t *testing.T) {
	f, ctx := setup(t)
	for _, c := range []struct {
		name, fileType, source  string
		status, code            string
		compileStatus, rendered string
	}{
		{"a good page", "tsx", simplePage, "unavailable", string(rc.CodeServiceUnavailable), "passed", "unavailable"},
		{"a page that does not compile", "tsx", brokenPage, "failed", "", "failed", "skipped"},
		{"an asset that cannot be pinned", "tsx", usingAssets(ids.New(ids.Asset)), "failed", "", "passed", "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := f.svc.ValidatePage(ctx, f.a, Target{ProjectID: f.prjA}, c.fileType, c.source)
			if err != nil {
				t.Fatal(err)
			}
			if v.Valid || v.Status != c.status || v.Code != c.code || v.Stages.Compile.Status != c.compileStatus || v.Stages.Render.Status != c.rendered {
				t.Fatalf("validation %+v", v)
			}
			if c.compileStatus == "failed" && len(v.Stages.Compile.Diagnostics) == 0 {
				t.Fatal("a failed compile without diagnostics")
			}
			if c.rendered == "failed" && v.Stages.Render.Code != string(rc.CodeInputNotReproducible) {
				t.Fatalf("render stage %+v", v.Stages.Render)
			}
		})
	}
	if _, err := f.svc.ValidatePage(ctx, f.a, Target{}, "vue", simplePage); code(err) != problem.ValidationFailed {
		t.Fatalf("a file type outside the standard: %v", err)
	}
	v, err := f.svc.ValidateComponent(ctx, f.a, "card", "tsx", cardSource)
	if err != nil || v.Valid || v.Status != "unavailable" || v.Stages.Compile.Status != "passed" {
		t.Fatalf("component: %+v %v", v, err)
	}
}

// TestValidateEntity: the entity kind's read scope first, then the mode's required fields, the
// baseline of an edit, and the entity of the workspace.
func TestValidateEntity(t *testing.T) {
	f, ctx := running(t)
	p := f.createPage(t, f.a, f.prjA, "intro", simplePage)
	pb := f.createPage(t, f.b, f.prjB, "theirs", simplePage)
	pagesOnly := f.user(t, "pat@example.com", "editor", []string{"page:read"})
	componentsOnly := f.user(t, "cora@example.com", "editor", []string{"component:read"})
	for _, c := range []struct {
		name   string
		sc     auth.Scope
		req    EntityRequest
		code   problem.Code
		field  string
		status string
	}{
		{"a page's current version", f.a, EntityRequest{EntityType: "page", Mode: "current", EntityID: p.ID}, "", "", "unavailable"},
		{"a page edit on its version", f.a, EntityRequest{EntityType: "page", Mode: "edits", EntityID: p.ID, Version: 1, Source: brokenPage}, "", "", "failed"},
		{"page content", pagesOnly, EntityRequest{EntityType: "page", Mode: "content", FileType: "tsx", Source: simplePage}, "", "", "unavailable"},
		{"component content", componentsOnly, EntityRequest{EntityType: "component", Mode: "content", FileType: "tsx", Source: cardSource}, "", "", "unavailable"},
		{"a page without page:read", componentsOnly, EntityRequest{EntityType: "page", Mode: "content", FileType: "tsx", Source: simplePage}, problem.ScopeRequired, "", ""},
		{"a component without component:read", pagesOnly, EntityRequest{EntityType: "component", Mode: "content", FileType: "tsx", Source: cardSource}, problem.ScopeRequired, "", ""},
		{"page content without a source", f.a, EntityRequest{EntityType: "page", Mode: "content", FileType: "tsx"}, problem.ValidationFailed, "source", ""},
		{"page content without a file type", f.a, EntityRequest{EntityType: "page", Mode: "content", Source: simplePage}, problem.ValidationFailed, "source", ""},
		{"component content without a source", f.a, EntityRequest{EntityType: "component", Mode: "content", FileType: "tsx"}, problem.ValidationFailed, "source", ""},
		{"a page edit without a version", f.a, EntityRequest{EntityType: "page", Mode: "edits", EntityID: p.ID, Source: simplePage}, problem.ValidationFailed, "entity_id", ""},
		{"a page edit on a stale version", f.a, EntityRequest{EntityType: "page", Mode: "edits", EntityID: p.ID, Version: 2, Source: simplePage}, problem.VersionConflict, "", ""},
		{"current mode without an entity", f.a, EntityRequest{EntityType: "page", Mode: "current"}, problem.ValidationFailed, "entity_id", ""},
		{"another workspace's page", f.a, EntityRequest{EntityType: "page", Mode: "current", EntityID: pb.ID}, problem.NotFound, "", ""},
		{"another workspace's page, as an edit", f.a, EntityRequest{EntityType: "page", Mode: "edits", EntityID: pb.ID, Version: 1, Source: simplePage}, problem.NotFound, "", ""},
		{"a component that does not exist", f.a, EntityRequest{EntityType: "component", Mode: "current", EntityID: ids.New(ids.Component)}, problem.NotFound, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := f.svc.ValidateEntity(ctx, c.sc, c.req)
			if code(err) != c.code {
				t.Fatalf("want %q, got %v", c.code, err)
			}
			if c.field != "" {
				if fe := problem.As(err).Fields; len(fe) != 1 || fe[0].Field != c.field {
					t.Fatalf("fields %+v, want %s", fe, c.field)
				}
			}
			if c.code == "" && (v.Status != c.status || v.Valid) {
				t.Fatalf("validation %+v", v)
			}
		})
	}
}

// TestPreviewPage: a preview fixes the page's current version as a saved snapshot of the
// workspace and signs a URL for exactly its document path; the page decides first (another
// workspace's is the one 404), then whether previews are configured.
func TestPreviewPage(t *testing.T) {
	f, ctx := running(t)
	p := f.createPage(t, f.a, f.prjA, "intro", simplePage)
	pb := f.createPage(t, f.b, f.prjB, "theirs", simplePage)

	if _, err := f.svc.PreviewPage(ctx, f.a, pb.ID, ""); code(err) != problem.NotFound {
		t.Fatalf("another workspace's page without previews: %v", err)
	}
	if _, err := f.svc.PreviewPage(ctx, f.a, p.ID, ""); code(err) != problem.RenderServiceUnavailable {
		t.Fatalf("previews not configured: %v", err)
	}
	if _, _, err := f.svc.Screenshot(ctx, f.a, pb.ID); code(err) != problem.NotFound {
		t.Fatalf("screenshot of another workspace's page: %v", err)
	}
	if _, _, err := f.svc.Screenshot(ctx, f.a, p.ID); code(err) != problem.RenderServiceUnavailable {
		t.Fatalf("screenshot without a renderer: %v", err)
	}

	signer, err := ticket.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse("https://slides.example.com/app/")
	f.svc.Previews = &Previews{PublicBase: base, Signer: signer, TTL: 10 * time.Minute}
	before := time.Now()
	art, err := f.svc.PreviewPage(ctx, f.a, p.ID, "/intro")
	if err != nil {
		t.Fatal(err)
	}
	ws := f.a.WorkspaceID()
	wantPath := "/app/preview/w/" + ws + "/snapshots/" + art.ArtifactID
	u, err := url.Parse(art.PreviewURL)
	if err != nil || u.Scheme != "https" || u.Host != "slides.example.com" || u.Path != wantPath || !ids.Valid(ids.Snapshot, art.ArtifactID) ||
		art.PageID != p.ID || art.Route != "/intro" {
		t.Fatalf("artifact %+v", art)
	}
	if art.ExpiresAt.Before(before.Add(10*time.Minute)) || art.ExpiresAt.After(time.Now().Add(10*time.Minute)) {
		t.Fatalf("expires %v, want 10 min after the request", art.ExpiresAt)
	}
	m, err := snapshot.Load(ctx, f.svc.Modules.Bucket, ws, art.ArtifactID)
	if err != nil {
		t.Fatal(err)
	}
	if m.InputDigest != art.InputDigest || m.Entity.ID != p.ID || m.Entity.Version != 1 || m.Route != "/intro" ||
		m.Owner != "preview:"+f.a.Principal().UserID || !m.ExpiresAt.Equal(art.ExpiresAt) {
		t.Fatalf("saved snapshot %+v", m)
	}
	if _, err := snapshot.Load(ctx, f.svc.Modules.Bucket, f.b.WorkspaceID(), art.ArtifactID); err != snapshot.ErrNotFound {
		t.Fatalf("B loads A's preview snapshot: %v", err)
	}
	keys, err := ticket.NewKeySet(signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	var claims ticket.PreviewAccess
	if err := keys.Verify(u.Query().Get("access"), time.Now(), &claims); err != nil {
		t.Fatal(err)
	}
	if claims.WorkspaceID != ws || claims.SnapshotRef != art.ArtifactID || claims.Origin != "https://slides.example.com" || claims.Path != wantPath ||
		!claims.Allows("https://slides.example.com", wantPath) || claims.Allows("https://slides.example.com", wantPath+"x") {
		t.Fatalf("claims %+v", claims)
	}
}

// TestPreviewProject: a project's route resolves through its route tree (the entry route when
// none is given); a route without a page is a 422, another workspace's project the one 404.
func TestPreviewProject(t *testing.T) {
	f, ctx := running(t)
	home := f.createPage(t, f.a, f.prjA, "home", simplePage)
	deep := f.createPage(t, f.a, f.prjA, "deep", simplePage)
	tree := content.RouteTree{Routes: []content.RouteNode{{Segment: "", PageID: home.ID, Children: []content.RouteNode{
		{Segment: "a", Children: []content.RouteNode{{Segment: "b", PageID: deep.ID}}}}}}}
	if _, _, err := (&content.Projects{Store: f.svc.Store}).PutRouteTree(ctx, f.a, f.prjA, 1, tree); err != nil {
		t.Fatal(err)
	}
	signer, _ := ticket.GenerateSigner("k1")
	base, _ := url.Parse("https://slides.example.com")
	f.svc.Previews = &Previews{PublicBase: base, Signer: signer}
	for _, c := range []struct {
		name, project, route string
		page                 string
		code                 problem.Code
	}{
		{"the entry route", f.prjA, "", home.ID, ""},
		{"a nested route", f.prjA, "/a/b", deep.ID, ""},
		{"a route without a page", f.prjA, "/a", "", problem.ValidationFailed},
		{"a route that does not exist", f.prjA, "/nope", "", problem.ValidationFailed},
		{"another workspace's project", f.prjB, "/", "", problem.NotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			art, err := f.svc.PreviewProject(ctx, f.a, c.project, c.route)
			if code(err) != c.code || art.PageID != c.page {
				t.Fatalf("want page %q / %q, got %+v %v", c.page, c.code, art, err)
			}
		})
	}
}
