package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"slidecells/shared/ids"
)

type call struct {
	contentType string
	base        string
	method      string
	path        string
	token       string
	ws          string
	key         string
	body        string
	header      []string // name, value pairs, set last
	// bare sends no default: no token unless given, no Content-Type unless given.
	bare bool
}

// call is the package's one HTTP test client.
func (b *bundle) call(t *testing.T, c call) (*http.Response, []byte) {
	t.Helper()
	if c.base == "" {
		c.base = b.srv.URL
	}
	if c.token == "" && !c.bare {
		c.token = b.pat
	}
	req, _ := http.NewRequest(c.method, c.base+c.path, strings.NewReader(c.body))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.ws != "" {
		req.Header.Set("X-Workspace-ID", c.ws)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", c.key)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	} else if c.body != "" && !c.bare {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		req.Header.Set(c.header[i], c.header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body
}

func (b *bundle) createProject(t *testing.T, base, ws, name string) (id string, version int64) {
	t.Helper()
	resp, body := b.call(t, call{base: base, method: "POST", path: "/api/v1/projects", ws: ws, key: ids.New("k"), body: `{"name":"` + name + `"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create project: %d %s", resp.StatusCode, body)
	}
	var p struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}
	_ = json.Unmarshal(body, &p)
	return p.ID, p.Version
}

func TestIdempotency(t *testing.T) {
	b := setup(t)
	create := call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: "key-1", body: `{"name":"Deck","description":"d"}`}

	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, body: `{"name":"x"}`}); resp.StatusCode != 422 || code(t, body) != "IDEMPOTENCY_KEY_REQUIRED" {
		t.Fatalf("missing key: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: strings.Repeat("k", 256), body: `{"name":"x"}`}); resp.StatusCode != 422 {
		t.Fatalf("bad key: %d %s", resp.StatusCode, body)
	}
	r1, b1 := b.call(t, create)
	// Same key, same request with the JSON keys reordered and spaced: replayed byte for byte.
	same := create
	same.body = `{ "description": "d", "name": "Deck" }`
	r2, b2 := b.call(t, same)
	if r1.StatusCode != r2.StatusCode || !bytes.Equal(b1, b2) || r1.Header.Get("Location") != r2.Header.Get("Location") {
		t.Fatalf("replay differs:\n%d %s\n%d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	if r2.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatal("replay not marked")
	}
	// Same key, different request: 409.
	other := create
	other.body = `{"name":"Other"}`
	if resp, body := b.call(t, other); resp.StatusCode != 409 || code(t, body) != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("reuse: %d %s", resp.StatusCode, body)
	}
	// The key is bounded by user+workspace+operation: the same key in another workspace is new.
	elsewhere := create
	elsewhere.ws = b.wsB
	elsewhere.base = b.srvB.URL
	if resp, body := b.call(t, elsewhere); resp.StatusCode != http.StatusCreated || bytes.Equal(body, b1) {
		t.Fatalf("other workspace: %d %s", resp.StatusCode, body)
	}
	// Only one project exists in the first workspace.
	_, list := b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if n := strings.Count(string(list), `"id":"prj_`); n != 1 {
		t.Fatalf("%d projects after replays: %s", n, list)
	}
}

func TestIdempotencyConcurrentSameKey(t *testing.T) {
	b := setup(t)
	const n = 12
	var wg sync.WaitGroup
	statuses := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: "same", body: `{"name":"Race"}`})
			c := ""
			if resp.StatusCode >= 400 {
				c = code(t, body)
				if c == "IDEMPOTENCY_KEY_IN_FLIGHT" && (resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"retryable":true`)) {
					t.Errorf("in-flight answer lacks Retry-After or retryable: %v %s", resp.Header, body)
				}
			}
			statuses <- fmt.Sprintf("%d %s", resp.StatusCode, c)
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != "201 " && s != "409 IDEMPOTENCY_KEY_IN_FLIGHT" {
			t.Fatalf("unexpected answer %q", s)
		}
	}
	_, list := b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if c := strings.Count(string(list), `"id":"prj_`); c != 1 {
		t.Fatalf("%d projects created by one key: %s", c, list)
	}
}

func TestOptimisticLocking(t *testing.T) {
	b := setup(t)
	id, v := b.createProject(t, "", b.ws, "Deck")
	up := func(version int64, name string) (*http.Response, []byte) {
		return b.call(t, call{method: "PATCH", path: "/api/v1/projects/" + id, ws: b.ws, key: ids.New("k"),
			body: fmt.Sprintf(`{"version":%d,"name":%q}`, version, name)})
	}
	if resp, body := up(v, "Deck 2"); resp.StatusCode != 200 || !strings.Contains(string(body), `"version":2`) {
		t.Fatalf("update: %d %s", resp.StatusCode, body)
	}
	resp, body := up(v, "Deck 3") // stale baseline
	if resp.StatusCode != 409 || code(t, body) != "VERSION_CONFLICT" {
		t.Fatalf("stale: %d %s", resp.StatusCode, body)
	}
	_, got := b.call(t, call{method: "GET", path: "/api/v1/projects/" + id, ws: b.ws})
	if !strings.Contains(string(got), `"name":"Deck 2"`) {
		t.Fatalf("stale update overwrote: %s", got)
	}
	if resp, body := up(2, ""); resp.StatusCode != 422 || code(t, body) != "VALIDATION_FAILED" || !strings.Contains(string(body), "body.name") {
		t.Fatalf("invalid: %d %s", resp.StatusCode, body)
	}
}

func TestArchive(t *testing.T) {
	b := setup(t)
	p1, _ := b.createProject(t, "", b.ws, "One")
	p2, _ := b.createProject(t, "", b.ws, "Two")
	foreign, _ := b.createProject(t, b.srvB.URL, b.wsB, "Elsewhere")
	batch := func(idsJSON string, confirm bool) (*http.Response, []byte) {
		return b.call(t, call{method: "POST", path: "/api/v1/projects/archive", ws: b.ws, key: ids.New("k"),
			body: fmt.Sprintf(`{"ids":%s,"confirm":%v}`, idsJSON, confirm)})
	}
	if resp, body := batch(`["`+p1+`"]`, false); resp.StatusCode != 422 || !strings.Contains(string(body), "body.confirm") {
		t.Fatalf("unconfirmed: %d %s", resp.StatusCode, body)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = `"` + ids.New(ids.Project) + `"`
	}
	if resp, _ := batch("["+strings.Join(many, ",")+"]", true); resp.StatusCode != 422 {
		t.Fatalf("over cap: %d", resp.StatusCode)
	}
	// All or nothing: one foreign ID rolls the whole batch back.
	if resp, body := batch(`["`+p1+`","`+foreign+`"]`, true); resp.StatusCode != 404 {
		t.Fatalf("mixed batch: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.call(t, call{method: "GET", path: "/api/v1/projects/" + p1, ws: b.ws}); resp.StatusCode != 200 {
		t.Fatalf("p1 archived by a failed batch: %d", resp.StatusCode)
	}
	if resp, body := batch(`["`+p1+`","`+p2+`"]`, true); resp.StatusCode != 200 {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	for _, id := range []string{p1, p2} {
		if resp, _ := b.call(t, call{method: "GET", path: "/api/v1/projects/" + id, ws: b.ws}); resp.StatusCode != 404 {
			t.Fatalf("archived %s still visible: %d", id, resp.StatusCode)
		}
		// Archived objects leave operations too: no edit, no second archive.
		if resp, _ := b.call(t, call{method: "PATCH", path: "/api/v1/projects/" + id, ws: b.ws, key: ids.New("k"), body: `{"version":1,"name":"x"}`}); resp.StatusCode != 404 {
			t.Fatalf("edit of archived: %d", resp.StatusCode)
		}
	}
	_, list := b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if strings.Contains(string(list), p1) {
		t.Fatalf("archived in list: %s", list)
	}
	p3, _ := b.createProject(t, "", b.ws, "Three")
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects/" + p3 + "/archive", ws: b.ws, key: ids.New("k")}); resp.StatusCode != 200 {
		t.Fatalf("single archive: %d %s", resp.StatusCode, body)
	}
}

// isoFixture makes an object of one kind in (cell server, workspace) and returns its ID.
type isoFixture struct {
	prefix string // ID prefix, to make a well-formed ID that does not exist
	make   func(t *testing.T, b *bundle, base, ws string) string
}

// The isolation test's tables. Each resource's test file adds its rows in an init function:
// a fixture per object ID path parameter, a valid sample body per writing operation that names
// an object (so the answer is about the object, not about bad input), and the body's media
// type when it is not JSON.
var (
	isoFixtures     = map[string]isoFixture{}
	isoBodies       = map[string]string{}
	isoContentTypes = map[string]string{}
	// isoHeaders are further request headers an operation requires (a hash lock's If-Match).
	isoHeaders = map[string][]string{}
)

func init() {
	isoFixtures["project_id"] = isoFixture{prefix: ids.Project, make: func(t *testing.T, b *bundle, base, ws string) string {
		id, _ := b.createProject(t, base, ws, "Foreign")
		return id
	}}
	isoBodies["update-project"] = `{"version":1,"name":"Hijack"}`
}

// objectParam finds the object ID parameters of a path.
var objectParam = regexp.MustCompile(`\{([a-z_]+_id)\}`)

// TestCrossWorkspaceObjectsAre404 walks the registry: every operation that names an object is
// called with an object of another workspace the caller also belongs to (on this cell and on
// the other cell) and must answer exactly what it answers for an ID that does not exist.
func TestCrossWorkspaceObjectsAre404(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	// The caller is a member of a second workspace on cell-a too.
	if err := b.dir.AddMember(ctx, b.wsOther, b.user.ID, "editor"); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, op := range b.api.Operations() {
		params := objectParam.FindAllStringSubmatch(op.Path, -1)
		var names []string
		for _, p := range params {
			if p[1] != "workspace_id" {
				names = append(names, p[1])
			}
		}
		if len(names) == 0 {
			continue
		}
		if op.Method != "GET" && isoBodies[op.ID] == "" && !strings.HasSuffix(op.Path, "/archive") {
			t.Errorf("%s: no sample body; add one so the isolation check is meaningful", op.ID)
			continue
		}
		for _, other := range []struct{ name, base, ws string }{{"same cell", b.srv.URL, b.wsOther}, {"other cell", b.srvB.URL, b.wsB}} {
			foreign, missing := op.Path, op.Path
			for _, n := range names {
				fx, ok := isoFixtures[n]
				if !ok {
					t.Fatalf("%s: no fixture for {%s}; add one to isoFixtures", op.ID, n)
				}
				foreign = strings.ReplaceAll(foreign, "{"+n+"}", fx.make(t, b, other.base, other.ws))
				missing = strings.ReplaceAll(missing, "{"+n+"}", ids.New(fx.prefix))
			}
			foreign = strings.ReplaceAll(foreign, "{workspace_id}", b.ws)
			missing = strings.ReplaceAll(missing, "{workspace_id}", b.ws)
			c := call{method: op.Method, ws: b.ws, body: isoBodies[op.ID], contentType: isoContentTypes[op.ID], header: isoHeaders[op.ID]}
			if op.Idempotency == "required" {
				c.key = ids.New("k")
			}
			c.path = foreign
			r1, b1 := b.call(t, c)
			if op.Idempotency == "required" {
				c.key = ids.New("k")
			}
			c.path = missing
			r2, b2 := b.call(t, c)
			if r2.StatusCode != 404 {
				t.Errorf("%s: nonexistent object answered %d %s", op.ID, r2.StatusCode, b2)
				continue
			}
			if r1.StatusCode != r2.StatusCode || stripTrace(b1) != stripTrace(b2) {
				t.Errorf("%s (%s): foreign %d %s vs missing %d %s", op.ID, other.name, r1.StatusCode, b1, r2.StatusCode, b2)
			}
			checked++
		}
		// Positive control: the same call on the caller's own object is not a 404, so the
		// handler really reads the object from the path.
		own := strings.ReplaceAll(op.Path, "{workspace_id}", b.ws)
		for _, n := range names {
			own = strings.ReplaceAll(own, "{"+n+"}", isoFixtures[n].make(t, b, b.srv.URL, b.ws))
		}
		c := call{method: op.Method, ws: b.ws, body: isoBodies[op.ID], contentType: isoContentTypes[op.ID], header: isoHeaders[op.ID], path: own}
		if op.Idempotency == "required" {
			c.key = ids.New("k")
		}
		if r, body := b.call(t, c); r.StatusCode == 404 {
			t.Errorf("%s: own object answered 404 %s; the isolation check would be vacuous", op.ID, body)
		}
	}
	if checked == 0 {
		t.Fatal("no operation checked")
	}
}

func stripTrace(body []byte) string {
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	delete(m, "trace_id")
	out, _ := json.Marshal(m)
	return string(out)
}

func TestRequestLimits(t *testing.T) {
	b := setup(t)
	big := `{"name":"` + strings.Repeat("x", 2<<20) + `"}`
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: ids.New("k"), body: big}); resp.StatusCode != 413 || code(t, body) != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("big body: %d %.200s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: ids.New("k"), body: `{"name":"` + strings.Repeat("x", 201) + `"}`}); resp.StatusCode != 422 || !strings.Contains(string(body), "body.name") {
		t.Fatalf("long name: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "POST", path: "/api/v1/projects", ws: b.ws, key: ids.New("k"), body: `{"name":`}); resp.StatusCode != http.StatusUnprocessableEntity || code(t, body) != "BAD_REQUEST" {
		t.Fatalf("broken JSON: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "GET", path: "/api/v1/projects/prj_nope", ws: b.ws}); resp.StatusCode != 422 || code(t, body) != "VALIDATION_FAILED" {
		t.Fatalf("malformed ID: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.call(t, call{method: "GET", path: "/api/v1/projects?limit=1000", ws: b.ws}); resp.StatusCode != 422 {
		t.Fatalf("limit: %d %s", resp.StatusCode, body)
	}
	_, list := b.call(t, call{method: "GET", path: "/api/v1/projects", ws: b.ws})
	if strings.Contains(string(list), "prj_") {
		t.Fatalf("a rejected request wrote data: %s", list)
	}
}
