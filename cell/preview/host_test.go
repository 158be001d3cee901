package preview

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

type answer struct {
	status  int
	body    string
	header  http.Header
	cookies []*http.Cookie
}

func get(t *testing.T, rawURL string, hdr map[string]string, cookies ...*http.Cookie) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header, resp.Cookies()}
}

func simplePage() snap {
	return snap{Source: `export default function P() { return <p>hello</p>; }`}
}

// The document needs a preview-access token of the right type, signature, snapshot, path and
// workspace, unexpired; every refusal is one identical answer that does not tell a bad token
// from a missing snapshot.
func TestDocumentTokenChecks(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(simplePage())
	other := e.snapshot(simplePage())
	otherWS := e.snapshot(snap{Source: simplePage().Source, Workspace: ids.New(ids.Workspace)})
	doc := e.host.URL + "/snapshots/" + m.Ref
	routed := e.host.URL + "/preview/w/" + m.WorkspaceID + "/snapshots/" + m.Ref

	good := e.token(m, nil)
	ok := get(t, doc, map[string]string{rc.PreviewAccessHeader: good})
	if ok.status != http.StatusOK || !strings.Contains(ok.header.Get("Content-Type"), "text/html") {
		t.Fatalf("valid token: %d %q", ok.status, ok.body)
	}
	missing := get(t, e.host.URL+"/snapshots/"+ids.New(ids.Snapshot), nil)
	if missing.status != http.StatusNotFound {
		t.Fatalf("unknown snapshot without a token: %d", missing.status)
	}

	admissionSigner := func() string {
		tok, err := e.signer.Sign(&ticket.Admission{RequestID: "rrq_1", AttemptID: "rat_1", RequestDigest: "sha256:00", WorkspaceID: m.WorkspaceID,
			WorkerID: "w", Epoch: "e", SlotGeneration: 1, IssuedAt: time.Now(), AcceptBy: time.Now().Add(time.Minute), StopBy: time.Now().Add(2 * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	stranger, _ := ticket.GenerateSigner("test-1") // same key ID, another key
	forged, _ := stranger.Sign(&ticket.PreviewAccess{WorkspaceID: m.WorkspaceID, SnapshotRef: m.Ref, Origin: e.host.URL,
		Path: "/snapshots/" + m.Ref, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	tampered := func() string {
		parts := strings.Split(good, ".")
		var c map[string]any
		b, _ := b64decode(parts[1])
		_ = json.Unmarshal(b, &c)
		c["snapshot_ref"] = other.Ref
		nb, _ := json.Marshal(c)
		return parts[0] + "." + b64(nb) + "." + parts[2]
	}()

	cases := []struct {
		name, url, token string
		query            bool
	}{
		{"no token", doc, "", false},
		{"garbage", doc, "not.a.token", false},
		{"expired", doc, e.token(m, func(c *ticket.PreviewAccess) {
			c.IssuedAt, c.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-time.Minute)
		}), false},
		{"wrong path", doc, e.token(m, func(c *ticket.PreviewAccess) { c.Path = "/snapshots/" + m.Ref + "/module.js" }), false},
		{"path of the routed form", doc, e.token(m, func(c *ticket.PreviewAccess) { c.Path = "/preview/w/" + m.WorkspaceID + "/snapshots/" + m.Ref }), false},
		{"wrong ref", doc, e.token(other, nil), false},
		{"ref of the url, path of another", e.host.URL + "/snapshots/" + other.Ref, good, false},
		{"token of another workspace's snapshot", e.host.URL + "/snapshots/" + otherWS.Ref, e.token(otherWS, func(c *ticket.PreviewAccess) { c.WorkspaceID = m.WorkspaceID }), false},
		{"wrong workspace prefix", e.host.URL + "/preview/w/" + otherWS.WorkspaceID + "/snapshots/" + m.Ref,
			e.token(m, func(c *ticket.PreviewAccess) { c.Path = "/preview/w/" + otherWS.WorkspaceID + "/snapshots/" + m.Ref }), false},
		{"admission ticket", doc, admissionSigner(), false},
		{"signed by another key", doc, forged, false},
		{"tampered claims", doc, tampered, false},
		{"snapshot that does not exist", e.host.URL + "/snapshots/" + "snap_aaaaaaaaaaaaaaaaaaaaaaaaaa", e.token(m, func(c *ticket.PreviewAccess) {
			c.SnapshotRef, c.Path = "snap_aaaaaaaaaaaaaaaaaaaaaaaaaa", "/snapshots/snap_aaaaaaaaaaaaaaaaaaaaaaaaaa"
		}), false},
		{"expired in the query", doc, e.token(m, func(c *ticket.PreviewAccess) {
			c.IssuedAt, c.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-time.Minute)
		}), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u, hdr := c.url, map[string]string{}
			if c.query {
				u += "?access=" + url.QueryEscape(c.token)
			} else if c.token != "" {
				hdr[rc.PreviewAccessHeader] = c.token
			}
			a := get(t, u, hdr)
			if a.status != missing.status || a.body != missing.body || len(a.cookies) != 0 {
				t.Fatalf("%s: %d %q cookies %d; want the refusal %d %q", c.name, a.status, a.body, len(a.cookies), missing.status, missing.body)
			}
		})
	}

	// The router's public form: the same handler, the token's path is the routed one, and the
	// token may come in the query.
	routedTok := e.token(m, func(c *ticket.PreviewAccess) { c.Path = "/preview/w/" + m.WorkspaceID + "/snapshots/" + m.Ref })
	if a := get(t, routed+"?access="+url.QueryEscape(routedTok), nil); a.status != http.StatusOK {
		t.Fatalf("routed form with the token in the query: %d %q", a.status, a.body)
	}
	if a := get(t, routed, map[string]string{rc.PreviewAccessHeader: good}); a.status != http.StatusNotFound {
		t.Fatalf("routed form with a token for the direct path: %d", a.status)
	}
}

// A successful document answer: strict CSP with a fresh nonce, nosniff, no-store, and a
// path-scoped HttpOnly SameSite=Strict cookie expiring with the token.
func TestDocumentHeadersAndCookie(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(simplePage())
	exp := time.Now().Add(7 * time.Minute).Truncate(time.Second)
	tok := e.token(m, func(c *ticket.PreviewAccess) { c.ExpiresAt = exp })
	a := get(t, e.host.URL+"/snapshots/"+m.Ref, map[string]string{rc.PreviewAccessHeader: tok})
	b := get(t, e.host.URL+"/snapshots/"+m.Ref, map[string]string{rc.PreviewAccessHeader: tok})
	if a.status != 200 {
		t.Fatalf("document: %d", a.status)
	}
	csp := a.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self' 'nonce-", "connect-src 'none'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-eval") || strings.Contains(strings.SplitN(strings.SplitN(csp, "script-src", 2)[1], ";", 2)[0], "unsafe-inline") {
		t.Errorf("CSP allows eval or inline scripts: %q", csp)
	}
	if csp == b.header.Get("Content-Security-Policy") {
		t.Error("two documents share a nonce")
	}
	if a.header.Get("X-Content-Type-Options") != "nosniff" || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers: %v", a.header)
	}
	if !strings.HasPrefix(a.body, "<!doctype html>\n<html lang=\"en\"><head>\n<meta charset=\"utf-8\">\n<meta name=\"robots\" content=\"noindex\">\n<title>Preview</title>\n<script nonce=") {
		t.Errorf("the bootstrap is not the document's first script:\n%.300s", a.body)
	}
	if len(a.cookies) != 1 {
		t.Fatalf("cookies: %v", a.cookies)
	}
	ck := a.cookies[0]
	if ck.Name != CookieName || ck.Value != tok || ck.Path != "/snapshots/"+m.Ref || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode ||
		!ck.Expires.Equal(exp) || ck.Secure {
		t.Fatalf("cookie %+v", ck)
	}
	if strings.Contains(a.body, tok) {
		t.Fatal("the document holds the token")
	}
}

// A tsx/jsx document announces every runtime module and the snapshot's module as
// modulepreload links after its import map (the browser fetches them while the document is
// parsed, not one level of imports after another), each one served to the document's browser;
// an html page, which loads no modules, announces none.
func TestDocumentPreloadsModules(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(simplePage())
	tok := e.token(m, nil)
	a := get(t, e.host.URL+"/snapshots/"+m.Ref, map[string]string{rc.PreviewAccessHeader: tok})
	if a.status != 200 || len(a.cookies) != 1 {
		t.Fatalf("document: %d, cookies %v", a.status, a.cookies)
	}
	const tag = `<link rel="modulepreload" href="`
	var hrefs []string
	for rest := a.body; ; {
		i := strings.Index(rest, tag)
		if i < 0 {
			break
		}
		rest = rest[i+len(tag):]
		end := strings.IndexByte(rest, '"')
		if end < 0 {
			t.Fatalf("unterminated preload link in\n%s", a.body)
		}
		hrefs = append(hrefs, rest[:end])
	}
	rt := testRuntime(t)
	var want []string
	for name := range rt.files {
		if strings.HasSuffix(name, ".js") {
			want = append(want, name)
		}
	}
	if len(hrefs) != len(want)+1 {
		t.Fatalf("preloads %v, want the %d runtime modules and the snapshot's module", hrefs, len(want))
	}
	runtimeBase := "/runtime/" + rt.Version + "/"
	if hrefs[0] != runtimeBase+"main.js" || hrefs[len(hrefs)-1] != "/snapshots/"+m.Ref+"/module.js" {
		t.Errorf("preloads %v: want the runtime's main module first and the snapshot's module last", hrefs)
	}
	seen := map[string]bool{}
	for _, h := range hrefs[:len(hrefs)-1] {
		seen[strings.TrimPrefix(h, runtimeBase)] = true
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("runtime module %s is not preloaded (preloads %v)", name, hrefs)
		}
	}
	if im, pl := strings.Index(a.body, `<script type="importmap"`), strings.Index(a.body, tag); im < 0 || pl < im {
		t.Errorf("the preloads precede the import map (import map at %d, first preload at %d)", im, pl)
	}
	for _, h := range hrefs {
		r := get(t, e.host.URL+h, nil, a.cookies[0])
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") {
			t.Errorf("preload %s: %d %q", h, r.status, r.header.Get("Content-Type"))
		}
	}

	hp := e.snapshot(snap{FileType: "html", Source: `<p>plain</p>`})
	d := get(t, e.host.URL+"/snapshots/"+hp.Ref, map[string]string{rc.PreviewAccessHeader: e.token(hp, nil)})
	if d.status != 200 || strings.Contains(d.body, "modulepreload") {
		t.Errorf("html page document: %d, preloads in\n%s", d.status, d.body)
	}
}

// Subresources load with the document's cookie only: of the same snapshot, below the token's
// path, listed by the manifest.
func TestSubresources(t *testing.T) {
	e := newEnv(t)
	asset := pngOf(t, 2, 2, color.RGBA{255, 0, 0, 255})
	m := e.snapshot(snap{Source: simplePage().Source, Styles: `@font-face{font-family:F;src:url({{font:0}})}`,
		Fonts:  []blobSpec{{Data: testFont(t), Type: "font/ttf", Write: true}},
		Assets: []blobSpec{{ID: "ast_logo", Data: asset, Type: "image/png", Write: true}}})
	other := e.snapshot(snap{Source: `export default function Q() { return <p>other</p>; }`,
		Assets: []blobSpec{{ID: "ast_other", Data: pngOf(t, 3, 3, color.Black), Type: "image/png", Write: true}}})
	cookie := &http.Cookie{Name: CookieName, Value: e.token(m, nil)}
	base := e.host.URL + "/snapshots/" + m.Ref
	refusal := get(t, base+"/module.js", nil)
	if refusal.status != http.StatusNotFound {
		t.Fatalf("module without a cookie: %d", refusal.status)
	}

	mod := get(t, base+"/module.js", nil, cookie)
	if mod.status != 200 || mod.header.Get("Content-Type") != "text/javascript; charset=utf-8" || !strings.Contains(mod.body, "hello") {
		t.Fatalf("module: %d %q %q", mod.status, mod.header.Get("Content-Type"), mod.body)
	}
	if css := get(t, base+"/styles.css", nil, cookie); css.status != 200 || !strings.Contains(css.body, "blobs/"+m.Fonts[0].Hex()) {
		t.Fatalf("styles: %d %q", css.status, css.body)
	}
	img := get(t, base+"/blobs/"+m.Assets[0].Hex(), nil, cookie)
	if img.status != 200 || img.header.Get("Content-Type") != "image/png" || img.body != string(asset) || img.header.Get("Content-Length") != strconv.Itoa(len(asset)) {
		t.Fatalf("asset: %d %v", img.status, img.header)
	}
	if f := get(t, base+"/blobs/"+m.Fonts[0].Hex(), nil, cookie); f.status != 200 || f.header.Get("Content-Type") != "font/ttf" {
		t.Fatalf("font: %d %v", f.status, f.header)
	}

	refused := []struct{ name, url string }{
		{"object of another snapshot", base + "/blobs/" + other.Assets[0].Hex()},
		{"object not in any manifest", base + "/blobs/" + strings.Repeat("ab", 32)},
		{"module by its digest", base + "/blobs/" + m.Module.Hex()},
		{"styles by its digest", base + "/blobs/" + m.Styles.Hex()},
		{"another snapshot's module with this cookie", e.host.URL + "/snapshots/" + other.Ref + "/module.js"},
		{"another snapshot's asset with this cookie", e.host.URL + "/snapshots/" + other.Ref + "/blobs/" + other.Assets[0].Hex()},
		{"routed form with a direct-path cookie", e.host.URL + "/preview/w/" + m.WorkspaceID + "/snapshots/" + m.Ref + "/module.js"},
		{"unknown file", base + "/index.html"},
	}
	for _, c := range refused {
		a := get(t, c.url, nil, cookie)
		if a.status != refusal.status || a.body != refusal.body {
			t.Errorf("%s: %d %q, want the refusal", c.name, a.status, a.body)
		}
	}
	// An expired cookie token is refused too.
	expired := &http.Cookie{Name: CookieName, Value: e.token(m, func(c *ticket.PreviewAccess) {
		c.IssuedAt, c.ExpiresAt = time.Now().Add(-time.Hour), time.Now().Add(-time.Second)
	})}
	if a := get(t, base+"/module.js", nil, expired); a.status != refusal.status {
		t.Errorf("expired cookie: %d", a.status)
	}
}

func b64decode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
func b64(b []byte) string                { return base64.RawURLEncoding.EncodeToString(b) }

// The backend interface answers only the preview service credential: manifests, listed objects
// with length and type, and the published key set.
func TestBackendInterface(t *testing.T) {
	e := newEnv(t)
	asset := pngOf(t, 4, 4, color.White)
	m := e.snapshot(snap{Source: simplePage().Source, Assets: []blobSpec{{ID: "ast_a", Data: asset, Type: "image/png", Write: true}}})
	other := e.snapshot(snap{Source: simplePage().Source, Assets: []blobSpec{{ID: "ast_b", Data: pngOf(t, 5, 5, color.Black), Type: "image/png", Write: true}}})
	root := e.cell.URL + BackendRoot
	manURL := root + "/workspaces/" + m.WorkspaceID + "/snapshots/" + m.Ref
	paths := []string{root + "/keys", manURL, manURL + "/objects/" + m.Assets[0].Hex()}
	for _, p := range paths {
		for _, auth := range []string{"", "Bearer ", "Bearer wrong-credential-of-some-length", "Basic " + testCredential, "Bearer " + testCredential + "x", testCredential} {
			a := get(t, p, map[string]string{"Authorization": auth})
			if a.status != http.StatusUnauthorized || strings.Contains(a.body, testCredential) {
				t.Errorf("%s with %q: %d %q", p, auth, a.status, a.body)
			}
		}
	}
	cred := map[string]string{"Authorization": "Bearer " + testCredential}
	keys := get(t, root+"/keys", cred)
	var kb KeysBody
	if keys.status != 200 || json.Unmarshal([]byte(keys.body), &kb) != nil || len(kb.Keys) != 1 || kb.Keys[0] != e.signer.PublicKey().String() {
		t.Fatalf("keys: %d %q", keys.status, keys.body)
	}
	man := get(t, manURL, cred)
	var got snapshot.Manifest
	if man.status != 200 || json.Unmarshal([]byte(man.body), &got) != nil || got.Check(m.WorkspaceID, m.Ref) != nil || got.InputDigest != m.InputDigest {
		t.Fatalf("manifest: %d %q", man.status, man.body)
	}
	obj := get(t, manURL+"/objects/"+m.Assets[0].Hex(), cred)
	if obj.status != 200 || obj.body != string(asset) || obj.header.Get("Content-Type") != "image/png" || obj.header.Get("Content-Length") != strconv.Itoa(len(asset)) {
		t.Fatalf("object: %d %v", obj.status, obj.header)
	}
	for name, u := range map[string]string{
		"object of another snapshot":    manURL + "/objects/" + other.Assets[0].Hex(),
		"object in no manifest":         manURL + "/objects/" + strings.Repeat("cd", 32),
		"snapshot of another workspace": root + "/workspaces/" + ids.New(ids.Workspace) + "/snapshots/" + m.Ref,
		"malformed ref":                 root + "/workspaces/" + m.WorkspaceID + "/snapshots/..",
	} {
		if a := get(t, u, cred); a.status != http.StatusNotFound {
			t.Errorf("%s: %d", name, a.status)
		}
	}

}

// The host caches manifests and objects (the backend is asked once) and follows a key
// rotation: a token naming a key it does not know makes it fetch the key set once more.
func TestPullerCachesAndKeyRotation(t *testing.T) {
	e := newEnv(t)
	m := e.snapshot(snap{Source: simplePage().Source, Assets: []blobSpec{{ID: "ast_a", Data: pngOf(t, 4, 4, color.White), Type: "image/png", Write: true}}})
	cookie := &http.Cookie{Name: CookieName, Value: e.token(m, nil)}
	for i := 0; i < 3; i++ {
		if a := get(t, e.host.URL+"/snapshots/"+m.Ref+"/blobs/"+m.Assets[0].Hex(), nil, cookie); a.status != 200 {
			t.Fatalf("asset: %d", a.status)
		}
	}
	manPath := BackendRoot + "/workspaces/" + m.WorkspaceID + "/snapshots/" + m.Ref
	if n := e.calls(manPath); n != 1 {
		t.Errorf("manifest fetched %d times", n)
	}
	if n := e.calls(manPath + "/objects/" + m.Assets[0].Hex()); n != 1 {
		t.Errorf("object fetched %d times", n)
	}
	if n := e.calls(BackendRoot + "/keys"); n != 1 {
		t.Errorf("key set fetched %d times", n)
	}

	// Rotation: the cell signs with a new key and publishes it (a little later: unknown key IDs
	// refresh the set at most once a second).
	e.mu.Lock()
	e.now = time.Now().Add(2 * time.Second)
	e.mu.Unlock()
	next, _ := ticket.GenerateSigner("test-2")
	e.mu.Lock()
	e.extra = append(e.extra, e.signer.PublicKey())
	e.signer = next
	e.mu.Unlock()
	tok := e.token(m, nil)
	if a := get(t, e.host.URL+"/snapshots/"+m.Ref, map[string]string{rc.PreviewAccessHeader: tok}); a.status != 200 {
		t.Fatalf("token of the new key: %d", a.status)
	}
	if n := e.calls(BackendRoot + "/keys"); n != 2 {
		t.Errorf("key set fetched %d times after the rotation, want 2", n)
	}
	// Made-up key IDs do not make the host ask again and again.
	stranger, _ := ticket.GenerateSigner("made-up")
	for i := 0; i < 5; i++ {
		bad, _ := stranger.Sign(&ticket.PreviewAccess{WorkspaceID: m.WorkspaceID, SnapshotRef: m.Ref, Origin: e.host.URL,
			Path: "/snapshots/" + m.Ref, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
		if a := get(t, e.host.URL+"/snapshots/"+m.Ref, map[string]string{rc.PreviewAccessHeader: bad}); a.status != http.StatusNotFound {
			t.Fatalf("unknown key: %d", a.status)
		}
	}
	if n := e.calls(BackendRoot + "/keys"); n > 3 {
		t.Errorf("key set fetched %d times for made-up key IDs", n)
	}
}

// The puller never hands out bytes other than the pinned ones.
func TestPullerVerifiesDigests(t *testing.T) {
	e := newEnv(t)
	data := pngOf(t, 4, 4, color.White)
	m := e.snapshot(snap{Source: simplePage().Source, Assets: []blobSpec{{ID: "ast_a", Data: data, Type: "image/png", Write: true}}})
	bad := append([]byte(nil), data...)
	bad[len(bad)-5] ^= 1 // same length, other bytes
	e.put(m.Assets[0].Key, bad, "image/png")
	_, err := e.puller.Object(context.Background(), m, m.Assets[0].Object)
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("tampered object: %v", err)
	}
	cookie := &http.Cookie{Name: CookieName, Value: e.token(m, nil)}
	if a := get(t, e.host.URL+"/snapshots/"+m.Ref+"/blobs/"+m.Assets[0].Hex(), nil, cookie); a.status == http.StatusOK {
		t.Fatalf("tampered object served: %d", a.status)
	}
}

func TestResolve(t *testing.T) {
	ref := "snap_" + strings.Repeat("a", 26)
	b := Resolve(BaseConfig{}, "", ref, "v1")
	if b.Document != "/snapshots/"+ref || b.Runtime != "/runtime/v1" || b.Platform != "/platform" || b.runtimeOrigin != "" {
		t.Fatalf("direct: %+v", b)
	}
	b = Resolve(BaseConfig{}, Prefix("ws_x"), ref, "v1")
	if b.Document != "/preview/w/ws_x/snapshots/"+ref || b.Runtime != "/preview/w/ws_x/runtime/v1" || b.Platform != "/preview/w/ws_x/platform" {
		t.Fatalf("routed: %+v", b)
	}
	b = Resolve(BaseConfig{RuntimeAssetBase: "https://cdn.example/preview-rt/", PlatformAssetBase: "https://assets.example/p"}, Prefix("ws_x"), ref, "v1")
	if b.Runtime != "https://cdn.example/preview-rt/v1" || b.Platform != "https://assets.example/p" || b.runtimeOrigin != "https://cdn.example" ||
		b.platformOrigin != "https://assets.example" || b.Document != "/preview/w/ws_x/snapshots/"+ref {
		t.Fatalf("configured: %+v", b)
	}
	csp := contentSecurityPolicy(b, "n", nil)
	if !strings.Contains(csp, "script-src 'self' 'nonce-n' https://cdn.example") || !strings.Contains(csp, "img-src 'self' data: blob: https://assets.example") {
		t.Fatalf("csp %q", csp)
	}
	for _, bad := range []string{"ftp://x", "http://", "https://u:p@x", "https://x/?q=1", "/relative"} {
		if CheckBase(bad) == nil {
			t.Errorf("CheckBase(%q) accepted", bad)
		}
	}
}

func TestLoadRuntimeMissing(t *testing.T) {
	_, err := LoadRuntime(t.TempDir())
	if !errors.Is(err, ErrRuntimeMissing) || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("missing runtime: %v", err)
	}
	rt := testRuntime(t)
	if len(rt.Version) != 16 || rt.bootstrap == "" {
		t.Fatalf("runtime %+v", rt.Version)
	}
}

// runtimeSources are the digests of the runtime's sources (runtime/src and package-lock.json)
// each HostBuild was released with. The render profile pins HostBuild, so a change of the
// runtime must come with a new HostBuild: add its entry here when you bump it.
var runtimeSources = map[string]string{
	"preview-host-1": "54b3fe114b2b175a2a505b5e66c3ef94e2c31655284bbfcc45fecb6189dbf64e",
	// An image counts as loaded only once its load event was seen (a failed one is "complete"
	// for a moment before its error event).
	"preview-host-2": "8368f40d0e7e2f9f887c770c38c04ea089fba610d697e2d8e1714633d0970a77",
	// CSS images (backgrounds and the other image properties, pseudo-elements included), SVG
	// <image> and video posters are visual resources the runtime awaits.
	"preview-host-3": "8c29f4a63afdc3e1b3c717e514c40cb5286e36291a18efadaa84563fb3d4b919",
	// mounted is published once the frame after the commit was rendered (an animation frame,
	// then a task), not after a second animation frame.
	"preview-host-4": "3256ecb1c22dd167dee018e14b77554520cdf1e8f2c081a77eb168e78e5f713a",
}

func TestHostBuildPinsRuntimeSources(t *testing.T) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir("runtime", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasPrefix(p, filepath.Join("runtime", "src")+string(filepath.Separator)) || p == filepath.Join("runtime", "package-lock.json")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %x\n", filepath.ToSlash(f), sha256.Sum256(b))
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want, ok := runtimeSources[HostBuild]; !ok || want != got {
		t.Fatalf("the runtime's sources are %s, HostBuild %q was released with %q: bump HostBuild and record the new digest", got, HostBuild, want)
	}
}
