package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"slidecells/shared/ids"
)

func init() {
	isoBodies["put-project-configuration"] = `{"version":1,"configuration":{"title":"x"}}`
	isoBodies["put-project-route-tree"] = `{"version":1,"route_tree":{"routes":[]}}`
	isoBodies["put-project-build-assets"] = `{"version":1,"build_assets":[]}`
	// A style that does not exist: the foreign or missing project must still answer first.
	isoBodies["apply-project-style"] = `{"version":1,"style_id":"sty_aaaaaaaaaaaaaaaaaaaaaaaaaa"}`
}

func TestApplyStyle(t *testing.T) {
	b := setup(t)
	id, _ := b.createProject(t, "", b.ws, "Deck")
	b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand"}`)
	style := b.createStyle(t, "", b.ws, `{"name":"Wide","page_width":1920,"page_height":1080,"theme_key":"brand","background":"#112233"}`)
	foreign := b.createStyle(t, b.srvB.URL, b.wsB, `{"name":"Theirs","page_width":1280}`)
	path := "/api/v1/projects/" + id + "/apply-style"
	apply := func(version int, styleID string) (int, []byte) {
		resp, body := b.call(t, call{method: "POST", path: path, ws: b.ws, key: ids.New("k"), body: fmt.Sprintf(`{"version":%d,"style_id":%q}`, version, styleID)})
		return resp.StatusCode, body
	}
	// Settings written before survive the apply.
	if resp, body := b.call(t, call{method: "PUT", path: "/api/v1/projects/" + id + "/configuration", ws: b.ws, key: ids.New("k"),
		body: `{"version":1,"configuration":{"title":"Q3"}}`}); resp.StatusCode != 200 {
		t.Fatalf("put: %d %s", resp.StatusCode, body)
	}
	st, body := apply(2, style.ID)
	if st != 200 {
		t.Fatalf("apply: %d %s", st, body)
	}
	var out struct {
		Version       int64 `json:"version"`
		Configuration struct {
			Title        string         `json:"title"`
			Presentation map[string]any `json:"presentation"`
		} `json:"configuration"`
	}
	_ = json.Unmarshal(body, &out)
	var snap struct {
		Presentation map[string]any `json:"presentation"`
	}
	_ = json.Unmarshal(style.Snapshot, &snap)
	p := out.Configuration.Presentation
	if out.Version != 3 || out.Configuration.Title != "Q3" || p["style_id"] != style.ID || p["style_snapshot_digest"] != style.SnapshotDigest {
		t.Fatalf("applied: %s", body)
	}
	for k, v := range snap.Presentation {
		if fmt.Sprint(p[k]) != fmt.Sprint(v) {
			t.Errorf("presentation.%s = %v, snapshot has %v", k, p[k], v)
		}
	}
	if st, body := apply(2, style.ID); st != 409 || code(t, body) != "VERSION_CONFLICT" {
		t.Fatalf("stale: %d %s", st, body)
	}
	if st, body := apply(3, foreign.ID); st != 422 || !strings.Contains(string(body), "body.style_id") {
		t.Fatalf("foreign style: %d %s", st, body)
	}
	if st, body := apply(3, ids.New(ids.Style)); st != 422 {
		t.Fatalf("missing style: %d %s", st, body)
	}
	resp, got := b.call(t, call{method: "GET", path: "/api/v1/projects/" + id + "/configuration", ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(got), `"page_width":1920`) || !strings.Contains(string(got), style.ID) {
		t.Fatalf("get: %d %s", resp.StatusCode, got)
	}
}

func TestBuildAssets(t *testing.T) {
	b := setup(t)
	id, _ := b.createProject(t, "", b.ws, "Deck")
	png := b.uploadAsset(t, "", b.ws, "image/png", string(testPNG(t, 4, 4, 9)), "")
	font := b.uploadAsset(t, "", b.ws, "font/woff2", "wOF2\x00\x01\x00\x00"+strings.Repeat("\x01", 40), "")
	foreign := b.uploadAsset(t, b.srvB.URL, b.wsB, "image/png", string(testPNG(t, 2, 2, 1)), "")
	path := "/api/v1/projects/" + id + "/build-assets"
	put := func(version int, list string) (int, []byte) {
		resp, body := b.call(t, call{method: "PUT", path: path, ws: b.ws, key: ids.New("k"), body: fmt.Sprintf(`{"version":%d,"build_assets":%s}`, version, list)})
		return resp.StatusCode, body
	}
	good := fmt.Sprintf(`[{"asset_id":%q,"role":"favicon","path":"/assets/favicon.png"},{"asset_id":%q,"role":"font","path":"/assets/fonts/brand.woff2"}]`, png.ID, font.ID)
	st, body := put(1, good)
	if st != 200 || !strings.Contains(string(body), png.SHA256) || !strings.Contains(string(body), `"version":2`) {
		t.Fatalf("good: %d %s", st, body)
	}
	for list, field := range map[string]string{
		fmt.Sprintf(`[{"asset_id":%q,"role":"font","path":"/assets/a.png"}]`, png.ID):                                                                "body.build_assets[0].role",
		fmt.Sprintf(`[{"asset_id":%q,"role":"image","path":"/assets/a.png"}]`, foreign.ID):                                                           "body.build_assets[0].asset_id",
		fmt.Sprintf(`[{"asset_id":%q,"role":"image","path":"/assets/a.png"},{"asset_id":%q,"role":"image","path":"/assets/a.png"}]`, png.ID, png.ID): "body.build_assets[1].path",
		fmt.Sprintf(`[{"asset_id":%q,"role":"image","path":"/etc/passwd"}]`, png.ID):                                                                 "path",
		fmt.Sprintf(`[{"asset_id":%q,"role":"banner","path":"/assets/a.png"}]`, png.ID):                                                              "role",
	} {
		if st, body := put(2, list); st != 422 || !strings.Contains(string(body), field) {
			t.Errorf("%s: %d %s", list, st, body)
		}
	}
	if st, _ := put(1, `[]`); st != 409 {
		t.Fatalf("stale: %d", st)
	}
	resp, body := b.call(t, call{method: "GET", path: path, ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), font.SHA256) || !strings.Contains(string(body), "/assets/favicon.png") {
		t.Fatalf("get: %d %s", resp.StatusCode, body)
	}
}

func TestProjectConfiguration(t *testing.T) {
	b := setup(t)
	id, _ := b.createProject(t, "", b.ws, "Deck")
	path := "/api/v1/projects/" + id + "/configuration"
	resp, body := b.call(t, call{method: "GET", path: path, ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"version":1`) {
		t.Fatalf("get: %d %s", resp.StatusCode, body)
	}
	put := func(version int, cfg string) (int, []byte) {
		resp, body := b.call(t, call{method: "PUT", path: path, ws: b.ws, key: ids.New("k"), body: fmt.Sprintf(`{"version":%d,"configuration":%s}`, version, cfg)})
		return resp.StatusCode, body
	}
	if st, body := put(1, `{"title":"Q3","locale":"en-US","entry_route":"/intro","presentation":{"page_width":1280,"theme_key":"brand"}}`); st != 422 || !strings.Contains(string(body), "body.configuration.presentation.theme_key") {
		t.Fatalf("unknown theme: %d %s", st, body)
	}
	b.createTheme(t, "", b.ws, `{"key":"brand","name":"Brand"}`)
	if st, body := put(1, `{"title":"Q3","locale":"en-US","entry_route":"/intro","presentation":{"page_width":1280,"theme_key":"brand"}}`); st != 200 || !strings.Contains(string(body), `"version":2`) || !strings.Contains(string(body), `"page_height":720`) {
		t.Fatalf("put: %d %s", st, body)
	}
	if st, body := put(1, `{"title":"stale"}`); st != 409 || code(t, body) != "VERSION_CONFLICT" {
		t.Fatalf("stale: %d %s", st, body)
	}
	for cfg, field := range map[string]string{
		`{"locale":"english"}`:                         "body.configuration.locale",
		`{"entry_route":"no-slash"}`:                   "body.configuration.entry_route",
		`{"title":"` + strings.Repeat("t", 201) + `"}`: "body.configuration.title",
		`{"presentation":{"Bad Key":1}}`:               "body.configuration.presentation",
		`{"unknown_field":1}`:                          "unknown_field",
	} {
		st, body := put(2, cfg)
		if st != 422 || !strings.Contains(string(body), field) {
			t.Errorf("%s: %d %s", cfg, st, body)
		}
	}
	_, body = b.call(t, call{method: "GET", path: path, ws: b.ws})
	if !strings.Contains(string(body), `"title":"Q3"`) || !strings.Contains(string(body), `"theme_key":"brand"`) {
		t.Fatalf("after rejected writes: %s", body)
	}
}

func TestRouteTree(t *testing.T) {
	b := setup(t)
	id, _ := b.createProject(t, "", b.ws, "Deck")
	other, _ := b.createProject(t, "", b.ws, "Other")
	// Pages made the only way there is: through mutation jobs.
	page := b.waitJob(t, "", b.ws, b.submitPage(t, "", b.ws, id, "intro", `export default () => null`).JobID, "succeeded").Result.ObjectID
	otherPage := b.waitJob(t, "", b.ws, b.submitPage(t, "", b.ws, other, "x", `export default () => null`).JobID, "succeeded").Result.ObjectID
	path := "/api/v1/projects/" + id + "/route-tree"
	put := func(version int, tree string) (int, []byte) {
		resp, body := b.call(t, call{method: "PUT", path: path, ws: b.ws, key: ids.New("k"), body: fmt.Sprintf(`{"version":%d,"route_tree":%s}`, version, tree)})
		return resp.StatusCode, body
	}
	good := `{"routes":[{"segment":"","page_id":"` + page + `","children":[{"segment":"intro","title":"Intro"}]}]}`
	if st, body := put(1, good); st != 200 || !strings.Contains(string(body), `"version":2`) {
		t.Fatalf("good: %d %s", st, body)
	}
	cases := map[string]string{
		`{"routes":[{"segment":"a"},{"segment":"a"}]}`:                       "body.route_tree.routes[1].segment",
		`{"routes":[{"segment":"a","children":[{"segment":""}]}]}`:           "body.route_tree.routes[0].children[0].segment",
		`{"routes":[{"segment":"a","page_id":"` + otherPage + `"}]}`:         "body.route_tree.routes[0].page_id",
		`{"routes":[{"segment":"a","page_id":"` + ids.New(ids.Page) + `"}]}`: "body.route_tree.routes[0].page_id",
		`{"routes":[{"segment":"Bad Segment"}]}`:                             "segment",
		`{"routes":[{"segment":"a","page_id":"pg_x"}]}`:                      "page_id",
		nest(8): "body.route_tree.routes[0]",
	}
	for tree, field := range cases {
		if st, body := put(2, tree); st != 422 || !strings.Contains(string(body), field) {
			t.Errorf("%s: %d %s", tree, st, body)
		}
	}
	if st, body := put(1, `{"routes":[]}`); st != 409 {
		t.Fatalf("stale: %d %s", st, body)
	}
	resp, body := b.call(t, call{method: "GET", path: path, ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), page) || !strings.Contains(string(body), `"segment":"intro"`) {
		t.Fatalf("get: %d %s", resp.StatusCode, body)
	}
	resp, body = b.call(t, call{method: "GET", path: "/api/v1/projects/" + id + "/pages", ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), page) || strings.Contains(string(body), otherPage) {
		t.Fatalf("pages: %d %s", resp.StatusCode, body)
	}
}

func nest(depth int) string {
	s := `{"segment":"leaf"}`
	for i := 0; i < depth; i++ {
		s = fmt.Sprintf(`{"segment":"n%d","children":[%s]}`, i, s)
	}
	return `{"routes":[` + s + `]}`
}

func TestAICatalogAndConfigs(t *testing.T) {
	b := setup(t)
	resp, body := b.call(t, call{method: "GET", path: "/ai/agent-catalog"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"key":"deck-writer"`) {
		t.Fatalf("catalog: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/ai/agent-catalog/nope"}); resp.StatusCode != 404 {
		t.Fatalf("unknown agent: %d", resp.StatusCode)
	}
	if _, err := b.api.DB.Pool.Exec(context.Background(), `INSERT INTO agent_configs (workspace_id, agent_key, enabled, settings, updated_by) VALUES ($1, 'deck-writer', false, '{"tone":"formal"}', 'u')`, b.ws); err != nil {
		t.Fatal(err)
	}
	resp, body = b.call(t, call{method: "GET", path: "/ai/agent-configs", ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"tone":"formal"`) || !strings.Contains(string(body), `"palette_size":5`) {
		t.Fatalf("configs: %d %s", resp.StatusCode, body)
	}
	resp, body = b.call(t, call{method: "GET", path: "/ai/agent-configs/deck-writer", ws: b.ws})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"enabled":false`) {
		t.Fatalf("config: %d %s", resp.StatusCode, body)
	}
	// Configs are per workspace: the other workspace sees the defaults.
	resp, body = b.call(t, call{base: b.srvB.URL, method: "GET", path: "/ai/agent-configs/deck-writer", ws: b.wsB})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"enabled":true`) {
		t.Fatalf("other workspace: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/ai/agent-configs"}); resp.StatusCode != 422 {
		t.Fatalf("no workspace: %d", resp.StatusCode)
	}
}
