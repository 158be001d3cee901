package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/cell/api"
	"slidecells/shared/ids"
)

func init() {
	isoFixtures["theme_id"] = isoFixture{prefix: ids.Theme, make: func(t *testing.T, b *bundle, base, ws string) string {
		return b.createTheme(t, base, ws, `{"key":"`+uniqueKey()+`","name":"Foreign"}`).ID
	}}
	isoFixtures["style_id"] = isoFixture{prefix: ids.Style, make: func(t *testing.T, b *bundle, base, ws string) string {
		return b.createStyle(t, base, ws, `{"name":"Foreign","page_width":1280}`).ID
	}}
	isoFixtures["family_id"] = isoFixture{prefix: ids.FontFamily, make: func(t *testing.T, b *bundle, base, ws string) string {
		asset, _ := b.uploadFont(t, base, ws)
		return b.createFace(t, base, ws, `{"family_name":"Foreign Sans","asset_id":"`+asset+`"}`).FamilyID
	}}
	isoFixtures["font_id"] = isoFixture{prefix: ids.FontFace, make: func(t *testing.T, b *bundle, base, ws string) string {
		asset, _ := b.uploadFont(t, base, ws)
		return b.createFace(t, base, ws, `{"family_name":"Foreign Sans","asset_id":"`+asset+`"}`).ID
	}}
	isoBodies["update-theme"] = `{"version":1,"name":"Hijack"}`
	isoBodies["update-style"] = `{"version":1,"name":"Hijack"}`
	isoBodies["rename-font-family"] = `{"version":1,"name":"Hijack"}`
	isoBodies["delete-font-family"] = `{}`
	isoBodies["update-font-face"] = `{"version":1,"font_style":"italic"}`
	isoBodies["delete-font-face"] = `{}`
}

func uniqueKey() string { return "k" + strings.TrimPrefix(ids.New("x"), "x_")[:12] }

type themeOut = api.ThemeView

type styleOut struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Snapshot       json.RawMessage   `json:"snapshot"`
	SnapshotDigest string            `json:"snapshot_digest"`
	Version        int64             `json:"version"`
	CSSVariables   map[string]string `json:"css_variables"`
}

type faceOut struct {
	ID           string `json:"id"`
	FamilyID     string `json:"family_id"`
	FontFamily   string `json:"font_family"`
	AssetID      string `json:"asset_id"`
	FontWeight   string `json:"font_weight"`
	FontStyle    string `json:"font_style"`
	FontDisplay  string `json:"font_display"`
	UnicodeRange string `json:"unicode_range"`
	Enabled      bool   `json:"enabled"`
	Version      int64  `json:"version"`
}

type familyOut struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Version   int64     `json:"version"`
	Faces     []faceOut `json:"faces"`
	BundleURL string    `json:"bundle_url"`
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %T: %v in %s", v, err, body)
	}
	return v
}

func (b *bundle) write(t *testing.T, base, ws, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	return b.call(t, call{base: base, method: method, path: path, ws: ws, key: ids.New("k"), body: body})
}

// create posts a create and decodes its 201 answer.
func create[T any](t *testing.T, b *bundle, base, ws, path, body string) T {
	t.Helper()
	resp, out := b.write(t, base, ws, "POST", path, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s %s: %d %s", path, body, resp.StatusCode, out)
	}
	return decode[T](t, out)
}

func (b *bundle) createTheme(t *testing.T, base, ws, body string) themeOut {
	t.Helper()
	return create[themeOut](t, b, base, ws, "/api/v1/themes", body)
}

func (b *bundle) createStyle(t *testing.T, base, ws, body string) styleOut {
	t.Helper()
	return create[styleOut](t, b, base, ws, "/api/v1/styles", body)
}

// uploadFont stores a file with a WOFF2 signature as an asset and returns its ID and sha256.
func (b *bundle) uploadFont(t *testing.T, base, ws string) (string, string) {
	t.Helper()
	content := "wOF2" + ids.New("font") // distinct content per call
	resp, out := b.call(t, call{base: base, method: "POST", path: "/api/v1/assets/content", ws: ws, key: ids.New("k"),
		contentType: "font/woff2", body: content})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload font: %d %s", resp.StatusCode, out)
	}
	a := decode[struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
	}](t, out)
	return a.ID, a.SHA256
}

// uploadPDF uploads an asset that is not a font and returns its ID.
func (b *bundle) uploadPDF(t *testing.T) string {
	t.Helper()
	resp, pdf := b.call(t, call{method: "POST", path: "/api/v1/assets/content", ws: b.ws, key: ids.New("k"), contentType: "application/pdf", body: "%PDF-1.4\n%%EOF\n"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload pdf: %d %s", resp.StatusCode, pdf)
	}
	return decode[struct {
		ID string `json:"id"`
	}](t, pdf).ID
}

func (b *bundle) createFace(t *testing.T, base, ws, body string) faceOut {
	t.Helper()
	if ws == "" {
		ws = b.ws
	}
	return create[faceOut](t, b, base, ws, "/workspaces/"+ws+"/fonts", body)
}

// expect422 checks a 422 VALIDATION_FAILED naming every field.
func expect422(t *testing.T, what string, resp *http.Response, body []byte, fields ...string) {
	t.Helper()
	if resp.StatusCode != 422 || code(t, body) != "VALIDATION_FAILED" {
		t.Errorf("%s: want 422, got %d %s", what, resp.StatusCode, body)
		return
	}
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(body, &p)
	for _, f := range fields {
		found := false
		for _, e := range p.Errors {
			found = found || e.Field == f
		}
		if !found {
			t.Errorf("%s: no error for field %s in %s", what, f, body)
		}
	}
}

// rejected is a create the API refuses with a 422 naming fields.
type rejected struct {
	name, body string
	fields     []string
}

// expectRejected posts each create to path, expects its 422, and checks that none was written:
// the list at path shows no ID with prefix.
func (b *bundle) expectRejected(t *testing.T, path, prefix string, cases []rejected) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.write(t, "", b.ws, "POST", path, c.body)
			expect422(t, c.name, resp, body, c.fields...)
		})
	}
	if _, list := b.call(t, call{method: "GET", path: path, ws: b.ws}); strings.Contains(string(list), prefix) {
		t.Fatalf("a rejected create was written: %s", list)
	}
}

func expectCode(t *testing.T, what string, resp *http.Response, body []byte, status int, c string) {
	t.Helper()
	if resp.StatusCode != status || (c != "" && code(t, body) != c) {
		t.Errorf("%s: want %d %s, got %d %s", what, status, c, resp.StatusCode, body)
	}
}

func TestThemeDefaultsAndCSS(t *testing.T) {
	b := setup(t)
	th := b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand","colors":{"primary":"#FF0000","accent":"#0f0"}}`)
	ty := th.Typography
	if ty.Heading.Source != "preset" || ty.Heading.FontPreset != "platform-sans" || ty.Body.FontPreset != "platform-sans" ||
		ty.Code.FontPreset != "platform-mono" {
		t.Fatalf("default typography: %+v", ty)
	}
	if ty.Heading.CSSFontFamily != `"DejaVu Sans", sans-serif` || ty.Code.CSSFontFamily != `"DejaVu Sans Mono", monospace` {
		t.Fatalf("default stacks: %+v", ty)
	}
	if th.Colors["primary"] != "#ff0000" || th.Colors["accent"] != "#00ff00" || th.Colors["background"] != "#ffffff" || th.Colors["text"] == "" {
		t.Fatalf("colors: %v", th.Colors)
	}
	v := th.CSSVariables
	if v["--color-primary"] != "#ff0000" || v["--font-heading"] != `"DejaVu Sans", sans-serif` || v["--font-code"] == "" ||
		v["--space-1"] != "4px" || v["--radius-0"] != "0px" {
		t.Fatalf("css variables: %v", v)
	}
	if !strings.HasPrefix(th.CSS, ":root {") || !strings.Contains(th.CSS, "--color-primary: #ff0000;") {
		t.Fatalf("css: %s", th.CSS)
	}
	// Presets by choice, and read back.
	sys := b.createTheme(t, "", b.ws, `{"key":"sys","name":"System","heading_font_preset":"system-ui","code_font_preset":"monospace"}`)
	if sys.Typography.Heading.FontPreset != "system-ui" || sys.Typography.Heading.CSSFontFamily != "system-ui, sans-serif" ||
		sys.Typography.Body.FontPreset != "platform-sans" || sys.Typography.Code.CSSFontFamily != "monospace" {
		t.Fatalf("chosen presets: %+v", sys.Typography)
	}
	resp, body := b.call(t, call{method: "GET", path: "/api/v1/themes/" + th.ID, ws: b.ws})
	if resp.StatusCode != 200 || decode[themeOut](t, body).Typography != th.Typography {
		t.Fatalf("get: %d %s", resp.StatusCode, body)
	}
	// Keys are unique among live themes.
	resp, body = b.write(t, "", b.ws, "POST", "/api/v1/themes", `{"key":"brand","name":"Again"}`)
	expectCode(t, "duplicate key", resp, body, 409, "NAME_CONFLICT")
	// Paginated list.
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/themes?limit=1", ws: b.ws})
	page := decode[struct {
		Items      []themeOut `json:"items"`
		NextCursor string     `json:"next_cursor"`
	}](t, body)
	if resp.StatusCode != 200 || len(page.Items) != 1 || page.NextCursor == "" {
		t.Fatalf("list page 1: %d %s", resp.StatusCode, body)
	}
	_, body = b.call(t, call{method: "GET", path: "/api/v1/themes?limit=1&cursor=" + page.NextCursor, ws: b.ws})
	if p2 := decode[struct {
		Items []themeOut `json:"items"`
	}](t, body); len(p2.Items) != 1 || p2.Items[0].ID == page.Items[0].ID {
		t.Fatalf("list page 2: %s", body)
	}
}

func TestThemeValidation(t *testing.T) {
	b := setup(t)
	asset, _ := b.uploadFont(t, "", b.ws)
	face := b.createFace(t, "", b.ws, `{"family_name":"Brand Sans","asset_id":"`+asset+`"}`)
	foreignAsset, _ := b.uploadFont(t, b.srvB.URL, b.wsB)
	foreign := b.createFace(t, b.srvB.URL, b.wsB, `{"family_name":"Elsewhere","asset_id":"`+foreignAsset+`"}`)
	missingFamily := ids.New(ids.FontFamily)
	b.expectRejected(t, "/api/v1/themes", "thm_", []rejected{
		{"binding and preset for one role", `{"key":"a","name":"A","heading_font_family_id":"` + face.FamilyID + `","heading_font_preset":"platform-sans"}`,
			[]string{"body.heading_font_family_id", "body.heading_font_preset"}},
		{"code preset for heading", `{"key":"a","name":"A","heading_font_preset":"platform-mono"}`, []string{"body.heading_font_preset"}},
		{"sans preset for code", `{"key":"a","name":"A","code_font_preset":"platform-sans"}`, []string{"body.code_font_preset"}},
		{"unknown preset", `{"key":"a","name":"A","body_font_preset":"comic-sans"}`, []string{"body.body_font_preset"}},
		{"unknown family", `{"key":"a","name":"A","body_font_family_id":"` + missingFamily + `"}`, []string{"body.body_font_family_id"}},
		{"family of another workspace", `{"key":"a","name":"A","code_font_family_id":"` + foreign.FamilyID + `"}`, []string{"body.code_font_family_id"}},
		{"bad color", `{"key":"a","name":"A","colors":{"primary":"red"}}`, []string{"body.colors.primary"}},
		{"bad color name", `{"key":"a","name":"A","colors":{"Primary Color":"#fff"}}`, []string{"body.colors.Primary Color"}},
		{"decreasing spacing", `{"key":"a","name":"A","spacing":[0,8,4]}`, []string{"body.spacing[2]"}},
		{"radius out of range", `{"key":"a","name":"A","radius":[0,10000]}`, []string{"body.radius[1]"}},
		{"bad key", `{"key":"Not A Key","name":"A"}`, []string{"body.key"}},
	})

	// A binding names the family and its stack; the preset of another role stays.
	th := b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand","heading_font_family_id":"`+face.FamilyID+`"}`)
	h := th.Typography.Heading
	if h.Source != "family" || h.FamilyID != face.FamilyID || h.FontFamily != "Brand Sans" ||
		h.CSSFontFamily != `"Brand Sans", "DejaVu Sans", sans-serif` || h.BundleURL != "/workspaces/"+b.ws+"/font-families/"+face.FamilyID+"/bundle.css" {
		t.Fatalf("binding: %+v", h)
	}
	if th.CSSVariables["--font-heading"] != h.CSSFontFamily {
		t.Fatalf("--font-heading: %v", th.CSSVariables)
	}
	// Update: version-locked; a preset replaces the binding of its role only.
	up := func(version int64, body string) (*http.Response, []byte) {
		return b.write(t, "", b.ws, "PATCH", "/api/v1/themes/"+th.ID, fmt.Sprintf(`{"version":%d,%s}`, version, body))
	}
	resp, body := up(1, `"name":"Brand 2","heading_font_preset":"system-ui","body_font_family_id":"`+face.FamilyID+`"`)
	got := decode[themeOut](t, body)
	if resp.StatusCode != 200 || got.Version != 2 || got.Name != "Brand 2" || got.Typography.Heading.FontPreset != "system-ui" ||
		got.Typography.Body.FontFamily != "Brand Sans" || got.Typography.Code.FontPreset != "platform-mono" {
		t.Fatalf("update: %d %s", resp.StatusCode, body)
	}
	resp, body = up(1, `"name":"Stale"`)
	expectCode(t, "stale theme version", resp, body, 409, "VERSION_CONFLICT")
	resp, body = up(2, `"code_font_preset":"platform-mono","code_font_family_id":"`+face.FamilyID+`"`)
	expect422(t, "update with both", resp, body, "body.code_font_family_id", "body.code_font_preset")
	resp, body = up(2, `"code_font_family_id":"`+missingFamily+`"`)
	expect422(t, "update to unknown family", resp, body, "body.code_font_family_id")
	_, body = b.call(t, call{method: "GET", path: "/api/v1/themes/" + th.ID, ws: b.ws})
	if got := decode[themeOut](t, body); got.Version != 2 || got.Name != "Brand 2" {
		t.Fatalf("rejected updates changed the theme: %s", body)
	}
}

func TestStyleFormsNormaliseIdentically(t *testing.T) {
	b := setup(t)
	b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand"}`)
	fields := `"page_width":1920,"page_height":1080,"theme_key":"brand","style_spec_markdown":"# Deck\nUse the brand.","default_layout":"two-column","background":"#FFF","font_scale":1.25`
	a := b.createStyle(t, "", b.ws, `{"name":"Wide","configuration":{"presentation":{`+fields+`}}}`)
	bb := b.createStyle(t, "", b.ws, `{"name":"Wide",`+fields+`}`)
	if string(a.Snapshot) != string(bb.Snapshot) || a.SnapshotDigest != bb.SnapshotDigest || !strings.HasPrefix(a.SnapshotDigest, "sha256:") {
		t.Fatalf("forms differ:\nA %s %s\nB %s %s", a.Snapshot, a.SnapshotDigest, bb.Snapshot, bb.SnapshotDigest)
	}
	snap := decode[struct {
		Schema       string         `json:"schema"`
		Presentation map[string]any `json:"presentation"`
	}](t, a.Snapshot)
	p := snap.Presentation
	if snap.Schema != "style-snapshot.v1" || p["aspect_ratio"] != "16:9" || p["background"] != "#ffffff" || p["theme_key"] != "brand" ||
		p["page_width"] != 1920.0 || p["font_scale"] != 1.25 {
		t.Fatalf("snapshot: %s", a.Snapshot)
	}
	// Read back: the same snapshot and digest.
	_, body := b.call(t, call{method: "GET", path: "/api/v1/styles/" + bb.ID, ws: b.ws})
	if got := decode[styleOut](t, body); string(got.Snapshot) != string(a.Snapshot) || got.SnapshotDigest != a.SnapshotDigest {
		t.Fatalf("get: %s", body)
	}
	// Defaults fill the rest, identically in both forms; a nested empty presentation is form A.
	d1 := b.createStyle(t, "", b.ws, `{"name":"Default","configuration":{"presentation":{}}}`)
	d2 := b.createStyle(t, "", b.ws, `{"name":"Default","page_width":1280}`)
	if d1.SnapshotDigest != d2.SnapshotDigest || !strings.Contains(string(d1.Snapshot), `"page_height":720`) || !strings.Contains(string(d1.Snapshot), `"theme_key":null`) {
		t.Fatalf("defaults: %s vs %s", d1.Snapshot, d2.Snapshot)
	}
	if d1.CSSVariables["--page-width"] != "1280px" {
		t.Fatalf("style css variables: %v", d1.CSSVariables)
	}
}

func TestStyleValidation(t *testing.T) {
	b := setup(t)
	b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand"}`)
	big := strings.Repeat("x", 64<<10+1)
	b.expectRejected(t, "/api/v1/styles", "sty_", []rejected{
		{"mixed forms", `{"name":"S","configuration":{"presentation":{"page_width":1280}},"page_height":720}`, []string{"body"}},
		{"neither form", `{"name":"S"}`, []string{"body"}},
		{"no name", `{"page_width":1280}`, []string{"body.name"}},
		{"zero width (B)", `{"name":"S","page_width":0}`, []string{"body.page_width"}},
		{"zero width (A)", `{"name":"S","configuration":{"presentation":{"page_width":0}}}`, []string{"body.configuration.presentation.page_width"}},
		{"width over the side limit", `{"name":"S","page_width":8193}`, []string{"body.page_width"}},
		{"width over the physical side", `{"name":"S","page_width":4097}`, []string{"body.page_width"}},
		{"fractional height", `{"name":"S","page_height":720.5}`, []string{"body.page_height"}},
		{"over the pixel budget", `{"name":"S","page_width":4096,"page_height":4096}`, []string{"body.page_height"}},
		{"markdown over 64 KiB", `{"name":"S","style_spec_markdown":"` + big + `"}`, []string{"body.style_spec_markdown"}},
		{"unknown theme (B)", `{"name":"S","theme_key":"nope"}`, []string{"body.theme_key"}},
		{"unknown theme (A)", `{"name":"S","configuration":{"presentation":{"theme_key":"nope"}}}`, []string{"body.configuration.presentation.theme_key"}},
		{"aspect ratio mismatch", `{"name":"S","page_width":1280,"page_height":720,"aspect_ratio":"4:3"}`, []string{"body.aspect_ratio"}},
		{"bad layout", `{"name":"S","default_layout":"fancy"}`, []string{"body.default_layout"}},
		{"bad background", `{"name":"S","background":"white"}`, []string{"body.background"}},
		{"font scale", `{"name":"S","font_scale":3}`, []string{"body.font_scale"}},
		{"unknown field in A", `{"name":"S","configuration":{"presentation":{"page_width":1280,"colour":"red"}}}`, []string{"body.configuration.presentation.colour"}},
	})
	// A matching aspect ratio is accepted (and stored reduced).
	y := b.createStyle(t, "", b.ws, `{"name":"S","page_width":1024,"page_height":768,"aspect_ratio":"8:6","theme_key":"brand"}`)
	if !strings.Contains(string(y.Snapshot), `"aspect_ratio":"4:3"`) {
		t.Fatalf("ratio: %s", y.Snapshot)
	}
	// Updates merge the given fields in either form; theme_key null clears; version-locked.
	up := func(version int64, body string) (*http.Response, []byte) {
		return b.write(t, "", b.ws, "PATCH", "/api/v1/styles/"+y.ID, fmt.Sprintf(`{"version":%d%s}`, version, body))
	}
	resp, body := up(1, `,"configuration":{"presentation":{"page_width":1280,"page_height":720}}`)
	got := decode[styleOut](t, body)
	if resp.StatusCode != 200 || got.Version != 2 || !strings.Contains(string(got.Snapshot), `"aspect_ratio":"16:9"`) ||
		!strings.Contains(string(got.Snapshot), `"theme_key":"brand"`) {
		t.Fatalf("update A: %d %s", resp.StatusCode, body)
	}
	resp, body = up(2, `,"name":"Renamed","theme_key":null`)
	got = decode[styleOut](t, body)
	if resp.StatusCode != 200 || got.Name != "Renamed" || !strings.Contains(string(got.Snapshot), `"theme_key":null`) ||
		!strings.Contains(string(got.Snapshot), `"page_width":1280`) {
		t.Fatalf("update B: %d %s", resp.StatusCode, body)
	}
	resp, body = up(2, `,"name":"Stale"`)
	expectCode(t, "stale style version", resp, body, 409, "VERSION_CONFLICT")
	resp, body = up(3, `,"configuration":{"presentation":{"page_width":1280}},"page_height":720`)
	expect422(t, "mixed update", resp, body, "body")
	resp, body = up(3, `,"theme_key":"nope"`)
	expect422(t, "update to unknown theme", resp, body, "body.theme_key")
}

func TestStyleOpenAPIHasBothForms(t *testing.T) {
	b := setup(t)
	_, body := b.get(t, "/openapi.json", "")
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Schema struct {
						OneOf []struct {
							Ref string `json:"$ref"`
						} `json:"oneOf"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct{ path, method string }{{"/api/v1/styles", "post"}, {"/api/v1/styles/{style_id}", "patch"}} {
		oneOf := doc.Paths[op.path][op.method].RequestBody.Content["application/json"].Schema.OneOf
		if len(oneOf) != 2 {
			t.Fatalf("%s %s: request schema oneOf has %d entries", op.method, op.path, len(oneOf))
		}
		var nested, flat bool
		for _, ref := range oneOf {
			s := doc.Components.Schemas[strings.TrimPrefix(ref.Ref, "#/components/schemas/")]
			_, hasConfig := s.Properties["configuration"]
			_, hasWidth := s.Properties["page_width"]
			_, hasTheme := s.Properties["theme_key"]
			_, hasSpec := s.Properties["style_spec_markdown"]
			switch {
			case hasConfig && !hasWidth && contains(s.Required, "configuration"):
				nested = true
			case !hasConfig && hasWidth && hasTheme && hasSpec:
				flat = true
			}
		}
		if !nested || !flat {
			t.Fatalf("%s %s: forms nested=%v flat=%v in %v", op.method, op.path, nested, flat, oneOf)
		}
	}
	if !strings.Contains(string(body), `"/workspaces/{workspace_id}/font-families/{family_id}/bundle.css"`) || !strings.Contains(string(body), `"text/css"`) {
		t.Fatal("bundle not documented as text/css")
	}
}

func TestFontFaces(t *testing.T) {
	b := setup(t)
	asset, _ := b.uploadFont(t, "", b.ws)
	fonts := "/workspaces/" + b.ws + "/fonts"
	notFont := b.uploadPDF(t)
	foreignAsset, _ := b.uploadFont(t, b.srvB.URL, b.wsB)
	base := `"family_name":"Brand Sans","asset_id":"` + asset + `"`
	cases := []struct {
		name, body string
		fields     []string
	}{
		{"reversed weight range", `{` + base + `,"font_weight":"900 100"}`, []string{"body.font_weight"}},
		{"weight zero", `{` + base + `,"font_weight":"0"}`, []string{"body.font_weight"}},
		{"weight over 1000", `{` + base + `,"font_weight":"1001"}`, []string{"body.font_weight"}},
		{"range over 1000", `{` + base + `,"font_weight":"100 1200"}`, []string{"body.font_weight"}},
		{"weight not numeric", `{` + base + `,"font_weight":"bold"}`, []string{"body.font_weight"}},
		{"three weights", `{` + base + `,"font_weight":"100 200 300"}`, []string{"body.font_weight"}},
		{"bad style", `{` + base + `,"font_style":"slanted"}`, []string{"body.font_style"}},
		{"bad display", `{` + base + `,"font_display":"eager"}`, []string{"body.font_display"}},
		{"bad unicode range", `{` + base + `,"unicode_range":"U+ZZZZ"}`, []string{"body.unicode_range"}},
		{"reversed unicode range", `{` + base + `,"unicode_range":"U+00FF-0000"}`, []string{"body.unicode_range"}},
		{"unicode range beyond 10FFFF", `{` + base + `,"unicode_range":"U+110000"}`, []string{"body.unicode_range"}},
		{"asset is not a font", `{"family_name":"Brand Sans","asset_id":"` + notFont + `"}`, []string{"body.asset_id"}},
		{"asset of another workspace", `{"family_name":"Brand Sans","asset_id":"` + foreignAsset + `"}`, []string{"body.asset_id"}},
		{"missing asset", `{"family_name":"Brand Sans","asset_id":"` + ids.New(ids.Asset) + `"}`, []string{"body.asset_id"}},
		{"blank family name", `{"family_name":"   ","asset_id":"` + asset + `"}`, []string{"body.family_name"}},
		{"control character in family name", `{"family_name":"Brand\u0007","asset_id":"` + asset + `"}`, []string{"body.family_name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.write(t, "", b.ws, "POST", fonts, c.body)
			expect422(t, c.name, resp, body, c.fields...)
		})
	}
	_, list := b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families", ws: b.ws})
	if strings.Contains(string(list), "ffam_") {
		t.Fatalf("a rejected face wrote a family: %s", list)
	}

	f1 := b.createFace(t, "", b.ws, `{`+base+`,"font_weight":"100 900","unicode_range":"u+0000-00ff, U+131"}`)
	if f1.FontFamily != "Brand Sans" || f1.FontWeight != "100 900" || f1.FontStyle != "normal" || f1.FontDisplay != "swap" ||
		!f1.Enabled || f1.UnicodeRange != "U+0000-00FF, U+131" || !strings.HasPrefix(f1.FamilyID, "ffam_") {
		t.Fatalf("face: %+v", f1)
	}
	// The family is found by name, case-insensitively.
	f2 := b.createFace(t, "", b.ws, `{"family_name":"brand sans","asset_id":"`+asset+`","font_weight":"700","font_style":"italic","font_display":"block","enabled":false}`)
	if f2.FamilyID != f1.FamilyID || f2.FontFamily != "Brand Sans" || f2.FontWeight != "700" || f2.Enabled {
		t.Fatalf("second face: %+v", f2)
	}
	resp, body := b.call(t, call{method: "GET", path: fonts + "/" + f1.ID, ws: b.ws})
	if resp.StatusCode != 200 || decode[faceOut](t, body) != f1 {
		t.Fatalf("get face: %d %s", resp.StatusCode, body)
	}
	// Every listed family embeds all its faces, enabled or not.
	_, body = b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families", ws: b.ws})
	fams := decode[struct {
		Items []familyOut `json:"items"`
	}](t, body).Items
	if len(fams) != 1 || len(fams[0].Faces) != 2 || fams[0].Name != "Brand Sans" {
		t.Fatalf("families: %s", body)
	}

	// Update: version-locked, validated, may move the face to another family by name.
	patch := func(id string, body string) (*http.Response, []byte) {
		return b.write(t, "", b.ws, "PATCH", fonts+"/"+id, body)
	}
	resp, body = patch(f2.ID, `{"version":1,"font_weight":"900 100"}`)
	expect422(t, "update reversed weight", resp, body, "body.font_weight")
	resp, body = patch(f2.ID, `{"version":1,"font_display":"never"}`)
	expect422(t, "update bad display", resp, body, "body.font_display")
	resp, body = patch(f2.ID, `{"version":1,"enabled":true,"font_weight":"600"}`)
	if got := decode[faceOut](t, body); resp.StatusCode != 200 || !got.Enabled || got.FontWeight != "600" || got.Version != 2 || got.FontStyle != "italic" {
		t.Fatalf("update: %d %s", resp.StatusCode, body)
	}
	resp, body = patch(f2.ID, `{"version":1,"enabled":false}`)
	expectCode(t, "stale face version", resp, body, 409, "VERSION_CONFLICT")
	resp, body = patch(f2.ID, `{"version":2,"family_name":"Display Serif"}`)
	moved := decode[faceOut](t, body)
	if resp.StatusCode != 200 || moved.FamilyID == f1.FamilyID || moved.FontFamily != "Display Serif" {
		t.Fatalf("move: %d %s", resp.StatusCode, body)
	}
	// Moving the last face out of an unbound family removes it.
	resp, body = patch(moved.ID, `{"version":3,"family_name":"Brand Sans"}`)
	if back := decode[faceOut](t, body); resp.StatusCode != 200 || back.FamilyID != f1.FamilyID {
		t.Fatalf("move back: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families/" + moved.FamilyID, ws: b.ws}); resp.StatusCode != 404 {
		t.Fatalf("emptied family still there: %d", resp.StatusCode)
	}

	// Idempotent create: a replay answers the same face and makes no second one.
	c := call{method: "POST", path: fonts, ws: b.ws, key: "face-1", body: `{"family_name":"Replay","asset_id":"` + asset + `"}`}
	r1, b1 := b.call(t, c)
	r2, b2 := b.call(t, c)
	if r1.StatusCode != http.StatusCreated || r2.StatusCode != http.StatusCreated || string(b1) != string(b2) || r2.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %d %s / %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	// Writes need the Idempotency-Key.
	resp, body = b.call(t, call{method: "POST", path: fonts, ws: b.ws, body: `{` + base + `}`})
	expectCode(t, "no key", resp, body, 422, "IDEMPOTENCY_KEY_REQUIRED")
}

func TestFontFamilyRenameAndDelete(t *testing.T) {
	b := setup(t)
	asset, _ := b.uploadFont(t, "", b.ws)
	families := "/workspaces/" + b.ws + "/font-families/"
	a := b.createFace(t, "", b.ws, `{"family_name":"Alpha","asset_id":"`+asset+`"}`)
	bf := b.createFace(t, "", b.ws, `{"family_name":"Beta","asset_id":"`+asset+`"}`)

	rename := func(id string, version int64, name string) (*http.Response, []byte) {
		return b.write(t, "", b.ws, "PATCH", families+id, fmt.Sprintf(`{"version":%d,"name":%q}`, version, name))
	}
	resp, body := rename(a.FamilyID, 1, "beta")
	expectCode(t, "rename clash (other case)", resp, body, 409, "NAME_CONFLICT")
	resp, body = rename(a.FamilyID, 1, "Alpha Pro")
	if got := decode[familyOut](t, body); resp.StatusCode != 200 || got.Name != "Alpha Pro" || got.Version != 2 || len(got.Faces) != 1 || got.Faces[0].FontFamily != "Alpha Pro" {
		t.Fatalf("rename: %d %s", resp.StatusCode, body)
	}
	resp, body = rename(a.FamilyID, 2, "ALPHA PRO") // only its own name differs in case: allowed
	expectCode(t, "rename to own name in other case", resp, body, 200, "")
	resp, body = rename(a.FamilyID, 2, "Stale")
	expectCode(t, "stale rename", resp, body, 409, "VERSION_CONFLICT")
	resp, body = rename(a.FamilyID, 3, "  ")
	expect422(t, "blank rename", resp, body, "body.name")
	_, body = b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/fonts/" + a.ID, ws: b.ws})
	if decode[faceOut](t, body).FontFamily != "ALPHA PRO" {
		t.Fatalf("face keeps the old family name: %s", body)
	}

	del := func(path string) (*http.Response, []byte) { return b.write(t, "", b.ws, "DELETE", path, "") }
	resp, body = del(families + a.FamilyID)
	expectCode(t, "delete family with faces", resp, body, 409, "STATE_CONFLICT")

	// Family Beta is bound by a theme: deleting its last face keeps it, deleting it is refused.
	th := b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand","body_font_family_id":"`+bf.FamilyID+`"}`)
	resp, body = del("/workspaces/" + b.ws + "/fonts/" + bf.ID)
	gone := decode[struct {
		FamilyRemoved bool `json:"family_removed"`
	}](t, body)
	if resp.StatusCode != 200 || gone.FamilyRemoved {
		t.Fatalf("delete last face of bound family: %d %s", resp.StatusCode, body)
	}
	resp, body = b.call(t, call{method: "GET", path: families + bf.FamilyID, ws: b.ws})
	if got := decode[familyOut](t, body); resp.StatusCode != 200 || len(got.Faces) != 0 {
		t.Fatalf("bound family after its last face: %d %s", resp.StatusCode, body)
	}
	resp, body = del(families + bf.FamilyID)
	expectCode(t, "delete bound family", resp, body, 409, "STATE_CONFLICT")
	// The theme still names it.
	_, body = b.call(t, call{method: "GET", path: "/api/v1/themes/" + th.ID, ws: b.ws})
	if decode[themeOut](t, body).Typography.Body.FontFamily != "Beta" {
		t.Fatalf("theme lost its binding: %s", body)
	}
	// An archived theme binds nothing: now the empty family can go.
	if resp, body := b.write(t, "", b.ws, "POST", "/api/v1/themes/"+th.ID+"/archive", ""); resp.StatusCode != 200 {
		t.Fatalf("archive theme: %d %s", resp.StatusCode, body)
	}
	resp, body = del(families + bf.FamilyID)
	expectCode(t, "delete unbound empty family", resp, body, 200, "")
	if resp, _ := b.call(t, call{method: "GET", path: families + bf.FamilyID, ws: b.ws}); resp.StatusCode != 404 {
		t.Fatalf("deleted family: %d", resp.StatusCode)
	}
	// Deleting the last face of an unbound family takes the family along.
	resp, body = del("/workspaces/" + b.ws + "/fonts/" + a.ID)
	if got := decode[struct {
		FamilyRemoved bool   `json:"family_removed"`
		FamilyID      string `json:"family_id"`
	}](t, body); resp.StatusCode != 200 || !got.FamilyRemoved || got.FamilyID != a.FamilyID {
		t.Fatalf("delete last face: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.call(t, call{method: "GET", path: families + a.FamilyID, ws: b.ws}); resp.StatusCode != 404 {
		t.Fatalf("family of the last face: %d", resp.StatusCode)
	}
	if resp, _ := del("/workspaces/" + b.ws + "/fonts/" + a.ID); resp.StatusCode != 404 {
		t.Fatalf("second delete: %d", resp.StatusCode)
	}
}

func TestFontBundle(t *testing.T) {
	b := setup(t)
	a1, sha1 := b.uploadFont(t, "", b.ws)
	a2, sha2 := b.uploadFont(t, "", b.ws)
	a3, sha3 := b.uploadFont(t, "", b.ws)
	f1 := b.createFace(t, "", b.ws, `{"family_name":"Brand \"Sans\"","asset_id":"`+a1+`","font_weight":"100 900","unicode_range":"U+0000-00FF"}`)
	b.createFace(t, "", b.ws, `{"family_name":"Brand \"Sans\"","asset_id":"`+a2+`","font_weight":"400","font_style":"italic","font_display":"optional"}`)
	b.createFace(t, "", b.ws, `{"family_name":"Brand \"Sans\"","asset_id":"`+a3+`","enabled":false}`)
	url := "/workspaces/" + b.ws + "/font-families/" + f1.FamilyID + "/bundle.css"
	resp, body := b.call(t, call{method: "GET", path: url, ws: b.ws})
	css := string(body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("bundle: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), css)
	}
	if n := strings.Count(css, "@font-face"); n != 2 {
		t.Fatalf("%d rules, want the 2 enabled faces:\n%s", n, css)
	}
	for _, want := range []string{
		`src: url("/api/v1/assets/` + a1 + `/content?sha256=` + sha1 + `") format("woff2");`,
		`src: url("/api/v1/assets/` + a2 + `/content?sha256=` + sha2 + `") format("woff2");`,
		`font-family: "Brand \"Sans\"";`, "font-weight: 100 900;", "font-weight: 400;", "font-style: italic;",
		"font-display: optional;", "font-display: swap;", "unicode-range: U+0000-00FF;",
	} {
		if !strings.Contains(css, want) {
			t.Errorf("bundle lacks %q:\n%s", want, css)
		}
	}
	if strings.Contains(css, a3) || strings.Contains(css, sha3) {
		t.Fatalf("disabled face in the bundle:\n%s", css)
	}
	// The family view points at the bundle.
	_, fam := b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families/" + f1.FamilyID, ws: b.ws})
	if decode[familyOut](t, fam).BundleURL != url {
		t.Fatalf("bundle_url: %s", fam)
	}
	// A face may switch to another font asset (not to a non-font); an archived asset's face is
	// left out of the bundle with a comment.
	a4, sha4 := b.uploadFont(t, "", b.ws)
	notFont := b.uploadPDF(t)
	resp, body = b.write(t, "", b.ws, "PATCH", "/workspaces/"+b.ws+"/fonts/"+f1.ID, `{"version":1,"asset_id":"`+notFont+`"}`)
	expect422(t, "switch to a non-font asset", resp, body, "body.asset_id")
	resp, body = b.write(t, "", b.ws, "PATCH", "/workspaces/"+b.ws+"/fonts/"+f1.ID, `{"version":1,"asset_id":"`+a4+`"}`)
	expectCode(t, "switch asset", resp, body, 200, "")
	if resp, body := b.write(t, "", b.ws, "POST", "/api/v1/assets/"+a2+"/archive", ""); resp.StatusCode != 200 {
		t.Fatalf("archive asset: %d %s", resp.StatusCode, body)
	}
	_, body = b.call(t, call{method: "GET", path: url, ws: b.ws})
	css = string(body)
	if strings.Count(css, "@font-face") != 1 || !strings.Contains(css, sha4) || strings.Contains(css, sha1) || strings.Contains(css, sha2) ||
		!strings.Contains(css, "left out") {
		t.Fatalf("bundle after asset switch and archive:\n%s", css)
	}
	// The content URL in the bundle serves the font's bytes.
	resp, content := b.call(t, call{method: "GET", path: "/api/v1/assets/" + a1 + "/content?sha256=" + sha1, ws: b.ws})
	if resp.StatusCode != 200 || !strings.HasPrefix(string(content), "wOF2") {
		t.Fatalf("content url: %d", resp.StatusCode)
	}
}

func TestDesignArchiveAndScopes(t *testing.T) {
	b := setup(t)
	t1 := b.createTheme(t, "", b.ws, `{"key":"one","name":"One"}`)
	t2 := b.createTheme(t, "", b.ws, `{"key":"two","name":"Two"}`)
	y1 := b.createStyle(t, "", b.ws, `{"name":"S1","theme_key":"one"}`)
	y2 := b.createStyle(t, "", b.ws, `{"name":"S2","page_width":1280}`)
	if resp, body := b.write(t, "", b.ws, "POST", "/api/v1/themes/archive", `{"ids":["`+t1.ID+`","`+t2.ID+`"],"confirm":true}`); resp.StatusCode != 200 {
		t.Fatalf("batch archive themes: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.write(t, "", b.ws, "POST", "/api/v1/styles/"+y1.ID+"/archive", ""); resp.StatusCode != 200 {
		t.Fatalf("archive style: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/api/v1/themes/" + t1.ID, "/api/v1/themes/" + t2.ID, "/api/v1/styles/" + y1.ID} {
		if resp, _ := b.call(t, call{method: "GET", path: p, ws: b.ws}); resp.StatusCode != 404 {
			t.Errorf("archived %s: %d", p, resp.StatusCode)
		}
	}
	if resp, _ := b.write(t, "", b.ws, "PATCH", "/api/v1/themes/"+t1.ID, `{"version":1,"name":"x"}`); resp.StatusCode != 404 {
		t.Errorf("edit archived theme: %d", resp.StatusCode)
	}
	if resp, _ := b.write(t, "", b.ws, "PATCH", "/api/v1/styles/"+y1.ID, `{"version":1,"name":"x"}`); resp.StatusCode != 404 {
		t.Errorf("edit archived style: %d", resp.StatusCode)
	}
	_, list := b.call(t, call{method: "GET", path: "/api/v1/themes", ws: b.ws})
	if strings.Contains(string(list), t1.ID) {
		t.Errorf("archived theme listed: %s", list)
	}
	_, list = b.call(t, call{method: "GET", path: "/api/v1/styles", ws: b.ws})
	if strings.Contains(string(list), y1.ID) || !strings.Contains(string(list), y2.ID) {
		t.Errorf("style list after archive: %s", list)
	}
	// An archived theme's key is no longer a valid reference, and can be taken again.
	resp, body := b.write(t, "", b.ws, "POST", "/api/v1/styles", `{"name":"S3","theme_key":"one"}`)
	expect422(t, "style naming an archived theme", resp, body, "body.theme_key")
	b.createTheme(t, "", b.ws, `{"key":"one","name":"One again"}`)

	// Scopes: design-system:read reads but cannot write; a token without it cannot read.
	readOnly, _, err := b.dir.CreateToken(t.Context(), b.user.ID, "design-read", []string{"design-system:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/api/v1/styles", ws: b.ws, token: readOnly}); resp.StatusCode != 200 {
		t.Errorf("read with design-system:read: %d", resp.StatusCode)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families", token: readOnly}); resp.StatusCode != 200 {
		t.Errorf("font families with design-system:read: %d", resp.StatusCode)
	}
	for _, c := range []call{
		{method: "POST", path: "/api/v1/themes", body: `{"key":"x","name":"X"}`},
		{method: "POST", path: "/api/v1/styles", body: `{"name":"X","page_width":100}`},
		{method: "POST", path: "/workspaces/" + b.ws + "/fonts", body: `{"family_name":"X","asset_id":"` + ids.New(ids.Asset) + `"}`},
	} {
		c.ws, c.key, c.token = b.ws, ids.New("k"), readOnly
		resp, body := b.call(t, c)
		if resp.StatusCode != 403 || code(t, body) != "SCOPE_REQUIRED" || !strings.Contains(string(body), "design-system:write") {
			t.Errorf("%s %s with read scope: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/api/v1/themes", ws: b.ws, token: b.patScope}); resp.StatusCode != 403 {
		t.Errorf("themes without design-system:read: %d", resp.StatusCode)
	}
	// The editor-facing routes take the workspace from the path; a non-member's is 404.
	if resp, _ := b.call(t, call{method: "GET", path: "/workspaces/" + b.wsOther + "/font-families"}); resp.StatusCode != 404 {
		t.Errorf("font families of a non-member workspace: %d", resp.StatusCode)
	}
}

// Faces created at the same time under one new family name (in different letter case) end in
// one family: the find-or-create runs in one serializable transaction and is retried.
func TestFontFacesConcurrentNewFamily(t *testing.T) {
	b := setup(t)
	asset, _ := b.uploadFont(t, "", b.ws)
	const n = 8
	errs := make(chan string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := "Race Sans"
			if i%2 == 1 {
				name = "RACE sans"
			}
			resp, body := b.write(t, "", b.ws, "POST", "/workspaces/"+b.ws+"/fonts", `{"family_name":"`+name+`","asset_id":"`+asset+`"}`)
			if resp.StatusCode != http.StatusCreated {
				errs <- fmt.Sprintf("%d %s", resp.StatusCode, body)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	_, body := b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families", ws: b.ws})
	fams := decode[struct {
		Items []familyOut `json:"items"`
	}](t, body).Items
	if len(fams) != 1 || len(fams[0].Faces) != n {
		t.Fatalf("want one family with %d faces: %s", n, body)
	}
}
