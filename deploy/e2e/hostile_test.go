package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/shared/testenv"
)

// TestHostileInputThroughTheRouter is issue #27's attack run, one case per client-visible item,
// through the router of a running stack (the cell's own tests walk every operation): each bad
// request is a 4xx with a code, no 500, and nothing a refused request sent was written.
func TestHostileInputThroughTheRouter(t *testing.T) {
	e := start(t, "", nil)
	ws := e.demo.WorkspaceA
	json_ := func(method, path, key, body string, hdr ...string) answer {
		t.Helper()
		h := append([]string{"X-Workspace-ID", ws, "Content-Type", "application/json"}, hdr...)
		if key != "" {
			h = append(h, "Idempotency-Key", key)
		}
		return e.do(t, method, path, e.demo.PAT, []byte(body), h...)
	}
	want := func(what string, a answer, status int, code string) {
		t.Helper()
		if a.status != status || (code != "" && a.code != code) {
			t.Errorf("%s: %d %s, want %d %s", what, a.status, a.body, status, code)
		}
	}

	// #27.2: NUL in a text field and in a cursor is a validation error, not a 500.
	want("NUL in a project name", json_(http.MethodPost, "/api/v1/projects", "h-nul", `{"name":"a\u0000b"}`), 422, "VALIDATION_FAILED")
	want("NUL in a cursor", e.get(t, "/api/v1/projects?cursor=%00", e.demo.PAT, "X-Workspace-ID", ws), 422, "")
	// #27.6: control characters and bidi overrides in a name.
	want("CR/LF in a project name", json_(http.MethodPost, "/api/v1/projects", "h-crlf", `{"name":"a\r\n<script>"}`), 422, "VALIDATION_FAILED")
	want("a bidi override in a project name", json_(http.MethodPost, "/api/v1/projects", "h-bidi", `{"name":"a\u202eb"}`), 422, "VALIDATION_FAILED")
	// #27.8: no Content-Type on a JSON operation is 415; two Idempotency-Keys are 422.
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"untyped"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "h-415", "Content-Type", "text/plain")
	want("a JSON body sent as text/plain", a, 415, "UNSUPPORTED_MEDIA_TYPE")
	req, _ := http.NewRequest(http.MethodPost, e.s.RouterURL+"/api/v1/projects", strings.NewReader(`{"name":"twice"}`))
	req.Header.Set("Authorization", "Bearer "+e.demo.PAT)
	req.Header.Set("X-Workspace-ID", ws)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Idempotency-Key", "h-k1")
	req.Header.Add("Idempotency-Key", "h-k2")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("two Idempotency-Keys: %d, want 422", resp.StatusCode)
	}
	// #27.8: decode errors speak the client's terms, never a Go type.
	a = json_(http.MethodPost, "/api/v1/projects", "h-types", `{"name":{"a":[1e300]}}`)
	if a.status != 422 || bytes.Contains(a.body, []byte("Go ")) || bytes.Contains(a.body, []byte("Body")) || bytes.Contains(a.body, []byte("json: ")) {
		t.Errorf("a wrongly typed body: %d %s", a.status, a.body)
	}

	// #27.4: the documented 512 KiB page source limit is the real one, escaping included.
	a = json_(http.MethodPost, "/api/v1/projects", "h-prj", `{"name":"Hostile"}`)
	want("a project", a, 201, "")
	var prj struct{ ID string }
	_ = json.Unmarshal(a.body, &prj)
	src := func(n int) string {
		head := "export default () => null\n// "
		return head + strings.Repeat("<>&", n)[:n-len(head)]
	}
	for _, c := range []struct {
		n      int
		status int
	}{{512 << 10, 202}, {512<<10 + 1, 422}} {
		body, _ := json.Marshal(map[string]string{"project_id": prj.ID, "key": fmt.Sprintf("big%d", c.n), "file_type": "tsx", "source": src(c.n)})
		want(fmt.Sprintf("a %d-byte source", c.n), json_(http.MethodPost, "/api/v1/pages", fmt.Sprintf("h-src-%d", c.n), string(body)), c.status, "")
	}

	// #27.7: uploads — a decompression bomb, a PNG+ELF polyglot and a truncated PNG are refused;
	// a hostile file name is served sanitized.
	good := pngOf(t, 16, 3)
	upload := func(name, key string, data []byte) answer {
		return e.do(t, http.MethodPost, "/api/v1/assets/content?name="+name, e.demo.PAT, data,
			"X-Workspace-ID", ws, "Idempotency-Key", key, "Content-Type", "image/png")
	}
	for i, c := range []struct {
		what string
		data []byte
	}{
		{"a 30000×30000 bomb", testenv.BombPNG(30000, 30000)},
		{"a PNG+ELF polyglot", append(append([]byte{}, good...), append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...)...)},
		{"a truncated PNG", good[:len(good)/2]},
	} {
		if a := upload("x", fmt.Sprintf("h-up-%d", i), c.data); a.status != 422 {
			t.Errorf("%s: %d %s, want 422", c.what, a.status, a.body)
		}
	}
	a = upload("..%2F..%2Fetc%2Fpasswd.png", "h-up-name", good)
	want("an asset with a path for a name", a, 201, "")
	var asset struct{ ID string }
	_ = json.Unmarshal(a.body, &asset)
	a = e.get(t, "/api/v1/assets/"+asset.ID+"/content", e.demo.PAT, "X-Workspace-ID", ws)
	if cd := a.header.Get("Content-Disposition"); a.status != 200 || strings.Contains(cd, "/") || strings.Contains(cd, "..") {
		t.Errorf("the hostile name is served as %q (%d)", cd, a.status)
	}
	// #27.5: free-form metadata is bounded in depth and key length.
	i := 0
	for what, body := range map[string]string{
		"1,000 levels of metadata":  `{"version":1,"metadata":` + strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000) + `}`,
		"a 10,000-character key":    `{"version":1,"metadata":{"` + strings.Repeat("k", 10000) + `":1}}`,
		"a bidi override in a key":  `{"version":1,"metadata":{"a\u202eb":1}}`,
		"NUL in a metadata value":   `{"version":1,"metadata":{"a":"\u0000"}}`,
		"CR/LF in an asset's name":  `{"version":1,"name":"a\r\nb"}`,
		"metadata that is an array": `{"version":1,"metadata":[1]}`,
	} {
		i++
		want(what, json_(http.MethodPatch, "/api/v1/assets/"+asset.ID, fmt.Sprintf("h-meta-%d", i), body), 422, "VALIDATION_FAILED")
	}

	// #27.8: a declared length over the limit with Expect: 100-continue is refused before the
	// body is sent.
	addr := strings.TrimPrefix(e.s.RouterURL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-Workspace-ID: %s\r\nIdempotency-Key: h-big\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", e.demo.PAT, ws, 30<<20)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if first, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(first, " 413 ") {
		t.Errorf("Expect: 100-continue over the limit: %q %v", first, err)
	}
	// #27.8: the router's public port serves no metrics or health.
	for _, p := range []string{"/metrics", "/livez", "/readyz"} {
		resp, err = client.Get(e.s.RouterURL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s answers on the public port", p)
		}
	}

	// Nothing a refused request sent was written: the workspace has its demo projects and
	// "Hostile", no project named by a refused request.
	names, _, _ := e.listNames(t, ws)
	for _, n := range names {
		if strings.Contains(n, "untyped") || strings.Contains(n, "twice") || strings.ContainsAny(n, "\x00\r\n\u202e") {
			t.Errorf("a refused request wrote project %q", n)
		}
	}
}

// TestEndlessLoopPageThroughTheRouter (#27.1): a page that runs an endless loop at top level
// fails validation as a content error of that page, within its content budget, and another
// page of the same workspace validates meanwhile (the hung page holds neither the workspace's
// renders nor the cell's).
func TestEndlessLoopPageThroughTheRouter(t *testing.T) {
	e := startWith(t, "", map[string][]string{"cell": {"RENDER_CONTENT_READY_SECONDS=3"}}, true)
	e.waitRender(t)
	ws := e.demo.WorkspaceA
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"Loops"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "loop-project", "Content-Type", "application/json")
	if a.status != http.StatusCreated {
		t.Fatalf("project: %d %s", a.status, a.body)
	}
	var prj struct{ ID string }
	_ = json.Unmarshal(a.body, &prj)
	loop := e.pageJob(t, ws, prj.ID, "loop", `while (true) {}
export default function L() { return <h1>never</h1>; }`)
	fine := e.pageJob(t, ws, prj.ID, "fine", `export default function F() { return <h1>fine</h1>; }`)

	var wg sync.WaitGroup
	var hung, other validation
	wg.Go(func() { hung = e.validate(t, ws, loop) })
	time.Sleep(200 * time.Millisecond) // the loop's render is under way first
	wg.Go(func() { other = e.validate(t, ws, fine) })
	wg.Wait()
	if hung.Valid || hung.Status != "failed" || hung.Stages.Render.Status != "failed" || hung.Stages.Render.Code != "RENDER_CONTENT_ERROR" {
		t.Errorf("the endless-loop page: %+v, want a failed render stage with RENDER_CONTENT_ERROR", hung)
	}
	if !other.Valid || other.Status != "passed" {
		t.Errorf("another page of the workspace, meanwhile: %+v, want passed", other)
	}
}
