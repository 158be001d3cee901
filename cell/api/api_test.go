package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"slidecells/cell"
	"slidecells/cell/api"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
)

type bundle struct {
	srv      *httptest.Server
	srvB     *httptest.Server // cell-b, its own database
	dir      *directory.Directory
	api      *api.Server
	apiB     *api.Server // cell-b
	user     directory.User
	ws       string // on cell-a, demo user is owner
	wsOther  string // on cell-a, demo user is not a member
	wsB      string // on cell-b, demo user is owner
	pat      string
	patScope string // only project:read
}

// newAPI builds a cell's services over c's database and blob store, as cell/cmd/cell does, and
// the API that serves them.
func newAPI(t *testing.T, c api.Config) *api.Server {
	t.Helper()
	svc, err := cell.New(cell.Config{DB: c.DB, Blobs: c.Blobs, Renderer: c.Renderer})
	if err != nil {
		t.Fatal(err)
	}
	c.Services = svc
	return api.New(c)
}

func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel() // every test has its own databases, servers and blob folders
	ctx := context.Background()
	dirURL := dbtest.NewDatabase(t, migrations.FS, migrations.Directory)
	cellURL := dbtest.NewDatabase(t, migrations.FS, migrations.Cell)
	dir, err := directory.Connect(ctx, dirURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dir.Close)
	for _, c := range []string{"cell-a", "cell-b"} {
		if err := dir.AddCell(ctx, directory.Cell{ID: c, InternalURL: "http://127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	b := &bundle{dir: dir}
	b.user, err = dir.CreateUser(ctx, "ann@example.com", "Ann")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := dir.CreateUser(ctx, "bob@example.com", "Bob")
	mk := func(name, cell, owner string) string {
		w, err := dir.CreateWorkspace(ctx, name, cell, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.AddMember(ctx, w.ID, owner, "owner"); err != nil {
			t.Fatal(err)
		}
		return w.ID
	}
	b.ws = mk("Ann's", "cell-a", b.user.ID)
	b.wsOther = mk("Bob's", "cell-a", other.ID)
	b.wsB = mk("Ann's B", "cell-b", b.user.ID)
	b.pat, _, err = dir.CreateToken(ctx, b.user.ID, "all", directory.Scopes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b.patScope, _, _ = dir.CreateToken(ctx, b.user.ID, "narrow", []string{"project:read"}, time.Hour)
	b.api = newAPI(t, api.Config{CellID: "cell-a", DB: dbtest.Open(t, cellURL), Log: zap.NewNop(), Blobs: newBucket(t),
		Dir: directory.NewCached(dir, directory.CacheOptions{TTL: time.Nanosecond, MaxStale: time.Minute})})
	b.srv = httptest.NewServer(b.api.Handler())
	t.Cleanup(b.srv.Close)
	apiB := newAPI(t, api.Config{CellID: "cell-b", DB: dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell)), Log: zap.NewNop(), Blobs: newBucket(t),
		Dir: directory.NewCached(dir, directory.CacheOptions{TTL: time.Nanosecond, MaxStale: time.Minute})})
	b.apiB = apiB
	b.srvB = httptest.NewServer(apiB.Handler())
	t.Cleanup(b.srvB.Close)
	// Each cell runs its mutation-job workers, as cell/cmd/cell does.
	for _, a := range []*api.Server{b.api, apiB} {
		pctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		p := a.Workers(2, 0)
		p.PollInterval, p.ShutdownGrace = 50*time.Millisecond, time.Second
		go func() { _ = p.Run(pctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return b
}

func (b *bundle) get(t *testing.T, path, token string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return b.call(t, call{method: http.MethodGet, path: path, token: token, header: hdr, bare: true})
}

// metrics scrapes the cell's /metrics and fails t on each of want its text lacks.
func (b *bundle) metrics(t *testing.T, want ...string) string {
	t.Helper()
	res, err := http.Get(b.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, w := range want {
		if !strings.Contains(string(m), w) {
			t.Errorf("metrics lack %s", w)
		}
	}
	return string(m)
}

func code(t *testing.T, body []byte) string {
	t.Helper()
	var p struct {
		Code    string `json:"code"`
		TraceID string `json:"trace_id"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not JSON: %s", body)
	}
	if p.TraceID == "" {
		t.Fatalf("no trace_id in %s", body)
	}
	return p.Code
}

// fieldNames are the fields a problem answer names, in order.
func fieldNames(t *testing.T, body []byte) []string {
	t.Helper()
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("not a problem answer: %v: %s", err, body)
	}
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	return out
}

func TestWhoamiAndWorkspaces(t *testing.T) {
	b := setup(t)
	resp, body := b.get(t, "/api/v1/auth/whoami", b.pat)
	if resp.StatusCode != 200 || !strings.Contains(string(body), b.user.ID) || strings.Contains(string(body), b.pat) {
		t.Fatalf("whoami %d %s", resp.StatusCode, body)
	}
	resp, body = b.get(t, "/api/v1/workspaces", b.pat)
	if resp.StatusCode != 200 || !strings.Contains(string(body), b.ws) || !strings.Contains(string(body), b.wsB) || strings.Contains(string(body), b.wsOther) {
		t.Fatalf("list %d %s", resp.StatusCode, body)
	}
	resp, body = b.get(t, "/api/v1/workspaces/"+b.ws, b.pat)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"role":"owner"`) {
		t.Fatalf("detail %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Request-ID") == "" {
		t.Fatal("no X-Request-ID")
	}
}

func TestBadTokensAre401(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	expired, tokExp, _ := b.dir.CreateToken(ctx, b.user.ID, "exp", directory.Scopes, time.Hour)
	if _, err := b.dir.DB.Pool.Exec(ctx, `UPDATE tokens SET expires_at = now() - INTERVAL '1 second' WHERE id = $1`, tokExp.ID); err != nil {
		t.Fatal(err)
	}
	revoked, tokRev, _ := b.dir.CreateToken(ctx, b.user.ID, "rev", directory.Scopes, time.Hour)
	if err := b.dir.RevokeToken(ctx, tokRev.ID); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"missing":      "",
		"malformed":    "svc_pat_short",
		"wrong prefix": "svc_dlg_" + strings.TrimPrefix(b.pat, directory.TokenPrefix),
		"unknown":      directory.NewTokenSecret(),
		"expired":      expired,
		"revoked":      revoked,
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/api/v1/auth/whoami", "/api/v1/workspaces/" + b.ws} {
				resp, body := b.get(t, path, tok)
				if resp.StatusCode != 401 || code(t, body) != "UNAUTHENTICATED" {
					t.Errorf("%s: %d %s", path, resp.StatusCode, body)
				}
			}
		})
	}
	// Basic auth or a token in another header is never a fallback.
	resp, _ := b.get(t, "/api/v1/auth/whoami", "", "Authorization", "Basic "+b.pat, "X-Api-Key", b.pat)
	if resp.StatusCode != 401 {
		t.Errorf("non-bearer scheme: %d", resp.StatusCode)
	}
}

func TestNonMemberIdenticalToNonexistent(t *testing.T) {
	b := setup(t)
	r1, b1 := b.get(t, "/api/v1/workspaces/"+b.wsOther, b.pat)
	r2, b2 := b.get(t, "/api/v1/workspaces/"+ids.New(ids.Workspace), b.pat)
	if r1.StatusCode != 404 || r2.StatusCode != 404 {
		t.Fatalf("statuses %d %d", r1.StatusCode, r2.StatusCode)
	}
	strip := func(body []byte) string {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		delete(m, "trace_id")
		out, _ := json.Marshal(m)
		return string(out)
	}
	if strip(b1) != strip(b2) {
		t.Fatalf("bodies differ:\n%s\n%s", b1, b2)
	}
	for _, h := range []http.Header{r1.Header, r2.Header} {
		h.Del("Date")
		h.Del("X-Request-Id")
	}
	if len(r1.Header) != len(r2.Header) {
		t.Fatalf("headers differ:\n%v\n%v", r1.Header, r2.Header)
	}
	for k := range r1.Header {
		if r1.Header.Get(k) != r2.Header.Get(k) {
			t.Fatalf("header %s differs: %q vs %q", k, r1.Header.Get(k), r2.Header.Get(k))
		}
	}
}

func TestWorkspaceIDChecks(t *testing.T) {
	b := setup(t)
	resp, body := b.get(t, "/api/v1/workspaces/ws_nope", b.pat)
	if resp.StatusCode != 422 || code(t, body) != "WORKSPACE_ID_INVALID" {
		t.Errorf("malformed: %d %s", resp.StatusCode, body)
	}
	// The path's workspace wins over a default X-Workspace-ID naming another.
	resp, body = b.get(t, "/api/v1/workspaces/"+b.ws, b.pat, "X-Workspace-ID", b.wsB)
	if resp.StatusCode != 200 || !strings.Contains(string(body), b.ws) {
		t.Errorf("path and another default header: %d %s", resp.StatusCode, body)
	}
	resp, body = b.get(t, "/api/v1/workspaces/"+b.ws, b.patScope)
	if resp.StatusCode != 403 || code(t, body) != "SCOPE_REQUIRED" || !strings.Contains(string(body), "workspace:read") {
		t.Errorf("scope: %d %s", resp.StatusCode, body)
	}
}

func TestTenancyGuard(t *testing.T) {
	b := setup(t)
	// A workspace placed on cell-b is misdirected here, with the owner as a hint.
	resp, body := b.get(t, "/api/v1/workspaces/"+b.wsB, b.pat, "X-Placement-Epoch", "1")
	if resp.StatusCode != 421 || code(t, body) != "WORKSPACE_MISDIRECTED" || resp.Header.Get("X-Owning-Cell") != "cell-b" {
		t.Fatalf("misdirect: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	// Adopted at epoch 1; a router asserting an older epoch than the cell's is sent back.
	if resp, _ := b.get(t, "/api/v1/workspaces/"+b.ws, b.pat, "X-Placement-Epoch", "1"); resp.StatusCode != 200 {
		t.Fatalf("owner: %d", resp.StatusCode)
	}
	if err := b.api.Guard.Fence(context.Background(), b.ws, 2, "moved", "cell-b"); err != nil {
		t.Fatal(err)
	}
	resp, _ = b.get(t, "/api/v1/workspaces/"+b.ws, b.pat, "X-Placement-Epoch", "1")
	if resp.StatusCode != 421 || resp.Header.Get("X-Owning-Cell") != "cell-b" {
		t.Fatalf("fenced: %d %v", resp.StatusCode, resp.Header)
	}
	// The workspace comes back: the directory names this cell at epoch 3, and a router routing
	// with that epoch is served again (the cell re-adopts it); an older epoch is still sent away.
	if _, err := b.dir.DB.Pool.Exec(context.Background(), `UPDATE placements SET cell_id = 'cell-a', epoch = 3 WHERE workspace_id = $1`, b.ws); err != nil {
		t.Fatal(err)
	}
	if resp, body := b.get(t, "/api/v1/workspaces/"+b.ws, b.pat, "X-Placement-Epoch", "3"); resp.StatusCode != 200 {
		t.Fatalf("came back: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.get(t, "/api/v1/workspaces/"+b.ws, b.pat, "X-Placement-Epoch", "2"); resp.StatusCode != 421 {
		t.Fatalf("older epoch after the return: %d", resp.StatusCode)
	}
}

func TestUnknownPathsAndPrefix(t *testing.T) {
	b := setup(t)
	for _, p := range []string{"/api/external/v1/workspaces", "/api/v1/nope", "/"} {
		resp, body := b.get(t, p, b.pat)
		if resp.StatusCode != 404 || code(t, body) != "NOT_FOUND" {
			t.Errorf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, body := b.get(t, "/openapi.json", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"/api/v1/workspaces/{workspace_id}"`) || strings.Contains(string(body), "/api/external") {
		t.Errorf("openapi: %d", resp.StatusCode)
	}
}

func TestHealthReportsRenderUnavailable(t *testing.T) {
	b := setup(t)
	resp, body := b.get(t, "/api/v1/system/health", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"render":{"status":"unavailable"`) {
		t.Fatalf("health %d %s", resp.StatusCode, body)
	}
	resp, body = b.get(t, "/api/v1/system/version", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"api_version":"v1"`) {
		t.Fatalf("version %d %s", resp.StatusCode, body)
	}
}

func TestStandardsKitFonts(t *testing.T) {
	b := setup(t)
	for path, want := range map[string]string{
		"/api/v1/standards/page":      `"file_types":["tsx","jsx","html"]`,
		"/api/v1/standards/component": `"max_scenes":16`,
		"/api/v1/runtime-kit":         `"name":"layout"`,
		"/api/v1/runtime-kit/chart":   `"BarChart"`,
		"/api/v1/fonts":               `"platform-mono"`,
	} {
		resp, body := b.get(t, path, b.patScope)
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if resp, body := b.get(t, "/api/v1/runtime-kit/nope", b.pat); resp.StatusCode != 404 || code(t, body) != "NOT_FOUND" {
		t.Errorf("unknown kit item: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.get(t, "/api/v1/runtime-kit/Bad!Name", b.pat); resp.StatusCode != 422 || code(t, body) != "VALIDATION_FAILED" {
		t.Errorf("bad kit item: %d %s", resp.StatusCode, body)
	}
}

// newBucket is a real file blob store in a temporary folder.
func newBucket(t *testing.T) *blob.Bucket {
	t.Helper()
	b, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
