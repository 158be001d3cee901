package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"slidecells/cell/api"
	"slidecells/cell/auth"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
)

// TestRegistryMatchesRoutesAndOpenAPI checks the contract derived from the registry: every
// operation is routed and documented, nothing else is, and every declaration follows the rules.
func TestRegistryMatchesRoutesAndOpenAPI(t *testing.T) {
	b := setup(t)
	resp, body := b.get(t, "/openapi.json", "")
	if resp.StatusCode != 200 {
		t.Fatalf("openapi: %d", resp.StatusCode)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, methods := range doc.Paths {
		for m := range methods {
			documented[strings.ToUpper(m)+" "+path] = true
		}
	}
	ops := b.api.Operations()
	if len(ops) == 0 {
		t.Fatal("empty registry")
	}
	t.Logf("%d operations in the registry", len(ops))
	for _, op := range ops {
		key := op.Method + " " + op.Path
		if !documented[key] {
			t.Errorf("%s (%s) is not in the OpenAPI document", op.ID, key)
		}
		delete(documented, key)
		if strings.HasPrefix(op.Path, "/api/external/v1") {
			t.Errorf("%s uses the forbidden prefix", op.ID)
		}
		if !strings.HasPrefix(op.Path, "/api/v1/") && !strings.HasPrefix(op.Path, "/workspaces/") && !strings.HasPrefix(op.Path, "/ai/") {
			t.Errorf("%s: path %s outside the public prefixes", op.ID, op.Path)
		}
		if !op.ReadOnly && op.Idempotency == api.NoIdempotency {
			t.Errorf("%s writes but declares no idempotency rule", op.ID)
		}
		for _, s := range op.Scopes {
			if !directory.ValidScope(string(s)) {
				t.Errorf("%s declares scope %q, not in the spec's list", op.ID, s)
			}
		}
		// The route exists: an unauthenticated call gets the operation's answer, not the
		// router-level 404 for unknown paths.
		path := strings.NewReplacer("{workspace_id}", "ws_"+strings.Repeat("a", 26)).Replace(op.Path)
		req, _ := http.NewRequest(op.Method, b.srv.URL+path, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if op.Access != api.Public && r.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s unauthenticated: %d, want 401", op.Method, path, r.StatusCode)
		}
	}
	for extra := range documented {
		t.Errorf("%s is documented but not in the registry", extra)
	}
}

func TestCapabilities(t *testing.T) {
	b := setup(t)
	resp, body := b.get(t, "/api/v1/workspaces/"+b.ws+"/capabilities", b.pat)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var c struct {
		Scopes     []string `json:"scopes"`
		Operations []string `json:"operations"`
	}
	_ = json.Unmarshal(body, &c)
	if len(c.Scopes) != len(directory.Scopes) || !contains(c.Operations, "get-workspace") || !contains(c.Operations, "get-workspace-capabilities") {
		t.Fatalf("capabilities %s", body)
	}
	// A token without workspace:read cannot read capabilities at all.
	if resp, _ := b.get(t, "/api/v1/workspaces/"+b.ws+"/capabilities", b.patScope); resp.StatusCode != 403 {
		t.Fatalf("narrow token: %d", resp.StatusCode)
	}
	// Capabilities list only what the credential can use: with workspace:read but neither
	// page nor component scopes, jobs and entity validation are not offered, and calling them
	// is the 403 the declaration (x-scopes-one-of) announces.
	wsOnly, _, err := b.dir.CreateToken(t.Context(), b.user.ID, "ws only", []string{"workspace:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, body = b.get(t, "/api/v1/workspaces/"+b.ws+"/capabilities", wsOnly)
	c.Operations = nil
	_ = json.Unmarshal(body, &c)
	for _, op := range []string{"get-mutation-job", "cancel-mutation-job", "retry-mutation-job", "validate-entity"} {
		if contains(c.Operations, op) {
			t.Errorf("capabilities offer %s to a token that cannot use it", op)
		}
	}
	if !contains(c.Operations, "get-workspace") {
		t.Errorf("capabilities %s", body)
	}
	job := ids.New(ids.Job)
	if resp, body := b.call(t, call{method: "GET", path: "/api/v1/jobs/mutations/" + job, ws: b.ws, token: wsOnly}); resp.StatusCode != 403 || code(t, body) != "SCOPE_REQUIRED" {
		t.Errorf("job read without page or component scope: %d %s", resp.StatusCode, body)
	}
	pagesOnly, _, _ := b.dir.CreateToken(t.Context(), b.user.ID, "pages", []string{"workspace:read", "page:read"}, time.Hour)
	_, body = b.get(t, "/api/v1/workspaces/"+b.ws+"/capabilities", pagesOnly)
	c.Operations = nil
	_ = json.Unmarshal(body, &c)
	if !contains(c.Operations, "get-mutation-job") || !contains(c.Operations, "validate-entity") || contains(c.Operations, "cancel-mutation-job") {
		t.Errorf("page reader's capabilities %s", body)
	}
	_, doc := b.get(t, "/openapi.json", "")
	var d struct {
		Paths map[string]map[string]struct {
			OneOf [][]string `json:"x-scopes-one-of"`
		} `json:"paths"`
	}
	_ = json.Unmarshal(doc, &d)
	if got := d.Paths["/api/v1/jobs/mutations/{job_id}/cancel"]["post"].OneOf; len(got) != 2 || len(got[0]) != 2 || got[0][1] != "page:write" {
		t.Errorf("cancel's x-scopes-one-of %v", got)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestDocumentedStatuses checks that the document states each operation's success status from
// the registry, every create answers 201 with Location, and error answers use the problem
// schema.
func TestDocumentedStatuses(t *testing.T) {
	b := setup(t)
	_, body := b.get(t, "/openapi.json", "")
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]struct {
			Security  *[]map[string][]string `json:"security"`
			Responses map[string]struct {
				Headers map[string]json.RawMessage                  `json:"headers"`
				Content map[string]struct{ Schema json.RawMessage } `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 {
		t.Error("no servers entry")
	}
	for _, op := range b.api.Operations() {
		t.Run(op.ID, func(t *testing.T) {
			d := doc.Paths[op.Path][strings.ToLower(op.Method)]
			ok, found := d.Responses[fmt.Sprint(op.Status)]
			if !found {
				t.Fatalf("status %d not documented: %v", op.Status, d.Responses)
			}
			if op.Lock == api.CreateOnly && (op.Status != http.StatusCreated || ok.Headers["Location"] == nil) {
				t.Errorf("a create must answer 201 with Location, declares %d %v", op.Status, ok.Headers)
			}
			if op.Access == api.Public && (d.Security == nil || len(*d.Security) != 0) {
				t.Errorf("public operation without security: []")
			}
			for _, st := range []string{"401", "500"} {
				if op.Access == api.Public && st == "401" {
					continue
				}
				if _, ok := d.Responses[st].Content["application/problem+json"]; !ok {
					t.Errorf("error answer %s not documented with the problem schema", st)
				}
			}
		})
	}
}

// TestCreatesAnswer201WithLocation creates one object of each kind and reads it back at its
// Location.
func TestCreatesAnswer201WithLocation(t *testing.T) {
	b := setup(t)
	asset, _ := b.uploadFont(t, "", b.ws)
	cases := []struct{ name, path, body string }{
		{"project", "/api/v1/projects", `{"name":"P"}`},
		{"theme", "/api/v1/themes", `{"key":"brand","name":"Brand"}`},
		{"style", "/api/v1/styles", `{"name":"S","page_width":1280}`},
		{"font face", "/workspaces/" + b.ws + "/fonts", `{"family_name":"Sans","asset_id":"` + asset + `","font_weight":700}`},
		{"asset copy", "/api/v1/assets/" + asset + "/copy", ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.write(t, "", b.ws, "POST", c.path, c.body)
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusCreated || loc == "" {
				t.Fatalf("%d %q %s", resp.StatusCode, loc, body)
			}
			if resp, got := b.call(t, call{method: "GET", path: loc, ws: b.ws}); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d %s", loc, resp.StatusCode, got)
			}
		})
	}
}

// TestFontWeightNumberAndFamilyID checks the face's font_weight as a JSON number and the
// family's family_id.
func TestFontWeightNumberAndFamilyID(t *testing.T) {
	b := setup(t)
	asset, _ := b.uploadFont(t, "", b.ws)
	cases := []struct {
		name, weight, want string
		status             int
	}{
		{"number", `700`, "700", http.StatusCreated},
		{"string", `"700"`, "700", http.StatusCreated},
		{"range", `"100 900"`, "100 900", http.StatusCreated},
		{"fraction", `700.5`, "", http.StatusUnprocessableEntity},
		{"out of range", `1001`, "", http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.write(t, "", b.ws, "POST", "/workspaces/"+b.ws+"/fonts",
				`{"family_name":"W `+c.name+`","asset_id":"`+asset+`","font_weight":`+c.weight+`}`)
			if resp.StatusCode != c.status {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if c.status != http.StatusCreated {
				return
			}
			if f := decode[faceOut](t, body); f.FontWeight != c.want {
				t.Fatalf("font_weight %q", f.FontWeight)
			}
		})
	}
	_, body := b.call(t, call{method: "GET", path: "/workspaces/" + b.ws + "/font-families", ws: b.ws})
	if !strings.Contains(string(body), `"family_id":"ffam_`) {
		t.Fatalf("families without family_id: %s", body)
	}
}

// TestUnroutedAnswers checks 405 with Allow for a known path, OAuth's clear answer and 404.
func TestUnroutedAnswers(t *testing.T) {
	b := setup(t)
	cases := []struct {
		name, method, path string
		status             int
		code, allow        string
	}{
		{"wrong method", http.MethodDelete, "/api/v1/projects", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET, HEAD, POST"},
		{"wrong method on an item", http.MethodPut, "/api/v1/themes/thm_x", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET, HEAD, PATCH"},
		{"oauth discovery", http.MethodGet, "/.well-known/oauth-authorization-server", http.StatusNotFound, "OAUTH_NOT_ENABLED", ""},
		{"oauth token", http.MethodPost, "/oauth/token", http.StatusNotFound, "OAUTH_NOT_ENABLED", ""},
		{"unknown path", http.MethodGet, "/api/v1/nothing", http.StatusNotFound, "NOT_FOUND", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.call(t, call{method: c.method, path: c.path})
			if resp.StatusCode != c.status || code(t, body) != c.code || resp.Header.Get("Allow") != c.allow ||
				resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Allow"), body)
			}
		})
	}
}

// TestRegistryRejectsBadDeclarations checks that a bad declaration does not start.
func TestRegistryRejectsBadDeclarations(t *testing.T) {
	type noBaseline struct {
		api.ObjectID
		Body struct {
			Name string `json:"name"`
		}
	}
	type out struct{ Body string }
	cases := []struct {
		name string
		op   api.Operation
	}{
		{"version lock without a baseline", api.Operation{ID: "x", Method: http.MethodPatch, Path: "/api/v1/projects/{project_id}",
			Scopes: []auth.Permission{auth.ProjectWrite}, Idempotency: api.KeyRequired, Lock: api.VersionLock}},
		{"create without Location", api.Operation{ID: "x", Method: http.MethodPost, Path: "/api/v1/projects",
			Scopes: []auth.Permission{auth.ProjectWrite}, Idempotency: api.KeyRequired, Lock: api.CreateOnly}},
		{"write without idempotency", api.Operation{ID: "x", Method: http.MethodPost, Path: "/api/v1/projects",
			Scopes: []auth.Permission{auth.ProjectWrite}}},
		{"accepted without Location", api.Operation{ID: "x", Method: http.MethodPost, Path: "/api/v1/projects",
			Scopes: []auth.Permission{auth.ProjectWrite}, Idempotency: api.KeyRequired, Status: http.StatusAccepted}},
		{"unknown ID parameter", api.Operation{ID: "x", Method: http.MethodGet, Path: "/api/v1/things/{thing_id}",
			Scopes: []auth.Permission{auth.ProjectRead}, ReadOnly: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := api.New(api.Config{CellID: "cell-a", Log: zap.NewNop()})
			defer func() {
				if recover() == nil {
					t.Fatal("registered")
				}
			}()
			api.Scoped(s, c.op, func(context.Context, auth.Scope, *noBaseline) (*out, error) { return nil, nil })
		})
	}
}

// TestIDPatternsFromSharedIDs checks that every ID the document constrains, in a path or a
// body, carries the pattern of shared/ids for its prefix.
func TestIDPatternsFromSharedIDs(t *testing.T) {
	b := setup(t)
	_, body := b.get(t, "/openapi.json", "")
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	prefixOf := func(name string) string {
		for suffix, p := range map[string]string{"workspace_id": ids.Workspace, "project_id": ids.Project, "theme_id": ids.Theme,
			"style_id": ids.Style, "asset_id": ids.Asset, "family_id": ids.FontFamily, "font_id": ids.FontFace, "page_id": ids.Page, "job_id": ids.Job, "component_id": ids.Component} {
			if strings.HasSuffix(name, suffix) {
				return p
			}
		}
		return ""
	}
	seen := 0
	var walk func(v any, name string)
	walk = func(v any, name string) {
		switch v := v.(type) {
		case map[string]any:
			if pat, ok := v["pattern"].(string); ok && strings.HasSuffix(name, "_id") {
				seen++
				if want := ids.Pattern(prefixOf(name)); pat != want {
					t.Errorf("%s: pattern %s, want %s", name, pat, want)
				}
			}
			if n, ok := v["name"].(string); ok && v["in"] != nil {
				walk(v["schema"], n)
			}
			for k, child := range v {
				if k == "properties" {
					for pn, pv := range child.(map[string]any) {
						walk(pv, pn)
					}
				} else if k != "schema" || v["in"] == nil {
					walk(child, "")
				}
			}
		case []any:
			for _, child := range v {
				walk(child, "")
			}
		}
	}
	walk(doc, "")
	if seen < 10 {
		t.Fatalf("only %d ID patterns found", seen)
	}
}
