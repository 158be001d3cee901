package renderer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slidecells/renderer/internal/fixture"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
)

// setupNoBrowser starts a renderer whose child is a shell script instead of
// the browser child: admission, slot, marks and the supervisor's stop order
// need no browser. The child is isolated exactly like a real one.
func setupNoBrowser(t *testing.T, script string, mutate func(*Config)) *env {
	t.Helper()
	cfg, fx, signer, token := baseConfig(t)
	cfg.noLaunchProbe = true
	cfg.ChildCommand = []string{"/bin/sh", "-c", script}
	cfg.ChildExtraEnv = nil
	if mutate != nil {
		mutate(&cfg)
	}
	p := rc.RenderProfile{ContractVersion: rc.ContractVersion, BrowserBuild: "none (admission tests)"}
	return start(t, cfg, p, fx, signer, token)
}

func (e *env) slot() rc.Slot {
	e.t.Helper()
	var caps rc.Capabilities
	_, b, _ := e.do("GET", rc.APIRoot+"/capabilities", nil)
	if err := json.Unmarshal(b, &caps); err != nil {
		e.t.Fatal(err)
	}
	return caps.Slot
}

func (e *env) cancel(id string) (int, []byte) {
	st, b, _ := e.do("PUT", rc.APIRoot+"/executions/"+id+"/cancellation", nil)
	return st, b
}

// TestConcurrentDuplicatePostsStartOnce: the same attempt POSTed many times
// at once is taken over once, every answer is its receipt, and a second
// attempt meanwhile is explicitly not taken over, also on repetition.
func TestConcurrentDuplicatePostsStartOnce(t *testing.T) {
	e := setupNoBrowser(t, "sleep 60", nil)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	var wg sync.WaitGroup
	answers := make(chan string, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := e.post(req)
			var rec rc.Receipt
			_ = json.Unmarshal(b, &rec)
			answers <- fmt.Sprintf("%d %s %d", st, rec.AttemptID, rec.SlotGeneration)
		}()
	}
	wg.Wait()
	close(answers)
	want := fmt.Sprintf("202 %s %d", req.AttemptID, e.gen)
	for a := range answers {
		if a != want {
			t.Fatalf("answer %q, want %q", a, want)
		}
	}
	other := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	for i := 0; i < 2; i++ {
		if st, b := e.post(other); st != http.StatusTooManyRequests || errorOf(t, b).Code != rc.CodeWorkerBusy {
			t.Fatalf("second attempt = %d %s", st, b)
		}
	}
	e.waitFor(req.AttemptID, func(r rc.Receipt) bool { return r.Times.ChildStartedAt != nil })
	if st, b := e.cancel(req.AttemptID); st != http.StatusOK {
		t.Fatalf("cancel = %d %s", st, b)
	}
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeCancelled || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("receipt = %+v", rec)
	}
	if n := e.starts.Load(); n != 1 {
		t.Fatalf("%d children started, want 1", n)
	}
	if s := e.slot(); s.State != rc.SlotIdle {
		t.Fatalf("slot = %+v", s)
	}
}

// TestCancelBetweenAdmissionAndChildStart: a cancel that lands after the 202
// but before the runner started the child starts nothing.
func TestCancelBetweenAdmissionAndChildStart(t *testing.T) {
	gate := make(chan struct{})
	e := setupNoBrowser(t, "sleep 60", func(c *Config) { c.beforeRun = func() { <-gate } })
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	if st, b := e.cancel(req.AttemptID); st != http.StatusOK {
		t.Fatalf("cancel = %d %s", st, b)
	}
	close(gate)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeCancelled || rec.Error.Code != rc.CodeCancelled || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("receipt = %+v", rec)
	}
	if n := e.starts.Load(); n != 0 {
		t.Fatalf("%d children started after the cancel", n)
	}
}

// TestDiskBelowMinimumRefusesTakeover: too little temp disk is a recorded
// 503, readiness says why, nothing starts.
func TestDiskBelowMinimumRefusesTakeover(t *testing.T) {
	e := setupNoBrowser(t, "sleep 60", func(c *Config) { c.MinFreeDiskBytes = 1 << 62 })
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	for i := 0; i < 2; i++ {
		if st, b := e.post(req); st != http.StatusServiceUnavailable || errorOf(t, b).Code != rc.CodeServiceUnavailable {
			t.Fatalf("POST = %d %s", st, b)
		}
	}
	st, b, _ := e.do("GET", "/readyz", nil)
	if st != http.StatusServiceUnavailable || !strings.Contains(string(b), "temp disk") {
		t.Fatalf("readyz = %d %s", st, b)
	}
	if n := e.starts.Load(); n != 0 {
		t.Fatalf("%d children started", n)
	}
}

// TestDrainingRefusesAndReports: after shutdown began, POST is refused,
// readiness fails, the slot says draining, queries still work.
func TestDrainingRefusesAndReports(t *testing.T) {
	e := setupNoBrowser(t, "sleep 60", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	if st, b := e.post(req); st != http.StatusServiceUnavailable || errorOf(t, b).Code != rc.CodeServiceUnavailable {
		t.Fatalf("POST while draining = %d %s", st, b)
	}
	if st, b, _ := e.do("GET", "/readyz", nil); st != http.StatusServiceUnavailable || !strings.Contains(string(b), "draining") {
		t.Fatalf("readyz = %d %s", st, b)
	}
	if s := e.slot(); s.State != rc.SlotDraining {
		t.Fatalf("slot = %+v", s)
	}
	if n := e.starts.Load(); n != 0 {
		t.Fatalf("%d children started", n)
	}
}

// fakeClock is an injected clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// TestJanitorForgetsReceiptsAndMarksOnlyAfterRetention: with the injected
// clock moved past the retention, recorded receipts and cancel marks go;
// before that they stay.
func TestJanitorForgetsReceiptsAndMarksOnlyAfterRetention(t *testing.T) {
	clock := &fakeClock{}
	e := setupNoBrowser(t, "sleep 60", func(c *Config) { c.Now = clock.Now; c.MinFreeDiskBytes = 1 << 62 })
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	if st, _ := e.post(req); st != http.StatusServiceUnavailable {
		t.Fatalf("POST = %d", st)
	}
	if st, _ := e.cancel("ra_marked"); st != http.StatusAccepted {
		t.Fatalf("mark = %d", st)
	}
	time.Sleep(1500 * time.Millisecond) // a janitor round with nothing expired
	if st, _, _ := e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID, nil); st != http.StatusOK {
		t.Fatalf("receipt forgotten before its retention: %d", st)
	}
	clock.Advance(DefaultResultTTL + DefaultMarkRetention + 10*time.Minute)
	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "receipt and marks gone after the retention", func() error {
		st, _, _ := e.do("GET", rc.APIRoot+"/executions/"+req.AttemptID, nil)
		e.srv.mu.Lock()
		marks := len(e.srv.marks)
		e.srv.mu.Unlock()
		if st != http.StatusNotFound || marks != 0 {
			return fmt.Errorf("receipt %d, %d marks", st, marks)
		}
		return nil
	})
}

// TestMarksAndReceiptsAreBounded: when full, new marks and new attempts are
// refused (503) instead of anything being forgotten; a refused attempt can
// never start later (its generation is fenced).
func TestMarksAndReceiptsAreBounded(t *testing.T) {
	e := setupNoBrowser(t, "sleep 60", func(c *Config) { c.MaxCancelMarks = 2; c.MaxReceipts = 1; c.MinFreeDiskBytes = 1 << 62 })
	for _, id := range []string{"ra_m1", "ra_m2", "ra_m1"} {
		if st, b := e.cancel(id); st != http.StatusAccepted {
			t.Fatalf("mark %s = %d %s", id, st, b)
		}
	}
	if st, b := e.cancel("ra_m3"); st != http.StatusServiceUnavailable || errorOf(t, b).Code != rc.CodeServiceUnavailable {
		t.Fatalf("third mark = %d %s", st, b)
	}
	first := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	if st, _ := e.post(first); st != http.StatusServiceUnavailable {
		t.Fatalf("first = %d", st)
	}
	second := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	st, b := e.post(second)
	if st != http.StatusServiceUnavailable || !strings.Contains(errorOf(t, b).Message, "receipts") {
		t.Fatalf("second = %d %s", st, b)
	}
	if st, b := e.post(second); st != http.StatusTooManyRequests || errorOf(t, b).Code != rc.CodeWorkerBusy {
		t.Fatalf("repeat of the unrecorded refusal = %d %s, want the generation fence", st, b)
	}
	if n := e.starts.Load(); n != 0 {
		t.Fatalf("%d children started", n)
	}
}

// TestOversizeFrameFailsTheAttempt: a child announcing an artifact above the
// contract limit breaks the stream: output limit exceeded, the child is
// stopped, nothing is stored.
func TestOversizeFrameFailsTheAttempt(t *testing.T) {
	script := fmt.Sprintf(`printf '{"type":"artifact","artifact":{"name":"capture.png","bytes":%d}}\n'; head -c 1000 /dev/zero; sleep 60`, rc.MaxPNGBytes+1)
	e := setupNoBrowser(t, script, nil)
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeFailed || rec.Error.Code != rc.CodeOutputLimitExceeded || rec.Result != nil || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("receipt = %+v %+v", rec, rec.Error)
	}
}

func TestChildDeadlineMargin(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{60 * time.Second, 58500 * time.Millisecond},
		{2 * time.Second, 1500 * time.Millisecond},
		{0, 0},
	} {
		if got := childBudget(c.in); got != c.want {
			t.Errorf("childBudget(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
