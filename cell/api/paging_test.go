package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"slidecells/shared/ids"
)

type pageAnswer struct {
	Items []struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
	NextBefore *int64 `json:"next_before"`
}

// TestOnePagingContract checks that every kind of list pages the same way: limit and cursor in,
// next_cursor out (history lists and the workspace list included), and that a cursor that is
// not a next_cursor of the same list (garbage, another list's, another workspace's) is 422 at
// query.cursor, never a silent first page.
func TestOnePagingContract(t *testing.T) {
	b := setup(t)
	list := func(t *testing.T, base, ws, path string) (int, pageAnswer, []byte) {
		t.Helper()
		resp, body := b.call(t, call{base: base, method: http.MethodGet, path: path, ws: ws})
		var p pageAnswer
		_ = json.Unmarshal(body, &p)
		return resp.StatusCode, p, body
	}
	// A component with three published versions.
	cmp := b.publishComponent(t, "", b.ws, "pager", `export default () => null`)
	for v := 2; v <= 3; v++ {
		if _, err := b.api.DB.Pool.Exec(t.Context(), `INSERT INTO component_versions (workspace_id, component_id, version, file_type, source, source_digest, compiled_digest, job_id, created_by)
			VALUES ($1, $2, $3, 'tsx', 'export default () => null', 'd', 'c', 'job', 'u')`, b.ws, cmp, v); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("history", func(t *testing.T) {
		var got []int64
		path := "/api/v1/components/" + cmp + "/versions?limit=2"
		st, p, body := list(t, "", b.ws, path)
		if st != 200 || len(p.Items) != 2 || p.NextCursor == "" || p.NextBefore != nil {
			t.Fatalf("first page: %d %s", st, body)
		}
		for _, it := range p.Items {
			got = append(got, it.Version)
		}
		st, p, body = list(t, "", b.ws, path+"&cursor="+url.QueryEscape(p.NextCursor))
		if st != 200 || len(p.Items) != 1 || p.NextCursor != "" {
			t.Fatalf("second page: %d %s", st, body)
		}
		got = append(got, p.Items[0].Version)
		if got[0] != 3 || got[1] != 2 || got[2] != 1 {
			t.Fatalf("versions %v, want 3 2 1", got)
		}
	})
	t.Run("workspaces", func(t *testing.T) {
		resp, body := b.get(t, "/api/v1/workspaces?limit=1", b.pat)
		var p pageAnswer
		_ = json.Unmarshal(body, &p)
		if resp.StatusCode != 200 || len(p.Items) != 1 || p.NextCursor == "" {
			t.Fatalf("first page: %d %s", resp.StatusCode, body)
		}
		first := p.Items[0].ID
		resp, body = b.get(t, "/api/v1/workspaces?limit=1&cursor="+url.QueryEscape(p.NextCursor), b.pat)
		var p2 pageAnswer
		_ = json.Unmarshal(body, &p2)
		if resp.StatusCode != 200 || len(p2.Items) != 1 || p2.Items[0].ID == first || p2.NextCursor != "" {
			t.Fatalf("second page: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("agent lists", func(t *testing.T) {
		for _, path := range []string{"/ai/agent-catalog?limit=1", "/ai/agent-configs?limit=1"} {
			st, p, body := list(t, "", b.ws, path)
			if st != 200 || len(p.Items) != 1 || p.NextCursor == "" {
				t.Fatalf("%s: %d %s", path, st, body)
			}
		}
	})
	t.Run("foreign and unknown cursors", func(t *testing.T) {
		for _, name := range []string{"One", "Two"} {
			b.createProject(t, "", b.ws, name)
			b.createProject(t, b.srvB.URL, b.wsB, name)
		}
		st, p, body := list(t, "", b.ws, "/api/v1/projects?limit=1")
		if st != 200 || p.NextCursor == "" {
			t.Fatalf("projects: %d %s", st, body)
		}
		cursor := url.QueryEscape(p.NextCursor)
		if st, p2, body := list(t, "", b.ws, "/api/v1/projects?limit=1&cursor="+cursor); st != 200 || len(p2.Items) != 1 || p2.Items[0].ID == p.Items[0].ID {
			t.Fatalf("own cursor: %d %s", st, body)
		}
		cases := []struct{ name, base, ws, path string }{
			{"garbage", "", b.ws, "/api/v1/projects?cursor=" + ids.New(ids.Project)},
			{"another list's", "", b.ws, "/api/v1/themes?cursor=" + cursor},
			{"another workspace's", b.srvB.URL, b.wsB, "/api/v1/projects?limit=1&cursor=" + cursor},
			{"another object's history", "", b.ws, "/api/v1/components/" + ids.New(ids.Component) + "/versions?cursor=" + cursor},
		}
		for _, c := range cases {
			resp, body := b.call(t, call{base: c.base, method: http.MethodGet, path: c.path, ws: c.ws})
			if resp.StatusCode != http.StatusUnprocessableEntity || code(t, body) != "VALIDATION_FAILED" || !json.Valid(body) ||
				!containsField(body, "query.cursor") {
				t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
			}
		}
	})
}

func containsField(body []byte, field string) bool {
	var p struct {
		Errors []struct{ Field string } `json:"errors"`
	}
	_ = json.Unmarshal(body, &p)
	for _, e := range p.Errors {
		if e.Field == field {
			return true
		}
	}
	return false
}
