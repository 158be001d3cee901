package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"slidecells/cell/api"
	"slidecells/shared/directory"
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
			if !directory.ValidScope(s) {
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
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
