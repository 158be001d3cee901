package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"slidecells/shared/pgserver"
	"slidecells/shared/testenv"

	"gocloud.dev/blob/fileblob"

	"slidecells/cell/auth"
	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

// These tests drive real renderer processes (bin/renderer, Debian Chromium, the kernel's
// isolation, hence root) through the coordinator. The preview documents come from a small
// document server that speaks render-ready.v1 like the preview host; what a document does is
// chosen by the snapshot's entity ID: "ready" mounts at once, "slow" after 3 s, "never" stays
// pending forever, "loop" runs an endless loop on the page's main thread, "noprotocol" is a
// document without render-ready.v1 (a broken preview host build).

// docServer serves snapshot documents for the renderers' browsers and checks the preview
// access each document request carries.
type docServer struct {
	srv     *http.Server
	url     string
	keys    *ticket.KeySet
	bucket  string
	mu      sync.Mutex
	served  map[string]int // documents served by snapshot ref
	refused int
}

func newDocServer(t *testing.T, f *fixture) *docServer {
	t.Helper()
	ks, err := ticket.NewKeySet(f.signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &docServer{url: "http://" + ln.Addr().String(), keys: ks, bucket: f.bucket, served: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /snapshots/{ref}", d.document)
	d.srv = &http.Server{Handler: mux}
	go func() { _ = d.srv.Serve(ln) }()
	t.Cleanup(func() { _ = d.srv.Close() })
	return d
}

// counts reads what the server counted, under its lock.
func (d *docServer) counts(ref string) (served, refused int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served[ref], d.refused
}

func (d *docServer) document(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	var claims ticket.PreviewAccess
	if err := d.keys.Verify(r.Header.Get(rc.PreviewAccessHeader), time.Now(), &claims); err != nil ||
		claims.SnapshotRef != ref || claims.Path != r.URL.Path || claims.Origin != d.url {
		d.mu.Lock()
		d.refused++
		d.mu.Unlock()
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	b, err := fileblob.OpenBucket(d.bucket, nil)
	if err != nil {
		http.Error(w, "bucket", 500)
		return
	}
	defer b.Close()
	m, err := snapshot.Load(r.Context(), b, claims.WorkspaceID, ref)
	if err != nil {
		http.Error(w, "not found", 404)
		return
	}
	d.mu.Lock()
	d.served[ref]++
	d.mu.Unlock()
	if m.Entity.ID == "noprotocol" { // a broken preview host build: no render-ready.v1 at all
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><h1>no readiness protocol</h1></body></html>`)
		return
	}
	mount := `setTimeout(() => { S.mount = "mounted"; pub(); }, 30);`
	switch m.Entity.ID {
	case "never":
		mount = ``
	case "slow":
		mount = `setTimeout(() => { S.mount = "mounted"; pub(); }, 3000);`
	case "loop": // the page's script never ends: its main thread answers nothing any more
		mount = `setTimeout(() => { for (;;) {} }, 30);`
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><script>
(() => {
  const send = typeof window.__renderReadyV1 === "function" ? window.__renderReadyV1 : null;
  try { delete window.__renderReadyV1; } catch (e) {}
  const stringify = JSON.stringify;
  const S = {protocol: "render-ready.v1", artifact_id: %q, input_digest: %q, host_build: %q,
    init: "ok", init_error: null, mount: "pending",
    resources: {fonts: {loaded: 0, failed: 0, pending: 0}, images: {loaded: 0, failed: 0, pending: 0}, other: {loaded: 0, failed: 0, pending: 0}, failures: []},
    scenes: ["default"], scene: "default", scene_receipts: [], content_faults: []};
  window.__renderReady = S;
  const pub = () => { if (send) send(stringify(S)); };
  window.__pub = pub;
  pub();
  window.addEventListener("DOMContentLoaded", () => { %s });
})();
</script></head><body style="margin:0;background:#1f6feb"><h1 style="color:#fff;margin:0;padding:20px">Quarterly results</h1></body></html>`,
		m.Ref, m.InputDigest, m.HostBuild, mount)
}

// renderer is one real renderer process.
type renderer struct {
	id, url string
	cmd     *exec.Cmd
	env     []string
	log     *testenv.Buffer
}

func rendererBinary(t *testing.T) string {
	t.Helper()
	testenv.MustHaveRoot(t, "renderers build a per-attempt isolation")
	return filepath.Join(testenv.MustHaveBin(t, "renderer"), "renderer")
}

func startRenderer(t *testing.T, f *fixture, d *docServer, id, credFile string, extraEnv ...string) *renderer {
	t.Helper()
	rendererBinary(t)
	port, err := pgserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := &renderer{id: id, url: "http://127.0.0.1:" + strconv.Itoa(port), env: append(os.Environ(),
		"RENDER_WORKER_ID="+id,
		"RENDER_LISTEN_ADDR=127.0.0.1:"+strconv.Itoa(port),
		"RENDER_TICKET_PUBLIC_KEYS="+f.signer.PublicKey().String(),
		"RENDER_PREVIEW_BASE_URL="+d.url,
		"RENDER_TEMP_ROOT="+shortTemp(t),
		"RENDER_SERVICE_CREDENTIAL_FILE="+credFile,
		// "never" documents stay pending until their render deadline, not a content budget's
		// end, unless a test sets one.
		"RENDER_CONTENT_READY_SECONDS=3600",
	)}
	r.env = append(r.env, extraEnv...)
	r.start(t)
	return r
}

func (r *renderer) start(t *testing.T) {
	t.Helper()
	r.log = &testenv.Buffer{}
	r.cmd = exec.Command(rendererBinaryPath())
	r.cmd.Env = r.env
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.kill() })
	exited := make(chan struct{})
	go func() { _, _ = r.cmd.Process.Wait(); close(exited) }()
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "renderer "+r.id+" live", func() error {
		select {
		case <-exited:
			t.Fatalf("renderer %s exited: %s", r.id, r.log.String())
		default:
		}
		resp, err := http.Get(r.url + "/livez")
		if err != nil {
			return fmt.Errorf("%v; log: %s", err, r.log.String())
		}
		resp.Body.Close()
		return nil
	})
}

// shortTemp is a temp root short enough for the browser's socket paths below it.
func shortTemp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "rr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func rendererBinaryPath() string { return filepath.Join(os.Getenv("SLIDECELLS_BIN"), "renderer") }

func (r *renderer) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		_ = r.cmd.Wait()
	}
}

// world is a fixture with a document server, renderers and a credential.
type world struct {
	f         *fixture
	docs      *docServer
	renderers []*renderer
	workers   []Worker
	cred      string
	profile   string
}

func newWorld(t *testing.T, n int, rendererEnv ...string) *world {
	t.Helper()
	rendererBinary(t)
	f := setup(t, 2)
	w := &world{f: f, docs: newDocServer(t, f), cred: filepath.Join(t.TempDir(), "cred")}
	if err := os.WriteFile(w.cred, []byte("lifecycle-test-credential-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// Worker IDs name the renderer's cgroup, whose leftovers a starting renderer kills:
		// parallel tests need their own.
		r := startRenderer(t, f, w.docs, fmt.Sprintf("r%d-%s", i+1, strings.TrimPrefix(ids.New("t"), "t_")[:8]), w.cred, rendererEnv...)
		w.renderers = append(w.renderers, r)
		w.workers = append(w.workers, Worker{ID: r.id, URL: r.url})
	}
	caps, _, err := newClient("lifecycle-test-credential-0123456789").capabilities(context.Background(), w.renderers[0].url)
	if err != nil {
		t.Fatal(err)
	}
	w.profile = caps.EnvironmentDigest
	return w
}

func (w *world) coordinator(t *testing.T, tune func(*Config)) *Coordinator {
	t.Helper()
	c := w.f.coordinator(t, w.workers, func(cfg *Config) {
		cfg.Credential = "lifecycle-test-credential-0123456789"
		cfg.ProfileDigest = w.profile
		cfg.NavigationBase, _ = url.Parse(w.docs.url)
		if tune != nil {
			tune(cfg)
		}
	})
	c.TickInterval = 200 * time.Millisecond
	c.Lease = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	t.Cleanup(func() { cancel(); c.Stop() })
	return c
}

// start is the beginning of most lifecycle tests: n renderers, a coordinator over them (tune as
// for coordinator) and the workspace the test renders in.
func start(t *testing.T, n int, tune func(*Config)) (*world, *Coordinator, auth.Scope) {
	t.Helper()
	w := newWorld(t, n)
	return w, w.coordinator(t, tune), w.f.scopes[0]
}

func docManifest(t *testing.T, sc auth.Scope, behaviour string, n int) *snapshot.Manifest {
	t.Helper()
	m := manifest(t, sc, n)
	m.Entity.ID = behaviour
	var err error
	if m.InputDigest, err = m.ComputeInputDigest(); err != nil {
		t.Fatal(err)
	}
	return m
}

// submitDoc submits a render of a document server page ("ready", "slow" or "never"); the operation
// decides the category, as the business entries do (captures are background).
func submitDoc(t *testing.T, c *Coordinator, sc auth.Scope, stage string, op rc.Operation, behaviour string, n int) Request {
	t.Helper()
	cat := Interactive
	if op == rc.OpPageCapture {
		cat = Background
	}
	r, err := c.Submit(context.Background(), sc, Spec{Owner: "t", Stage: stage, Operation: op, Category: cat, Snapshot: docManifest(t, sc, behaviour, n)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wait(t *testing.T, c *Coordinator, sc auth.Scope, id string, limit time.Duration) Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	r, err := c.Wait(ctx, sc, id)
	if err != nil {
		t.Fatalf("request %s: %v (state %s)", id, err, r.State)
	}
	return r
}

func TestCaptureAndDiagnoseThroughRealRenderers(t *testing.T) {
	w, c, sc := start(t, 2, nil)
	ctx := context.Background()
	shot := submitDoc(t, c, sc, "shot", rc.OpPageCapture, "ready", 1)
	diag := submitDoc(t, c, sc, "diag", rc.OpPageDiagnose, "ready", 2)
	if r := wait(t, c, sc, shot.ID, time.Minute); r.State != StateSucceeded {
		t.Fatalf("capture: %+v", r)
	}
	res, err := c.Result(ctx, sc, shot.ID)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := c.bucket.NewReader(ctx, res.ArtifactKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rd)
	rd.Close()
	img, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil || img.Width != 320 || img.Height != 180 || !strings.Contains(res.ArtifactKey, shot.ID) || !strings.Contains(res.ArtifactKey, res.AttemptID) {
		t.Fatalf("capture: %v %dx%d at %s, want a 320x180 PNG under the request and attempt", err, img.Width, img.Height, res.ArtifactKey)
	}
	if r := wait(t, c, sc, diag.ID, time.Minute); r.State != StateSucceeded {
		t.Fatalf("diagnose: %+v", r)
	}
	dres, err := c.Result(ctx, sc, diag.ID)
	if err != nil || dres.Diagnosis == nil || dres.Diagnosis.ArtifactID == "" {
		t.Fatalf("diagnosis: %+v %v", dres, err)
	}
	var live int
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE released = false`).Scan(&live)
	if live != 0 {
		t.Fatalf("%d attempts still hold capacity after both requests succeeded", live)
	}
	if h := c.Health(ctx); !h.Available || h.Ready != 2 {
		t.Fatalf("health %+v, want 2 dispatchable renderers", h)
	}
	// The renderers' browsers carried the preview access on every document request.
	if _, refused := w.docs.counts(""); refused != 0 {
		t.Fatalf("%d document requests without valid preview access", refused)
	}
}

func TestCancelAndDeadlineOfExecutingRequests(t *testing.T) {
	// The cancelled request has all the time a loaded machine may need to start executing; the
	// other one a deadline of its own, which it meets executing or, on a slow start, queued.
	w, c, sc := start(t, 2, func(cfg *Config) { cfg.RequestTimeout = 2 * time.Minute })
	ctx := context.Background()
	cancelled := submitDoc(t, c, sc, "cancel", rc.OpPageDiagnose, "never", 1)
	expired, err := c.Submit(ctx, sc, Spec{Owner: "t", Stage: "expire", Operation: rc.OpPageDiagnose, Category: Interactive,
		Snapshot: docManifest(t, sc, "never", 2), Deadline: time.Now().Add(6 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the first is executing on a renderer, then cancel it.
	w.waitAttempt(t, cancelled.ID, "running", "accepted")
	if _, err := c.Cancel(ctx, sc, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, c, sc, cancelled.ID, time.Minute); r.State != StateCancelled {
		t.Fatalf("cancelled while executing: %+v", r)
	}
	if r := wait(t, c, sc, expired.ID, 30*time.Second); r.State != StateExpired || r.ErrorCode != string(rc.CodeDeadlineExceeded) {
		t.Fatalf("past its deadline: %+v", r)
	}
	waitReleased(t, w, 20*time.Second)
}

// waitAttempt waits until the request's latest attempt is in one of states.
func (w *world) waitAttempt(t *testing.T, requestID string, states ...string) {
	t.Helper()
	// a loaded machine starts renderers' browsers slowly
	testenv.Eventually(t, 90*time.Second, 5*time.Millisecond, fmt.Sprintf("attempt of %s in %v", requestID, states), func() error {
		var st string
		_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT state FROM render_attempts WHERE request_id = $1
			ORDER BY seq DESC LIMIT 1`, requestID).Scan(&st)
		if !slices.Contains(states, st) {
			return fmt.Errorf("attempt is %q", st)
		}
		return nil
	})
}

func waitReleased(t *testing.T, w *world, limit time.Duration) {
	t.Helper()
	testenv.Eventually(t, limit, 100*time.Millisecond, "every attempt released", func() error {
		var live int
		_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM render_attempts WHERE released = false`).Scan(&live)
		if live != 0 {
			return fmt.Errorf("%d attempts still hold capacity", live)
		}
		return nil
	})
}

func TestRendererKilledMidAttemptRetriesOnProof(t *testing.T) {
	w, c, sc := start(t, 1, func(cfg *Config) { cfg.RequestTimeout = 90 * time.Second })
	ctx := context.Background()
	// A document that mounts only after a while, so the kill lands mid-attempt.
	req := submitDoc(t, c, sc, "kill", rc.OpPageDiagnose, "never", 1)
	w.waitAttempt(t, req.ID, "running", "accepted")
	r := w.renderers[0]
	r.kill()
	// While the renderer is gone the attempt keeps its capacity (unknown, not released).
	time.Sleep(1500 * time.Millisecond)
	var live int
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE request_id = $1 AND released = false`, req.ID).Scan(&live)
	if live != 1 {
		t.Fatalf("the attempt of a vanished renderer was released without proof (%d live)", live)
	}
	if h := c.Health(ctx); h.Available {
		t.Fatalf("health says render is available with the only renderer dead: %+v", h)
	}
	// The renderer comes back with a new epoch: its start killed the old epoch's processes,
	// which proves the attempt gone; the request retries within its budget.
	r.start(t)
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "a retry after the renderer came back", func() error {
		cur, _ := c.Get(ctx, sc, req.ID)
		if cur.AttemptsUsed < 2 && !Terminal(cur.State) {
			return fmt.Errorf("request %+v", cur)
		}
		if cur.AttemptsUsed < 2 && cur.State != StateRetryWait && cur.State != StateExecuting {
			t.Fatalf("after the restart: %+v, want a second attempt", cur)
		}
		return nil
	})
	var epochs int
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT count(DISTINCT epoch) FROM render_attempts WHERE request_id = $1`, req.ID).Scan(&epochs)
	if epochs != 2 {
		t.Fatalf("attempts ran on %d epochs, want the old and the new", epochs)
	}
	if _, err := c.Cancel(ctx, sc, req.ID); err != nil {
		t.Fatal(err)
	}
	if cur := wait(t, c, sc, req.ID, 30*time.Second); cur.State != StateCancelled {
		t.Fatalf("%+v", cur)
	}
}

func TestTakeoverAfterACoordinatorDies(t *testing.T) {
	w, a, sc := start(t, 1, nil)
	ctx := context.Background()
	// A document that mounts after 3 s: the attempt is still running when a stops.
	req := submitDoc(t, a, sc, "takeover", rc.OpPageCapture, "slow", 1)
	// Stop a once the renderer has taken the attempt (a stop between the dispatch mark and the
	// renderer's 202 would leave nothing to take over: the attempt is then lost and retried).
	w.waitAttempt(t, req.ID, "accepted", "running")
	a.Stop()
	if cur, _ := a.Get(ctx, sc, req.ID); Terminal(cur.State) {
		t.Fatalf("the attempt of a document that mounts after 3 s ended before its coordinator stopped: %+v", cur)
	}
	b := w.coordinator(t, nil)
	cur := wait(t, b, sc, req.ID, 2*time.Minute)
	if cur.State != StateSucceeded || cur.AttemptsUsed != 1 {
		t.Fatalf("after takeover: %+v, want succeeded by the same attempt", cur)
	}
	if n, _ := w.docs.counts(cur.SnapshotRef); n != 1 {
		t.Fatalf("document rendered %d times; a takeover must query, never redo", n)
	}
}

func TestProfileMismatchIsNeverDispatched(t *testing.T) {
	w, c, sc := start(t, 1, func(cfg *Config) {
		cfg.ProfileDigest = "sha256:" + strings.Repeat("ab", 32)
		cfg.RequestTimeout = 3 * time.Second
	})
	ctx := context.Background()
	req := submitDoc(t, c, sc, "mismatch", rc.OpPageCapture, "ready", 1)
	cur := wait(t, c, sc, req.ID, 30*time.Second)
	var state string
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT state FROM render_workers WHERE worker_id = $1`, w.workers[0].ID).Scan(&state)
	if cur.State != StateExpired || cur.AttemptsUsed != 0 || state != "mismatch" {
		t.Fatalf("request %+v on a worker %q: want expired without an attempt, the worker marked mismatch", cur, state)
	}
	if h := c.Health(ctx); h.Available {
		t.Fatalf("health available with only a mismatching renderer: %+v", h)
	}
	_ = errors.New
}

// A lost answer to the POST (the renderer took the attempt over, the connection broke before
// the 202 arrived): the coordinator asks the same worker/epoch first, finds the attempt and
// follows it — no replacement attempt, one render.
func TestLostDispatchResponseQueriesTheSameWorker(t *testing.T) {
	w := newWorld(t, 1)
	target, _ := url.Parse(w.renderers[0].url)
	var dropped atomic.Bool
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/executions") && dropped.CompareAndSwap(false, true) {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r) // the renderer takes the attempt over...
			hj, ok := rw.(http.Hijacker)
			if !ok {
				t.Error("no hijacker")
				return
			}
			conn, _, _ := hj.Hijack()
			conn.Close() // ...and its answer is lost
			return
		}
		rp.ServeHTTP(rw, r)
	}))
	defer proxy.Close()
	w.workers[0].URL = proxy.URL
	c := w.coordinator(t, nil)
	sc := w.f.scopes[0]
	req := submitDoc(t, c, sc, "lost", rc.OpPageCapture, "ready", 1)
	cur := wait(t, c, sc, req.ID, time.Minute)
	if !dropped.Load() {
		t.Fatal("the POST answer was never dropped")
	}
	if cur.State != StateSucceeded || cur.AttemptsUsed != 1 {
		t.Fatalf("after a lost dispatch answer: %+v, want succeeded by the one attempt", cur)
	}
	var attempts int
	_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM render_attempts WHERE request_id = $1`, req.ID).Scan(&attempts)
	if served, _ := w.docs.counts(cur.SnapshotRef); attempts != 1 || served != 1 {
		t.Fatalf("%d attempts, document served %d times; want one of each", attempts, served)
	}
}

// Both renderers that could serve a workspace are frozen (SIGSTOP) during its attempt: the
// waiting caller gets its answer by the request's deadline — expired with
// RENDER_DEADLINE_EXCEEDED, never cancelled — while the attempt keeps its capacity (its stop is
// not proven); another workspace renders on the third renderer meanwhile, and after SIGCONT
// the frozen workspace renders again.
// waitOutOfDispatch waits until none of rs is registered ready (what dispatch reads).
func (w *world) waitOutOfDispatch(t *testing.T, rs []*renderer) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "the frozen renderers out of dispatch", func() error {
		for _, r := range rs {
			var state string
			if err := w.f.db.Pool.QueryRow(context.Background(), `SELECT state FROM render_workers WHERE worker_id = $1`, r.id).Scan(&state); err != nil {
				return err
			}
			if state == "ready" {
				return fmt.Errorf("%s still %s", r.id, state)
			}
		}
		return nil
	})
}

// TestFrozenRenderersDoNotStaleTheOthers: renderers that stop answering cost their own probes'
// timeouts, not the heartbeats of the renderers that answer. Probed one after another, two
// frozen renderers made every pass last two probe timeouts (4 s), so the healthy renderer's
// heartbeat was refreshed once a pass and was older than health's three ticks (0.6 s here)
// most of the time: health counted no renderer ready, and render checks gave up waiting after
// 2 s (cell/authoring) while a renderer was free.
func TestFrozenRenderersDoNotStaleTheOthers(t *testing.T) {
	w, c, _ := start(t, 3, nil)
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "three renderers ready", func() error {
		if h := c.Health(ctx); h.Ready != 3 {
			return fmt.Errorf("%s", h.Detail)
		}
		return nil
	})
	frozen, healthy := w.renderers[:2], w.renderers[2]
	for _, r := range frozen {
		if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range frozen {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGCONT)
		}
	})
	w.waitOutOfDispatch(t, frozen)
	// For 8 s (40 ticks, four probe timeouts of the frozen renderers), the healthy renderer's
	// heartbeat moves on tick after tick (a tick and a probe apart: 40 values on a quiet
	// machine, 6 if a probe took 1.1 s). One probe after another, it moved once a pass of 4 s:
	// 3 values at most (2 in 8 s, measured; 41 with a loop per renderer).
	beats := map[time.Time]bool{}
	readySeen := 0
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var hb time.Time
		if err := w.f.db.Pool.QueryRow(ctx, `SELECT heartbeat_at FROM render_workers WHERE worker_id = $1 AND state = 'ready'`, healthy.id).Scan(&hb); err != nil {
			t.Fatalf("the healthy renderer %s: %v", healthy.id, err)
		}
		beats[hb] = true
		if c.Health(ctx).Ready == 1 {
			readySeen++
		}
	}
	if len(beats) < 6 {
		t.Fatalf("the healthy renderer's heartbeat took %d values in 8 s while two others were frozen, want at least 6 (one a tick, 200 ms)", len(beats))
	}
	t.Logf("the healthy renderer's heartbeat took %d values in 8 s", len(beats))
	if readySeen == 0 {
		t.Fatal("health never counted the healthy renderer ready while two others were frozen")
	}
}

func TestFrozenRenderersExpireTheRequestByItsDeadline(t *testing.T) {
	w, c, sc := start(t, 3, func(cfg *Config) { cfg.WorkspaceConcurrency = 1; cfg.RequestTimeout = 2 * time.Minute })
	ctx := context.Background()
	other := w.f.scopes[1]
	stuck, err := c.Submit(ctx, sc, Spec{Owner: "t", Stage: "frozen", Operation: rc.OpPageDiagnose, Category: Interactive,
		Snapshot: docManifest(t, sc, "never", 1), Deadline: time.Now().Add(60 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	w.waitAttempt(t, stuck.ID, "running", "accepted")
	var busy string
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT worker_id FROM render_attempts WHERE request_id = $1 AND released = false`, stuck.ID).Scan(&busy)
	var frozen, rest []*renderer
	for _, r := range w.renderers {
		if r.id == busy {
			frozen = append(frozen, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(frozen) != 1 {
		t.Fatalf("attempt on %q, not on one of the renderers", busy)
	}
	frozen = append(frozen, rest[0])
	spare := rest[1]
	for _, r := range frozen {
		if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, r := range frozen {
				_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(thaw)
	// The registry sees the frozen ones go (a dispatch to a frozen idle renderer would hold
	// that attempt's capacity too, until it answers). What dispatch looks at is the registry's
	// state, which a probe that timed out sets; health's count of ready renderers also drops
	// a renderer whose heartbeat is stale, which happens earlier, while the probe of another
	// frozen one is still waiting: waiting for health alone let the next render go to the
	// frozen idle renderer now and then (a failure under load).
	w.waitOutOfDispatch(t, frozen)
	// The caller of the stuck request waits no longer than its deadline (a little slack for a
	// loaded machine's scheduling, far below the 2-minute render budget).
	type waited struct {
		r   Request
		err error
	}
	stuckDone := make(chan waited, 1)
	go func() {
		wctx, cancel := context.WithDeadline(ctx, stuck.DeadlineAt.Add(3*time.Second))
		defer cancel()
		r, err := c.Wait(wctx, sc, stuck.ID)
		stuckDone <- waited{r, err}
	}()
	// Another workspace renders on the renderer that is left, while the first one's attempt is
	// stuck on a frozen renderer.
	elsewhere := submitDoc(t, c, other, "elsewhere", rc.OpPageCapture, "ready", 2)
	if r := wait(t, c, other, elsewhere.ID, time.Minute); r.State != StateSucceeded {
		t.Fatalf("another workspace's render while two renderers are frozen: %+v", r)
	}
	var ranOn string
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT worker_id FROM render_attempts WHERE request_id = $1`, elsewhere.ID).Scan(&ranOn)
	if ranOn != spare.id {
		t.Fatalf("the other workspace's render ran on %q, want the unfrozen %q", ranOn, spare.id)
	}
	res := <-stuckDone
	got, err := res.r, res.err
	if err != nil {
		t.Fatalf("the caller waited past the request's deadline: %v (%+v)", err, got)
	}
	if got.State != StateExpired || got.ErrorCode != string(rc.CodeDeadlineExceeded) {
		t.Fatalf("at its deadline the request is %s/%s, want expired/RENDER_DEADLINE_EXCEEDED", got.State, got.ErrorCode)
	}
	var live int
	_ = w.f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE request_id = $1 AND released = false`, stuck.ID).Scan(&live)
	if live != 1 || !got.Reclaiming {
		t.Fatalf("the frozen attempt was released without proof (%d live, reclaiming %v)", live, got.Reclaiming)
	}
	// Back from SIGCONT: the renderer answers for the attempt, its capacity returns and the
	// workspace renders again; the expired request stays expired (no 409 cancelled).
	thaw()
	next := submitDoc(t, c, sc, "after", rc.OpPageCapture, "ready", 3)
	if r := wait(t, c, sc, next.ID, 2*time.Minute); r.State != StateSucceeded {
		t.Fatalf("the next render after SIGCONT: %+v", r)
	}
	waitReleased(t, w, 30*time.Second)
	if r, _ := c.Get(ctx, sc, stuck.ID); r.State != StateExpired || r.Reclaiming {
		t.Fatalf("after the renderers came back the stuck request is %+v, want expired and reclaimed", r)
	}
}

// A page whose script never ends is a content error of that page once its content budget is
// spent — final, not retried, named by its message — and another page of the same workspace
// (concurrency 1: it queues behind, for at most the content budget) renders meanwhile.
func TestEndlessLoopPageIsAContentErrorAndFreesItsWorkspace(t *testing.T) {
	w := newWorld(t, 2, "RENDER_CONTENT_READY_SECONDS=3")
	c := w.coordinator(t, func(cfg *Config) { cfg.WorkspaceConcurrency = 1; cfg.RequestTimeout = 2 * time.Minute })
	sc := w.f.scopes[0]
	loop := submitDoc(t, c, sc, "loop", rc.OpPageDiagnose, "loop", 1)
	w.waitAttempt(t, loop.ID, "dispatched", "accepted", "running")
	other := submitDoc(t, c, sc, "other", rc.OpPageDiagnose, "ready", 2)
	got := wait(t, c, sc, loop.ID, 2*time.Minute)
	if got.State != StateFailed || got.ErrorCode != string(rc.CodeContentError) || got.AttemptsUsed != 1 ||
		!strings.Contains(got.ErrorMessage, "did not become ready within 3s") {
		t.Fatalf("the endless-loop page: %+v, want failed once with RENDER_CONTENT_ERROR naming its content budget", got)
	}
	if r := wait(t, c, sc, other.ID, 2*time.Minute); r.State != StateSucceeded {
		t.Fatalf("the other page of the workspace: %+v", r)
	}
	waitReleased(t, w, 30*time.Second)
}

// Business cancellation (a cancelled job, through CancelOwner with the job's ID as owner)
// reaches the render work it started: the executing render is cancelled on its renderer and its
// slot comes back, and a queued one of the same owner never dispatches.
func TestCancelOwnerFreesTheSlotOfAnExecutingRender(t *testing.T) {
	w, c, sc := start(t, 1, func(cfg *Config) { cfg.RequestTimeout = 2 * time.Minute })
	ctx := context.Background()
	running, err := c.Submit(ctx, sc, Spec{Owner: "job_cancelled", Stage: "render-check", Operation: rc.OpPageDiagnose,
		Category: Interactive, Snapshot: docManifest(t, sc, "never", 1)})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := c.Submit(ctx, sc, Spec{Owner: "job_cancelled", Stage: "render-check-2", Operation: rc.OpPageDiagnose,
		Category: Interactive, Snapshot: docManifest(t, sc, "ready", 2)})
	if err != nil {
		t.Fatal(err)
	}
	bystander := submitDoc(t, c, sc, "bystander", rc.OpPageCapture, "ready", 3)
	w.waitAttempt(t, running.ID, "running", "accepted")
	n, err := c.CancelOwner(ctx, sc, "job_cancelled")
	if err != nil || n != 2 {
		t.Fatalf("CancelOwner: %d cancelled, %v; want the executing and the queued one", n, err)
	}
	// The slot comes back: poll the state change (bounded), no timing asserted.
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the cancelled render's slot released", func() error {
		var live int
		_ = w.f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE request_id = $1 AND released = false`, running.ID).Scan(&live)
		if live != 0 {
			return errors.New("the cancelled render's attempt still holds its slot")
		}
		return nil
	})
	if r := wait(t, c, sc, running.ID, 30*time.Second); r.State != StateCancelled || r.ErrorCode != string(rc.CodeCancelled) {
		t.Fatalf("the executing render after its owner's cancel: %+v", r)
	}
	if r, _ := c.Get(ctx, sc, queued.ID); r.State != StateCancelled || r.AttemptsUsed != 0 {
		t.Fatalf("the queued render of the cancelled owner: %+v, want cancelled without an attempt", r)
	}
	if r := wait(t, c, sc, bystander.ID, 2*time.Minute); r.State != StateSucceeded {
		t.Fatalf("another owner's render after the cancel: %+v", r)
	}
}
