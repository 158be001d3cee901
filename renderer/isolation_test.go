package renderer

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"slidecells/renderer/egress"
	"slidecells/renderer/internal/fixture"
	"slidecells/renderer/internal/rendertest"
	"slidecells/renderer/internal/unpriv"
	"slidecells/renderer/supervisor"
	"slidecells/shared/loop"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
)

// TestLaunchProbeGatesReadiness: /readyz is true only once a real sandboxed
// browser started inside the attempt's namespaces and limits.
func TestLaunchProbeGatesReadiness(t *testing.T) {
	e := setup(t, func(c *Config) { c.noLaunchProbe = false })
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "readyz 200 after the launch probe", func() error {
		st, b, _ := e.do("GET", "/readyz", nil)
		switch {
		case st == http.StatusOK:
			return nil
		case !strings.Contains(string(b), "launch probe pending"):
			return loop.Stop(fmt.Errorf("readyz = %d %s", st, b))
		}
		return fmt.Errorf("readyz = %d %s", st, b)
	})
	if n := e.starts.Load(); n != 1 {
		t.Fatalf("%d children started for one probe", n)
	}
	_, m, _ := e.do("GET", "/metrics", nil)
	if !strings.Contains(string(m), `renderer_launch_probes_total{result="ok"} 1`) || !strings.Contains(string(m), "renderer_stage_duration_seconds_count{stage=\"isolation_namespaces\"} 1") {
		t.Fatalf("metrics lack the probe:\n%s", m)
	}
}

// TestFailingLaunchProbeMakesTheRendererUnready: where the browser cannot
// start inside the limits (here: a pids limit no browser fits in), /readyz
// fails and attempts are refused before they burn the retry budget.
func TestFailingLaunchProbeMakesTheRendererUnready(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.noLaunchProbe = false
		c.ChildCgroup.Processes = 12
	})
	var body string
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "readyz 503 launch probe failed", func() error {
		st, b, _ := e.do("GET", "/readyz", nil)
		if body = string(b); st != http.StatusServiceUnavailable || !strings.Contains(body, "launch probe failed") {
			return fmt.Errorf("readyz = %d %s", st, b)
		}
		return nil
	})
	req := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	if st, b := e.post(req); st != http.StatusServiceUnavailable || errorOf(t, b).Code != rc.CodeServiceUnavailable {
		t.Fatalf("POST while the probe fails = %d %s", st, b)
	}
	if n := e.starts.Load(); n != 1 {
		t.Fatalf("%d children started; only the probe may run", n)
	}
}

// TestDeadlineFailureCarriesPendingFacts: the child's own deadline ends
// before the hard deadline, so the receipt holds its resource facts.
//
// It runs on a standby (the attempt's deadline replaces the standby's own at
// the hand-over), so a slow browser start on a loaded machine does not eat
// the short budget.
func TestDeadlineFailureCarriesPendingFacts(t *testing.T) {
	e := setup(t, func(c *Config) { c.noLaunchProbe = false })
	e.waitStandby()
	req := e.request(fixture.Pending, rc.OpPageCapture, small, 8*time.Second)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeExpired || rec.Error == nil || rec.Error.Code != rc.CodeDeadlineExceeded {
		t.Fatalf("receipt = %+v %+v", rec, rec.Error)
	}
	if rec.Error.Resources == nil || rec.Error.Resources.Images.Pending != 1 {
		t.Fatalf("deadline error lacks the pending resources: %+v", rec.Error)
	}
	if rec.Times.WorkFinishedAt == nil || !rec.Times.WorkFinishedAt.Before(*rec.HardDeadline) {
		t.Fatalf("the child did not report before the hard deadline: %+v", rec.Times)
	}
}

// TestPageMemoryBombEndsAsAFailedAttempt: a page that allocates without end
// meets the attempt's memory limit (the whole browser shares it); the kernel
// kills its renderer process, the child sees the crash and reports
// RENDER_BROWSER_LOST at once, the slot is released, the next attempt runs.
//
// The bomb runs on a standby (whose browser counts in the same memory limit);
// the next attempt is posted at once, so it takes the standby prepared after
// the crash while it still starts.
func TestPageMemoryBombEndsAsAFailedAttempt(t *testing.T) {
	e := setup(t, func(c *Config) {
		c.ChildCgroup.MemoryBytes = 768 << 20
		c.noLaunchProbe = false
	})
	e.waitStandby()
	req := e.request(fixture.MemoryBomb, rc.OpPageCapture, small, 20*time.Second)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeFailed || rec.Error.Code != rc.CodeBrowserLost || rec.Result != nil || rec.ResourceState != rc.ResourceReleased {
		t.Fatalf("receipt = %+v %+v", rec, rec.Error)
	}
	next := e.request(fixture.Ready, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(next)
	if r := e.waitFor(next.AttemptID, terminal); r.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("next attempt = %+v %+v", r, r.Error)
	}
}

// TestBombsEndAsFailedAttempts: a memory bomb and a fork bomb inside an
// attempt end as failed attempts, the slot is released and the next
// attempt runs; the host can still fork.
func TestBombsEndAsFailedAttempts(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		limits       supervisor.CgroupLimits
	}{
		{"memory", `awk 'BEGIN { s = "x"; for (;;) s = s s }'`, supervisor.CgroupLimits{MemoryBytes: 256 << 20, Processes: 64, CPUs: 1}},
		{"fork", `b() { b | b & }; b; sleep 60`, supervisor.CgroupLimits{MemoryBytes: 256 << 20, Processes: 64, CPUs: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setupNoBrowser(t, tc.script, func(c *Config) { c.ChildCgroup = tc.limits })
			req := e.request(fixture.Ready, rc.OpPageCapture, small, 3*time.Second)
			e.mustAccept(req)
			rec := e.waitFor(req.AttemptID, terminal)
			if (rec.Outcome != rc.OutcomeFailed && rec.Outcome != rc.OutcomeExpired) || rec.Result != nil || rec.ResourceState != rc.ResourceReleased {
				t.Fatalf("receipt = %+v %+v", rec, rec.Error)
			}
			if s := e.slot(); s.State != rc.SlotIdle {
				t.Fatalf("slot = %+v", s)
			}
			if out, err := exec.Command("/bin/true").CombinedOutput(); err != nil {
				t.Fatalf("host cannot fork: %v %s", err, out)
			}
		})
	}
}

// TestUnprivileged runs the control process's tests of the boundary again
// as an unprivileged user (user-namespace mode, delegated cgroup): a capture
// end to end, the launch probe, a deadline and a cancel that kill
// everything, a page's memory bomb and the child's memory and fork bombs.
func TestUnprivileged(t *testing.T) {
	rendertest.RequireBrowser(t)
	unpriv.RunTests(t, unpriv.Options{}, "TestCaptureEndToEnd", "TestLaunchProbeGatesReadiness", "TestDeadlineKillsEverything",
		"TestCancelDuringRun", "TestPageMemoryBombEndsAsAFailedAttempt", "TestBombsEndAsFailedAttempts",
		"TestStandbyServesOneAttemptAndIsGone", "TestStandbyThatDiesIsReplaced")
}

// TestEgressLimitEndsTheAttempt: a page that needs more than the attempt's
// egress allows (a 3 MiB image through a 512 KiB limit) fails with
// RENDER_ASSET_NOT_READY, not retryable, naming the limit, and the limit hit
// is counted; the same page within the default limits succeeds.
func TestEgressLimitEndsTheAttempt(t *testing.T) {
	e := setup(t, func(c *Config) { c.Egress = egress.Limits{MaxBytes: 512 << 10} })
	req := e.request(fixture.BigImage, rc.OpPageCapture, small, time.Minute)
	e.mustAccept(req)
	rec := e.waitFor(req.AttemptID, terminal)
	if rec.Outcome != rc.OutcomeFailed || rec.Error == nil || rec.Error.Code != rc.CodeAssetNotReady || rec.Error.Retryable ||
		!strings.Contains(rec.Error.Message, "egress limit (bytes)") {
		t.Fatalf("receipt = %+v %+v", rec, rec.Error)
	}
	if _, m, _ := e.do("GET", "/metrics", nil); !strings.Contains(string(m), `renderer_attempt_limit_hits_total{limit="egress_bytes"} 1`) {
		t.Fatalf("metrics lack the limit hit:\n%s", m)
	}
	within := setup(t, nil)
	ok := within.request(fixture.BigImage, rc.OpPageCapture, small, time.Minute)
	within.mustAccept(ok)
	if r := within.waitFor(ok.AttemptID, terminal); r.Outcome != rc.OutcomeSucceeded {
		t.Fatalf("within the default limits = %+v %+v", r, r.Error)
	}
}
