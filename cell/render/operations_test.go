package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
)

// identityProxy stands in front of a renderer and, while elsewhere is set, makes its
// capabilities report another host and cgroup: the renderer as it would look rescheduled on
// another node.
func identityProxy(t *testing.T, rendererURL string, elsewhere *atomic.Bool) string {
	t.Helper()
	target, err := url.Parse(rendererURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !elsewhere.Load() || resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/capabilities") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var caps map[string]any
		if err := json.Unmarshal(body, &caps); err != nil {
			return err
		}
		host, ok := caps["host"].(map[string]any)
		if !ok {
			return fmt.Errorf("capabilities without a host identity: %s", body)
		}
		host["boot_id"], host["cgroup"] = "another-host-boot", fmt.Sprint(host["cgroup"])+"/elsewhere"
		b, err := json.Marshal(caps)
		if err != nil {
			return err
		}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

func cellctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(testenv.MustHaveBin(t, "cellctl"), "cellctl")
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (w *world) epochState(t *testing.T, workerID, epoch string) string {
	t.Helper()
	var st string
	_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT state FROM render_workers WHERE worker_id = $1 AND epoch = $2`, workerID, epoch).Scan(&st)
	return st
}

func (w *world) liveAttempts(t *testing.T, requestID string) (n int, state string) {
	t.Helper()
	_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT count(*), COALESCE(max(state), '') FROM render_attempts
		WHERE request_id = $1 AND released = false`, requestID).Scan(&n, &state)
	return n, state
}

// A renderer that comes back with a new epoch on another host or cgroup (here: a proxy makes its
// capabilities say so) proves nothing about the processes of its old epoch: the old epoch is
// quarantined and its attempt stays unknown, holding the worker's slot, and no retry runs — until
// an operator, having verified the old node's termination, releases it with cellctl (a dry run
// without --confirm-terminated changes nothing); the release is recorded, the old epoch retired,
// and the worker renders again. (The same identity does free it: TestRendererKilledMidAttemptRetriesOnProof.)
func TestNewEpochElsewhereKeepsTheOldOccupancyUntilAnOperatorReleasesIt(t *testing.T) {
	w := newWorld(t, 1)
	r := w.renderers[0]
	var elsewhere atomic.Bool
	w.workers[0].URL = identityProxy(t, r.url, &elsewhere)
	c := w.coordinator(t, func(cfg *Config) { cfg.RequestTimeout = 3 * time.Minute })
	sc := w.f.scopes[0]
	ctx := context.Background()
	req := submitDoc(t, c, sc, "elsewhere", rc.OpPageDiagnose, "never", 1)
	w.waitAttempt(t, req.ID, "running", "accepted")
	var oldEpoch, attemptID string
	if err := w.f.db.Pool.QueryRow(ctx, `SELECT epoch, attempt_id FROM render_attempts WHERE request_id = $1 AND released = false`, req.ID).
		Scan(&oldEpoch, &attemptID); err != nil {
		t.Fatal(err)
	}
	r.kill()
	elsewhere.Store(true)
	r.start(t)
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "the old epoch quarantined", func() error {
		if st := w.epochState(t, r.id, oldEpoch); st != "quarantined" {
			return fmt.Errorf("old epoch is %q", st)
		}
		if n, st := w.liveAttempts(t, req.ID); n != 1 || st != "unknown" {
			return fmt.Errorf("%d live attempts, state %q; want the one, unknown", n, st)
		}
		return nil
	})
	// Several registry rounds and reconciler queries later, still nothing is freed or retried.
	var epochs int
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "the new epoch registered ready", func() error {
		_ = w.f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_workers WHERE worker_id = $1 AND state = 'ready'`, r.id).Scan(&epochs)
		if epochs != 1 {
			return fmt.Errorf("%d ready epochs", epochs)
		}
		return nil
	})
	time.Sleep(3 * c.TickInterval)
	if n, st := w.liveAttempts(t, req.ID); n != 1 || st != "unknown" {
		t.Fatalf("a new epoch elsewhere freed the old occupancy: %d live attempts (%s)", n, st)
	}
	if cur, _ := c.Get(ctx, sc, req.ID); cur.AttemptsUsed != 1 || cur.State != StateExecuting {
		t.Fatalf("request %+v: want still executing on its one unproven attempt", cur)
	}
	// The operator sees it.
	out, err := cellctl(t, "renderers", "list", "--json", "--cell-database-url", w.f.url)
	if err != nil {
		t.Fatalf("renderers list: %v\n%s", err, out)
	}
	var list []RendererEpoch
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("renderers list --json: %v\n%s", err, out)
	}
	var old *RendererEpoch
	for i := range list {
		if list[i].Epoch == oldEpoch {
			old = &list[i]
		}
	}
	if old == nil || old.State != "quarantined" || old.Unknown != 1 || old.Occupied != 1 || old.BootID == "" || old.Cgroup == "" ||
		len(old.Attempts) != 1 || old.Attempts[0] != attemptID || !strings.Contains(old.Detail, "another host or cgroup") {
		t.Fatalf("renderers list shows the old epoch as %+v", old)
	}
	if out, err := cellctl(t, "renderers", "list", "--cell-database-url", w.f.url); err != nil || !strings.Contains(out, oldEpoch) || !strings.Contains(out, "quarantined") {
		t.Fatalf("renderers list (table): %v\n%s", err, out)
	}
	// Without the explicit confirmation nothing changes.
	args := []string{"renderers", "release", r.id, "--cell-database-url", w.f.url, "--operator", "ops@example.com", "--reason", "node-17 drained and deleted (ticket OPS-1)"}
	if out, err := cellctl(t, args...); err == nil || !strings.Contains(out, "--confirm-terminated") || !strings.Contains(out, attemptID) {
		t.Fatalf("release without --confirm-terminated: %v\n%s", err, out)
	}
	if n, _ := w.liveAttempts(t, req.ID); n != 1 {
		t.Fatal("a release without confirmation freed the attempt")
	}
	if out, err := cellctl(t, append(args, "--confirm-terminated")...); err != nil || !strings.Contains(out, "1 attempt(s) released") {
		t.Fatalf("release: %v\n%s", err, out)
	}
	if n, _ := w.liveAttempts(t, req.ID); n != 0 {
		t.Fatal("the released attempt still holds its slot")
	}
	var operator, reason, released string
	if err := w.f.db.Pool.QueryRow(ctx, `SELECT operator, reason, attempts_released::TEXT FROM render_operator_actions
		WHERE worker_id = $1 AND action = 'release'`, r.id).Scan(&operator, &reason, &released); err != nil ||
		operator != "ops@example.com" || !strings.Contains(reason, "OPS-1") || !strings.Contains(released, attemptID) {
		t.Fatalf("the release is not recorded with who, why and what: %q %q %q %v", operator, reason, released, err)
	}
	if st := w.epochState(t, r.id, oldEpoch); st != "retired" {
		t.Fatalf("the old epoch is %q after the release, want retired", st)
	}
	// The request retries within its budget on the new epoch; cancel it, then the worker renders.
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "a retry on the new epoch", func() error {
		if cur, _ := c.Get(ctx, sc, req.ID); cur.AttemptsUsed < 2 {
			return fmt.Errorf("%d attempts used", cur.AttemptsUsed)
		}
		return nil
	})
	if _, err := c.Cancel(ctx, sc, req.ID); err != nil {
		t.Fatal(err)
	}
	next := submitDoc(t, c, sc, "after-release", rc.OpPageCapture, "ready", 2)
	if got := wait(t, c, sc, next.ID, 2*time.Minute); got.State != StateSucceeded {
		t.Fatalf("the worker after the release: %+v", got)
	}
}

// faultProxy stands in front of a renderer and answers the first n POSTs of executions itself
// with answer (status and body), without forwarding them.
func faultProxy(t *testing.T, rendererURL string, n int32, status int, contentType, body string) (string, *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(rendererURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/executions") && hits.Add(1) <= n {
			rw.Header().Set("Content-Type", contentType)
			rw.WriteHeader(status)
			_, _ = io.WriteString(rw, body)
			return
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &hits
}

func (w *world) quarantinedEver(t *testing.T, workerID string) bool {
	t.Helper()
	var n int
	_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM render_workers WHERE worker_id = $1
		AND (state = 'quarantined' OR quarantined_at IS NOT NULL)`, workerID).Scan(&n)
	var lifted int
	_ = w.f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM render_operator_actions WHERE worker_id = $1`, workerID).Scan(&lifted)
	return n+lifted > 0
}

// Blame the right party: a proxy's 502 page in place of the renderer's answer says nothing
// about the renderer (the attempt is queried and retried, the renderer is not quarantined), and
// a preview host build that does not speak render-ready.v1 is the host's fault (the request
// fails at once with RENDER_CONTRACT_MISMATCH at readiness, not retried on the next renderer,
// and no renderer is quarantined).
func TestProxyAnswersAndHostFaultsDoNotQuarantineTheRenderer(t *testing.T) {
	w := newWorld(t, 1)
	proxied, hits := faultProxy(t, w.renderers[0].url, 1, http.StatusBadGateway, "text/html", "<html><body><h1>502 Bad Gateway</h1></body></html>")
	w.workers[0].URL = proxied
	c := w.coordinator(t, func(cfg *Config) { cfg.RequestTimeout = 2 * time.Minute })
	sc := w.f.scopes[0]
	id := w.workers[0].ID
	shot := submitDoc(t, c, sc, "through-proxy", rc.OpPageCapture, "ready", 1)
	if got := wait(t, c, sc, shot.ID, 2*time.Minute); got.State != StateSucceeded || got.AttemptsUsed != 2 || hits.Load() < 2 {
		t.Fatalf("a render whose first dispatch met a proxy's 502: %+v (%d POSTs), want succeeded by a second attempt", got, hits.Load())
	}
	if w.quarantinedEver(t, id) {
		t.Fatal("a proxy's 502 quarantined the renderer")
	}
	broken := submitDoc(t, c, sc, "broken-host", rc.OpPageDiagnose, "noprotocol", 2)
	got := wait(t, c, sc, broken.ID, 2*time.Minute)
	if got.State != StateFailed || got.ErrorCode != string(rc.CodeContractMismatch) || got.ErrorStage != string(rc.StageReadiness) || got.AttemptsUsed != 1 {
		t.Fatalf("a document without render-ready.v1: %+v, want failed once with RENDER_CONTRACT_MISMATCH at readiness", got)
	}
	if w.quarantinedEver(t, id) {
		t.Fatal("a preview host fault quarantined the renderer")
	}
	if h := c.Health(context.Background()); !h.Available || len(h.Quarantined) != 0 {
		t.Fatalf("health after faults that are not the renderer's: %+v", h)
	}
}

// A renderer fault (here: a contract error in answer to the dispatch) quarantines the renderer;
// after the cool-down a passing probe lifts the quarantine by itself (recorded as probe_lift)
// and the waiting request renders.
func TestQuarantineIsLiftedByAPassingProbeAfterItsCooldown(t *testing.T) {
	w := newWorld(t, 1)
	proxied, _ := faultProxy(t, w.renderers[0].url, 1, http.StatusBadRequest, "application/json",
		`{"code":"RENDER_CONTRACT_MISMATCH","category":"configuration","stage":"admission","retryable":false,"message":"body is not an execution request"}`)
	w.workers[0].URL = proxied
	c := w.coordinator(t, func(cfg *Config) { cfg.RequestTimeout = 2 * time.Minute; cfg.QuarantineCooldown = 2 * time.Second })
	sc := w.f.scopes[0]
	req := submitDoc(t, c, sc, "quarantined", rc.OpPageCapture, "ready", 1)
	if got := wait(t, c, sc, req.ID, 2*time.Minute); got.State != StateSucceeded {
		t.Fatalf("the render after the quarantine's lift: %+v", got)
	}
	var operator, reason string
	if err := w.f.db.Pool.QueryRow(context.Background(), `SELECT operator, reason FROM render_operator_actions
		WHERE worker_id = $1 AND action = 'probe_lift'`, w.workers[0].ID).Scan(&operator, &reason); err != nil ||
		operator != "probe" || !strings.Contains(reason, "contract mismatch at admission") {
		t.Fatalf("no recorded probe lift of the contract-mismatch quarantine: %q %q %v", operator, reason, err)
	}
	if st := w.epochState(t, w.workers[0].ID, w.epochOf(t, 0)); st != "ready" {
		t.Fatalf("the renderer is %q after the lift", st)
	}
}

func (w *world) epochOf(t *testing.T, i int) string {
	t.Helper()
	caps, _, err := newClient("lifecycle-test-credential-0123456789").capabilities(context.Background(), w.renderers[i].url)
	if err != nil {
		t.Fatal(err)
	}
	return caps.Epoch
}

// A quarantine shows in health, in the metrics and in cellctl renderers list with its reason;
// the operator lifts it with cellctl renderers unquarantine (recorded), after which the probe
// makes the renderer ready and it renders. Input errors of the procedure change nothing.
func TestQuarantineIsVisibleAndTheOperatorLiftsIt(t *testing.T) {
	w, c, sc := start(t, 1, func(cfg *Config) { cfg.RequestTimeout = 2 * time.Minute })
	ctx := context.Background()
	id, epoch := w.workers[0].ID, w.epochOf(t, 0)
	testenv.Eventually(t, 30*time.Second, 20*time.Millisecond, "the renderer registered", func() error {
		if st := w.epochState(t, id, epoch); st != "ready" {
			return fmt.Errorf("state %q", st)
		}
		return nil
	})
	c.quarantine(ctx, id, epoch, "terminal receipt without released resources")
	h := c.Health(ctx)
	if h.Available || len(h.Quarantined) != 1 || h.Quarantined[0] != id || !strings.Contains(h.Detail, "quarantined: "+id) {
		t.Fatalf("health with the only renderer quarantined: %+v", h)
	}
	if g := gauges(t, c); g["cell_render_workers{quarantined}"] != 1 {
		t.Fatalf("cell_render_workers{quarantined} = %v", g["cell_render_workers{quarantined}"])
	}
	out, err := cellctl(t, "renderers", "list", "--cell-database-url", w.f.url)
	if err != nil || !strings.Contains(out, "quarantined") || !strings.Contains(out, "terminal receipt without released resources") {
		t.Fatalf("renderers list: %v\n%s", err, out)
	}
	// Bad input: no reason, an unknown renderer, a worker ID that is none.
	for _, args := range [][]string{
		{"renderers", "unquarantine", id, "--operator", "ops@example.com"},
		{"renderers", "unquarantine", "nope", "--operator", "ops@example.com", "--reason", "x"},
		{"renderers", "unquarantine", "../x", "--operator", "ops@example.com", "--reason", "x"},
		{"renderers", "unquarantine", id, "--operator", "ops@example.com", "--reason", strings.Repeat("x", 1001)},
	} {
		if out, err := cellctl(t, append(args, "--cell-database-url", w.f.url)...); err == nil {
			t.Fatalf("%v accepted:\n%s", args, out)
		}
	}
	if st := w.epochState(t, id, epoch); st != "quarantined" {
		t.Fatalf("a refused operator request changed the renderer to %q", st)
	}
	if out, err := cellctl(t, "renderers", "unquarantine", id, "--operator", "ops@example.com", "--reason", "fixed the node's disk",
		"--cell-database-url", w.f.url); err != nil {
		t.Fatalf("unquarantine: %v\n%s", err, out)
	}
	shot := submitDoc(t, c, sc, "after-unquarantine", rc.OpPageCapture, "ready", 1)
	if got := wait(t, c, sc, shot.ID, 2*time.Minute); got.State != StateSucceeded {
		t.Fatalf("the render after the operator lifted the quarantine: %+v", got)
	}
	out, err = cellctl(t, "renderers", "actions", "--json", "--cell-database-url", w.f.url)
	var acts []OperatorAction
	if err != nil || json.Unmarshal([]byte(out), &acts) != nil || len(acts) != 1 || acts[0].Action != "unquarantine" ||
		acts[0].Operator != "ops@example.com" || acts[0].Reason != "fixed the node's disk" {
		t.Fatalf("renderers actions: %v\n%s", err, out)
	}
}

// The renderer's monitoring listener (RENDER_METRICS_ADDR) serves /metrics without the service
// credential and nothing else; the control API (its /metrics included) still needs it.
func TestRendererMetricsListenerNeedsNoCredential(t *testing.T) {
	rendererBinary(t)
	f := setup(t, 1)
	docs := newDocServer(t, f)
	cred := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(cred, []byte("metrics-test-credential-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	r := startRenderer(t, f, docs, "rm-"+strings.TrimPrefix(ids.New("t"), "t_")[:8], cred, "RENDER_METRICS_ADDR="+metricsAddr)
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var body string
	testenv.Eventually(t, 10*time.Second, 20*time.Millisecond, "the metrics listener", func() error {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		body = string(b)
		return nil
	})
	if !strings.Contains(body, "renderer_launch_probe_ok") || strings.Contains(body, "metrics-test-credential") {
		t.Fatalf("the metrics listener's /metrics:\n%.500s", body)
	}
	if code, _ := get("http://" + metricsAddr + rc.APIRoot + "/capabilities"); code != http.StatusNotFound {
		t.Fatalf("the metrics listener serves the control API: HTTP %d", code)
	}
	if code, _ := get(r.url + "/metrics"); code != http.StatusUnauthorized {
		t.Fatalf("the control API's /metrics without the credential: HTTP %d, want 401", code)
	}
}

// Output beyond the contract's limits (a capture over 32 MiB, a diagnosis over 1 MiB) is the
// content's outcome: the request fails at once, without a blind retry; a host readiness fault
// (RENDER_CONTRACT_MISMATCH at readiness) is not retried either; a renderer's own contract fault
// is (another renderer may match).
func TestOutputLimitAndHostFaultsFailWithoutRetry(t *testing.T) {
	f := setup(t, 1)
	c := f.coordinator(t, f.addWorkers(t, 1), nil)
	sc := f.scopes[0]
	ctx := context.Background()
	for i, tc := range []struct {
		err   *rc.Error
		state string
	}{
		{rc.NewError(rc.CodeOutputLimitExceeded, rc.StageCapture, "capture is 40000000 bytes, limit 33554432"), StateFailed},
		{rc.NewError(rc.CodeContractMismatch, rc.StageReadiness, "preview document loaded without sending render-ready.v1"), StateFailed},
		{rc.NewError(rc.CodeContractMismatch, rc.StageAdmission, "unknown operation"), StateRetryWait},
	} {
		req := f.submit(t, c, sc, i+1, Interactive)
		got := drain(t, c)
		if len(got) != 1 {
			t.Fatal("not dispatched")
		}
		c.finish(ctx, &attempt{req: got[0].req, attemptID: got[0].attemptID, workerID: got[0].workerID, epoch: got[0].epoch}, tc.err, true)
		r, _ := c.Get(ctx, sc, req.ID)
		if r.State != tc.state || (tc.state == StateFailed && r.ErrorCode != string(tc.err.Code)) {
			t.Fatalf("%s at %s: request %s/%s, want %s", tc.err.Code, tc.err.Stage, r.State, r.ErrorCode, tc.state)
		}
		if tc.state == StateRetryWait {
			if _, err := c.Cancel(ctx, sc, req.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// An operator's release of an unknown attempt, then a late word from that attempt's driver (its
// renderer answered after all): the request has moved on to a new attempt, and the late finish
// leaves it alone — neither the new attempt nor the request's state is touched.
func TestLateFinishAfterAnOperatorReleaseLeavesTheRequestAlone(t *testing.T) {
	f := setup(t, 1)
	c := f.coordinator(t, f.addWorkers(t, 2), nil)
	sc := f.scopes[0]
	ctx := context.Background()
	req := f.submit(t, c, sc, 1, Interactive)
	got := drain(t, c)
	if len(got) != 1 {
		t.Fatal("not dispatched")
	}
	first := &attempt{req: got[0].req, attemptID: got[0].attemptID, workerID: got[0].workerID, epoch: got[0].epoch}
	if _, err := f.db.Exec(ctx, `UPDATE render_attempts SET state = 'unknown' WHERE attempt_id = $1`, first.attemptID); err != nil {
		t.Fatal(err)
	}
	res, err := NewOperator(f.db, nil).Release(ctx, Action{WorkerID: first.workerID, Operator: "ann", Reason: "node deleted"})
	if err != nil || len(res.Released) != 1 || res.Released[0] != first.attemptID {
		t.Fatalf("release: %+v %v", res, err)
	}
	if _, err := f.db.Exec(ctx, `UPDATE render_requests SET not_before = now() - interval '1 second' WHERE id = $1`, req.ID); err != nil {
		t.Fatal(err)
	}
	again := drain(t, c)
	if len(again) != 1 || again[0].req.ID != req.ID {
		t.Fatal("the released request was not dispatched again")
	}
	c.finish(ctx, first, rc.NewError(rc.CodeBrowserLost, rc.StageCleanup, "late"), true)
	r, _ := c.Get(ctx, sc, req.ID)
	var live string
	_ = f.db.Pool.QueryRow(ctx, `SELECT attempt_id FROM render_attempts WHERE request_id = $1 AND released = false`, req.ID).Scan(&live)
	if r.State != StateExecuting || r.AttemptsUsed != 2 || live != again[0].attemptID {
		t.Fatalf("after a late finish of the released attempt: request %s (%d attempts), live attempt %q; want executing on %s",
			r.State, r.AttemptsUsed, live, again[0].attemptID)
	}
}
