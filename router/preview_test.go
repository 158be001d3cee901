package router

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sony/gobreaker/v2"

	"slidecells/shared/cellproto"
	"slidecells/shared/problem"
)

// fakePreviewHost records what reaches it and answers like a preview host: a document with a
// session cookie.
type fakePreviewHost struct {
	name string
	srv  *httptest.Server

	mu       sync.Mutex
	requests []seen
	rawQuery []string
	hits     atomic.Int32
	// misdirect makes it answer 421, as when its cell no longer hosts the workspace.
	misdirect atomic.Bool
}

func newFakePreviewHost(t *testing.T, name string) *fakePreviewHost {
	t.Helper()
	p := &fakePreviewHost{name: name}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		p.requests = append(p.requests, seen{method: r.Method, path: r.URL.Path, header: r.Header.Clone()})
		p.rawQuery = append(p.rawQuery, r.URL.RawQuery)
		p.mu.Unlock()
		if p.misdirect.Load() {
			problem.Write(w, problem.New(problem.WorkspaceMisdirected, "not here"), "")
			return
		}
		w.Header().Set("Set-Cookie", "preview_session=s1; Path=/preview/w/; HttpOnly")
		w.Header().Set(cellproto.HeaderOwningCell, "secret")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"cell": p.name, "path": r.URL.Path})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePreviewHost) last(t *testing.T) (seen, string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.requests) == 0 {
		t.Fatalf("%s received no request", p.name)
	}
	return p.requests[len(p.requests)-1], p.rawQuery[len(p.rawQuery)-1]
}

func (a answer) wantPreview(t *testing.T, host, cellID string) {
	t.Helper()
	if a.status != http.StatusOK || a.cell != host || a.header.Get(cellproto.HeaderCellID) != cellID {
		t.Fatalf("got %d from %q (X-Cell-ID %q, problem %q), want 200 from %s of %s",
			a.status, a.cell, a.header.Get(cellproto.HeaderCellID), a.problem.Code, host, cellID)
	}
}

// setupPreview is setup with a preview host for cell-a; cell-b has none.
func setupPreview(t *testing.T, opts ...option) (*bundle, *fakePreviewHost) {
	t.Helper()
	b := setup(t, opts...)
	pa := newFakePreviewHost(t, "preview-a")
	b.setPreview(t, "cell-a", pa.srv.URL)
	return b, pa
}

func (b *bundle) setPreview(t *testing.T, cellID, url string) {
	t.Helper()
	b.dir.mu.Lock()
	for i := range b.dir.cells {
		if b.dir.cells[i].ID == cellID {
			b.dir.cells[i].PreviewURL = url
		}
	}
	b.dir.mu.Unlock()
	if err := b.rt.RefreshCells(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPreviewPathsGoToTheOwningCellsPreviewHost(t *testing.T) {
	t.Parallel()
	b, pa := setupPreview(t)
	path := "/preview/w/" + b.wsA + "/snapshots/snap_x"
	res := b.do(t, http.MethodGet, path+"?access=tok",
		nil,
		"Authorization", "Bearer svc_pat_secret",
		"Cookie", "preview_session=s0; theme=dark",
		cellproto.HeaderPlacementEpoch, "999",
		cellproto.HeaderPlacementCell, "cell-b",
		cellproto.HeaderWorkspaceID, b.wsB, // the path's workspace wins for previews
		"X-Forwarded-For", "6.6.6.6",
	)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"preview-a"`) {
		t.Fatalf("answer %d %s", res.StatusCode, body)
	}
	if got := res.Header.Get(cellproto.HeaderCellID); got != "cell-a" {
		t.Errorf("X-Cell-ID = %q, want cell-a", got)
	}
	if res.Header.Get("Set-Cookie") == "" || res.Header.Get(cellproto.HeaderOwningCell) != "" {
		t.Errorf("answer headers: Set-Cookie %q, X-Owning-Cell %q", res.Header.Get("Set-Cookie"), res.Header.Get(cellproto.HeaderOwningCell))
	}
	got, rawQuery := pa.last(t)
	if got.path != path || rawQuery != "access=tok" {
		t.Errorf("preview host saw %s?%s, want the path unchanged", got.path, rawQuery)
	}
	for k, want := range map[string]string{
		"Authorization":                "",
		"Cookie":                       "preview_session=s0; theme=dark",
		cellproto.HeaderPlacementEpoch: "1",
		cellproto.HeaderPlacementCell:  "cell-a",
		cellproto.HeaderRequestID:      res.Header.Get(cellproto.HeaderRequestID),
		"X-Forwarded-For":              "127.0.0.1",
	} {
		if v := strings.Join(got.header.Values(k), ","); v != want {
			t.Errorf("preview host saw %s = %q, want %q", k, v, want)
		}
	}
	if n := b.a.hits.Load() + b.b.hits.Load(); n != 0 {
		t.Errorf("cell APIs received %d requests, want none", n)
	}
	// The workspace's API still goes to the cell, with its Authorization.
	b.get(t, "/api/v1/workspaces/"+b.wsA, "Authorization", "Bearer svc_pat_secret").wantCell(t, "cell-a")
	if got := b.a.last(t).header.Get("Authorization"); got != "Bearer svc_pat_secret" {
		t.Errorf("cell API lost the Authorization header: %q", got)
	}
}

// A preview path of a workspace the directory does not know goes to a preview host, like its
// API paths go to a cell: the preview host answers it the way it answers a known workspace's
// refused document, so neither the router's answer nor its absence tells which IDs exist.
func TestPreviewOfAnUnknownWorkspaceGoesToAHashedPreviewHost(t *testing.T) {
	t.Parallel()
	b, pa := setupPreview(t)
	pb := newFakePreviewHost(t, "preview-b")
	b.setPreview(t, "cell-b", pb.srv.URL)
	unknown := b.get(t, "/preview/w/ws_"+strings.Repeat("a", 26)+"/snapshots/snap_x")
	if unknown.status != http.StatusOK || pa.hits.Load()+pb.hits.Load() != 1 {
		t.Fatalf("unknown workspace: %d, preview hosts asked %d times; want it forwarded to one", unknown.status, pa.hits.Load()+pb.hits.Load())
	}
	if n := b.a.hits.Load() + b.b.hits.Load(); n != 0 {
		t.Errorf("%d preview requests reached a cell's API", n)
	}
	b.get(t, "/preview/w/ws_bad/snapshots/snap_x").wantProblem(t, http.StatusUnprocessableEntity, problem.WorkspaceIDInvalid)
}

func TestPreviewWithoutAPreviewHostIsUnavailable(t *testing.T) {
	t.Parallel()
	b, _ := setupPreview(t)
	a := b.get(t, "/preview/w/"+b.wsB+"/snapshots/snap_x")
	a.wantProblem(t, http.StatusServiceUnavailable, problem.PreviewUnavailable)
	if a.header.Get(cellproto.HeaderCellID) != "cell-b" || a.header.Get("Retry-After") == "" {
		t.Errorf("X-Cell-ID %q, Retry-After %q", a.header.Get(cellproto.HeaderCellID), a.header.Get("Retry-After"))
	}
	if n := b.b.hits.Load(); n != 0 {
		t.Errorf("cell-b's API received %d preview requests", n)
	}
	// The directory gives cell-b a preview host: the router takes it at the next reread.
	pb := newFakePreviewHost(t, "preview-b")
	b.setPreview(t, "cell-b", pb.srv.URL+"/")
	b.get(t, "/preview/w/"+b.wsB+"/snapshots/snap_x").wantPreview(t, "preview-b", "cell-b")
	// And moves it.
	pb2 := newFakePreviewHost(t, "preview-b2")
	b.setPreview(t, "cell-b", pb2.srv.URL)
	b.get(t, "/preview/w/"+b.wsB+"/snapshots/snap_x").wantPreview(t, "preview-b2", "cell-b")
	// A preview URL with a path is refused (the path must stay unchanged): none.
	b.setPreview(t, "cell-b", pb2.srv.URL+"/prefix")
	b.get(t, "/preview/w/"+b.wsB+"/snapshots/snap_x").wantProblem(t, http.StatusServiceUnavailable, problem.PreviewUnavailable)
}

// TestPreviewFollowsAMovedWorkspace: a 421 from the preview host is the router's business, as
// from a cell: it reads the placement again and retries once, on the new cell's preview host.
func TestPreviewFollowsAMovedWorkspace(t *testing.T) {
	t.Parallel()
	b, pa := setupPreview(t)
	pb := newFakePreviewHost(t, "preview-b")
	b.setPreview(t, "cell-b", pb.srv.URL)
	path := "/preview/w/" + b.wsA + "/snapshots/snap_x"
	b.get(t, path).wantPreview(t, "preview-a", "cell-a")
	b.dir.place(b.wsA, "cell-b", 2)
	pa.misdirect.Store(true)
	b.get(t, path).wantPreview(t, "preview-b", "cell-b")
	if got, _ := pb.last(t); got.header.Get(cellproto.HeaderPlacementEpoch) != "2" {
		t.Errorf("epoch on the retry = %q, want 2", got.header.Get(cellproto.HeaderPlacementEpoch))
	}
}

// TestDeadPreviewHostLeavesTheCellAPIAlone: the preview host's failures open its own breaker,
// not the cell's.
func TestDeadPreviewHostLeavesTheCellAPIAlone(t *testing.T) {
	t.Parallel()
	b, pa := setupPreview(t, func(c *Config) { c.BreakerFailures = 2 })
	pa.srv.Close()
	for range 3 {
		b.get(t, "/preview/w/"+b.wsA+"/snapshots/snap_x").wantProblem(t, http.StatusServiceUnavailable, problem.PreviewUnavailable)
	}
	c := b.rt.cells.Load().byID["cell-a"]
	if st := c.preview.Load().breaker.State(); st != gobreaker.StateOpen {
		t.Fatalf("preview breaker %v, want open", st)
	}
	if st := c.breaker.State(); st != gobreaker.StateClosed {
		t.Fatalf("cell breaker %v, want closed", st)
	}
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	// A cell marked down serves no previews either.
	b.dir.mu.Lock()
	b.dir.cells[0].State = CellDown
	b.dir.mu.Unlock()
	_ = b.rt.RefreshCells(context.Background())
	b.get(t, "/preview/w/"+b.wsA+"/snapshots/snap_x").wantProblem(t, http.StatusServiceUnavailable, problem.CellUnavailable)
}

// TestInternalPathsAreNeverForwarded: /internal/… (the renderer's and the preview host's
// service APIs live there) and the preview host's unprefixed document form are 404 from the
// router, however they are spelled, and reach no cell and no preview host.
func TestInternalPathsAreNeverForwarded(t *testing.T) {
	t.Parallel()
	b, pa := setupPreview(t)
	ws := b.wsA
	paths := []string{
		"/internal",
		"/internal/",
		"/internal/preview/v1/snapshots/snap_x",
		"/internal/render/v1/capabilities",
		"/internal/render/v1/executions",
		"/internal/render/v1/executions/ra_x?state=running&wait_ms=1000", // the receipt long-poll
		"/snapshots/snap_x",
		"/preview/snapshots/snap_x",
		"/preview/w",
		"/INTERNAL/preview/v1/snapshots/snap_x",
	}
	for _, p := range paths {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			b.send(t, m, p, nil, cellproto.HeaderWorkspaceID, ws).wantProblem(t, http.StatusNotFound, problem.NotFound)
		}
	}
	// Spellings that a client's library would clean are sent raw.
	for _, p := range []string{
		"/preview/w/" + ws + "/../../internal/preview/v1/snapshots/snap_x",
		"/preview/w/" + ws + "/%2e%2e/%2e%2e/internal/preview/v1/snapshots/snap_x",
		"/preview/w/" + ws + "/snapshots/..%2f..%2f..%2finternal%2fpreview%2fv1",
		"/preview/w/" + ws + "//internal/preview/v1/snapshots/snap_x",
		"/api/v1/workspaces/" + ws + "/../../../internal/render/v1/capabilities",
		"/api/v1/%2e%2e/%2e%2e/internal/render/v1/capabilities",
		"//internal/render/v1/capabilities",
	} {
		status := rawGet(t, b.srv.Listener.Addr().String(), p)
		if status != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, status)
		}
	}
	if n := pa.hits.Load() + b.a.hits.Load() + b.b.hits.Load(); n != 0 {
		t.Errorf("%d requests reached a cell or preview host", n)
	}
}

// rawGet sends a request line exactly as given and returns the status.
func rawGet(t *testing.T, addr, target string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+target+" HTTP/1.1\r\nHost: router\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
