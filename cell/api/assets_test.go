package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"

	"slidecells/cell/api"
	cblob "slidecells/cell/blob"
	"slidecells/shared/ids"
)

func init() {
	isoFixtures["asset_id"] = isoFixture{prefix: ids.Asset, make: func(t *testing.T, b *bundle, base, ws string) string {
		return b.uploadAsset(t, base, ws, "image/png", string(testPNG(t, 2, 2, 7)), "").ID
	}}
	isoBodies["update-asset"] = `{"version":1,"name":"Hijack"}`
	isoBodies["replace-asset-content"] = string(testPNG(t0{}, 3, 3, 1))
	isoContentTypes["replace-asset-content"] = "image/png"
	isoBodies["preview-asset-content"] = `{}`
	isoBodies["copy-asset"] = `{"name":"Hijack"}`
}

// t0 lets init build a fixture image without a *testing.T.
type t0 struct{}

func (t0) Helper()           {}
func (t0) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

type fataler interface {
	Helper()
	Fatal(args ...any)
}

// testPNG encodes a w×h PNG whose bytes depend on shade.
func testPNG(t fataler, w, h int, shade uint8) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{R: shade, G: uint8(x), B: uint8(y), A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type assetJSON struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	ContentType string         `json:"content_type"`
	Kind        string         `json:"kind"`
	ByteSize    int64          `json:"byte_size"`
	SHA256      string         `json:"sha256"`
	Tags        []string       `json:"tags"`
	Metadata    map[string]any `json:"metadata"`
	Version     int64          `json:"version"`
	ContentURL  string         `json:"content_url"`
}

func decodeAsset(t *testing.T, body []byte) assetJSON {
	t.Helper()
	var a assetJSON
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("not an asset: %s", body)
	}
	return a
}

// testJPEG is a small, whole JPEG.
func testJPEG(t *testing.T) string {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// uploadAsset uploads and expects a 201.
func (b *bundle) uploadAsset(t *testing.T, base, ws, contentType, body, query string) assetJSON {
	t.Helper()
	resp, out := b.call(t, call{base: base, method: "POST", path: "/api/v1/assets/content" + query, ws: ws, key: ids.New("k"), contentType: contentType, body: body})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, out)
	}
	return decodeAsset(t, out)
}

// send is a request with arbitrary headers (name, value pairs).
func (b *bundle) send(t *testing.T, method, path string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return b.call(t, call{method: method, path: path, body: string(body), token: b.pat, ws: b.ws, header: hdr, bare: true})
}

// blobKeys lists the keys of a bucket under prefix.
func blobKeys(t *testing.T, bucket *gcblob.Bucket, prefix string) []string {
	t.Helper()
	keys, err := cblob.Keys(t.Context(), bucket, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// expectStored checks how many live assets the workspace has and how many blobs the cell holds.
func (b *bundle) expectStored(t *testing.T, assets, blobs int) {
	t.Helper()
	if n, k := b.assetCount(t), blobKeys(t, b.api.Blobs, ""); n != assets || len(k) != blobs {
		t.Fatalf("%d assets, want %d; blobs %v, want %d", n, assets, k, blobs)
	}
}

func (b *bundle) assetCount(t *testing.T) int {
	t.Helper()
	resp, body := b.call(t, call{method: "GET", path: "/api/v1/assets?limit=200", ws: b.ws})
	if resp.StatusCode != 200 {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	return strings.Count(string(body), `"id":"ast_`)
}

func TestAssetUploadDownloadRoundTrip(t *testing.T) {
	b := setup(t)
	data := testPNG(t, 3, 2, 10)
	sum := hexSHA(data)
	resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content?name=Logo%20dark&tags=logo,brand,logo", ws: b.ws,
		key: ids.New("k"), contentType: "image/png", body: string(data)})
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	a := decodeAsset(t, body)
	if !ids.Valid(ids.Asset, a.ID) || a.Name != "Logo dark" || a.ContentType != "image/png" || a.Kind != "image" ||
		a.ByteSize != int64(len(data)) || a.SHA256 != sum || a.Version != 1 || strings.Join(a.Tags, ",") != "brand,logo" {
		t.Fatalf("asset %+v", a)
	}
	if resp.Header.Get("Location") != "/api/v1/assets/"+a.ID || a.ContentURL != "/api/v1/assets/"+a.ID+"/content?sha256="+sum {
		t.Fatalf("location %q content_url %q", resp.Header.Get("Location"), a.ContentURL)
	}
	// The blob is content-addressed in the workspace; no temporary blob is left.
	if k := blobKeys(t, b.api.Blobs, ""); len(k) != 1 || k[0] != cblob.Key(b.ws, sum) {
		t.Fatalf("blobs %v", k)
	}

	resp, got := b.send(t, "GET", "/api/v1/assets/"+a.ID+"/content", nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, data) || hexSHA(got) != sum {
		t.Fatalf("download: %d, %d bytes", resp.StatusCode, len(got))
	}
	for h, want := range map[string]string{
		"Content-Type": "image/png", "Content-Length": fmt.Sprint(len(data)), "ETag": `"` + sum + `"`,
		"Cache-Control": "private, no-cache", "X-Content-Type-Options": "nosniff",
		"Content-Disposition": `inline; filename="Logo dark"; filename*=UTF-8''Logo%20dark`,
	} {
		if resp.Header.Get(h) != want {
			t.Errorf("%s: %q, want %q", h, resp.Header.Get(h), want)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("no sandboxing CSP: %q", resp.Header.Get("Content-Security-Policy"))
	}
	// Pinned to its sha256 the URL names one content forever.
	resp, got = b.send(t, "GET", a.ContentURL, nil)
	if resp.StatusCode != 200 || !bytes.Equal(got, data) || resp.Header.Get("Cache-Control") != "private, max-age=31536000, immutable" {
		t.Fatalf("pinned: %d %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	resp, got = b.send(t, "GET", "/api/v1/assets/"+a.ID+"/content", nil, "If-None-Match", `"`+sum+`"`)
	if resp.StatusCode != 304 || len(got) != 0 || resp.Header.Get("ETag") != `"`+sum+`"` {
		t.Fatalf("revalidation: %d %q", resp.StatusCode, got)
	}

	resp, got = b.send(t, "HEAD", "/api/v1/assets/"+a.ID+"/content", nil)
	if resp.StatusCode != 200 || len(got) != 0 || resp.Header.Get("Content-Length") != fmt.Sprint(len(data)) {
		t.Fatalf("HEAD: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Length"), got)
	}

	resp, body = b.call(t, call{method: "GET", path: "/api/v1/assets/" + a.ID, ws: b.ws})
	if resp.StatusCode != 200 || decodeAsset(t, body).SHA256 != sum {
		t.Fatalf("detail: %d %s", resp.StatusCode, body)
	}
	resp, body = b.call(t, call{method: "POST", path: "/api/v1/assets/" + a.ID + "/content/preview", ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"width":3,"height":2`) || !strings.Contains(string(body), sum) {
		t.Fatalf("preview: %d %s", resp.StatusCode, body)
	}

	// Declared as a generic type, the content decides; without a name one is made from the digest.
	jpg := b.uploadAsset(t, "", b.ws, "application/octet-stream", string(testPNG(t, 1, 1, 200)), "")
	if jpg.ContentType != "image/png" || jpg.Name != jpg.SHA256[:12]+".png" {
		t.Fatalf("generic upload %+v", jpg)
	}
}

func TestAssetUploadTooLarge(t *testing.T) {
	b := setup(t)
	data := testPNG(t, 1, 1, 1)
	big := append(data, make([]byte, int(cblob.MaxBytes)+1-len(data))...)
	resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content", ws: b.ws, key: ids.New("k"), contentType: "image/png", body: string(big)})
	if resp.StatusCode != 413 || code(t, body) != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("oversized: %d %.300s", resp.StatusCode, body)
	}
	b.expectStored(t, 0, 0)
}

func TestAssetContentTypes(t *testing.T) {
	b := setup(t)
	pngData := testPNG(t, 2, 2, 3)
	exe := "MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + strings.Repeat("\x00", 64)
	webp := "RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f" + string([]byte{99, 0x40, 0x0c, 0}) + "\x00\x00\x00\x00\x00"
	rejected := []struct {
		name, declared, body, code, field string
	}{
		{"text declared png", "image/png", "hello, not an image", "UNSUPPORTED_MEDIA_TYPE", "body"},
		{"png declared jpeg", "image/jpeg", string(pngData), "UNSUPPORTED_MEDIA_TYPE", "header.Content-Type"},
		{"exe as octet-stream", "application/octet-stream", exe, "UNSUPPORTED_MEDIA_TYPE", "body"},
		{"exe declared as exe", "application/x-msdownload", exe, "UNSUPPORTED_MEDIA_TYPE", "body"},
		{"html", "text/html", "<!DOCTYPE html><html><body>x</body></html>", "UNSUPPORTED_MEDIA_TYPE", "body"},
		{"json", "application/json", `{"a":1}`, "UNSUPPORTED_MEDIA_TYPE", "body"},
		{"svg with script", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`, "UNSUPPORTED_MEDIA_TYPE", "body"},
		{"empty", "image/png", "", "VALIDATION_FAILED", "body"},
	}
	for _, c := range rejected {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content", ws: b.ws, key: ids.New("k"), contentType: c.declared, body: c.body})
			status := map[string]int{"UNSUPPORTED_MEDIA_TYPE": 415, "VALIDATION_FAILED": 422}[c.code]
			if resp.StatusCode != status || code(t, body) != c.code || !strings.Contains(string(body), `"field":"`+c.field+`"`) {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
	b.expectStored(t, 0, 0)
	accepted := []struct{ name, declared, body, stored, kind string }{
		{"svg", "image/svg+xml", `<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="4" height="2"/></svg>`, "image/svg+xml", "image"},
		{"jpeg alias", "image/jpg", testJPEG(t), "image/jpeg", "image"}, // a whole JPEG: it must decode
		{"webp", "image/webp", webp, "image/webp", "image"},
		{"gif", "image/gif", "GIF89a\x01\x00\x01\x00\x00\x00\x00;", "image/gif", "image"},
		{"woff2", "font/woff2", "wOF2\x00\x01\x00\x00" + strings.Repeat("\x01", 40), "font/woff2", "font"},
		{"woff", "application/font-woff", "wOFF\x00\x01\x00\x00" + strings.Repeat("\x01", 40), "font/woff", "font"},
		{"ttf declared otf", "font/otf", "\x00\x01\x00\x00\x00\x0a" + strings.Repeat("\x02", 40), "font/ttf", "font"},
		{"otf", "font/otf", "OTTO\x00\x0a" + strings.Repeat("\x03", 40), "font/otf", "font"},
		{"pdf", "application/pdf", "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "application/pdf", "document"},
	}
	for _, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content", ws: b.ws, key: ids.New("k"), contentType: c.declared, body: c.body})
			if resp.StatusCode != 201 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if a := decodeAsset(t, body); a.ContentType != c.stored || a.Kind != c.kind {
				t.Errorf("stored as %s/%s", a.ContentType, a.Kind)
			}
		})
	}
	// Kind filter and preview dimensions of WebP and SVG.
	resp, body := b.call(t, call{method: "GET", path: "/api/v1/assets?kind=font", ws: b.ws})
	if n := strings.Count(string(body), `"id":"ast_`); resp.StatusCode != 200 || n != 4 {
		t.Fatalf("fonts: %d (%d) %s", resp.StatusCode, n, body)
	}
	_, body = b.call(t, call{method: "GET", path: "/api/v1/assets?kind=image&limit=200", ws: b.ws})
	var list struct{ Items []assetJSON }
	_ = json.Unmarshal(body, &list)
	dims := map[string]string{"image/webp": `"width":100,"height":50`, "image/svg+xml": `"width":40,"height":20`}
	for _, a := range list.Items {
		want, ok := dims[a.ContentType]
		if !ok {
			continue
		}
		_, pv := b.call(t, call{method: "POST", path: "/api/v1/assets/" + a.ID + "/content/preview", ws: b.ws})
		if !strings.Contains(string(pv), want) {
			t.Errorf("%s preview %s", a.ContentType, pv)
		}
		delete(dims, a.ContentType)
	}
	if len(dims) != 0 {
		t.Errorf("not previewed: %v", dims)
	}
}

func TestAssetDeduplicationAndReplay(t *testing.T) {
	b := setup(t)
	data := string(testPNG(t, 4, 4, 4))
	first := call{method: "POST", path: "/api/v1/assets/content?name=a", ws: b.ws, key: "upload-1", contentType: "image/png", body: data}
	r1, b1 := b.call(t, first)
	r2, b2 := b.call(t, first)
	if r1.StatusCode != 201 || r2.StatusCode != 201 || !bytes.Equal(b1, b2) || r2.Header.Get("Idempotency-Replayed") != "true" ||
		r2.Header.Get("Location") != r1.Header.Get("Location") {
		t.Fatalf("replay: %d %s / %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	other := first
	other.body = string(testPNG(t, 4, 4, 5))
	if resp, body := b.call(t, other); resp.StatusCode != 409 || code(t, body) != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("key reused: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content", ws: b.ws, contentType: "image/png", body: data}); resp.StatusCode != 422 || code(t, body) != "IDEMPOTENCY_KEY_REQUIRED" {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
	// The same bytes under a new key: a second asset, one blob.
	second := b.uploadAsset(t, "", b.ws, "image/png", data, "?name=b")
	a1 := decodeAsset(t, b1)
	if second.ID == a1.ID || second.SHA256 != a1.SHA256 {
		t.Fatalf("second %+v first %+v", second, a1)
	}
	b.expectStored(t, 2, 1)
}

func TestAssetReplaceContent(t *testing.T) {
	b := setup(t)
	dataA, dataB := testPNG(t, 2, 2, 1), testPNG(t, 5, 4, 2)
	a := b.uploadAsset(t, "", b.ws, "image/png", string(dataA), "?name=pic")
	path := "/api/v1/assets/" + a.ID + "/content"
	put := func(body []byte, hdr ...string) (*http.Response, []byte) {
		return b.send(t, "PUT", path, body, append([]string{"Idempotency-Key", ids.New("k"), "Content-Type", "image/png"}, hdr...)...)
	}
	if resp, body := put(dataB); resp.StatusCode != 422 || !strings.Contains(string(body), "header.If-Match") {
		t.Fatalf("no If-Match: %d %s", resp.StatusCode, body)
	}
	// The content's rules name the asset's sha256; the client sees the header it sent.
	for _, bad := range []string{"*", `W/"` + a.SHA256 + `"`, `"abc"`, `""`} {
		if resp, body := put(dataB, "If-Match", bad); resp.StatusCode != 422 || !slices.Equal(fieldNames(t, body), []string{"header.If-Match"}) {
			t.Fatalf("If-Match %s: %d %s", bad, resp.StatusCode, body)
		}
	}
	if resp, body := put(dataB, "If-Match", `"`+hexSHA([]byte("other"))+`"`); resp.StatusCode != 409 || code(t, body) != "VERSION_CONFLICT" || !strings.Contains(string(body), a.SHA256) {
		t.Fatalf("stale hash: %d %s", resp.StatusCode, body)
	}
	resp, body := put(dataB, "If-Match", `"`+a.SHA256+`"`)
	if resp.StatusCode != 200 {
		t.Fatalf("replace: %d %s", resp.StatusCode, body)
	}
	r := decodeAsset(t, body)
	if r.ID != a.ID || r.SHA256 != hexSHA(dataB) || r.ByteSize != int64(len(dataB)) || r.Version != 2 || r.Name != "pic" {
		t.Fatalf("replaced %+v", r)
	}
	if _, got := b.send(t, "GET", path, nil); !bytes.Equal(got, dataB) {
		t.Fatal("download after replace is not the new content")
	}
	// The old blob is kept (never overwritten nor deleted); its pinned URL is now stale.
	for _, sum := range []string{a.SHA256, r.SHA256} {
		if ok, err := b.api.Blobs.Exists(context.Background(), cblob.Key(b.ws, sum)); err != nil || !ok {
			t.Fatalf("blob %s missing: %v", sum, err)
		}
	}
	if old, _ := b.api.Blobs.ReadAll(context.Background(), cblob.Key(b.ws, a.SHA256)); !bytes.Equal(old, dataA) {
		t.Fatal("old blob changed")
	}
	if resp, body := b.send(t, "GET", a.ContentURL, nil); resp.StatusCode != 409 || code(t, body) != "VERSION_CONFLICT" {
		t.Fatalf("stale pinned URL: %d %s", resp.StatusCode, body)
	}
	// The old baseline is stale now; a font cannot replace an image; the same bytes change nothing.
	if resp, body := put(dataA, "If-Match", `"`+a.SHA256+`"`); resp.StatusCode != 409 {
		t.Fatalf("second replace on the old baseline: %d %s", resp.StatusCode, body)
	}
	font := []byte("wOF2\x00\x01\x00\x00" + strings.Repeat("\x01", 40))
	if resp, body := b.send(t, "PUT", path, font, "Idempotency-Key", ids.New("k"), "Content-Type", "font/woff2", "If-Match", r.SHA256); resp.StatusCode != 415 {
		t.Fatalf("kind change: %d %s", resp.StatusCode, body)
	}
	if resp, body := put(dataB, "If-Match", r.SHA256); resp.StatusCode != 200 || decodeAsset(t, body).Version != 2 {
		t.Fatalf("same bytes: %d %s", resp.StatusCode, body)
	}
	if k := blobKeys(t, b.api.Blobs, ""); len(k) != 2 {
		t.Fatalf("blobs %v", k)
	}
}

func TestAssetCopyPatchTagsArchive(t *testing.T) {
	b := setup(t)
	x := b.uploadAsset(t, "", b.ws, "image/png", string(testPNG(t, 2, 1, 1)), "?name=x&tags=logo,brand")
	y := b.uploadAsset(t, "", b.ws, "image/png", string(testPNG(t, 1, 2, 2)), "?name=y&tags=logo")

	// Copy: a new row on the same blob, tags and metadata carried over.
	resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/" + x.ID + "/copy", ws: b.ws, key: ids.New("k"), body: `{"name":"x copy"}`})
	if resp.StatusCode != 201 {
		t.Fatalf("copy: %d %s", resp.StatusCode, body)
	}
	c := decodeAsset(t, body)
	if c.ID == x.ID || c.Name != "x copy" || c.SHA256 != x.SHA256 || strings.Join(c.Tags, ",") != "brand,logo" || c.Version != 1 {
		t.Fatalf("copy %+v", c)
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/" + y.ID + "/copy", ws: b.ws, key: ids.New("k")}); resp.StatusCode != 201 || decodeAsset(t, body).Name != "y" {
		t.Fatalf("copy without body: %d %s", resp.StatusCode, body)
	}
	if k := blobKeys(t, b.api.Blobs, ""); len(k) != 2 {
		t.Fatalf("a copy wrote bytes: %v", k)
	}

	patch := func(id string, body string) (*http.Response, []byte) {
		return b.call(t, call{method: "PATCH", path: "/api/v1/assets/" + id, ws: b.ws, key: ids.New("k"), body: body})
	}
	resp, body = patch(x.ID, `{"version":1,"name":"x2","tags":["hero","logo"],"metadata":{"alt":"Our logo"}}`)
	if p := decodeAsset(t, body); resp.StatusCode != 200 || p.Version != 2 || p.Name != "x2" || strings.Join(p.Tags, ",") != "hero,logo" || p.Metadata["alt"] != "Our logo" {
		t.Fatalf("patch: %d %s", resp.StatusCode, body)
	}
	edge := `{"version":1,"metadata":{"` + strings.Repeat("k", 128) + `":` + strings.Repeat(`{"a":`, 7) + `1` + strings.Repeat(`}`, 7) + `}}`
	if resp, body := patch(y.ID, edge); resp.StatusCode != 200 {
		t.Fatalf("metadata at its bounds (8 levels, a 128-character key): %d %s", resp.StatusCode, body)
	}
	if resp, body := patch(x.ID, `{"version":1,"name":"stale"}`); resp.StatusCode != 409 || code(t, body) != "VERSION_CONFLICT" {
		t.Fatalf("stale version: %d %s", resp.StatusCode, body)
	}
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf(`"t%d"`, i)
	}
	for name, bad := range map[string]string{
		"uppercase tag":  `{"version":2,"tags":["Logo"]}`,
		"long tag":       `{"version":2,"tags":["` + strings.Repeat("a", 65) + `"]}`,
		"too many tags":  `{"version":2,"tags":[` + strings.Join(many, ",") + `]}`,
		"big metadata":   `{"version":2,"metadata":{"a":"` + strings.Repeat("m", 16<<10) + `"}}`,
		"NUL metadata":   `{"version":2,"metadata":{"a":"\u0000"}}`,
		"control name":   `{"version":2,"name":"a\u0007b"}`,
		"blank name":     `{"version":2,"name":"   "}`,
		"no version":     `{"name":"v"}`,
		"metadata array": `{"version":2,"metadata":[1]}`,
		// Free-form structure is bounded (#27.5): 1,000 levels, 9 levels, a 10,000-character key.
		"deep body":         `{"version":2,"metadata":` + strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000) + `}`,
		"deep metadata":     `{"version":2,"metadata":` + strings.Repeat(`{"a":`, 9) + `1` + strings.Repeat(`}`, 9) + `}`,
		"deep array":        `{"version":2,"metadata":{"a":` + strings.Repeat(`[`, 8) + strings.Repeat(`]`, 8) + `}}`,
		"long metadata key": `{"version":2,"metadata":{"` + strings.Repeat("k", 10000) + `":1}}`,
		"bidi metadata key": `{"version":2,"metadata":{"a\u202eb":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if resp, body := patch(x.ID, bad); resp.StatusCode != 422 || code(t, body) != "VALIDATION_FAILED" {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content?tags=Bad!", ws: b.ws, key: ids.New("k"), contentType: "image/png", body: string(testPNG(t, 9, 9, 9))}); resp.StatusCode != 422 || !strings.Contains(string(body), "query.tags") {
		t.Errorf("bad upload tag: %d %s", resp.StatusCode, body)
	}

	tagsOf := func() string {
		t.Helper()
		resp, body := b.call(t, call{method: "GET", path: "/api/v1/assets/tags", ws: b.ws})
		if resp.StatusCode != 200 {
			t.Fatalf("tags: %d %s", resp.StatusCode, body)
		}
		var out struct {
			Items []struct {
				Tag   string
				Count int
			}
		}
		_ = json.Unmarshal(body, &out)
		var s []string
		for _, i := range out.Items {
			s = append(s, fmt.Sprintf("%s=%d", i.Tag, i.Count))
		}
		return strings.Join(s, " ")
	}
	// x: hero,logo; y: logo; copy of x: brand,logo; copy of y: logo.
	if got := tagsOf(); got != "brand=1 hero=1 logo=4" {
		t.Fatalf("tags %q", got)
	}
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/assets/tags?limit=1", ws: b.ws})
	var tagPage struct {
		Items      []struct{ Tag string } `json:"items"`
		NextCursor string                 `json:"next_cursor"`
	}
	_ = json.Unmarshal(body, &tagPage)
	if resp.StatusCode != http.StatusOK || len(tagPage.Items) != 1 || tagPage.Items[0].Tag != "brand" || tagPage.NextCursor == "" {
		t.Fatalf("tag page: %s", body)
	}
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/assets/tags?limit=1&cursor=" + tagPage.NextCursor, ws: b.ws})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"tag":"hero"`) {
		t.Fatalf("second tag page: %s", body)
	}
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/assets?tag=hero", ws: b.ws})
	if resp.StatusCode != http.StatusOK || strings.Count(string(body), `"id":"ast_`) != 1 || !strings.Contains(string(body), x.ID) {
		t.Fatalf("tag filter: %s", body)
	}
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/assets?limit=1", ws: b.ws})
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	_ = json.Unmarshal(body, &page)
	if resp.StatusCode != http.StatusOK || page.NextCursor == "" {
		t.Fatalf("no next cursor: %s", body)
	}

	// Archive: the asset leaves every query and operation; its copies stay.
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/" + x.ID + "/archive", ws: b.ws, key: ids.New("k")}); resp.StatusCode != 200 {
		t.Fatalf("archive: %d %s", resp.StatusCode, body)
	}
	for _, c := range []call{
		{method: "GET", path: "/api/v1/assets/" + x.ID},
		{method: "GET", path: "/api/v1/assets/" + x.ID + "/content"},
		{method: "POST", path: "/api/v1/assets/" + x.ID + "/content/preview"},
		{method: "POST", path: "/api/v1/assets/" + x.ID + "/copy", key: ids.New("k"), body: `{}`},
		{method: "PATCH", path: "/api/v1/assets/" + x.ID, key: ids.New("k"), body: `{"version":2,"name":"z"}`},
		{method: "POST", path: "/api/v1/assets/" + x.ID + "/archive", key: ids.New("k")},
	} {
		c.ws = b.ws
		if resp, body := b.call(t, c); resp.StatusCode != 404 || code(t, body) != "NOT_FOUND" {
			t.Errorf("%s %s on archived: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	if resp, body := b.send(t, "PUT", "/api/v1/assets/"+x.ID+"/content", testPNG(t, 3, 3, 3), "Idempotency-Key", ids.New("k"), "If-Match", x.SHA256); resp.StatusCode != 404 {
		t.Errorf("replace archived: %d %s", resp.StatusCode, body)
	}
	if got := tagsOf(); got != "brand=1 logo=3" {
		t.Fatalf("tags after archive %q", got)
	}
	if n := b.assetCount(t); n != 3 {
		t.Fatalf("%d live assets", n)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/api/v1/assets/" + c.ID + "/content", ws: b.ws}); resp.StatusCode != 200 {
		t.Fatalf("copy of archived asset: %d", resp.StatusCode)
	}
	// Batch archive, all or nothing.
	resp, body = b.call(t, call{method: "POST", path: "/api/v1/assets/archive", ws: b.ws, key: ids.New("k"), body: `{"ids":["` + y.ID + `","` + x.ID + `"],"confirm":true}`})
	if resp.StatusCode != 404 {
		t.Fatalf("batch with an archived ID: %d %s", resp.StatusCode, body)
	}
	resp, body = b.call(t, call{method: "POST", path: "/api/v1/assets/archive", ws: b.ws, key: ids.New("k"), body: `{"ids":["` + y.ID + `","` + c.ID + `"],"confirm":true}`})
	if resp.StatusCode != 200 || b.assetCount(t) != 1 {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
}

func TestAssetScopesAndDeclarations(t *testing.T) {
	b := setup(t)
	a := b.uploadAsset(t, "", b.ws, "image/png", string(testPNG(t, 1, 1, 1)), "")
	readOnly, _, err := b.dir.CreateToken(context.Background(), b.user.ID, "assets-ro", []string{"asset:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := b.call(t, call{method: "GET", path: "/api/v1/assets/" + a.ID + "/content", ws: b.ws, token: readOnly}); resp.StatusCode != 200 {
		t.Fatalf("read with asset:read: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/assets/content", ws: b.ws, token: readOnly, key: ids.New("k"), contentType: "image/png", body: "x"}); resp.StatusCode != 403 || !strings.Contains(string(body), "asset:write") {
		t.Fatalf("upload with asset:read: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "GET", path: "/api/v1/assets", ws: b.ws, token: b.patScope}); resp.StatusCode != 403 || !strings.Contains(string(body), "asset:read") {
		t.Fatalf("list with project:read: %d %s", resp.StatusCode, body)
	}

	want := map[string]struct {
		scope string
		idem  api.Idempotency
		lock  api.Lock
	}{
		"upload-asset":          {"asset:write", api.KeyRequired, api.CreateOnly},
		"list-assets":           {"asset:read", api.NoIdempotency, api.NoLock},
		"list-asset-tags":       {"asset:read", api.NoIdempotency, api.NoLock},
		"get-asset":             {"asset:read", api.NoIdempotency, api.NoLock},
		"update-asset":          {"asset:write", api.KeyRequired, api.VersionLock},
		"get-asset-content":     {"asset:read", api.NoIdempotency, api.NoLock},
		"replace-asset-content": {"asset:write", api.KeyRequired, api.HashLock},
		"preview-asset-content": {"asset:read", api.NoIdempotency, api.NoLock},
		"copy-asset":            {"asset:write", api.KeyRequired, api.CreateOnly},
		"archive-asset":         {"asset:write", api.KeyRequired, api.NoLock},
		"archive-assets":        {"asset:write", api.KeyRequired, api.NoLock},
	}
	for _, op := range b.api.Operations() {
		w, ok := want[op.ID]
		if !ok {
			continue
		}
		delete(want, op.ID)
		if len(op.Scopes) != 1 || string(op.Scopes[0]) != w.scope || op.Idempotency != w.idem || op.Lock != w.lock || op.ReadOnly != (w.idem == api.NoIdempotency) {
			t.Errorf("%s declared %+v", op.ID, op)
		}
		if (op.ID == "upload-asset" || op.ID == "replace-asset-content") && op.MaxBodyBytes != cblob.MaxBytes {
			t.Errorf("%s: MaxBodyBytes %d", op.ID, op.MaxBodyBytes)
		}
	}
	if len(want) != 0 {
		t.Errorf("not registered: %v", want)
	}
	// The OpenAPI document describes the raw upload body and the binary download.
	_, doc := b.get(t, "/openapi.json", "")
	var d struct {
		Paths map[string]map[string]struct {
			RequestBody *struct {
				Content map[string]any `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]any `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	up := d.Paths["/api/v1/assets/content"]["post"]
	if up.RequestBody == nil || up.RequestBody.Content["font/woff2"] == nil || up.RequestBody.Content["image/png"] == nil {
		t.Errorf("upload body undocumented: %+v", up.RequestBody)
	}
	if _, ok := up.Responses["201"]; !ok {
		t.Errorf("upload answer not documented as 201: %v", up.Responses)
	}
	if d.Paths["/api/v1/assets/{asset_id}/content"]["get"].Responses["200"].Content["image/png"] == nil {
		t.Error("download answer undocumented")
	}
}
