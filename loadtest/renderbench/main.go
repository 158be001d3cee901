// Command renderbench measures a page screenshot end to end — through the router, the cell's
// API, the snapshot, the render queue and coordinator, a renderer and the preview host, the
// verified result, the PNG streamed back — against the executor alone: the same snapshot posted
// straight to a renderer of the same cell (one the cell does not dispatch to), polled, and its
// PNG fetched. Each sample is a page never rendered before (the whole path would otherwise
// answer from its result); the two measurements alternate which goes first.
//
// It also breaks the whole path down by phase, from the cell's own timestamps of the render
// request and its attempt (API → queued → reserved → sent → accepted → the renderer's terminal
// receipt → committed → PNG read), and both measurements by the renderer's stages, from their
// receipts (accepted → browser started → ready → work finished → terminal). Before each
// executor-alone sample it waits until the spare renderer's standby is ready, as the cell's
// renderers' are after a cycle (a standby still starting would make the sample a cold start).
//
//	make build && go run ./loadtest/renderbench -pages 20
//
// It starts its own PostgreSQL, directory, two cells with their preview hosts and renderers,
// and the router on loopback (root: renderers isolate their attempts with namespaces and
// cgroups), and stops them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/deploy/stack"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/ticket"
)

func main() {
	pages := flag.Int("pages", 20, "samples: pages screenshot once each, both ways")
	bin := flag.String("bin", "bin", "folder with the built binaries (make build)")
	flag.Parse()
	if err := run(*pages, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "renderbench:", err)
		os.Exit(1)
	}
}

var client = &http.Client{Timeout: 3 * time.Minute}

func run(n int, binDir string) error {
	ctx := context.Background()
	bin, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "renderbench-")
	if err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o755)
	defer os.RemoveAll(dir)
	s, err := stack.Start(ctx, stack.Options{Dir: dir, BinDir: bin, Cells: []string{"cell-a", "cell-b"}, Renderers: true,
		Env: map[string][]string{"cell": {"LOG_LEVEL=warn"}, "renderer": {"LOG_LEVEL=warn"}},
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer s.Stop()
	demo, err := s.SeedDemo(ctx, filepath.Join(dir, "demo.json"))
	if err != nil {
		return err
	}
	spare, err := s.StartSpareRenderer("cell-a")
	if err != nil {
		return err
	}
	if err := waitHealthy(s); err != nil {
		return err
	}
	api := apiClient{base: s.RouterURL, pat: demo.PAT, ws: demo.WorkspaceA}
	var prj struct{ ID string }
	if err := api.call(http.MethodPost, "/api/v1/projects", map[string]string{"name": "bench"}, &prj); err != nil {
		return err
	}
	var pageIDs []string
	for i := range n + 1 {
		id, err := api.page(prj.ID, i)
		if err != nil {
			return err
		}
		pageIDs = append(pageIDs, id)
	}
	signerText, err := os.ReadFile(filepath.Join(dir, "keys", "ticket-signer"))
	if err != nil {
		return err
	}
	signer, err := ticket.ParseSigner(strings.TrimSpace(string(signerText)))
	if err != nil {
		return err
	}
	credText, err := os.ReadFile(filepath.Join(dir, "keys", "renderer-service-credential"))
	if err != nil {
		return err
	}
	ex := executor{url: spare.URL, cred: strings.TrimSpace(strings.SplitN(string(credText), "\n", 2)[0]), signer: signer,
		previewURL: s.Previews["cell-a"].URL}
	cellDB, err := pgx.Connect(ctx, s.CellDBURL["cell-a"])
	if err != nil {
		return err
	}
	defer cellDB.Close(ctx)
	// Warm-up: one page both ways, unmeasured (connections, the preview host's runtime cache).
	var whole, alone []time.Duration
	var parts []phases
	var wholeStages, aloneStages []stages
	for i, id := range pageIDs {
		var tw, ta time.Duration
		measureWhole := func() error {
			t0 := time.Now()
			if err := api.screenshot(id); err != nil {
				return err
			}
			t1 := time.Now()
			tw = t1.Sub(t0)
			if i > 0 {
				b, url, attemptID, acceptedAt, err := breakdown(ctx, cellDB, id, t0, t1)
				if err != nil {
					return err
				}
				var rec rc.Receipt
				rex := executor{url: url, cred: ex.cred}
				if _, err := rex.do(ctx, http.MethodGet, rc.APIRoot+"/executions/"+attemptID, nil, &rec); err != nil {
					return err
				}
				if t := rec.Times.TerminalAt; t != nil {
					// Split accepted → committed at the renderer's terminal receipt.
					done := b[4] + b[5]
					b[4] = t.Sub(acceptedAt)
					b[5] = done - b[4]
				}
				parts = append(parts, b)
				wholeStages = append(wholeStages, stagesOf(rec))
				fmt.Fprintf(os.Stderr, "  whole path: %s\n", fmtStages(stagesOf(rec)))
			}
			return nil
		}
		measureAlone := func() error {
			var ref, input string
			var vp []byte
			if err := cellDB.QueryRow(ctx, `SELECT snapshot_ref, input_digest, viewport FROM render_requests
				WHERE owner = $1 ORDER BY enqueued_at DESC LIMIT 1`, "screenshot:"+id).Scan(&ref, &input, &vp); err != nil {
				return fmt.Errorf("the page's render request: %w", err)
			}
			var v rc.Viewport
			_ = json.Unmarshal(vp, &v)
			// The spare's standby for this attempt must be ready, as the cell's renderers'
			// are after a cycle: the wait is the slot's recovery, not the attempt's.
			if err := ex.waitReady(ctx); err != nil {
				return err
			}
			t0 := time.Now()
			rec, err := ex.capture(ctx, demo.WorkspaceA, ref, input, v)
			if err != nil {
				return err
			}
			ta = time.Since(t0)
			if i > 0 {
				aloneStages = append(aloneStages, stagesOf(rec))
				fmt.Fprintf(os.Stderr, "  executor alone: %s\n", fmtStages(stagesOf(rec)))
			}
			return nil
		}
		// The whole path must run first for a page (it creates the snapshot); the order
		// alternates through which page's render of the other kind ran just before.
		if err := measureWhole(); err != nil {
			return err
		}
		if err := measureAlone(); err != nil {
			return err
		}
		if i == 0 {
			continue
		}
		whole, alone = append(whole, tw), append(alone, ta)
		fmt.Fprintf(os.Stderr, "page %2d: whole path %-8s executor alone %-8s\n", i, tw.Round(time.Millisecond), ta.Round(time.Millisecond))
	}
	w50, a50 := pct(whole, 0.5), pct(alone, 0.5)
	fmt.Printf("samples %d\nwhole path      p50 %-8s p90 %-8s mean %s\nexecutor alone  p50 %-8s p90 %-8s mean %s\nratio p50 %.2f, mean %.2f\n",
		len(whole), w50.Round(time.Millisecond), pct(whole, 0.9).Round(time.Millisecond), mean(whole).Round(time.Millisecond),
		a50.Round(time.Millisecond), pct(alone, 0.9).Round(time.Millisecond), mean(alone).Round(time.Millisecond),
		float64(w50)/float64(a50), float64(mean(whole))/float64(mean(alone)))
	printBreakdown(parts)
	printStages("whole path", wholeStages)
	printStages("executor alone", aloneStages)
	return nil
}

// stageNames name the renderer's own stages of an attempt, from its receipt.
var stageNames = []string{"accepted → browser started", "browser started → ready", "ready → work finished", "work finished → terminal"}

type stages [4]time.Duration

func stagesOf(r rc.Receipt) stages {
	t := r.Times
	d := func(a, b *time.Time) time.Duration {
		if a == nil || b == nil {
			return 0
		}
		return b.Sub(*a)
	}
	return stages{d(t.AcceptedAt, t.BrowserStartedAt), d(t.BrowserStartedAt, t.ReadyAt), d(t.ReadyAt, t.WorkFinishedAt), d(t.WorkFinishedAt, t.TerminalAt)}
}

func fmtStages(s stages) string {
	var b strings.Builder
	for k, name := range stageNames {
		fmt.Fprintf(&b, "%s %s; ", name, s[k].Round(time.Millisecond))
	}
	return b.String()
}

func printStages(what string, ss []stages) {
	if len(ss) == 0 {
		return
	}
	fmt.Printf("%s, renderer stages from the receipts (median, mean):\n", what)
	for k, name := range stageNames {
		var d []time.Duration
		for _, s := range ss {
			d = append(d, s[k])
		}
		fmt.Printf("  %-26s %-8s %s\n", name, pct(d, 0.5).Round(time.Millisecond), mean(d).Round(time.Millisecond))
	}
}

// phaseNames name the parts of one whole-path sample, from the cell's own timestamps (same
// host clock): the API until the render request is queued (page, snapshot, submit), queued →
// attempt reserved (dispatch), reserved → sent, sent → accepted by the renderer, accepted →
// the renderer's terminal receipt (its run, cleanup included), terminal receipt → request
// committed (the driver's poll noticing, result fetch, verification, storing, commit), committed → the PNG fully read by the client (the API's wait noticing,
// the result read, the PNG streamed through the router).
var phaseNames = []string{"api → queued", "queued → reserved", "reserved → sent", "sent → accepted", "accepted → terminal receipt", "terminal → committed", "committed → PNG read"}

type phases [7]time.Duration

// breakdown reads the page's latest render request and its attempt.
// It also returns the attempt's renderer URL and attempt ID, to read its receipt.
func breakdown(ctx context.Context, db *pgx.Conn, pageID string, t0, t1 time.Time) (phases, string, string, time.Time, error) {
	var enq, created, disp, acc, afin, rfin time.Time
	var url, attemptID string
	if err := db.QueryRow(ctx, `SELECT r.enqueued_at, a.created_at, a.dispatched_at, a.accepted_at, a.finished_at, r.finished_at,
		w.url, a.attempt_id
		FROM render_requests r JOIN render_attempts a ON a.workspace_id = r.workspace_id AND a.request_id = r.id
		JOIN render_workers w ON w.worker_id = a.worker_id AND w.epoch = a.epoch
		WHERE r.owner = $1 ORDER BY r.enqueued_at DESC, a.seq DESC LIMIT 1`, "screenshot:"+pageID).
		Scan(&enq, &created, &disp, &acc, &afin, &rfin, &url, &attemptID); err != nil {
		return phases{}, "", "", time.Time{}, fmt.Errorf("the page's render timestamps: %w", err)
	}
	return phases{enq.Sub(t0), created.Sub(enq), disp.Sub(created), acc.Sub(disp), afin.Sub(acc), rfin.Sub(afin), t1.Sub(rfin)}, url, attemptID, acc, nil
}

func printBreakdown(ps []phases) {
	if len(ps) == 0 {
		return
	}
	fmt.Println("whole path by phase (median, mean):")
	for k, name := range phaseNames {
		var d []time.Duration
		for _, p := range ps {
			d = append(d, p[k])
		}
		fmt.Printf("  %-26s %-8s %s\n", name, pct(d, 0.5).Round(time.Millisecond), mean(d).Round(time.Millisecond))
	}
}

func pct(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func mean(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t / time.Duration(len(d))
}

func waitHealthy(s *stack.Stack) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(s.Cells["cell-a"].URL + "/api/v1/system/health")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), `"render":{"status":"ok"`) {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("cell-a never reported render ok")
}

type apiClient struct{ base, pat, ws string }

func (a apiClient) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.pat)
	req.Header.Set("X-Workspace-ID", a.ws)
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", ids.New("k"))
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// page creates a page (a job) whose content differs by i and waits for it.
func (a apiClient) page(projectID string, i int) (string, error) {
	src := fmt.Sprintf(`import { Slide } from "@kit/layout";
import { Title, Body } from "@kit/text";
export default function P() { return <Slide><Title>Bench slide %d</Title><Body>Revenue grew in every region.</Body></Slide>; }`, i)
	var job struct {
		JobID string `json:"job_id"`
	}
	if err := a.call(http.MethodPost, "/api/v1/pages", map[string]string{"project_id": projectID, "key": fmt.Sprintf("bench-%d", i),
		"file_type": "tsx", "source": src}, &job); err != nil {
		return "", err
	}
	for range 600 {
		var st struct {
			Status string `json:"status"`
			Result struct {
				ObjectID string `json:"object_id"`
			} `json:"result"`
		}
		if err := a.call(http.MethodGet, "/api/v1/jobs/mutations/"+job.JobID, nil, &st); err != nil {
			return "", err
		}
		if st.Status == "succeeded" {
			return st.Result.ObjectID, nil
		}
		if st.Status == "failed" || st.Status == "canceled" {
			return "", fmt.Errorf("page job %d %s", i, st.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("page job %d did not finish", i)
}

func (a apiClient) screenshot(pageID string) error {
	req, _ := http.NewRequest(http.MethodGet, a.base+"/api/v1/pages/"+pageID+"/screenshot", nil)
	req.Header.Set("Authorization", "Bearer "+a.pat)
	req.Header.Set("X-Workspace-ID", a.ws)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		return fmt.Errorf("screenshot: %d %s", resp.StatusCode, b)
	}
	return nil
}

// executor posts executions straight to one renderer, as the coordinator would, and fetches the
// PNG: the executor's own latency.
type executor struct {
	url, cred, previewURL string
	signer                *ticket.Signer
	generation            int64
}

func (e *executor) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.cred)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

// waitReady waits (at most a minute) until the renderer's /readyz answers 200 with its standby
// ready. /readyz answers 200 as soon as the launch probe passed, also while the standby for the
// next attempt is still being prepared after the previous one; an attempt admitted then waits
// for that browser to start (or starts its own), which is the slot's recovery, not the
// executor's latency. The cell's renderers had a whole cycle to prepare theirs.
func (e *executor) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	last := ""
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+e.cred)
		if resp, err := client.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var rz struct {
				Standby struct {
					State string `json:"state"`
				} `json:"standby"`
			}
			_ = json.Unmarshal(b, &rz)
			if resp.StatusCode == http.StatusOK && (rz.Standby.State == "ready" || rz.Standby.State == "off") {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the spare renderer's standby was not ready within a minute (%s)", last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *executor) capture(ctx context.Context, ws, ref, input string, vp rc.Viewport) (rc.Receipt, error) {
	var caps rc.Capabilities
	if _, err := e.do(ctx, http.MethodGet, rc.APIRoot+"/capabilities", nil, &caps); err != nil {
		return rc.Receipt{}, err
	}
	e.generation = max(e.generation, caps.Slot.SlotGeneration) + 1
	now := time.Now().UTC()
	deadline := now.Add(2 * time.Minute)
	req := rc.ExecutionRequest{ContractVersion: rc.ContractVersion, Operation: rc.OpPageCapture, RequestID: ids.New(ids.Render),
		AttemptID: ids.New(ids.Attempt), WorkspaceID: ws, SnapshotRef: ref, InputDigest: input,
		RenderProfileDigest: caps.EnvironmentDigest, Viewport: vp, DeadlineAt: deadline, RemainingBudgetMS: 120_000}
	var err error
	if req.RequestDigest, err = req.ComputeRequestDigest(); err != nil {
		return rc.Receipt{}, err
	}
	if req.AdmissionTicket, err = e.signer.Sign(&ticket.Admission{RequestID: req.RequestID, AttemptID: req.AttemptID,
		RequestDigest: req.RequestDigest, WorkspaceID: ws, WorkerID: caps.WorkerID, Epoch: caps.Epoch, SlotGeneration: e.generation,
		IssuedAt: now, AcceptBy: now.Add(10 * time.Second), StopBy: deadline}); err != nil {
		return rc.Receipt{}, err
	}
	tok, err := e.signer.Sign(&ticket.PreviewAccess{WorkspaceID: ws, SnapshotRef: ref, Origin: e.previewURL,
		Path: rc.PreviewPath("", ref), IssuedAt: now, ExpiresAt: deadline})
	if err != nil {
		return rc.Receipt{}, err
	}
	req.PreviewAccess = rc.PreviewAccess{Token: tok, ExpiresAt: deadline}
	var rec rc.Receipt
	if st, err := e.do(ctx, http.MethodPost, rc.APIRoot+"/executions", &req, &rec); err != nil || st != http.StatusAccepted {
		return rc.Receipt{}, fmt.Errorf("post: %d %v", st, err)
	}
	// Followed as the cell's driver follows it (cell/render poll): a long-poll on the last state
	// seen, and a renderer that answers it at once (one predating the long-poll, as 565fcc9's)
	// read every 15 ms growing to 50 ms — a 5 ms loop of receipt reads took CPU from the attempt
	// itself on a loaded 2-core host.
	for interval := 15 * time.Millisecond; !rec.Terminal(); {
		asked, last := time.Now(), rec.State
		q := fmt.Sprintf("?%s=%s&%s=250", rc.QueryReceiptState, last, rc.QueryReceiptWaitMS)
		if st, err := e.do(ctx, http.MethodGet, rc.APIRoot+"/executions/"+req.AttemptID+q, nil, &rec); err != nil || st != http.StatusOK {
			return rc.Receipt{}, fmt.Errorf("receipt: %d %v", st, err)
		}
		if rec.State == last {
			time.Sleep(interval - time.Since(asked))
			interval = min(interval*3/2, 50*time.Millisecond)
		}
	}
	if rec.Outcome != rc.OutcomeSucceeded {
		return rc.Receipt{}, fmt.Errorf("executor alone: %s %+v", rec.Outcome, rec.Error)
	}
	if st, err := e.do(ctx, http.MethodGet, rc.APIRoot+"/executions/"+req.AttemptID+"/artifacts/"+string(rc.ArtifactCapture), nil, nil); err != nil || st != 200 {
		return rc.Receipt{}, fmt.Errorf("artifact: %d %v", st, err)
	}
	_, _ = e.do(ctx, http.MethodPut, rc.APIRoot+"/executions/"+req.AttemptID+"/result-consumption", struct{}{}, nil)
	return rec, nil
}
