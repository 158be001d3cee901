package authoring

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	gcblob "gocloud.dev/blob"

	"slidecells/cell/jobs"
	"slidecells/cell/render"
	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	"slidecells/shared/pgserver"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
	"slidecells/shared/ticket"
)

// pendingHost stands in for the preview host: it serves every snapshot document speaking
// render-ready.v1 for that snapshot, never mounted (the page stays pending for as long as its
// render runs).
func pendingHost(t *testing.T, bucket *gcblob.Bucket, ws string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /snapshots/{ref}", func(w http.ResponseWriter, r *http.Request) {
		m, err := snapshot.Load(r.Context(), bucket, ws, r.PathValue("ref"))
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><meta charset="utf-8"><script>
(() => {
  const send = typeof window.__renderReadyV1 === "function" ? window.__renderReadyV1 : null;
  try { delete window.__renderReadyV1; } catch (e) {}
  const S = {protocol: "render-ready.v1", artifact_id: %q, input_digest: %q, host_build: %q,
    init: "ok", init_error: null, mount: "pending",
    resources: {fonts: {loaded: 0, failed: 0, pending: 0}, images: {loaded: 0, failed: 0, pending: 0}, other: {loaded: 0, failed: 0, pending: 0}, failures: []},
    scenes: ["default"], scene: "default", scene_receipts: [], content_faults: []};
  if (send) send(JSON.stringify(S));
})();
</script></head><body><h1>pending</h1></body></html>`, m.Ref, m.InputDigest, m.HostBuild)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startRenderer starts a real renderer process (bin/renderer: Chromium in its isolation, hence
// root) for the preview base and returns its worker.
func startRenderer(t *testing.T, previewBase, credFile string, keys *ticket.Signer) render.Worker {
	t.Helper()
	testenv.MustHaveRoot(t, "renderers build a per-attempt isolation")
	bin := filepath.Join(testenv.MustHaveBin(t, "renderer"), "renderer")
	p, err := pgserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(p)
	temp, err := os.MkdirTemp("/tmp", "ra-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(temp) })
	id := "ra-" + ids.New("t")[2:10]
	var log bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "RENDER_WORKER_ID="+id, "RENDER_LISTEN_ADDR=127.0.0.1:"+port,
		"RENDER_TICKET_PUBLIC_KEYS="+keys.PublicKey().String(), "RENDER_PREVIEW_BASE_URL="+previewBase,
		"RENDER_TEMP_ROOT="+temp, "RENDER_SERVICE_CREDENTIAL_FILE="+credFile, "RENDER_CONTENT_READY_SECONDS=3600")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	u := "http://127.0.0.1:" + port
	testenv.Eventually(t, 60*time.Second, 50*time.Millisecond, "the renderer up", func() error {
		resp, err := http.Get(u + "/livez")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return render.Worker{ID: id, URL: u}
}

// A page create job cancelled while its render check executes on a renderer gives the render
// slot back promptly: the job's cancel (as the cancel endpoint does it: the job's cancel, then
// its render work's) is persisted, the renderer stops the attempt, the attempt is released and
// the render request ends cancelled; the job ends canceled without writing the page.
func TestJobCancelledDuringItsRenderCheckFreesTheSlot(t *testing.T) {
	f, ctx := setup(t)
	bucket := f.svc.Modules.Bucket
	signer, err := ticket.GenerateSigner("test-1")
	if err != nil {
		t.Fatal(err)
	}
	const credential = "authoring-render-credential-0123456789"
	credFile := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(credFile, []byte(credential+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := pendingHost(t, bucket, f.a.WorkspaceID())
	worker := startRenderer(t, host, credFile, signer)
	req, _ := http.NewRequest(http.MethodGet, worker.URL+rc.APIRoot+"/capabilities", nil)
	req.Header.Set("Authorization", "Bearer "+credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var caps rc.Capabilities
	err = json.NewDecoder(resp.Body).Decode(&caps)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	nav, _ := url.Parse(host)
	c := render.New(render.Config{Workers: []render.Worker{worker}, Credential: credential, ProfileDigest: caps.EnvironmentDigest,
		GlobalConcurrency: 1, WorkspaceConcurrency: 1, QueueSize: 100, WorkspaceQueueSize: 100, RequestTimeout: 2 * time.Minute,
		MaxAttempts: 3, Signer: signer, PromoteAfter: time.Hour, NavigationBase: nav}, f.svc.Store.DB, bucket, zap.NewNop())
	c.TickInterval = 200 * time.Millisecond
	cctx, cancel := context.WithCancel(context.Background())
	c.Start(cctx)
	t.Cleanup(func() { cancel(); c.Stop() })
	f.svc.Render = c
	f.run(t)
	// A check submitted while no renderer is dispatchable answers unavailable within 2 s: wait
	// for the renderer's registration (and its launch probe) first.
	testenv.Eventually(t, 90*time.Second, 20*time.Millisecond, "the renderer dispatchable", func() error {
		if h := c.Health(ctx); !h.Available {
			return fmt.Errorf("%s", h.Detail)
		}
		return nil
	})

	j, err := f.svc.SubmitPageCreate(ctx, f.a, PageCreate{ProjectID: f.prjA, Key: "pending", Title: "Pending", FileType: "tsx",
		Source: simplePage, RenderCheck: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	pool := f.svc.Store.DB.Pool
	var requestID string
	testenv.Eventually(t, 90*time.Second, 10*time.Millisecond, "the job's render check executing on the renderer", func() error {
		var st string
		err := pool.QueryRow(ctx, `SELECT a.request_id, a.state FROM render_attempts a JOIN render_requests r
			ON r.workspace_id = a.workspace_id AND r.id = a.request_id WHERE r.owner = $1 AND a.released = false`, j.ID).Scan(&requestID, &st)
		if err != nil {
			return err
		}
		if st != "running" {
			return fmt.Errorf("attempt %s", st)
		}
		return nil
	})
	cancelled := time.Now()
	if _, err := f.svc.Jobs.Cancel(ctx, f.a, j.ID); err != nil {
		got, _ := f.svc.Jobs.Get(ctx, f.a, j.ID)
		t.Fatalf("%v (job %s: %s %s)", err, got.Status, got.ErrorCode, got.ErrorSummary)
	}
	if err := f.svc.CancelRenderWork(ctx, f.a, j.ID); err != nil {
		t.Fatal(err)
	}
	// The slot comes back (state polled, bounded; the time it took is logged, not asserted: a
	// loaded test machine is no benchmark).
	testenv.Eventually(t, 10*time.Second, 5*time.Millisecond, "the render slot released", func() error {
		var live int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE released = false`).Scan(&live); err != nil {
			return err
		}
		if live != 0 {
			return fmt.Errorf("%d attempts hold the slot", live)
		}
		return nil
	})
	t.Logf("slot released %v after the job's cancel", time.Since(cancelled).Round(time.Millisecond))
	if r, err := c.Get(ctx, f.a, requestID); err != nil || r.State != render.StateCancelled || r.Reclaiming {
		t.Fatalf("the job's render request after the cancel: %+v, %v", r, err)
	}
	if got := f.finished(t, f.a, j.ID); got.Status != jobs.Canceled {
		t.Fatalf("the job after its cancel: %s (%s)", got.Status, got.ErrorCode)
	}
	if err := f.svc.Store.CheckNewPage(ctx, f.a, f.prjA, "pending"); err != nil {
		t.Fatalf("the cancelled job wrote its page: %v", err)
	}
}
