package router

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"slidecells/router/placement"
	"slidecells/shared/cellproto"
	"slidecells/shared/ids"
	"slidecells/shared/logging"
	"slidecells/shared/problem"
	"slidecells/shared/testenv"
	"slidecells/shared/tracing"
)

// testClient is the one HTTP client of the package's tests; its timeout bounds every request
// (the slowest deliberate answer is a frozen cell's, released by its test).
var testClient = &http.Client{Timeout: time.Minute}

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

// fakeDirectory is the placement and cell source of the tests.
type fakeDirectory struct {
	mu         sync.Mutex
	placements map[string]placement.Placement
	cells      []Cell
	err        error // returned by every read while set
	lookups    atomic.Int32
}

func (d *fakeDirectory) Placement(_ context.Context, ws string) (placement.Placement, error) {
	d.lookups.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return placement.Placement{}, d.err
	}
	p, ok := d.placements[ws]
	if !ok {
		return placement.Placement{}, placement.ErrNotFound
	}
	return p, nil
}

func (d *fakeDirectory) Cells(context.Context) ([]Cell, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, d.err
	}
	return append([]Cell(nil), d.cells...), nil
}

func (d *fakeDirectory) place(ws, cellID string, epoch int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.placements[ws] = placement.Placement{CellID: cellID, Epoch: epoch}
}

func (d *fakeDirectory) setErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

// seen is one request as a fake cell received it.
type seen struct {
	method string
	path   string
	header http.Header
	body   []byte
	remote string // the router's side of the hop connection
}

// fakeCell behaves like a cell's tenancy guard: it answers a workspace request only at the
// epoch it hosts the workspace at, 421 otherwise, and 404 for epoch 0.
type fakeCell struct {
	id  string
	srv *httptest.Server

	mu       sync.Mutex
	hosts    map[string]int64
	requests []seen
	ready    int    // /readyz status
	hangs    bool   // /readyz answers only once the prober gives up (a frozen cell, or a stalled router)
	onReady  func() // called by /readyz before it answers
	// block, when set, is waited on by API requests (a frozen cell); entered is told first.
	block   chan struct{}
	entered chan struct{}
	hits    atomic.Int32 // API requests received
}

func newFakeCell(t *testing.T, id string) *fakeCell {
	t.Helper()
	c := &fakeCell{id: id, hosts: map[string]int64{}, ready: http.StatusOK}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *fakeCell) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/readyz" {
		c.mu.Lock()
		st, hangs, onReady := c.ready, c.hangs, c.onReady
		c.mu.Unlock()
		if onReady != nil {
			onReady()
		}
		if hangs {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(st)
		return
	}
	c.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.requests = append(c.requests, seen{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body, remote: r.RemoteAddr})
	block, entered := c.block, c.entered
	c.mu.Unlock()
	if block != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	// Internal headers a careless cell might send; the router must not pass them on.
	w.Header().Set(cellproto.HeaderOwningCell, "cell-secret")
	w.Header().Set(cellproto.HeaderCellID, "not-"+c.id)
	if e := r.Header.Get(cellproto.HeaderPlacementEpoch); e != "" {
		ws := r.Header.Get(cellproto.HeaderWorkspaceID)
		if p, ok := workspaceInPath(r.URL.Path); ok {
			ws = p
		}
		c.mu.Lock()
		hosted, ok := c.hosts[ws]
		c.mu.Unlock()
		switch {
		case e == "0":
			problem.Write(w, problem.ErrNotFound(), r.Header.Get(cellproto.HeaderRequestID))
			return
		case !ok || strconv.FormatInt(hosted, 10) != e:
			w.Header().Set(cellproto.HeaderOwningCell, "")
			problem.Write(w, problem.New(problem.WorkspaceMisdirected, "not here"), r.Header.Get(cellproto.HeaderRequestID))
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"cell": c.id, "path": r.URL.Path, "body_len": len(body)})
}

func (c *fakeCell) host(ws string, epoch int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hosts[ws] = epoch
}

func (c *fakeCell) unhost(ws string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.hosts, ws)
}

func (c *fakeCell) setReady(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = status
}

func (c *fakeCell) setHangs(hangs bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hangs = hangs
}

func (c *fakeCell) last(t *testing.T) seen {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.requests) == 0 {
		t.Fatalf("%s received no request", c.id)
	}
	return c.requests[len(c.requests)-1]
}

// clock is a settable time source for the placement cache.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bundle is what setup returns: a router in front of two cells, cell-a and cell-b, with one
// workspace placed on each.
type bundle struct {
	rt       *Router
	srv      *publicSrv       // the public listener
	ops      *httptest.Server // the internal listener (OpsHandler)
	dir      *fakeDirectory
	a, b     *fakeCell
	wsA, wsB string
	clock    *clock
	logs     *observer.ObservedLogs // events
	access   *testenv.Buffer        // access-log lines
}

type option func(*Config)

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	b := &bundle{
		a:     newFakeCell(t, "cell-a"),
		b:     newFakeCell(t, "cell-b"),
		wsA:   ids.New(ids.Workspace),
		wsB:   ids.New(ids.Workspace),
		clock: &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	b.dir = &fakeDirectory{
		placements: map[string]placement.Placement{},
		cells: []Cell{
			{ID: "cell-a", URL: b.a.srv.URL, State: CellActive},
			{ID: "cell-b", URL: b.b.srv.URL, State: CellActive},
		},
	}
	b.dir.place(b.wsA, "cell-a", 1)
	b.a.host(b.wsA, 1)
	b.dir.place(b.wsB, "cell-b", 1)
	b.b.host(b.wsB, 1)

	core, logs := observer.New(zap.InfoLevel)
	b.logs = logs
	b.access = &testenv.Buffer{}
	_, access, err := logging.NewWithAccess("router", logging.Options{Output: b.access})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Placements:         b.dir,
		Cells:              b.dir,
		Cache:              placement.Config{TTL: 30 * time.Second, MaxStale: 5 * time.Minute, NegativeTTL: 5 * time.Second},
		ProbeInterval:      -1, // tests probe explicitly with ProbeCells
		CellsRefresh:       -1,
		BreakerOpenTimeout: time.Hour, // an opened breaker stays open for the whole test
		Logger:             zap.New(core),
		AccessLog:          access,
		Now:                b.clock.Now,
		UnknownHashKey:     []byte("test-key"),
	}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	b.rt = rt
	b.srv = startPublic(t, rt.Handler(), ServerConfig{})
	b.ops = httptest.NewServer(rt.OpsHandler())
	t.Cleanup(b.ops.Close)
	return b
}

// startPublic serves h as the router binary serves its public listener (NewPublicServer on a
// TCP listener).
func startPublic(t *testing.T, h http.Handler, sc ServerConfig) *publicSrv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewPublicServer(h, sc)
	if rt, ok := h.(*Router); ok {
		rt.ObservePublic(srv) // as the router binary does
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &publicSrv{URL: "http://" + ln.Addr().String(), Listener: ln}
}

// publicSrv is a public server started by startPublic.
type publicSrv struct {
	URL      string
	Listener net.Listener
}

func (b *bundle) cell(id string) *fakeCell {
	if id == "cell-a" {
		return b.a
	}
	return b.b
}

// do sends a request through the router.
func (b *bundle) do(t *testing.T, method, path string, body io.Reader, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// answer is a decoded response: the status, headers and either the fake cell's JSON or a
// problem body.
type answer struct {
	status  int
	header  http.Header
	cell    string // from the fake cell's body
	problem problem.Body
}

func (b *bundle) get(t *testing.T, path string, header ...string) answer {
	t.Helper()
	return b.send(t, http.MethodGet, path, nil, header...)
}

func (b *bundle) send(t *testing.T, method, path string, body io.Reader, header ...string) answer {
	t.Helper()
	res := b.do(t, method, path, body, header...)
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: res.StatusCode, header: res.Header}
	if strings.HasPrefix(res.Header.Get("Content-Type"), problem.ContentType) {
		if err := json.Unmarshal(raw, &a.problem); err != nil {
			t.Fatalf("problem body %q: %v", raw, err)
		}
	} else {
		var v struct{ Cell string }
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("cell body %q: %v", raw, err)
		}
		a.cell = v.Cell
	}
	// Every answer, from a cell or from the router, carries both headers.
	if _, ok := res.Header[http.CanonicalHeaderKey(cellproto.HeaderCellID)]; !ok {
		t.Errorf("%s %s: no X-Cell-ID", method, path)
	}
	if res.Header.Get(cellproto.HeaderRequestID) == "" {
		t.Errorf("%s %s: no X-Request-ID", method, path)
	}
	return a
}

func (a answer) wantProblem(t *testing.T, status int, code problem.Code) {
	t.Helper()
	if a.status != status || a.problem.Code != code {
		t.Fatalf("got %d %q, want %d %s", a.status, a.problem.Code, status, code)
	}
	if a.problem.TraceID == "" || a.problem.TraceID != a.header.Get(cellproto.HeaderRequestID) {
		t.Errorf("trace_id %q, X-Request-ID %q: want equal and set", a.problem.TraceID, a.header.Get(cellproto.HeaderRequestID))
	}
}

func (a answer) wantCell(t *testing.T, id string) {
	t.Helper()
	if a.status != http.StatusOK || a.cell != id || a.header.Get(cellproto.HeaderCellID) != id {
		t.Fatalf("got %d from %q (X-Cell-ID %q, problem %q), want 200 from %s",
			a.status, a.cell, a.header.Get(cellproto.HeaderCellID), a.problem.Code, id)
	}
}

func TestRoutesByPathAndHeader(t *testing.T) {
	t.Parallel()
	b := setup(t)

	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	if got := b.a.last(t).header.Get(cellproto.HeaderPlacementEpoch); got != "1" {
		t.Errorf("epoch sent = %q, want 1", got)
	}
	b.get(t, "/api/v1/workspaces/"+b.wsB+"/capabilities").wantCell(t, "cell-b")
	b.get(t, "/workspaces/"+b.wsA+"/font-families").wantCell(t, "cell-a")
	b.get(t, "/api/v1/pages/pg_x/dependencies", cellproto.HeaderWorkspaceID, b.wsB).wantCell(t, "cell-b")
	if got := b.b.last(t).header.Get(cellproto.HeaderPlacementCell); got != "cell-b" {
		t.Errorf("X-Placement-Cell = %q, want cell-b", got)
	}
}

// TestWorkspaceRouteSendsWhatAnyCellRouteSends: the workspace route once cost more CPU per
// request than a route without a workspace, in the router and in the cell (issue #23). It must
// reach the cell over the same pooled keep-alive connection and differ only by the epoch
// header, so that a cell pays nothing more than reading one header for it.
func TestWorkspaceRouteSendsWhatAnyCellRouteSends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dir.mu.Lock()
	b.dir.cells = b.dir.cells[:1] // cell-a only, so that routes without a workspace go there too
	b.dir.mu.Unlock()
	if err := b.rt.RefreshCells(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []seen
	for range 3 {
		b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
		got = append(got, b.a.last(t))
		b.get(t, "/api/v1/system/version").wantCell(t, "cell-a")
		got = append(got, b.a.last(t))
	}
	for _, s := range got[1:] {
		if s.remote != got[0].remote {
			t.Fatalf("the cell saw connections from %s and %s: want one pooled connection", got[0].remote, s.remote)
		}
	}
	ws, plain := got[0].header, got[1].header
	for k := range ws {
		if _, ok := plain[k]; !ok && k != http.CanonicalHeaderKey(cellproto.HeaderPlacementEpoch) {
			t.Errorf("the workspace route sends %s: %q; the route without a workspace does not", k, ws[k])
		}
	}
	for k := range plain {
		if _, ok := ws[k]; !ok {
			t.Errorf("the route without a workspace sends %s: %q; the workspace route does not", k, plain[k])
		}
	}
}

func TestRoutesWithoutWorkspaceGoToAnyCell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	served := map[string]bool{}
	for range 4 {
		a := b.get(t, "/api/v1/system/version")
		if a.status != http.StatusOK {
			t.Fatalf("status %d", a.status)
		}
		served[a.cell] = true
	}
	if !served["cell-a"] || !served["cell-b"] {
		t.Errorf("routes without a workspace served by %v, want both cells", served)
	}
	if got := b.a.last(t).header.Get(cellproto.HeaderPlacementEpoch); got != "" {
		t.Errorf("a route without a workspace carried epoch %q", got)
	}
}

func TestRouterAnswersBadRequestsItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.get(t, "/api/v1/workspaces/ws_short").wantProblem(t, http.StatusUnprocessableEntity, problem.WorkspaceIDInvalid)
	b.get(t, "/api/v1/pages", cellproto.HeaderWorkspaceID, "nope").wantProblem(t, http.StatusUnprocessableEntity, problem.WorkspaceIDInvalid)
	b.get(t, "/api/v1/pages", cellproto.HeaderWorkspaceID, b.wsA, cellproto.HeaderWorkspaceID, b.wsB).wantProblem(t, http.StatusUnprocessableEntity, problem.WorkspaceIDConflict)
	b.get(t, "/api/v1/pages").wantProblem(t, http.StatusUnprocessableEntity, problem.WorkspaceRequired)
	b.get(t, "/api/external/v1/workspaces/"+b.wsA).wantProblem(t, http.StatusNotFound, problem.NotFound)
	b.get(t, "/api/external/v1/system/version").wantProblem(t, http.StatusNotFound, problem.NotFound)
	a := b.get(t, "/nothing-here")
	a.wantProblem(t, http.StatusNotFound, problem.NotFound)
	if got := a.header.Get(cellproto.HeaderCellID); got != "" {
		t.Errorf("X-Cell-ID on a router answer before any cell = %q, want empty", got)
	}
	if n := b.a.hits.Load() + b.b.hits.Load(); n != 0 {
		t.Errorf("cells received %d requests, want none", n)
	}
}

func TestRouterOnlyHeadersAreStripped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.get(t, "/api/v1/workspaces/"+b.wsA,
		cellproto.HeaderPlacementEpoch, "999",
		cellproto.HeaderPlacementCell, "cell-b",
		cellproto.HeaderOwningCell, "cell-b",
		cellproto.HeaderCellID, "cell-b",
		"Forwarded", "for=6.6.6.6",
		"X-Forwarded-For", "6.6.6.6",
		"X-Forwarded-Host", "evil.example",
		"X-Forwarded-Proto", "gopher",
		"X-Real-IP", "6.6.6.6",
	)
	a.wantCell(t, "cell-a")
	h := b.a.last(t).header
	for k, want := range map[string]string{
		cellproto.HeaderPlacementEpoch: "1",
		cellproto.HeaderPlacementCell:  "cell-a",
		cellproto.HeaderOwningCell:     "",
		cellproto.HeaderCellID:         "",
		"Forwarded":                    "",
		"X-Forwarded-For":              "127.0.0.1",
		"X-Real-Ip":                    "",
		"X-Forwarded-Proto":            "http",
	} {
		if got := strings.Join(h.Values(k), ","); got != want {
			t.Errorf("cell saw %s = %q, want %q", k, got, want)
		}
	}
	if got := h.Get("X-Forwarded-Host"); got == "evil.example" {
		t.Errorf("X-Forwarded-Host from the client reached the cell")
	}
	// And the cell's internal headers do not reach the client.
	if got := a.header.Values(cellproto.HeaderOwningCell); len(got) != 0 {
		t.Errorf("client saw X-Owning-Cell %q", got)
	}
	if got := a.header.Values(cellproto.HeaderCellID); len(got) != 1 || got[0] != "cell-a" {
		t.Errorf("client saw X-Cell-ID %q, want exactly cell-a", got)
	}
}

// TestRequestIDReachesCellAndClient: the request ID is the W3C trace ID, the same for the
// client and the cell: a client's traceparent's, else a client's X-Request-ID when it is a
// trace ID, else a new one; a client's traceparent reaches the cell in the router's form
// (tracing off: the client's span stays the parent) and tracestate does not.
func TestRequestIDReachesCellAndClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	a := b.get(t, "/api/v1/workspaces/"+b.wsA, cellproto.HeaderRequestID, tid)
	if got := a.header.Values(cellproto.HeaderRequestID); len(got) != 1 || got[0] != tid {
		t.Errorf("client saw X-Request-ID %q", got)
	}
	if got := b.a.last(t).header.Get(cellproto.HeaderRequestID); got != tid {
		t.Errorf("cell saw X-Request-ID %q", got)
	}
	if got := b.a.last(t).header.Values("Traceparent"); len(got) != 0 {
		t.Errorf("cell saw traceparent %q although the client sent none and tracing is off", got)
	}

	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	a = b.get(t, "/api/v1/workspaces/"+b.wsA, "traceparent", tp, "tracestate", "vendor=secret",
		cellproto.HeaderRequestID, tid)
	if got := a.header.Get(cellproto.HeaderRequestID); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("client saw X-Request-ID %q, want the traceparent's trace ID", got)
	}
	cell := b.a.last(t).header
	if got := cell.Values("Traceparent"); len(got) != 1 || got[0] != tp {
		t.Errorf("cell saw traceparent %q, want %q", got, tp)
	}
	if cell.Get(cellproto.HeaderRequestID) != "0af7651916cd43dd8448eb211c80319c" || cell.Get("Tracestate") != "" {
		t.Errorf("cell saw X-Request-ID %q, tracestate %q", cell.Get(cellproto.HeaderRequestID), cell.Get("Tracestate"))
	}

	for _, bad := range []string{"client-trace.1", "bad id with spaces", "4BF92F3577B34DA6A3CE929D0E0E4736", "00000000000000000000000000000000", "svc_pat_abc"} {
		a = b.get(t, "/api/v1/workspaces/"+b.wsA, cellproto.HeaderRequestID, bad, "traceparent", "00-"+bad+"-b7ad6b7169203331-01")
		got := a.header.Get(cellproto.HeaderRequestID)
		if _, ok := tracing.ParseTraceID(got); !ok || got == tid || b.a.last(t).header.Get(cellproto.HeaderRequestID) != got {
			t.Errorf("X-Request-ID %q: client saw %q, cell saw %q: want the same new trace ID", bad, got, b.a.last(t).header.Get(cellproto.HeaderRequestID))
		}
		if got := b.a.last(t).header.Values("Traceparent"); len(got) != 0 {
			t.Errorf("an invalid traceparent reached the cell: %q", got)
		}
	}
}

func TestMisdirectRetriesOnNewOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a") // cached: cell-a, epoch 1

	// The workspace moves to cell-b at epoch 2; the router's cache still says cell-a.
	b.b.host(b.wsA, 2)
	b.a.unhost(b.wsA)
	b.dir.place(b.wsA, "cell-b", 2)

	body := strings.Repeat("x", 1000)
	a := b.send(t, http.MethodPost, "/api/v1/workspaces/"+b.wsA+"/anything", strings.NewReader(body))
	a.wantCell(t, "cell-b")
	got := b.b.last(t)
	if string(got.body) != body || got.header.Get(cellproto.HeaderPlacementEpoch) != "2" {
		t.Errorf("retry carried %d body bytes at epoch %q, want %d at 2", len(got.body), got.header.Get(cellproto.HeaderPlacementEpoch), len(body))
	}
	if string(b.a.last(t).body) != body {
		t.Errorf("first attempt did not carry the body")
	}
	// The new placement is cached: the next request goes straight to cell-b.
	hitsA := b.a.hits.Load()
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-b")
	if b.a.hits.Load() != hitsA {
		t.Errorf("cell-a was asked again after the placement was refreshed")
	}
}

func TestMisdirectChunkedBodyIsResent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	b.b.host(b.wsA, 2)
	b.a.unhost(b.wsA)
	b.dir.place(b.wsA, "cell-b", 2)

	body := strings.Repeat("y", 5000)
	// An io.Reader of unknown length is sent chunked.
	a := b.send(t, http.MethodPut, "/api/v1/workspaces/"+b.wsA, io.MultiReader(strings.NewReader(body)))
	a.wantCell(t, "cell-b")
	if got := b.b.last(t).body; string(got) != body {
		t.Errorf("retry carried %d bytes, want %d", len(got), len(body))
	}
}

func TestSecondMisdirectIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.a.unhost(b.wsA) // cell-a refuses, and the directory still names it
	a := b.get(t, "/api/v1/workspaces/"+b.wsA)
	a.wantProblem(t, http.StatusServiceUnavailable, problem.ServiceUnavailable)
	if got := a.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if n := b.a.hits.Load(); n != 2 {
		t.Errorf("cell-a was asked %d times, want 2 (one retry)", n)
	}
	if a.header.Get(cellproto.HeaderCellID) != "cell-a" {
		t.Errorf("X-Cell-ID = %q, want the cell tried", a.header.Get(cellproto.HeaderCellID))
	}
}

func TestMisdirectWithLargeBody(t *testing.T) {
	t.Parallel()
	for _, chunked := range []bool{false, true} {
		t.Run("chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
			b.b.host(b.wsA, 2)
			b.a.unhost(b.wsA)
			b.dir.place(b.wsA, "cell-b", 2)

			var body io.Reader = strings.NewReader(strings.Repeat("z", DefaultMaxRetryBody+1))
			if chunked {
				body = io.MultiReader(body)
			}
			a := b.send(t, http.MethodPost, "/api/v1/workspaces/"+b.wsA+"/x", body)
			a.wantProblem(t, http.StatusServiceUnavailable, problem.RetryBodyTooLarge)
			if a.header.Get("Retry-After") == "" {
				t.Errorf("no Retry-After")
			}
			if got := len(b.a.last(t).body); got != DefaultMaxRetryBody+1 {
				t.Errorf("cell-a got %d body bytes, want the whole body streamed", got)
			}
			if n := b.b.hits.Load(); n != 0 {
				t.Errorf("cell-b was asked %d times, want 0", n)
			}
			// The stale entry was dropped: the next request goes to the new owner.
			b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-b")
		})
	}
}

func TestUnknownWorkspaceGoesToHashedCell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	unknown := ids.New(ids.Workspace)
	want := b.rt.cells.Load().pickHashed(unknown, []byte("test-key")).id

	a := b.get(t, "/api/v1/workspaces/"+unknown+"/capabilities")
	// The cell's 404, passed through: the router does not answer for unknown workspaces.
	a.wantProblem(t, http.StatusNotFound, problem.NotFound)
	if got := a.header.Get(cellproto.HeaderCellID); got != want {
		t.Errorf("served by %q, want the hash-chosen %q", got, want)
	}
	got := b.cell(want).last(t)
	if got.header.Get(cellproto.HeaderPlacementEpoch) != "0" || got.path != "/api/v1/workspaces/"+unknown+"/capabilities" {
		t.Errorf("cell saw epoch %q path %q, want epoch 0", got.header.Get(cellproto.HeaderPlacementEpoch), got.path)
	}

	// Deterministic, and the negative answer is cached.
	lookups := b.dir.lookups.Load()
	for range 3 {
		if got := b.get(t, "/api/v1/pages", cellproto.HeaderWorkspaceID, unknown).header.Get(cellproto.HeaderCellID); got != want {
			t.Fatalf("served by %q, want %q every time", got, want)
		}
	}
	if n := b.dir.lookups.Load() - lookups; n != 0 {
		t.Errorf("directory asked %d more times, want the negative cache to answer", n)
	}

	// Many unknown workspaces spread over both cells.
	spread := map[string]bool{}
	for range 32 {
		spread[b.rt.cells.Load().pickHashed(ids.New(ids.Workspace), []byte("test-key")).id] = true
	}
	if len(spread) != 2 {
		t.Errorf("unknown workspaces hashed to %v, want both cells", spread)
	}
}

// TestAccessLog checks the access log as the router binary writes it (Config.AccessLog): one
// JSON line per request with the fields operators search by, nothing that looks like a token in
// it or in any event.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.get(t, "/api/v1/workspaces/"+b.wsA+"?token=svc_pat_secret", "Authorization", "Bearer svc_pat_secret",
		cellproto.HeaderRequestID, "11111111111111111111111111111111")
	b.get(t, "/api/v1/workspaces/"+b.wsA+"/svc_pat_secretsecret", cellproto.HeaderRequestID, "22222222222222222222222222222222")
	lines := strings.Split(strings.TrimSuffix(b.access.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d access lines, want 2: %q", len(lines), lines)
	}
	for i, want := range []map[string]any{
		{"path": "/api/v1/workspaces/" + b.wsA, "trace_id": "11111111111111111111111111111111"},
		{"path": "/api/v1/workspaces/" + b.wsA + "/[REDACTED]", "trace_id": "22222222222222222222222222222222"},
	} {
		var f map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &f); err != nil {
			t.Fatalf("line %d is not one JSON object: %v: %q", i, err, lines[i])
		}
		for k, v := range map[string]any{
			"level": "info", "msg": "request", "component": "router", "method": "GET",
			"status": float64(200), "cell": "cell-a", "workspace_id": b.wsA,
		} {
			want[k] = v
		}
		for k, w := range want {
			if f[k] != w {
				t.Errorf("line %d: field %s = %v, want %v", i, k, f[k], w)
			}
		}
		if d, ok := f["duration"].(float64); !ok || d <= 0 {
			t.Errorf("line %d: duration = %v", i, f["duration"])
		}
	}
	if strings.Contains(b.access.String(), "svc_pat_") {
		t.Errorf("an access line holds a token: %s", b.access.String())
	}
	for _, e := range b.logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, "svc_pat_") {
				t.Errorf("log %q field %s holds a token: %q", e.Message, k, s)
			}
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	b.get(t, "/api/v1/pages").wantProblem(t, http.StatusUnprocessableEntity, problem.WorkspaceRequired)
	raw := b.metrics(t)
	for _, want := range []string{
		`router_requests_total{cell="cell-a",code="2xx"} 1`,
		`router_requests_total{cell="none",code="4xx"} 1`,
		`router_proxy_duration_seconds_count{cell="cell-a"} 1`,
		`router_placement_lookups_total{result="miss"} 1`,
		`router_placement_cache_entries 1`,
		`router_cell_breaker_state{cell="cell-a"} 0`,
		`router_cell_healthy{cell="cell-b"} 1`,
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestDirectoryDownKeepsLastCellList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dir.setErr(errors.New("directory down"))
	if err := b.rt.RefreshCells(context.Background()); err == nil {
		t.Fatal("RefreshCells succeeded against a failing directory")
	}
	b.get(t, "/api/v1/system/version")
	if a := b.get(t, "/api/v1/auth/whoami"); a.status != http.StatusOK {
		t.Fatalf("route without a workspace: %d, want 200 from the last known cells", a.status)
	}
}

func TestDrainingCell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dir.mu.Lock()
	b.dir.cells[0].State = CellDraining // cell-a
	b.dir.mu.Unlock()
	if err := b.rt.RefreshCells(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Its own workspaces are still served …
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a")
	// … but it takes no new work.
	for range 4 {
		b.get(t, "/api/v1/system/version").wantCell(t, "cell-b")
	}
	// Unknown workspaces still hash over every cell, the draining one included: otherwise
	// reaching the draining cell would prove that a workspace exists.
	seen := map[string]bool{}
	for range 40 {
		seen[b.get(t, "/api/v1/workspaces/"+ids.New(ids.Workspace)).header.Get(cellproto.HeaderCellID)] = true
	}
	if !seen["cell-a"] || !seen["cell-b"] {
		t.Errorf("unknown workspaces reached %v, want both cells", seen)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ops := func(path string) int {
		res, err := testClient.Get(b.ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	ready := func() bool { return ops("/readyz") == http.StatusOK }
	if !ready() {
		t.Fatal("not ready with the directory up and healthy cells")
	}
	b.dir.setErr(errors.New("down"))
	_ = b.rt.RefreshCells(context.Background())
	if ready() {
		t.Error("ready with the directory down and nothing cached")
	}
	b.dir.setErr(nil)
	b.get(t, "/api/v1/workspaces/"+b.wsA).wantCell(t, "cell-a") // warms the cache
	b.dir.setErr(errors.New("down"))
	_ = b.rt.RefreshCells(context.Background())
	if !ready() {
		t.Error("not ready with the directory down but placements cached")
	}
	b.a.setReady(http.StatusServiceUnavailable)
	b.b.setReady(http.StatusServiceUnavailable)
	for range DefaultProbeFailures {
		b.rt.ProbeCells(context.Background())
	}
	if ready() {
		t.Error("ready with no healthy cell")
	}
	if st := ops("/livez"); st != http.StatusOK {
		t.Errorf("livez = %d", st)
	}
}
