package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"slidecells/cell/tenancy"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// TestOneErrorWriter sends requests that fail in every place an error can arise (the pipeline,
// a handler on a read and on a buffered idempotent write, huma's own validation and body
// reading, the unrouted paths) and checks that each answer is exactly what the cell's one error
// writer sends: problem JSON as problem.Write encodes it, no caching, the trace ID of the
// request in the body, and Retry-After by the one policy. An answer written anywhere else
// (huma's own error writer, http.Error, a handler writing its own body) lacks some of it.
func TestOneErrorWriter(t *testing.T) {
	b := setup(t)
	prj, _ := b.createProject(t, "", b.ws, "Errors")
	job := b.submitPage(t, "", b.ws, prj, "errors", `export default function P() { return <div>x</div> }`)
	page := b.waitJob(t, "", b.ws, job.JobID, "succeeded").Result.ObjectID
	if err := b.apiB.Guard.Fence(context.Background(), b.wsB, 1, tenancy.Fenced, "cell-b"); err != nil {
		t.Fatal(err)
	}
	key := func() string { return ids.New("k") }
	cases := []struct {
		name   string
		call   call
		status int
		code   problem.Code
	}{
		{"pipeline: no credential", call{method: "GET", path: "/api/v1/projects", ws: b.ws, bare: true}, 401, problem.Unauthenticated},
		{"pipeline: no workspace", call{method: "GET", path: "/api/v1/projects"}, 422, problem.WorkspaceRequired},
		{"pipeline: scope", call{method: "GET", path: "/api/v1/themes", ws: b.ws, token: b.patScope}, 403, problem.ScopeRequired},
		{"pipeline: no Idempotency-Key", call{method: "POST", path: "/api/v1/projects", ws: b.ws, body: `{"name":"x"}`}, 422, problem.IdempotencyKeyRequired},
		{"pipeline: workspace moving (Retry-After)", call{base: b.srvB.URL, method: "POST", path: "/api/v1/projects", ws: b.wsB, key: key(), body: `{"name":"x"}`},
			503, problem.WorkspaceMoving},
		{"handler: not found", call{method: "GET", path: "/api/v1/projects/" + ids.New(ids.Project), ws: b.ws}, 404, problem.NotFound},
		{"handler: stale baseline on an idempotent write", call{method: "PATCH", path: "/api/v1/projects/" + prj, ws: b.ws, key: key(), body: `{"version":9,"name":"y"}`},
			409, problem.VersionConflict},
		{"handler: no render capacity (Retry-After)", call{method: "GET", path: "/api/v1/pages/" + page + "/screenshot", ws: b.ws}, 503, problem.RenderServiceUnavailable},
		{"huma: invalid body on an idempotent write", call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: key(), body: `{"name":""}`}, 422, problem.ValidationFailed},
		{"huma: malformed ID in the path", call{method: "GET", path: "/api/v1/projects/prj_x", ws: b.ws}, 422, problem.ValidationFailed},
		{"huma: malformed JSON", call{method: "POST", path: "/api/v1/validate/entity", ws: b.ws, body: `{`}, 422, problem.BadRequest},
		{"huma: body too large", call{method: "POST", path: "/api/v1/validate/entity", ws: b.ws, body: `{"source":"` + strings.Repeat("x", 3<<20+64<<10) + `"}`},
			413, problem.PayloadTooLarge},
		{"unrouted: unknown path", call{method: "GET", path: "/api/v1/nothing"}, 404, problem.NotFound},
		{"unrouted: wrong method", call{method: "DELETE", path: "/api/v1/projects"}, 405, problem.MethodNotAllowed},
		{"unrouted: OAuth", call{method: "GET", path: "/.well-known/oauth-authorization-server"}, 404, problem.OAuthNotEnabled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := b.call(t, c.call)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != problem.ContentType || cc != "no-store" {
				t.Fatalf("Content-Type %q, Cache-Control %q", ct, cc)
			}
			var p problem.Body
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil {
				t.Fatalf("not a problem body: %v: %s", err, body)
			}
			if p.Code != c.code || p.Status != c.status || p.Type != "about:blank" || p.Title != http.StatusText(c.status) || p.Message == "" {
				t.Fatalf("body %s", body)
			}
			if p.TraceID == "" || p.TraceID != resp.Header.Get("X-Request-ID") {
				t.Fatalf("trace_id %q, X-Request-ID %q", p.TraceID, resp.Header.Get("X-Request-ID"))
			}
			var again bytes.Buffer
			_ = json.NewEncoder(&again).Encode(p)
			if !bytes.Equal(again.Bytes(), body) {
				t.Fatalf("body not as problem.Write encodes it:\n%s\n%s", body, again.Bytes())
			}
			want := ""
			if s := problem.New(c.code, "").RetryAfter; s > 0 {
				want = strconv.Itoa(s)
			}
			if got := resp.Header.Get("Retry-After"); got != want {
				t.Fatalf("Retry-After %q, want %q by the policy", got, want)
			}
		})
	}
}

// TestErrorsHaveOneWriter checks the source of this package: problem.Write is called in one
// place (the writer, fail), nothing else writes an error body, and handlers return errors.
func TestErrorsHaveOneWriter(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	writers := regexp.MustCompile(`problem\.Write\(|http\.Error\(|huma\.WriteErr\(|\.SetStatus\(http\.Status\w+`)
	allowed := map[string]int{"errors.go: problem.Write(": 1, "server.go: http.Error(": 1} // fail; /readyz's plain probe answer
	found := map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range writers.FindAllString(string(src), -1) {
			found[f+": "+m]++
		}
	}
	for k, n := range found {
		if strings.HasSuffix(k, "SetStatus(http.StatusOK") || strings.HasSuffix(k, "SetStatus(http.StatusNotModified") {
			continue // success answers of streamed bodies
		}
		if allowed[k] != n {
			t.Errorf("%s: %d calls; error answers are written by fail alone", k, n)
		}
	}
	if found["errors.go: problem.Write("] != 1 {
		t.Errorf("fail no longer writes with problem.Write: %v", found)
	}
}
