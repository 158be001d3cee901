package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"slidecells/shared/ids"
)

// openAPIDoc is the served OpenAPI document, as plain JSON.
func openAPIDoc(t *testing.T, b *bundle) map[string]any {
	t.Helper()
	_, body := b.call(t, call{method: http.MethodGet, path: "/openapi.json", bare: true})
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("openapi: %v", err)
	}
	return doc
}

// stringFields lists the JSON paths (body.a.b, body.items[0].c) of every string in a schema,
// with a value that puts s there.
func stringFields(doc map[string]any, schema map[string]any, path string, depth int, wrap func(any) any, out map[string]any) {
	if depth > 6 || schema == nil {
		return
	}
	if ref, _ := schema["$ref"].(string); ref != "" {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		s, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
		stringFields(doc, s, path, depth+1, wrap, out)
		return
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		alts, _ := schema[k].([]any)
		for _, a := range alts {
			m, _ := a.(map[string]any)
			stringFields(doc, m, path, depth+1, wrap, out)
		}
	}
	types := []string{}
	switch t := schema["type"].(type) {
	case string:
		types = append(types, t)
	case []any:
		for _, x := range t {
			s, _ := x.(string)
			types = append(types, s)
		}
	}
	for _, ty := range types {
		switch ty {
		case "string":
			out[path] = wrap("a\u0000b")
		case "object":
			props, _ := schema["properties"].(map[string]any)
			for name, p := range props {
				m, _ := p.(map[string]any)
				stringFields(doc, m, path+"."+name, depth+1, func(v any) any { return wrap(map[string]any{name: v}) }, out)
			}
			if ap, ok := schema["additionalProperties"].(map[string]any); ok {
				stringFields(doc, ap, path+".k", depth+1, func(v any) any { return wrap(map[string]any{"k": v}) }, out)
			}
		case "array":
			m, _ := schema["items"].(map[string]any)
			stringFields(doc, m, path+"[0]", depth+1, func(v any) any { return wrap([]any{v}) }, out)
		}
	}
}

// TestNULIsRefusedEverywhere walks the registry (as the cross-workspace probe does): every
// string field of every operation's JSON body, every query parameter and every path
// parameter is sent holding U+0000; each answer is 422 naming the field, never a 500.
func TestNULIsRefusedEverywhere(t *testing.T) {
	b := setup(t)
	doc := openAPIDoc(t, b)
	paths, _ := doc["paths"].(map[string]any)
	checked := 0
	for _, op := range b.api.Operations() {
		item, _ := paths[op.Path].(map[string]any)
		spec, _ := item[strings.ToLower(op.Method)].(map[string]any)
		if spec == nil {
			t.Fatalf("%s: not in the OpenAPI document", op.ID)
		}
		// A path with well-formed IDs of the caller's workspace.
		path := strings.ReplaceAll(op.Path, "{workspace_id}", b.ws)
		for _, m := range objectParam.FindAllStringSubmatch(op.Path, -1) {
			if fx, ok := isoFixtures[m[1]]; ok {
				path = strings.ReplaceAll(path, m[0], ids.New(fx.prefix))
			}
		}
		base := call{method: op.Method, ws: b.ws, path: path, contentType: isoContentTypes[op.ID]}
		if op.Access == 0 { // Public
			base.bare = true
		}
		if op.Idempotency == "required" {
			base.key = ids.New("k")
		}
		expect := func(what string, c call, field string) {
			t.Helper()
			resp, body := b.call(t, c)
			if resp.StatusCode >= 500 {
				t.Errorf("%s %s: %d %s", op.ID, what, resp.StatusCode, body)
				return
			}
			if resp.StatusCode != http.StatusUnprocessableEntity || field != "" && !strings.Contains(string(body), `"field":"`+field+`"`) {
				t.Errorf("%s %s: %d %s (want 422 naming %s)", op.ID, what, resp.StatusCode, body, field)
			}
			checked++
		}
		params, _ := spec["parameters"].([]any)
		for _, p := range params {
			pm, _ := p.(map[string]any)
			name, _ := pm["name"].(string)
			switch pm["in"] {
			case "query":
				c := base
				c.path = path + "?" + url.QueryEscape(name) + "=%00"
				if c.key != "" {
					c.key = ids.New("k")
				}
				expect("query "+name, c, "query."+name)
			case "path":
				if name == "workspace_id" {
					continue
				}
				c := base
				c.path = strings.Replace(op.Path, "{"+name+"}", "x%00y", 1)
				c.path = strings.ReplaceAll(c.path, "{workspace_id}", b.ws)
				for _, m := range objectParam.FindAllStringSubmatch(c.path, -1) {
					c.path = strings.ReplaceAll(c.path, m[0], ids.New(isoFixtures[m[1]].prefix))
				}
				expect("path "+name, c, "")
			}
		}
		rb, _ := spec["requestBody"].(map[string]any)
		content, _ := rb["content"].(map[string]any)
		media, _ := content["application/json"].(map[string]any)
		schema, _ := media["schema"].(map[string]any)
		if schema == nil {
			continue
		}
		fields := map[string]any{}
		stringFields(doc, schema, "body", 0, func(v any) any { return v }, fields)
		names := make([]string, 0, len(fields))
		for f := range fields {
			names = append(names, f)
		}
		sort.Strings(names)
		for _, f := range names {
			raw, _ := json.Marshal(fields[f])
			c := base
			c.body = string(raw)
			if c.key != "" {
				c.key = ids.New("k")
			}
			expect("field "+f, c, f)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d NUL probes", checked)
	}
	t.Logf("%d NUL probes", checked)
}

// TestEdgeChecks: a JSON operation's body without a JSON Content-Type is 415; two different
// Idempotency-Key headers are 422; with Expect: 100-continue and a declared length over the
// limit the answer is 413 before the body is sent (no 100 Continue); JSON strings holding an
// unpaired surrogate or invalid UTF-8 are 422 naming the field; nothing was written.
func TestEdgeChecks(t *testing.T) {
	b := setup(t)
	post := func(ct, body string, hdr ...string) (int, string) {
		t.Helper()
		resp, out := b.call(t, call{method: http.MethodPost, path: "/api/v1/projects", ws: b.ws, key: ids.New("k"), body: body, contentType: ct, header: hdr})
		return resp.StatusCode, string(out)
	}
	for _, ct := range []string{"", "text/plain", "garbage;;", "application/x-www-form-urlencoded"} {
		h := []string{}
		if ct == "" {
			h = []string{"Content-Type", ""}
		}
		if st, out := post(ct, `{"name":"x"}`, h...); st != http.StatusUnsupportedMediaType || !strings.Contains(out, "UNSUPPORTED_MEDIA_TYPE") {
			t.Errorf("Content-Type %q: %d %s", ct, st, out)
		}
	}
	if st, out := post("application/json; charset=utf-8", `{"name":"ok"}`); st != http.StatusCreated {
		t.Fatalf("JSON with charset: %d %s", st, out)
	}
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/projects", strings.NewReader(`{"name":"twice"}`))
	req.Header.Set("Authorization", "Bearer "+b.pat)
	req.Header.Set("X-Workspace-ID", b.ws)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Idempotency-Key", "k-one")
	req.Header.Add("Idempotency-Key", "k-two")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("two Idempotency-Keys: %d", resp.StatusCode)
	}
	for _, c := range []struct{ body, field string }{
		{`{"name":"a\ud800b"}`, "body.name"},
		{`{"name":"a\udc00"}`, "body.name"},
		{"{\"name\":\"a\xffb\"}", "body.name"},
		{`{"name":"ok\\u0000"}`, ""}, // an escaped backslash: the text \u0000, not NUL
	} {
		st, out := post("application/json", c.body)
		if c.field == "" {
			if st != http.StatusCreated {
				t.Errorf("%s: %d %s", c.body, st, out)
			}
			continue
		}
		if st != http.StatusUnprocessableEntity || !strings.Contains(out, `"field":"`+c.field+`"`) {
			t.Errorf("%q: %d %s", c.body, st, out)
		}
	}
	// Expect: 100-continue with a declared length over the limit: 413 at once.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-Workspace-ID: %s\r\nIdempotency-Key: big\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", b.pat, b.ws, 30<<20)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	first, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(first, " 413 ") {
		t.Fatalf("Expect: 100-continue over the limit: %q %v", first, err)
	}
	_, list := b.call(t, call{method: http.MethodGet, path: "/api/v1/projects", ws: b.ws})
	if strings.Contains(string(list), "twice") || strings.Count(string(list), `"id":"prj_`) != 2 {
		t.Fatalf("a refused request wrote: %s", list)
	}
}

// goTypeName matches a CamelCase word in an answer's field errors (MetadataEdit, ThemeScales).
var goTypeName = regexp.MustCompile(`"errors":.*\b[A-Z][a-z]+[A-Z][A-Za-z]*\b`)

// TestDecodeErrorsNameNoGoTypes walks every operation that takes a JSON body with bodies of
// the wrong JSON types: every answer is a 4xx that names no Go type (ThemeUpdateBody, int64).
func TestDecodeErrorsNameNoGoTypes(t *testing.T) {
	b := setup(t)
	checked := 0
	for _, op := range b.api.Operations() {
		if op.Method == http.MethodGet || op.RawBody != nil {
			continue
		}
		path := strings.ReplaceAll(op.Path, "{workspace_id}", b.ws)
		for _, m := range objectParam.FindAllStringSubmatch(op.Path, -1) {
			if fx, ok := isoFixtures[m[1]]; ok {
				path = strings.ReplaceAll(path, m[0], ids.New(fx.prefix))
			}
		}
		for _, body := range []string{`{"version":1e300}`, `{"version":-1e300,"name":1e300}`, `[]`, `"x"`, `{"name":{"a":[1e300]}}`, `{"version":1,"tokens":1e300}`} {
			c := call{method: op.Method, ws: b.ws, path: path, body: body}
			if op.Idempotency == "required" {
				c.key = ids.New("k")
			}
			resp, out := b.call(t, c)
			if resp.StatusCode < 400 && resp.StatusCode != 0 {
				continue // a body some operation accepts (no required field)
			}
			for _, bad := range []string{"Go struct", "Go value", "Go type", "Body.", "int64", "json: "} {
				if resp.StatusCode >= 500 || strings.Contains(string(out), bad) || goTypeName.Match(out) {
					t.Errorf("%s %s: %d %s", op.ID, body, resp.StatusCode, out)
					break
				}
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d bodies checked", checked)
	}
}

// TestSourceLimitIsTheDocumentedOne: a page source of exactly 512 KiB (bytes) made of the
// characters JSON escapes to six bytes (<, >, &), sent escaped as Go's encoder does, is
// accepted (202); one byte more is 422 naming body.source, not a 413 about the job input.
func TestSourceLimitIsTheDocumentedOne(t *testing.T) {
	b := setup(t)
	project, _ := b.createProject(t, b.srv.URL, b.ws, "Big")
	src := func(n int) string {
		head := "export default () => null\n// "
		return head + strings.Repeat("<>&", n)[:n-len(head)]
	}
	for _, c := range []struct {
		n      int
		status int
	}{{512 << 10, http.StatusAccepted}, {512<<10 + 1, http.StatusUnprocessableEntity}} {
		body, _ := json.Marshal(map[string]string{"project_id": project, "key": fmt.Sprintf("big-%d", c.n), "file_type": "tsx", "source": src(c.n)})
		resp, out := b.call(t, call{method: http.MethodPost, path: "/api/v1/pages", ws: b.ws, key: ids.New("k"), body: string(body)})
		if resp.StatusCode != c.status || c.status == http.StatusUnprocessableEntity && !strings.Contains(string(out), `"field":"body.source"`) {
			t.Fatalf("%d bytes (%d in the body): %d %.300s", c.n, len(body), resp.StatusCode, out)
		}
	}
}
