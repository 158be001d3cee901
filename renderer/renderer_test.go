package renderer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"slidecells/renderer/chromium"
	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/rendertest"
	"slidecells/renderer/supervisor"
	"slidecells/shared/digest"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
	"slidecells/shared/ticket"
)

const childMarker = "RENDERER_TEST_CHILD"

func TestMain(m *testing.M) {
	supervisor.RunShimIfRequested()
	if os.Getenv(childMarker) == "1" {
		os.Exit(chromium.RunChild(os.Stdin, os.Stdout, os.Stderr))
	}
	if err := supervisor.BecomeSubreaper(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

const previewToken = "preview-token-renderer-tests"

var (
	profileOnce sync.Once
	profile     rc.RenderProfile
	profileErr  error
)

type env struct {
	t      *testing.T
	cfg    Config
	srv    *Server
	ts     *httptest.Server
	fx     *fixture.Server
	signer *ticket.Signer
	token  string
	gen    int64
	starts atomic.Int64
}

// setup starts a renderer with a fixture preview host. mutate may change
// the configuration; the launch probe is off unless mutate turns it on
// (tests of other behaviour do not pay for a browser start).
func setup(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	rendertest.RequireBrowser(t)
	rendertest.RequireIsolation(t)
	cfg, fx, signer, token := baseConfig(t)
	cfg.noLaunchProbe = true
	if mutate != nil {
		mutate(&cfg)
	}
	profileOnce.Do(func() { profile, profileErr = ComputeProfile(context.Background(), &cfg) })
	if profileErr != nil {
		t.Fatal(profileErr)
	}
	return start(t, cfg, profile, fx, signer, token)
}

// baseConfig is the configuration every test starts from: its own temp
// root, cgroup and credential.
func baseConfig(t *testing.T) (Config, *fixture.Server, *ticket.Signer, string) {
	t.Helper()
	fx := fixture.Start(previewToken)
	t.Cleanup(fx.Close)
	signer, err := ticket.GenerateSigner("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := ticket.NewKeySet(signer.PublicKey())
	root, err := os.MkdirTemp("/tmp", "rr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	self, _ := os.Executable()
	base, _ := parseBase(fx.BaseURL())
	credPath, token := rendertest.Credential(t)
	cfg := Config{
		WorkerID:         "w-test",
		TicketKeys:       keys,
		PreviewBaseURL:   base,
		BrowserPath:      chromium.DefaultBrowserPath,
		ChildCommand:     []string{self},
		ChildExtraEnv:    []string{childMarker + "=1"},
		TempRoot:         root,
		CleanupGrace:     time.Second,
		ResultTTL:        DefaultResultTTL,
		MarkRetention:    DefaultMarkRetention,
		Limits:           supervisor.Limits{}.WithDefaults(),
		MinFreeDiskBytes: 1 << 20,
		ServiceTokens:    []string{token},
		HidePaths:        []string{credPath},
		ChildUIDs:        rendertest.UIDPool(),
		CgroupName:       rendertest.Name("slidecells-test-"),
		ChildCgroup:      supervisor.CgroupLimits{}.WithDefaults(),
		ChildTempBytes:   DefaultChildTempBytes,
	}
	return cfg, fx, signer, token
}

func start(t *testing.T, cfg Config, profile rc.RenderProfile, fx *fixture.Server, signer *ticket.Signer, token string) *env {
	t.Helper()
	e := &env{t: t, cfg: cfg, fx: fx, signer: signer, token: token}
	before := cfg.beforeStart
	e.cfg.beforeStart = func() {
		e.starts.Add(1)
		if before != nil {
			before()
		}
	}
	srv, err := New(e.cfg, profile, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		e.ts.Close()
		if left := rendertest.ProcessesUnder(cfg.TempRoot); len(left) > 0 {
			t.Errorf("processes of an attempt survived: %v", left)
		}
		rendertest.RemoveCgroups(t, srv.cgroups)
	})
	return e
}

var attemptSeq int

// request builds a signed execution request for a fixture page.
func (e *env) request(ref string, op rc.Operation, vp rc.Viewport, budget time.Duration) *rc.ExecutionRequest {
	e.t.Helper()
	attemptSeq++
	now := time.Now()
	r := &rc.ExecutionRequest{
		ContractVersion:     rc.ContractVersion,
		Operation:           op,
		RequestID:           fmt.Sprintf("rr_%d", attemptSeq),
		AttemptID:           fmt.Sprintf("ra_%d_%d", attemptSeq, now.UnixNano()),
		WorkspaceID:         "ws_test",
		TraceID:             fmt.Sprintf("tr_%d", attemptSeq),
		SnapshotRef:         ref,
		InputDigest:         fixture.InputDigest,
		RenderProfileDigest: e.srv.EnvironmentDigest(),
		Viewport:            vp,
		DeadlineAt:          now.Add(budget),
		RemainingBudgetMS:   budget.Milliseconds(),
		PreviewAccess:       rc.PreviewAccess{Token: previewToken, ExpiresAt: now.Add(5 * time.Minute)},
	}
	e.sign(r, nil)
	return r
}

// sign recomputes the digest and signs a ticket; mutate may change the
// claims.
func (e *env) sign(r *rc.ExecutionRequest, mutate func(*ticket.Admission)) {
	e.t.Helper()
	d, err := r.ComputeRequestDigest()
	if err != nil {
		e.t.Fatal(err)
	}
	r.RequestDigest = d
	e.gen++
	now := time.Now()
	c := &ticket.Admission{
		RequestID: r.RequestID, AttemptID: r.AttemptID, RequestDigest: d, WorkspaceID: r.WorkspaceID,
		WorkerID: e.cfg.WorkerID, Epoch: e.srv.Epoch(), SlotGeneration: e.gen,
		IssuedAt: now, AcceptBy: now.Add(time.Minute), StopBy: now.Add(5 * time.Minute),
	}
	if mutate != nil {
		mutate(c)
	}
	tok, err := e.signer.Sign(c)
	if err != nil {
		e.t.Fatal(err)
	}
	r.AdmissionTicket = tok
}

func (e *env) do(method, path string, body any) (int, []byte, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.ts.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func (e *env) post(r *rc.ExecutionRequest) (int, []byte) {
	st, b, _ := e.do("POST", rc.APIRoot+"/executions", r)
	return st, b
}

func (e *env) mustAccept(r *rc.ExecutionRequest) rc.Receipt {
	e.t.Helper()
	st, b := e.post(r)
	if st != http.StatusAccepted {
		e.t.Fatalf("POST = %d %s", st, b)
	}
	var rec rc.Receipt
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

func (e *env) receipt(id string) rc.Receipt {
	e.t.Helper()
	st, b, _ := e.do("GET", rc.APIRoot+"/executions/"+id, nil)
	if st != http.StatusOK {
		e.t.Fatalf("GET receipt = %d %s", st, b)
	}
	var rec rc.Receipt
	if err := json.Unmarshal(b, &rec); err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// waitFor polls the receipt until cond holds; no timing is asserted, the
// bound only keeps a broken run from hanging.
func (e *env) waitFor(id string, cond func(rc.Receipt) bool) rc.Receipt {
	e.t.Helper()
	var rec rc.Receipt
	testenv.Eventually(e.t, 90*time.Second, 20*time.Millisecond, "receipt "+id+" in the expected state", func() error {
		if rec = e.receipt(id); !cond(rec) {
			return fmt.Errorf("receipt %+v", rec)
		}
		return nil
	})
	return rec
}

func terminal(r rc.Receipt) bool { return r.State == rc.StateTerminal }
func running(r rc.Receipt) bool  { return r.State == rc.StateRunning || r.Times.BrowserStartedAt != nil }

func errorOf(t *testing.T, b []byte) rc.Error {
	t.Helper()
	var e rc.Error
	if err := json.Unmarshal(b, &e); err != nil || e.Code == "" {
		t.Fatalf("not an error body: %s", b)
	}
	if e.Category == "" || e.Stage == "" || e.Message == "" {
		t.Fatalf("error body lacks fields: %s", b)
	}
	return e
}

var slide = rc.Viewport{Width: 1280, Height: 720, DeviceScaleFactor: 2}
var small = rc.Viewport{Width: 320, Height: 180, DeviceScaleFactor: 1}

func TestCaptureEndToEnd(t *testing.T) {
	e := setup(t, nil)
	req := e.request(fixture.Slide, rc.OpPageCapture, slide, time.Minute)
	rec := e.mustAccept(req)
	if rec.AttemptID != req.AttemptID || rec.WorkerID != "w-test" || rec.Epoch != e.srv.Epoch() || rec.SlotGeneration != e.gen ||
		rec.RequestDigest != req.RequestDigest || rec.State != rc.StateAccepted || rec.ResourceState != rc.ResourceHeld {
		t.Fatalf("accepted receipt = %+v", rec)
	}
	rec = e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeSucceeded || rec.ResourceState != rc.ResourceReleased || rec.Error != nil {
		t.Fatalf("terminal receipt = %+v (error %+v)", rec, rec.Error)
	}
	for name, ts := range map[string]*time.Time{"accepted": rec.Times.AcceptedAt, "child": rec.Times.ChildStartedAt, "browser": rec.Times.BrowserStartedAt,
		"ready": rec.Times.ReadyAt, "finished": rec.Times.WorkFinishedAt, "cleanup started": rec.Times.CleanupStartedAt, "cleanup finished": rec.Times.CleanupFinishedAt, "terminal": rec.Times.TerminalAt} {
		if ts == nil {
			t.Errorf("stage time %s missing", name)
		}
	}
	res := rec.Result
	wantRender, _ := rc.RenderDigest(e.srv.EnvironmentDigest(), rc.OpPageCapture, slide, rc.OperationOptions{})
	if res == nil || res.InputDigest != fixture.InputDigest || res.RenderProfileDigest != e.srv.EnvironmentDigest() ||
		res.RenderDigest != wantRender || res.HostBuild != fixture.HostBuild || res.State != rc.ResultAvailable || len(res.Artifacts) != 1 {
		t.Fatalf("result = %+v", res)
	}
	desc := res.Artifacts[0]
	if desc.Name != rc.ArtifactCapture || desc.ContentType != "image/png" || desc.Width != 2560 || desc.Height != 1440 {
		t.Fatalf("descriptor = %+v", desc)
	}
	st, body, hdr := e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/capture.png", nil)
	if st != http.StatusOK {
		t.Fatalf("artifact GET = %d %s", st, body)
	}
	sum := sha256.Sum256(body)
	if got := digest.Prefix + hex.EncodeToString(sum[:]); got != desc.SHA256 || hdr.Get(rc.HeaderArtifactSHA256) != desc.SHA256 {
		t.Fatalf("artifact digest %s, descriptor %s, header %s", got, desc.SHA256, hdr.Get(rc.HeaderArtifactSHA256))
	}
	if hdr.Get("Content-Length") != strconv.Itoa(len(body)) || int64(len(body)) != desc.Bytes || hdr.Get("Content-Type") != "image/png" {
		t.Fatalf("length/type headers %v, body %d, descriptor %d", hdr, len(body), desc.Bytes)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(body))
	if err != nil || cfg.Width != 2560 || cfg.Height != 1440 {
		t.Fatalf("png %dx%d %v", cfg.Width, cfg.Height, err)
	}

	// A repeated POST returns the stable receipt and runs nothing.
	again := e.mustAccept(req)
	if again.State != rc.StateTerminal || again.Outcome != rc.OutcomeSucceeded || again.AttemptID != req.AttemptID {
		t.Fatalf("repeat POST receipt = %+v", again)
	}
	if n := e.fx.DocumentHits(fixture.Slide); n != 1 {
		t.Fatalf("document loaded %d times; a finished attempt was restarted", n)
	}
	// Other names are refused; consumption releases the artifact early.
	if st, _, _ := e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/..%2Fetc%2Fpasswd", nil); st != http.StatusNotFound {
		t.Fatalf("foreign artifact name = %d", st)
	}
	if st, _, _ := e.do("PUT", rc.APIRoot+"/executions/"+req.AttemptID+"/result-consumption", nil); st != http.StatusOK {
		t.Fatalf("consumption = %d", st)
	}
	if st, _, _ := e.do("PUT", rc.APIRoot+"/executions/"+req.AttemptID+"/result-consumption", nil); st != http.StatusOK {
		t.Fatalf("repeated consumption = %d", st)
	}
	st, body, _ = e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/capture.png", nil)
	if st != http.StatusGone || errorOf(t, body).Code != rc.CodeResultLost {
		t.Fatalf("artifact after consumption = %d %s", st, body)
	}
	if got := e.receipt(req.AttemptID); got.Result.State != rc.ResultConsumed {
		t.Fatalf("result state after consumption = %s", got.Result.State)
	}
}

func TestDuplicatePostAndDigestConflict(t *testing.T) {
	e := setup(t, nil)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	first := e.mustAccept(req)
	second := e.mustAccept(req)
	if first.AttemptID != second.AttemptID || first.SlotGeneration != second.SlotGeneration || first.Times.AcceptedAt.String() != second.Times.AcceptedAt.String() {
		t.Fatalf("receipts differ: %+v vs %+v", first, second)
	}
	other := *req
	other.Viewport = rc.Viewport{Width: 321, Height: 180, DeviceScaleFactor: 1}
	e.sign(&other, nil)
	st, b := e.post(&other)
	if st != http.StatusConflict || errorOf(t, b).Code != rc.CodeContractMismatch {
		t.Fatalf("same attempt, other digest = %d %s", st, b)
	}
	e.waitFor(req.AttemptID, terminal)
	if n := e.fx.DocumentHits(fixture.Ready); n != 1 {
		t.Fatalf("document loaded %d times", n)
	}
}

func TestBusySlotIsExplicitlyNotTakenOver(t *testing.T) {
	e := setup(t, nil)
	long := e.request(fixture.Forever, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(long)
	e.waitFor(long.AttemptID, running)

	other := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	st, b, hdr := e.do("POST", rc.APIRoot+"/executions", other)
	if st != http.StatusTooManyRequests || errorOf(t, b).Code != rc.CodeWorkerBusy || hdr.Get("Retry-After") == "" {
		t.Fatalf("second POST = %d %s", st, b)
	}
	var caps rc.Capabilities
	_, cb, _ := e.do("GET", rc.APIRoot+"/capabilities", nil)
	_ = json.Unmarshal(cb, &caps)
	if caps.Slot.State != rc.SlotBusy || caps.Slot.AttemptID != long.AttemptID || caps.Epoch != e.srv.Epoch() ||
		caps.EnvironmentDigest != e.srv.EnvironmentDigest() || caps.Limits.MaxScenes != 16 || caps.ProtocolVersions.Readiness != rc.ReadinessProtocol {
		t.Fatalf("capabilities = %s", cb)
	}
	if st, rb, _ := e.do("GET", "/readyz", nil); st != http.StatusOK {
		t.Fatalf("readyz while busy = %d %s", st, rb)
	}
	e.do("PUT", rc.APIRoot+"/executions/"+long.AttemptID+"/cancellation", rc.CancelRequest{CancelVersion: 1})
	e.waitFor(long.AttemptID, terminal)
	// The refused attempt is never started later.
	if st, b := e.post(other); st != http.StatusTooManyRequests {
		t.Fatalf("repeat of a refused attempt = %d %s", st, b)
	}
	if e.fx.DocumentHits(fixture.Ready) != 0 {
		t.Fatal("a refused attempt reached the preview host")
	}
}

func TestCancelBeforePostStopsLateDispatch(t *testing.T) {
	e := setup(t, nil)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	st, b, _ := e.do("PUT", rc.APIRoot+"/executions/"+req.AttemptID+"/cancellation", rc.CancelRequest{CancelVersion: 3})
	var ans rc.CancelAnswer
	_ = json.Unmarshal(b, &ans)
	if st != http.StatusAccepted || !ans.MarkRecorded || ans.CancelVersion != 3 {
		t.Fatalf("cancel before POST = %d %s", st, b)
	}
	// Idempotent.
	if st, _, _ := e.do("PUT", rc.APIRoot+"/executions/"+req.AttemptID+"/cancellation", nil); st != http.StatusAccepted {
		t.Fatalf("repeated cancel = %d", st)
	}
	st, b = e.post(req)
	if st != http.StatusConflict || errorOf(t, b).Code != rc.CodeCancelled {
		t.Fatalf("late POST = %d %s", st, b)
	}
	rec := e.receipt(req.AttemptID)
	if rec.State != rc.StateTerminal || rec.Outcome != rc.OutcomeCancelled || rec.ResourceState != rc.ResourceNone || !rec.CancelRequested {
		t.Fatalf("receipt = %+v", rec)
	}
	if st, b := e.post(req); st != http.StatusConflict {
		t.Fatalf("repeat of a cancelled attempt = %d %s", st, b)
	}
	if e.fx.DocumentHits(fixture.Ready) != 0 {
		t.Fatal("a cancelled attempt reached the preview host")
	}
}

func TestCancelDuringRun(t *testing.T) {
	e := setup(t, nil)
	req := e.request(fixture.Forever, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	e.waitFor(req.AttemptID, running)
	assertSandboxed(t, e.cfg.TempRoot)
	st, b, _ := e.do("PUT", rc.APIRoot+"/executions/"+req.AttemptID+"/cancellation", nil)
	if st != http.StatusOK {
		t.Fatalf("cancel = %d %s", st, b)
	}
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeCancelled || rec.Error == nil || rec.Error.Code != rc.CodeCancelled || rec.ResourceState != rc.ResourceReleased || rec.Result != nil {
		t.Fatalf("receipt = %+v", rec)
	}
	if rec.Times.StopRequestedAt == nil || rec.Times.CleanupFinishedAt == nil {
		t.Fatalf("stop/cleanup times missing: %+v", rec.Times)
	}
	assertNoProcessesUnder(t, e.cfg.TempRoot)
	// Cancelling again is idempotent and changes nothing.
	if st, _, _ := e.do("PUT", rc.APIRoot+"/executions/"+req.AttemptID+"/cancellation", nil); st != http.StatusOK {
		t.Fatalf("repeated cancel = %d", st)
	}
}

func TestDeadlineKillsEverything(t *testing.T) {
	e := setup(t, func(c *Config) { c.CleanupGrace = 500 * time.Millisecond })
	req := e.request(fixture.Forever, rc.OpPageCapture, small, 4*time.Second)
	e.mustAccept(req)
	e.waitFor(req.AttemptID, func(r rc.Receipt) bool { return running(r) || terminal(r) })
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeExpired || rec.Error == nil || rec.Error.Code != rc.CodeDeadlineExceeded || rec.Error.Category != rc.CategoryTimeout ||
		rec.ResourceState != rc.ResourceReleased || rec.Result != nil {
		t.Fatalf("receipt = %+v (error %+v)", rec, rec.Error)
	}
	assertNoProcessesUnder(t, e.cfg.TempRoot)
	// The slot is free again.
	next := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(next)
	if r := e.waitFor(next.AttemptID, terminal); r.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("next attempt = %+v", r)
	}
}

func TestAdmissionRefusalsStartNothing(t *testing.T) {
	e := setup(t, nil)
	cases := []struct {
		name   string
		build  func() *rc.ExecutionRequest
		status int
		code   rc.Code
	}{
		{"tampered ticket", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			parts := strings.Split(r.AdmissionTicket, ".")
			parts[1] = parts[1][:len(parts[1])-2] + "AA"
			r.AdmissionTicket = strings.Join(parts, ".")
			return r
		}, http.StatusForbidden, rc.CodeInputExpired},
		{"ticket signed by an unknown key", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			other, _ := ticket.GenerateSigner("k1")
			saved := e.signer
			e.signer = other
			e.sign(r, nil)
			e.signer = saved
			return r
		}, http.StatusForbidden, rc.CodeInputExpired},
		{"expired ticket", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			e.sign(r, func(c *ticket.Admission) {
				c.IssuedAt = time.Now().Add(-2 * time.Minute)
				c.AcceptBy = time.Now().Add(-time.Minute)
			})
			return r
		}, http.StatusServiceUnavailable, rc.CodeServiceUnavailable},
		{"other epoch", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			e.sign(r, func(c *ticket.Admission) { c.Epoch = "ep_previous" })
			return r
		}, http.StatusServiceUnavailable, rc.CodeServiceUnavailable},
		{"other worker", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			e.sign(r, func(c *ticket.Admission) { c.WorkerID = "w-other" })
			return r
		}, http.StatusServiceUnavailable, rc.CodeServiceUnavailable},
		{"ticket for another attempt", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			e.sign(r, func(c *ticket.Admission) { c.AttemptID = "ra_other" })
			return r
		}, http.StatusForbidden, rc.CodeInputExpired},
		{"older slot generation", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			e.sign(r, func(c *ticket.Admission) { c.SlotGeneration = 1 })
			return r
		}, http.StatusTooManyRequests, rc.CodeWorkerBusy},
		{"other environment digest", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			r.RenderProfileDigest = digest.Bytes([]byte("another environment"))
			e.sign(r, nil)
			return r
		}, http.StatusUnprocessableEntity, rc.CodeProfileMismatch},
		{"canvas above 16 megapixels", func() *rc.ExecutionRequest {
			return e.request(fixture.Ready, rc.OpPageCapture, rc.Viewport{Width: 3000, Height: 2000, DeviceScaleFactor: 2}, time.Minute)
		}, http.StatusUnprocessableEntity, rc.CodeOutputLimitExceeded},
		{"side above 8192", func() *rc.ExecutionRequest {
			return e.request(fixture.Ready, rc.OpPageCapture, rc.Viewport{Width: 8200, Height: 10, DeviceScaleFactor: 1}, time.Minute)
		}, http.StatusUnprocessableEntity, rc.CodeOutputLimitExceeded},
		{"17 scenes", func() *rc.ExecutionRequest {
			r := e.request(fixture.Component, rc.OpComponentDiagnose, small, time.Minute)
			for i := 0; i < 16; i++ {
				r.OperationOptions.Scenes = append(r.OperationOptions.Scenes, fmt.Sprintf("s%d", i))
			}
			e.sign(r, nil)
			return r
		}, http.StatusUnprocessableEntity, rc.CodeOutputLimitExceeded},
		{"expired preview access", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			r.PreviewAccess.ExpiresAt = time.Now().Add(-time.Second)
			return r
		}, http.StatusForbidden, rc.CodeInputExpired},
		{"digest not matching the fields", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			r.SnapshotRef = fixture.Slide
			return r
		}, http.StatusBadRequest, rc.CodeContractMismatch},
		{"deadline already passed", func() *rc.ExecutionRequest {
			r := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
			r.DeadlineAt = time.Now().Add(-time.Second)
			e.sign(r, nil)
			return r
		}, http.StatusUnprocessableEntity, rc.CodeDeadlineExceeded},
	}
	// A first accepted attempt raises the accepted generation.
	first := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(first)
	e.waitFor(first.AttemptID, terminal)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.build()
			st, b := e.post(r)
			if st != tc.status || errorOf(t, b).Code != tc.code {
				t.Fatalf("POST = %d %s, want %d %s", st, b, tc.status, tc.code)
			}
			if got := errorOf(t, b); got.TraceID != r.TraceID {
				t.Fatalf("trace_id not echoed: %s", b)
			}
		})
	}
	if n := e.fx.DocumentHits(fixture.Ready) + e.fx.DocumentHits(fixture.Component) + e.fx.DocumentHits(fixture.Slide); n != 1 {
		t.Fatalf("preview documents loaded %d times; only the first attempt may run", n)
	}
	var caps rc.Capabilities
	_, cb, _ := e.do("GET", rc.APIRoot+"/capabilities", nil)
	_ = json.Unmarshal(cb, &caps)
	if caps.Slot.State != rc.SlotIdle {
		t.Fatalf("slot = %+v", caps.Slot)
	}
}

func TestUnknownAndReclaimed(t *testing.T) {
	e := setup(t, func(c *Config) { c.ResultTTL = time.Second })
	if st, b, _ := e.do("GET", rc.APIRoot+"/executions/ra_never_seen", nil); st != http.StatusNotFound || errorOf(t, b).Code != rc.CodeResultLost {
		t.Fatalf("unknown receipt = %d %s", st, b)
	}
	if st, _, _ := e.do("GET", rc.APIRoot+"/executions/ra_never_seen/artifacts/capture.png", nil); st != http.StatusNotFound {
		t.Fatalf("unknown artifact = %d", st)
	}
	req := e.request(fixture.Layout, rc.OpPageDiagnose, small, time.Minute)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("diagnose = %+v %+v", rec, rec.Error)
	}
	st, body, hdr := e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/diagnosis.json", nil)
	if st == http.StatusOK {
		var d rc.Diagnosis
		if err := json.Unmarshal(body, &d); err != nil || d.Counts.Error == 0 || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("diagnosis = %s (%v)", body, err)
		}
	}
	// After the retention the artifact is reclaimed: 410, while the
	// receipt stays.
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "artifact reclaimed (410)", func() error {
		if st, _, _ = e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/diagnosis.json", nil); st != http.StatusGone {
			return fmt.Errorf("status %d", st)
		}
		return nil
	})
	if r := e.receipt(req.AttemptID); r.Result == nil || r.Result.State != rc.ResultReclaimed {
		t.Fatalf("receipt after reclaim = %+v", r)
	}
}

func TestDiagnoseOperations(t *testing.T) {
	e := setup(t, nil)
	req := e.request(fixture.Component, rc.OpComponentDiagnose, small, time.Minute)
	req.OperationOptions.Scenes = []string{"dense", "broken"}
	e.sign(req, nil)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeSucceeded || rec.Result.Artifacts[0].Name != rc.ArtifactDiagnosis {
		t.Fatalf("receipt = %+v %+v", rec, rec.Error)
	}
	_, body, _ := e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/diagnosis.json", nil)
	var d rc.Diagnosis
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Scenes) != 3 || d.Scenes[2].Scene != "broken" || d.Counts.Error == 0 {
		t.Fatalf("diagnosis = %s", body)
	}
	for _, f := range d.Items {
		if f.Severity == "" || f.Code == "" || f.Scene == "" {
			t.Fatalf("finding lacks fields: %+v", f)
		}
	}
	// A blocking content fault fails a capture but is content in a
	// diagnosis.
	capReq := e.request(fixture.Fault, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(capReq)
	rec = e.waitFor(capReq.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeFailed || rec.Error.Code != rc.CodeContentError || rec.Error.Category != rc.CategoryContent || rec.Result != nil {
		t.Fatalf("capture of faulty content = %+v %+v", rec, rec.Error)
	}
	if st, _, _ := e.do("GET", rc.APIRoot+"/executions/"+capReq.AttemptID+"/artifacts/capture.png", nil); st != http.StatusNotFound {
		t.Fatalf("failed attempt served an artifact: %d", st)
	}
	// Missing protocol is an execution failure, never a success.
	never := e.request(fixture.Never, rc.OpPageDiagnose, small, time.Minute)
	e.mustAccept(never)
	rec = e.waitFor(never.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeFailed || rec.Error.Code != rc.CodeContractMismatch {
		t.Fatalf("page without protocol = %+v %+v", rec, rec.Error)
	}
}

// TestEveryEndpointNeedsTheServiceCredential: every endpoint but /livez
// refuses a missing or wrong credential with 401 and its own code; during a
// rotation both credentials are accepted.
func TestEveryEndpointNeedsTheServiceCredential(t *testing.T) {
	e := setup(t, func(c *Config) { c.ServiceTokens = append(c.ServiceTokens, "the-next-service-credential") })
	endpoints := [][2]string{
		{"GET", rc.APIRoot + "/capabilities"},
		{"POST", rc.APIRoot + "/executions"},
		{"GET", rc.APIRoot + "/executions/ra_x"},
		{"GET", rc.APIRoot + "/executions/ra_x?state=running&wait_ms=1000"},
		{"PUT", rc.APIRoot + "/executions/ra_x/cancellation"},
		{"GET", rc.APIRoot + "/executions/ra_x/artifacts/capture.png"},
		{"PUT", rc.APIRoot + "/executions/ra_x/result-consumption"},
		{"GET", "/readyz"},
		{"GET", "/metrics"},
		{"GET", "/nowhere"},
	}
	call := func(method, path, auth string) (int, []byte) {
		req, _ := http.NewRequest(method, e.ts.URL+path, strings.NewReader("{}"))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, ep := range endpoints {
		for _, auth := range []string{"", "Bearer wrong-credential-of-some-length", "Bearer " + e.token + "x", "Basic " + e.token, e.token} {
			st, b := call(ep[0], ep[1], auth)
			if st != http.StatusUnauthorized || errorOf(t, b).Code != rc.CodeUnauthenticated {
				t.Fatalf("%s %s with %q = %d %s", ep[0], ep[1], auth, st, b)
			}
		}
		for _, tok := range []string{e.token, "the-next-service-credential"} {
			if st, b := call(ep[0], ep[1], "Bearer "+tok); st == http.StatusUnauthorized {
				t.Fatalf("%s %s refused a valid credential: %s", ep[0], ep[1], b)
			}
		}
	}
	if st, _ := call("GET", "/livez", ""); st != http.StatusOK {
		t.Fatalf("livez needs no credential, got %d", st)
	}
	if n := e.starts.Load(); n != 0 {
		t.Fatalf("%d children started", n)
	}
}

func assertNoProcessesUnder(t *testing.T, root string) {
	t.Helper()
	if left := rendertest.ProcessesUnder(root); len(left) > 0 {
		t.Fatalf("processes of an attempt survived: %v", left)
	}
}

// assertSandboxed checks, while an attempt runs, that its browser runs as a
// non-root user, never with --no-sandbox, and that its renderer processes
// live in a user namespace of their own (Chromium's namespace sandbox).
func assertSandboxed(t *testing.T, root string) {
	t.Helper()
	self, _ := os.Readlink("/proc/self/ns/user")
	testenv.Eventually(t, 30*time.Second, 50*time.Millisecond, "a sandboxed renderer process", func() error {
		browsers, sandboxed := 0, 0
		ents, _ := os.ReadDir("/proc")
		for _, ent := range ents {
			if _, err := strconv.Atoi(ent.Name()); err != nil {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
			if !bytes.Contains(cmd, []byte(root)) || !bytes.Contains(cmd, []byte("chromium")) {
				continue
			}
			browsers++
			if bytes.Contains(cmd, []byte("--no-sandbox")) {
				t.Fatalf("browser process runs without sandbox: %s", strings.ReplaceAll(string(cmd), "\x00", " "))
			}
			status, _ := os.ReadFile("/proc/" + ent.Name() + "/status")
			for _, l := range strings.Split(string(status), "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == "0" {
					t.Fatalf("browser process %s runs as root", ent.Name())
				}
			}
			if bytes.Contains(cmd, []byte("--type=renderer")) {
				if ns, err := os.Readlink("/proc/" + ent.Name() + "/ns/user"); err == nil && ns != self {
					sandboxed++
				}
			}
		}
		if browsers == 0 || sandboxed == 0 {
			return fmt.Errorf("no sandboxed renderer process found (%d browser processes)", browsers)
		}
		return nil
	})
}
