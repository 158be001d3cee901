package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
