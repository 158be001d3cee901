package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"slidecells/shared/ids"
)

// jobResult waits for a mutation job through the router and returns its object.
func (e *env) jobResult(t *testing.T, ws string, submitted answer) string {
	t.Helper()
	if submitted.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", submitted.status, submitted.body)
	}
	var j struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(submitted.body, &j)
	deadline := time.Now().Add(60 * time.Second)
	for {
		a := e.get(t, "/api/v1/jobs/mutations/"+j.JobID, e.demo.PAT, "X-Workspace-ID", ws)
		var st struct {
			Status string `json:"status"`
			Result struct {
				ObjectID string `json:"object_id"`
			} `json:"result"`
		}
		_ = json.Unmarshal(a.body, &st)
		switch st.Status {
		case "succeeded":
			return st.Result.ObjectID
		case "failed", "canceled":
			t.Fatalf("job %s: %s", j.JobID, a.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never finished: %s", j.JobID, a.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func fieldsOf(body []byte) []string {
	var p struct {
		Errors []struct{ Field string } `json:"errors"`
	}
	_ = json.Unmarshal(body, &p)
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return out
}

func hasString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestSpecOnlyClientThroughTheRouter is issue #21's item 2 as a client written from the
// specification alone meets it, through the router: each deviation it tripped over, checked
// as the client sees it now.
func TestSpecOnlyClientThroughTheRouter(t *testing.T) {
	e := start(t, "", nil)
	ws := e.demo.WorkspaceA
	write := func(method, path, body string, hdr ...string) answer {
		t.Helper()
		return e.do(t, method, path, e.demo.PAT, []byte(body), append([]string{"X-Workspace-ID", ws, "Idempotency-Key", ids.New("k")}, hdr...)...)
	}
	prj := e.createProject(t, ws, ids.New("k"), "Contract")
	var p struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(prj.body, &p)
	page := e.pageJob(t, ws, p.ID, "intro", `export default function P() { return <div>one</div> }`)
	// A source edit moves the page's version to 2; its metadata_version stays 1.
	e.jobResult(t, ws, write(http.MethodPost, "/api/v1/pages/"+page+"/edits", `{"version":1,"source":"export default function P() { return <div>two</div> }"}`))

	t.Run("2.1 page metadata baseline is metadata_version", func(t *testing.T) {
		a := e.get(t, "/api/v1/pages/"+page, e.demo.PAT, "X-Workspace-ID", ws)
		if !strings.Contains(string(a.body), `"version":2`) || !strings.Contains(string(a.body), `"metadata_version":1`) {
			t.Fatalf("page: %s", a.body)
		}
		// The page's version is not the metadata baseline: sending it is refused as such,
		// not a 409 forever.
		if a := write(http.MethodPatch, "/api/v1/pages/"+page, `{"version":2,"title":"T"}`); a.status != 422 || !hasString(fieldsOf(a.body), "body.version") || !strings.Contains(string(a.body), "metadata_version") {
			t.Fatalf("version as baseline: %d %s", a.status, a.body)
		}
		if a := write(http.MethodPatch, "/api/v1/pages/"+page, `{"metadata_version":1,"title":"Intro"}`); a.status != 200 || !strings.Contains(string(a.body), `"metadata_version":2`) {
			t.Fatalf("patch: %d %s", a.status, a.body)
		}
		// A stale one is 409 naming the current metadata_version.
		if a := write(http.MethodPatch, "/api/v1/pages/"+page, `{"metadata_version":1,"title":"Stale"}`); a.status != 409 || !strings.Contains(string(a.body), "current metadata_version 2") {
			t.Fatalf("stale: %d %s", a.status, a.body)
		}
	})

	cmp := e.jobResult(t, ws, write(http.MethodPost, "/api/v1/components", `{"key":"badge","file_type":"tsx","source":"export default function Badge() { return <b>b</b> }"}`))
	var c struct {
		DraftHash string `json:"draft_hash"`
	}
	t.Run("2.8 ETag and one name for the draft hash", func(t *testing.T) {
		a := e.get(t, "/api/v1/components/"+cmp, e.demo.PAT, "X-Workspace-ID", ws)
		_ = json.Unmarshal(a.body, &c)
		if a.status != 200 || c.DraftHash == "" || a.header.Get("ETag") != `"`+c.DraftHash+`"` {
			t.Fatalf("component: %d %v %s", a.status, a.header.Get("ETag"), a.body)
		}
		a = e.get(t, "/api/v1/components/"+cmp+"/source", e.demo.PAT, "X-Workspace-ID", ws)
		if a.header.Get("ETag") != `"`+c.DraftHash+`"` || !strings.Contains(string(a.body), `"draft_hash":"`+c.DraftHash+`"`) {
			t.Fatalf("draft source: %v %s", a.header.Get("ETag"), a.body)
		}
		// The document marks If-Match required where a hash lock needs it.
		doc := e.get(t, "/openapi.json", "")
		var d struct {
			Paths map[string]map[string]struct {
				Parameters []struct {
					Name     string `json:"name"`
					In       string `json:"in"`
					Required bool   `json:"required"`
				} `json:"parameters"`
			} `json:"paths"`
		}
		if err := json.Unmarshal(doc.body, &d); err != nil {
			t.Fatal(err)
		}
		for _, op := range []struct{ path, method string }{
			{"/api/v1/components/{component_id}/publish", "post"}, {"/api/v1/components/{component_id}/edits", "post"},
			{"/api/v1/jobs/mutations/components/edits", "post"}, {"/api/v1/assets/{asset_id}/content", "put"},
		} {
			ok := false
			for _, prm := range d.Paths[op.path][op.method].Parameters {
				ok = ok || prm.Name == "If-Match" && prm.In == "header" && prm.Required
			}
			if !ok {
				t.Errorf("%s %s: If-Match not required in /openapi.json", op.method, op.path)
			}
		}
	})
	t.Run("2.3 dependencies before the first publish", func(t *testing.T) {
		a := e.get(t, "/api/v1/components/"+cmp+"/dependencies", e.demo.PAT, "X-Workspace-ID", ws)
		if a.status != 200 || !strings.Contains(string(a.body), `"dependencies":[]`) || !strings.Contains(string(a.body), `"version":0`) {
			t.Fatalf("dependencies: %d %s", a.status, a.body)
		}
	})
	t.Run("2.4 component safe-metadata PATCH", func(t *testing.T) {
		a := write(http.MethodPatch, "/api/v1/components/"+cmp, `{"metadata_version":1,"title":"Badge","tags":["ui"]}`)
		if a.status != 200 || !strings.Contains(string(a.body), `"title":"Badge"`) || !strings.Contains(string(a.body), `"metadata_version":2`) ||
			!strings.Contains(string(a.body), `"draft_hash":"`+c.DraftHash+`"`) {
			t.Fatalf("patch: %d %s", a.status, a.body)
		}
		// The metadata job takes the same field.
		e.jobResult(t, ws, write(http.MethodPost, "/api/v1/jobs/mutations/components/metadata", `{"component_id":"`+cmp+`","metadata_version":2,"description":"d"}`))
	})
	t.Run("2.8 publish needs If-Match", func(t *testing.T) {
		if a := write(http.MethodPost, "/api/v1/components/"+cmp+"/publish", ``); a.status != 422 || !hasString(fieldsOf(a.body), "header.If-Match") {
			t.Fatalf("without If-Match: %d %s", a.status, a.body)
		}
		if a := write(http.MethodPost, "/api/v1/components/"+cmp+"/publish", ``, "If-Match", `"`+c.DraftHash+`"`); a.status != 200 || !strings.Contains(string(a.body), `"published_version":1`) {
			t.Fatalf("publish: %d %s", a.status, a.body)
		}
	})
	t.Run("2.5 request-schema errors are 422 with field paths", func(t *testing.T) {
		cases := []struct {
			name, code, field string
			a                 answer
		}{
			{"no Idempotency-Key", "IDEMPOTENCY_KEY_REQUIRED", "header.Idempotency-Key",
				e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"x"}`), "X-Workspace-ID", ws)},
			{"no X-Workspace-ID", "WORKSPACE_REQUIRED", "header.X-Workspace-ID", e.get(t, "/api/v1/projects", e.demo.PAT)},
			{"malformed JSON", "BAD_REQUEST", "body", write(http.MethodPost, "/api/v1/projects", `{"name":`)},
			{"empty body", "BAD_REQUEST", "body", e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, nil,
				"X-Workspace-ID", ws, "Idempotency-Key", ids.New("k"), "Content-Type", "application/json")},
		}
		for _, c := range cases {
			if c.a.status != 422 || c.a.code != c.code || !hasString(fieldsOf(c.a.body), c.field) {
				t.Errorf("%s: %d %s", c.name, c.a.status, c.a.body)
			}
		}
	})
	t.Run("2.2 history pages with cursor", func(t *testing.T) {
		var pg struct {
			Items []struct {
				Version int64 `json:"version"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		a := e.get(t, "/api/v1/pages/"+page+"/versions?limit=1", e.demo.PAT, "X-Workspace-ID", ws)
		_ = json.Unmarshal(a.body, &pg)
		if a.status != 200 || len(pg.Items) != 1 || pg.Items[0].Version != 2 || pg.NextCursor == "" {
			t.Fatalf("first page: %d %s", a.status, a.body)
		}
		a = e.get(t, "/api/v1/pages/"+page+"/versions?limit=1&cursor="+url.QueryEscape(pg.NextCursor), e.demo.PAT, "X-Workspace-ID", ws)
		pg.NextCursor = ""
		_ = json.Unmarshal(a.body, &pg)
		if a.status != 200 || len(pg.Items) != 1 || pg.Items[0].Version != 1 || pg.NextCursor != "" {
			t.Fatalf("second page: %d %s", a.status, a.body)
		}
		if a := e.get(t, "/api/v1/pages/"+page+"/versions?cursor=nope", e.demo.PAT, "X-Workspace-ID", ws); a.status != 422 || !hasString(fieldsOf(a.body), "query.cursor") {
			t.Fatalf("unknown cursor: %d %s", a.status, a.body)
		}
		if a := e.get(t, "/api/v1/workspaces?limit=1", e.demo.PAT); a.status != 200 || !strings.Contains(string(a.body), `"next_cursor"`) {
			t.Fatalf("workspaces: %d %s", a.status, a.body)
		}
	})
	t.Run("2.7 OAuth endpoints answer OAUTH_NOT_ENABLED", func(t *testing.T) {
		for _, a := range []answer{e.get(t, "/.well-known/oauth-authorization-server", ""), e.do(t, http.MethodPost, "/oauth/token", "", nil)} {
			if a.status != 404 || a.code != "OAUTH_NOT_ENABLED" {
				t.Errorf("oauth: %d %s", a.status, a.body)
			}
		}
	})
	t.Run("2.11 DELETE on the workspace list is 405, the path's workspace wins", func(t *testing.T) {
		if a := e.do(t, http.MethodDelete, "/api/v1/workspaces", e.demo.PAT, nil); a.status != 405 || a.header.Get("Allow") == "" {
			t.Errorf("DELETE /api/v1/workspaces: %d %v %s", a.status, a.header.Get("Allow"), a.body)
		}
		if a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceB, e.demo.PAT, "X-Workspace-ID", ws); a.status != 200 || a.header.Get("X-Cell-ID") != "cell-b" {
			t.Errorf("other workspace with a default header: %d %s", a.status, a.body)
		}
	})
	t.Run("2.6 capabilities list only what the token can use", func(t *testing.T) {
		tok, _, err := e.s.Directory.CreateToken(t.Context(), e.demo.UserID, "ws only", []string{"workspace:read"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		a := e.get(t, "/api/v1/workspaces/"+ws+"/capabilities", tok)
		if a.status != 200 || strings.Contains(string(a.body), `"get-mutation-job"`) || strings.Contains(string(a.body), `"validate-entity"`) ||
			!strings.Contains(string(a.body), `"get-workspace"`) {
			t.Fatalf("capabilities: %d %s", a.status, a.body)
		}
		if a := e.get(t, "/api/v1/jobs/mutations/"+ids.New(ids.Job), tok, "X-Workspace-ID", ws); a.status != 403 || a.code != "SCOPE_REQUIRED" {
			t.Fatalf("job read: %d %s", a.status, a.body)
		}
	})
	t.Run("2.9 theme typography names family_id", func(t *testing.T) {
		a := e.get(t, "/openapi.json", "")
		if !strings.Contains(string(a.body), `"family_id"`) || strings.Contains(string(a.body), `"font_family_id"`) {
			t.Errorf("typography output still names font_family_id")
		}
	})
}
