package api_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	"slidecells/shared/ids"
)

// TestNameRuleEverywhere walks the registry: every name, title and family_name field of every
// operation's JSON body is sent with CR/LF, a right-to-left override, a zero-width space and a
// soft hyphen; each answer is 422 naming the field. And a decomposed name is stored NFC.
func TestNameRuleEverywhere(t *testing.T) {
	b := setup(t)
	doc := openAPIDoc(t, b)
	paths, _ := doc["paths"].(map[string]any)
	checked := map[string]bool{}
	for _, op := range b.api.Operations() {
		item, _ := paths[op.Path].(map[string]any)
		spec, _ := item[strings.ToLower(op.Method)].(map[string]any)
		rb, _ := spec["requestBody"].(map[string]any)
		content, _ := rb["content"].(map[string]any)
		media, _ := content["application/json"].(map[string]any)
		schema, _ := media["schema"].(map[string]any)
		if schema == nil {
			continue
		}
		path := strings.ReplaceAll(op.Path, "{workspace_id}", b.ws)
		for _, m := range objectParam.FindAllStringSubmatch(op.Path, -1) {
			if fx, ok := isoFixtures[m[1]]; ok {
				path = strings.ReplaceAll(path, m[0], ids.New(fx.prefix))
			}
		}
		for _, bad := range []string{"a\r\n<script>alert(1)</script>", "invoice\u202Efdp.exe", "in\u200Bvisible", "soft\u00ADhyphen"} {
			fields := map[string]any{}
			stringFields(doc, schema, "body", 0, func(v any) any { return v }, fields)
			var names []string
			for f := range fields {
				last := f[strings.LastIndexAny(f, ".")+1:]
				if (last == "name" || last == "title" || last == "family_name") && !strings.Contains(f, ".k.") {
					names = append(names, f)
				}
			}
			sort.Strings(names)
			for _, f := range names {
				// The same walk, with the bad text in this field.
				one := map[string]any{}
				stringFields(doc, schema, "body", 0, func(v any) any { return v }, one)
				raw, _ := json.Marshal(one[f])
				raw = []byte(strings.Replace(string(raw), `a\u0000b`, strings.Trim(mustJSON(bad), `"`), 1))
				c := call{method: op.Method, ws: b.ws, path: path, body: string(raw), contentType: isoContentTypes[op.ID]}
				if op.Idempotency == "required" {
					c.key = ids.New("k")
				}
				resp, out := b.call(t, c)
				if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(out), `"field":"`+f+`"`) {
					t.Errorf("%s %s %q: %d %s", op.ID, f, bad, resp.StatusCode, out)
				}
				checked[op.ID] = true
			}
		}
	}
	for _, want := range []string{"create-project", "update-project", "create-page", "create-component", "create-style", "update-style", "create-theme", "update-theme"} {
		if !checked[want] {
			t.Errorf("%s: no name field checked", want)
		}
	}
	// NFC: a decomposed é is stored composed.
	resp, out := b.call(t, call{method: http.MethodPost, path: "/api/v1/projects", ws: b.ws, key: ids.New("k"), body: `{"name":"Cafe\u0301"}`})
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(out), "Caf\u00e9") {
		t.Fatalf("NFC: %d %s", resp.StatusCode, out)
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
