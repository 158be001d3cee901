// Package e2e starts the real deployment — router and cell binaries as processes, PostgreSQL
// databases, the directory — and checks routing, the 421 protocol, fault isolation and
// authentication through the router, over real HTTP on loopback.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/shared/proc"
	"slidecells/shared/testenv"

	"slidecells/cell/tenancy"
	"slidecells/deploy/stack"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
	"slidecells/shared/pgserver"
)

// client is the one HTTP client of these tests; its timeout bounds every request.
var client = &http.Client{Timeout: 30 * time.Second}

// waitGroup waits for wg, failing the test when that takes longer than limit.
func waitGroup(t *testing.T, wg *sync.WaitGroup, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("goroutines still running after %v", limit)
	}
}

var binDir string

func TestMain(m *testing.M) {
	binDir = os.Getenv("SLIDECELLS_BIN")
	if binDir == "" {
		tmp, err := os.MkdirTemp("", "slidecells-bin-")
		if err != nil {
			panic(err)
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", tmp+"/", "./router/cmd/router", "./deploy/cmd/cellctl", "./cell/cmd/cell", "./renderer/cmd/renderer")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build binaries:", err)
			os.Exit(1)
		}
		binDir = tmp
		code := m.Run()
		os.RemoveAll(tmp)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

type env struct {
	s     *stack.Stack
	demo  stack.Demo
	dir   string
	other string // a workspace on cell-a the demo user is not a member of
}

// start runs a stack whose cell databases live on the shared test server; directoryURL may
// name a separate server (for the directory-outage test).
func start(t *testing.T, directoryURL string, extra map[string][]string) *env {
	return startWith(t, directoryURL, extra, false)
}

func startWith(t *testing.T, directoryURL string, extra map[string][]string, renderers bool) *env {
	t.Helper()
	return startIn(t, binDir, directoryURL, extra, renderers)
}

// startIn is startWith over the binaries in bin.
func startIn(t *testing.T, bin, directoryURL string, extra map[string][]string, renderers bool) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ctx := context.Background()
	if directoryURL == "" {
		directoryURL = dbtest.NewDatabase(t, nil, "")
	}
	dir := t.TempDir()
	e := &env{dir: dir}
	// Load tests here send far more than a tenant's share through one token; the rate limits
	// have their own test, which sets them.
	withDefaults := map[string][]string{"cell": {"CELL_RATE_WORKSPACE=0", "CELL_RATE_TOKEN=0"}}
	for k, v := range extra {
		withDefaults[k] = append(withDefaults[k], v...)
	}
	extra = withDefaults
	s, err := stack.Start(ctx, stack.Options{
		Dir: dir, BinDir: bin, Cells: []string{"cell-a", "cell-b"},
		DirectoryURL: directoryURL,
		CellURLs: map[string]string{
			"cell-a": dbtest.NewDatabase(t, migrations.FS, migrations.Cell),
			"cell-b": dbtest.NewDatabase(t, migrations.FS, migrations.Cell),
		},
		Env: extra, Renderers: renderers,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	t.Cleanup(func() {
		s.Stop()
		assertNoSecretsInLogs(t, s, e.demo)
		if t.Failed() {
			logWarnings(t, s)
		}
	})
	if e.demo, err = s.SeedDemo(ctx, filepath.Join(dir, "demo.json")); err != nil {
		t.Fatal(err)
	}
	u, err := s.Directory.CreateUser(ctx, "eve@example.com", "Eve")
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Directory.CreateWorkspace(ctx, "Eve's", "cell-a", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Directory.AddMember(ctx, w.ID, u.ID, "owner"); err != nil {
		t.Fatal(err)
	}
	e.other = w.ID
	return e
}

// waitRender waits until every cell's health says render ok: its coordinator has seen a
// renderer ready with the release's profile (renderers finish their launch probe first).
func (e *env) waitRender(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for c, p := range e.s.Cells {
		for {
			resp, err := client.Get(p.URL + "/api/v1/system/health")
			var body []byte
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if bytes.Contains(body, []byte(`"render":{"status":"ok"`)) {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never reported render ok: %v %s", c, err, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
	code   string
}

func (e *env) do(t *testing.T, method, path, token string, body []byte, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, e.s.RouterURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json") // a JSON operation needs it (415); hdr may set another
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	var p struct{ Code string }
	_ = json.Unmarshal(b, &p)
	a.code = p.Code
	return a
}

func (e *env) get(t *testing.T, path, token string, hdr ...string) answer {
	return e.do(t, http.MethodGet, path, token, nil, hdr...)
}

// logWarnings prints, for a failed test, the last warnings and errors of every process of the
// stack (its temporary folder, logs included, is gone after the test).
func logWarnings(t *testing.T, s *stack.Stack) {
	t.Helper()
	for _, f := range s.LogFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var keep []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) ||
				strings.Contains(line, "panic") || strings.Contains(line, "FATAL") {
				keep = append(keep, line)
			}
		}
		if len(keep) > 20 {
			keep = keep[len(keep)-20:]
		}
		if len(keep) > 0 {
			t.Logf("%s, last warnings and errors:\n%s", filepath.Base(f), strings.Join(keep, "\n"))
		}
	}
}

func assertNoSecretsInLogs(t *testing.T, s *stack.Stack, d stack.Demo) {
	for _, f := range s.LogFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, secret := range []string{d.PAT, d.PATReadOnly, directory.TokenPrefix} {
			if secret != "" && bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s contains a token", f)
			}
		}
		if bytes.Contains(bytes.ToLower(b), []byte("bearer ")) {
			t.Errorf("%s contains an Authorization value", f)
		}
	}
}

func TestRoutingByPathAndHeader(t *testing.T) {
	e := start(t, "", nil)
	for ws, cell := range map[string]string{e.demo.WorkspaceA: "cell-a", e.demo.WorkspaceB: "cell-b"} {
		a := e.get(t, "/api/v1/workspaces/"+ws, e.demo.PAT)
		if a.status != 200 || a.header.Get("X-Cell-ID") != cell || a.header.Get("X-Request-ID") == "" {
			t.Fatalf("path %s: %d %s %v", ws, a.status, a.body, a.header)
		}
		// A workspace-scoped route without the ID in the path is routed by X-Workspace-ID.
		a = e.get(t, "/api/v1/projects", e.demo.PAT, "X-Workspace-ID", ws)
		if a.header.Get("X-Cell-ID") != cell {
			t.Fatalf("header %s: served by %q (%d)", ws, a.header.Get("X-Cell-ID"), a.status)
		}
	}
	a := e.get(t, "/api/v1/workspaces", e.demo.PAT)
	if a.status != 200 || !bytes.Contains(a.body, []byte(e.demo.WorkspaceA)) || !bytes.Contains(a.body, []byte(e.demo.WorkspaceB)) {
		t.Fatalf("list: %d %s", a.status, a.body)
	}
	a = e.get(t, "/api/v1/auth/whoami", e.demo.PATReadOnly)
	if a.status != 200 || a.header.Get("X-Cell-ID") == "" {
		t.Fatalf("whoami: %d %s", a.status, a.body)
	}
	// A client cannot pose as the router: a forged epoch is stripped, so the request works.
	a = e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceA, e.demo.PAT, "X-Placement-Epoch", "999", "X-Placement-Cell", "cell-b")
	if a.status != 200 || a.header.Get("X-Cell-ID") != "cell-a" {
		t.Fatalf("forged headers: %d %s", a.status, a.body)
	}
}

func TestBadInputAndAuth(t *testing.T) {
	e := start(t, "", nil)
	ws := e.demo.WorkspaceA
	for _, p := range []string{"/api/v1/workspaces/ws_bad", "/api/v1/workspaces/WS_" + strings.Repeat("a", 26)} {
		if a := e.get(t, p, e.demo.PAT); a.status != 422 || a.code != "WORKSPACE_ID_INVALID" {
			t.Errorf("%s: %d %s", p, a.status, a.body)
		}
	}
	// The path's workspace wins over a client's default X-Workspace-ID.
	if a := e.get(t, "/api/v1/workspaces/"+ws, e.demo.PAT, "X-Workspace-ID", e.demo.WorkspaceB); a.status != 200 || a.header.Get("X-Cell-ID") != "cell-a" {
		t.Errorf("path and another default header: %d %s", a.status, a.body)
	}
	if a := e.get(t, "/api/v1/projects", e.demo.PAT); a.status != 422 {
		t.Errorf("missing workspace: %d %s", a.status, a.body)
	}
	if a := e.get(t, "/api/external/v1/workspaces/"+ws, e.demo.PAT); a.status != 404 {
		t.Errorf("external prefix: %d %s", a.status, a.body)
	}
	ctx := context.Background()
	expired, te, _ := e.s.Directory.CreateToken(ctx, e.demo.UserID, "x", directory.Scopes, time.Hour)
	_, _ = e.s.Directory.DB.Pool.Exec(ctx, `UPDATE tokens SET expires_at = now() - INTERVAL '1 second' WHERE id = $1`, te.ID)
	revoked, tr, _ := e.s.Directory.CreateToken(ctx, e.demo.UserID, "y", directory.Scopes, time.Hour)
	_ = e.s.Directory.RevokeToken(ctx, tr.ID)
	for name, tok := range map[string]string{
		"missing": "", "malformed": "svc_pat_x", "wrong prefix": "svc_oat_" + strings.TrimPrefix(e.demo.PAT, directory.TokenPrefix),
		"unknown": directory.NewTokenSecret(), "expired": expired, "revoked": revoked,
	} {
		for _, p := range []string{"/api/v1/auth/whoami", "/api/v1/workspaces/" + ws, "/api/v1/workspaces/" + ids.New(ids.Workspace)} {
			if a := e.get(t, p, tok); a.status != 401 || a.code != "UNAUTHENTICATED" {
				t.Errorf("%s %s: %d %s", name, p, a.status, a.body)
			}
		}
	}
	// Non-member and nonexistent: same status, same body but the trace ID, same headers but
	// the per-request IDs and the serving cell.
	a1 := e.get(t, "/api/v1/workspaces/"+e.other, e.demo.PAT)
	a2 := e.get(t, "/api/v1/workspaces/"+ids.New(ids.Workspace), e.demo.PAT)
	if a1.status != 404 || a2.status != 404 {
		t.Fatalf("404s: %d %d", a1.status, a2.status)
	}
	if normBody(a1.body) != normBody(a2.body) {
		t.Fatalf("bodies differ:\n%s\n%s", a1.body, a2.body)
	}
	if h1, h2 := normHeader(a1.header), normHeader(a2.header); h1 != h2 {
		t.Fatalf("headers differ:\n%s\n%s", h1, h2)
	}
}

func normBody(b []byte) string {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "trace_id")
	out, _ := json.Marshal(m)
	return string(out)
}

func normHeader(h http.Header) string {
	c := h.Clone()
	for _, k := range []string{"Date", "X-Request-Id", "X-Cell-Id"} {
		c.Del(k)
	}
	var b strings.Builder
	_ = c.Write(&b)
	return b.String()
}

func TestStalePlacementRetriesOnOwner(t *testing.T) {
	e := start(t, "", nil)
	ctx := context.Background()
	ws := e.demo.WorkspaceA
	if a := e.get(t, "/api/v1/workspaces/"+ws, e.demo.PAT); a.header.Get("X-Cell-ID") != "cell-a" {
		t.Fatalf("warm: %d %v", a.status, a.header)
	}
	// What a move does at its flip: the source is fenced and the directory names the target at
	// a newer epoch. The router still holds cell-a@1 in its cache.
	if _, err := e.s.Directory.DB.Pool.Exec(ctx, `UPDATE placements SET cell_id = 'cell-b', epoch = 2 WHERE workspace_id = $1`, ws); err != nil {
		t.Fatal(err)
	}
	fence(t, e.s.CellDBURL["cell-a"], ws, 2, "cell-b")
	a := e.get(t, "/api/v1/workspaces/"+ws, e.demo.PAT)
	if a.status != 200 || a.header.Get("X-Cell-ID") != "cell-b" {
		t.Fatalf("after move: %d %s %v", a.status, a.body, a.header)
	}
	// A write whose body must be resent: move the workspace back, so the router's entry
	// (cell-b@2) is stale again, and create a project through it.
	if _, err := e.s.Directory.DB.Pool.Exec(ctx, `UPDATE placements SET cell_id = 'cell-a', epoch = 3 WHERE workspace_id = $1`, ws); err != nil {
		t.Fatal(err)
	}
	fence(t, e.s.CellDBURL["cell-b"], ws, 3, "cell-a")
	a = e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"Moved twice"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "e2e-move-1", "Content-Type", "application/json")
	if a.status != http.StatusCreated || a.header.Get("X-Cell-ID") != "cell-a" || !bytes.Contains(a.body, []byte(`"name":"Moved twice"`)) {
		t.Fatalf("write after second move: %d %s %v", a.status, a.body, a.header)
	}
	// The fenced cell took no write: the project exists only on the owner.
	a = e.get(t, "/api/v1/projects", e.demo.PAT, "X-Workspace-ID", ws)
	if a.header.Get("X-Cell-ID") != "cell-a" || bytes.Count(a.body, []byte(`"id":"prj_`)) != 1 {
		t.Fatalf("projects after the move: %s %v", a.body, a.header)
	}
}

func fence(t *testing.T, cellDBURL, ws string, epoch int64, owner string) {
	t.Helper()
	g := &tenancy.Guard{DB: dbtest.Open(t, cellDBURL)}
	if err := g.Fence(context.Background(), ws, epoch, "moved", owner); err != nil {
		t.Fatal(err)
	}
}

func TestStoppedCellFailsFastOtherServes(t *testing.T) {
	e := start(t, "", nil)
	e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceB, e.demo.PAT)
	e.s.Cells["cell-b"].Stop()
	for i := 0; i < 5; i++ {
		a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceB, e.demo.PAT)
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || a.code != "CELL_UNAVAILABLE" {
			t.Fatalf("stopped cell: %d %s %v", a.status, a.body, a.header)
		}
		if a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceA, e.demo.PAT); a.status != 200 {
			t.Fatalf("other cell: %d %s", a.status, a.body)
		}
	}
}

func TestFrozenCellDoesNotSlowOthers(t *testing.T) {
	e := start(t, "", map[string][]string{"router": {"ROUTER_CELL_TIMEOUT=1s"}})
	e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceB, e.demo.PAT)
	b := e.s.Cells["cell-b"]
	if err := b.Pause(true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Pause(false) }()
	waitStopped(t, b.Pid())
	// Keep requests to the frozen cell in flight while the other cell is used.
	var wg sync.WaitGroup
	frozen := make(chan answer, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frozen <- e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceB, e.demo.PAT)
		}()
	}
	for i := 0; i < 20; i++ {
		if a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceA, e.demo.PAT); a.status != 200 {
			t.Fatalf("other cell while one is frozen: %d %s", a.status, a.body)
		}
	}
	waitGroup(t, &wg, time.Minute)
	close(frozen)
	for a := range frozen {
		if a.status != http.StatusServiceUnavailable || a.code != "CELL_UNAVAILABLE" {
			t.Fatalf("frozen cell answered %d %s (X-Cell-ID %q; cell-b state %s)", a.status, a.body, a.header.Get("X-Cell-ID"), procState(b.Pid()))
		}
	}
	// Once the breaker is open, the frozen cell's requests fail with CELL_UNAVAILABLE at once.
	opened := false
	for i := 0; i < 10 && !opened; i++ {
		a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceB, e.demo.PAT)
		opened = a.status == 503 && a.code == "CELL_UNAVAILABLE" && a.header.Get("Retry-After") != ""
	}
	if !opened {
		t.Fatal("breaker never reported the frozen cell unavailable")
	}
}

// procState is the state letter of a process (/proc/<pid>/stat), "T" when stopped.
func procState(pid int) string {
	s, err := proc.State(pid)
	if err != nil {
		return err.Error()
	}
	return s
}

// waitStopped waits until a process SIGSTOP was sent to is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, 10*time.Millisecond, fmt.Sprintf("process %d stopped", pid), func() error {
		if s := procState(pid); s != "T" {
			return fmt.Errorf("state %s", s)
		}
		return nil
	})
}

func TestDirectoryOutageServesCachedForBoundedTime(t *testing.T) {
	ctx := context.Background()
	// PostgreSQL runs as the postgres user when we are root: its folder must be reachable, and
	// t.TempDir's parent is private.
	pgDir, err := os.MkdirTemp("", "slidecells-dirpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pgDir) })
	_ = os.Chmod(pgDir, 0o755)
	pg, err := pgserver.Start(ctx, pgserver.Options{Dir: filepath.Join(pgDir, "pg")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pg.Stop() }()
	if err := pg.CreateDatabase(ctx, "directory"); err != nil {
		t.Fatal(err)
	}
	const maxStale = 6 * time.Second
	e := start(t, pg.URL("directory"), map[string][]string{
		"router": {"ROUTER_PLACEMENT_TTL=1s", "ROUTER_PLACEMENT_MAX_STALE=" + maxStale.String()},
		"cell":   {"CELL_DIRECTORY_CACHE_TTL=1s", "CELL_DIRECTORY_MAX_STALE=" + maxStale.String()},
	})
	for _, ws := range []string{e.demo.WorkspaceA, e.demo.WorkspaceB} {
		if a := e.get(t, "/api/v1/workspaces/"+ws, e.demo.PAT); a.status != 200 {
			t.Fatalf("warm: %d %s", a.status, a.body)
		}
	}
	e.s.Directory.Close()
	e.s.Directory = nil
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(1500 * time.Millisecond) // past the TTLs: answers now come from stale entries
	for _, ws := range []string{e.demo.WorkspaceA, e.demo.WorkspaceB} {
		if a := e.get(t, "/api/v1/workspaces/"+ws, e.demo.PAT); a.status != 200 {
			t.Fatalf("directory down, cached: %d %s", a.status, a.body)
		}
	}
	time.Sleep(time.Until(stopped.Add(maxStale + 2*time.Second)))
	if a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceA, e.demo.PAT); a.status != 503 {
		t.Fatalf("directory down past max stale: %d %s", a.status, a.body)
	}
}

// TestHealthReportsRenderersOfTheCell: each cell runs two renderers, each reporting the
// environment digest of the one profile manifest the stack wrote with `renderer profile` (the
// digest the cell is given the same file for), under the worker IDs and addresses of the cell's
// RENDER_WORKERS_CONFIG. Without its renderers a cell reports render unavailable, and ordinary
// API traffic goes on.
func TestHealthReportsRenderersOfTheCell(t *testing.T) {
	e := startWith(t, "", nil, true)
	e.waitRender(t)
	cred, err := os.ReadFile(filepath.Join(e.dir, "keys", "renderer-service-credential"))
	if err != nil {
		t.Fatal(err)
	}
	if e.s.ProfileDigest == "" {
		t.Fatal("no profile digest")
	}
	for _, cell := range []string{"cell-a", "cell-b"} {
		cenv := envMap(e.s.Cells[cell].Env())
		if cenv["RENDER_PROFILE_MANIFEST"] != e.s.ProfileManifest {
			t.Errorf("%s manifest = %q, renderers' = %q", cell, cenv["RENDER_PROFILE_MANIFEST"], e.s.ProfileManifest)
		}
		var workers []struct {
			WorkerID string `json:"worker_id"`
			URL      string `json:"url"`
		}
		if err := json.Unmarshal([]byte(cenv["RENDER_WORKERS_CONFIG"]), &workers); err != nil || len(workers) != 2 || len(e.s.Renderers[cell]) != 2 {
			t.Fatalf("%s RENDER_WORKERS_CONFIG = %q (%v), renderers %d", cell, cenv["RENDER_WORKERS_CONFIG"], err, len(e.s.Renderers[cell]))
		}
		for i, w := range workers {
			if w.WorkerID != fmt.Sprintf("%s-r%d", cell, i+1) {
				t.Errorf("%s worker %d is %q", cell, i, w.WorkerID)
			}
			req, _ := http.NewRequest(http.MethodGet, w.URL+"/internal/render/v1/capabilities", nil)
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(cred)))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var caps struct {
				WorkerID          string `json:"worker_id"`
				EnvironmentDigest string `json:"environment_digest"`
			}
			err = json.NewDecoder(resp.Body).Decode(&caps)
			resp.Body.Close()
			if err != nil || caps.WorkerID != w.WorkerID || caps.EnvironmentDigest != e.s.ProfileDigest {
				t.Errorf("%s capabilities = %+v (%v), want worker %s with digest %s", w.URL, caps, err, w.WorkerID, e.s.ProfileDigest)
			}
		}
	}
	// Without its renderers a cell reports render unavailable, never a pass.
	for _, r := range e.s.Renderers["cell-a"] {
		r.Stop()
	}
	// The coordinator reads its workers every second; within a few its health says so.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(e.s.Cells["cell-a"].URL + "/api/v1/system/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(body, []byte(`"render":{"status":"unavailable"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health without renderers: %s", body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if a := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceA, e.demo.PAT); a.status != 200 || a.header.Get("X-Cell-ID") != "cell-a" {
		t.Fatalf("API without renderers: %d %s", a.status, a.body)
	}
	if a := e.get(t, "/api/v1/workspaces", e.demo.PAT); a.status != 200 {
		t.Fatalf("workspace list without renderers: %d %s", a.status, a.body)
	}
}

// envMap turns KEY=value pairs into a map (the last value wins).
func envMap(kvs []string) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
