package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/testenv"
)

// cellctl runs the cellctl binary against the stack's directory and cells file.
func (e *env) cellctl(t *testing.T, extraEnv []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "cellctl"), args...)
	cmd.Env = append(append(os.Environ(), "DIRECTORY_DATABASE_URL="+e.s.DirURL, "CELLCTL_CELLS_FILE="+e.s.CellsFile), extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		s := out.String()
		if strings.Contains(s, "password") || strings.Contains(s, e.s.DirURL) {
			t.Errorf("cellctl printed a credential:\n%s", s)
		}
		return s, err
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("cellctl %v did not finish:\n%s", args, out.String())
		return "", nil
	}
}

var moveID = regexp.MustCompile(`move (mv_[a-z2-7]{26})`)

// listNames lists a workspace's project names through the router, every page, and the cell
// that served the last page.
func (e *env) listNames(t *testing.T, ws string) ([]string, string, answer) {
	t.Helper()
	var names []string
	cursor := ""
	for {
		a := e.get(t, "/api/v1/projects?limit=200&cursor="+url.QueryEscape(cursor), e.demo.PAT, "X-Workspace-ID", ws)
		if a.status != 200 {
			return nil, "", a
		}
		var p struct {
			Items []struct {
				ID, Name string
			}
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(a.body, &p); err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			names = append(names, it.Name)
		}
		if p.NextCursor == "" {
			return names, a.header.Get("X-Cell-ID"), a
		}
		cursor = p.NextCursor
	}
}

// workload is a client load on one workspace through the router: writers that create projects with
// fresh Idempotency-Keys and retry each (same key) on a retryable answer, and readers. It records
// every acknowledged write and every answer that was not a success.
type workload struct {
	e      *env
	ws     string
	prefix string
	// acked maps a project name to the ID its (only) acknowledged 201 carried.
	mu       sync.Mutex
	acked    map[string]string
	failures []string // unexpected answers
	retried  map[string]int
	reads    atomic.Int64
	writes   atomic.Int64
	foreign  atomic.Int64 // names read that this client never wrote nor seeded
}

func newWorkload(e *env, ws, prefix string) *workload {
	return &workload{e: e, ws: ws, prefix: prefix, acked: map[string]string{}, retried: map[string]int{}}
}

func (c *workload) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
}

// run starts writers and readers until stop is closed; moving says whether the workspace may
// answer 503 WORKSPACE_MOVING (and, for a moment at the flip, a placement-changing 503).
func (c *workload) run(t *testing.T, stop <-chan struct{}, writers int, moving bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("%s-%d-%d", c.prefix, w, i)
				c.write(t, name)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			names, _, a := c.e.listNames(t, c.ws)
			if a.status != 0 && a.status != 200 {
				if !(moving && a.status == 503 && a.header.Get("Retry-After") != "") {
					c.fail("read: %d %s", a.status, a.body)
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			c.reads.Add(1)
			for _, n := range names {
				if !strings.HasPrefix(n, c.prefix) && !strings.HasPrefix(n, "seed-") {
					c.foreign.Add(1)
				}
			}
		}
	}()
	return &wg
}

// write creates one project, retrying with the same key until it is acknowledged.
func (c *workload) write(t *testing.T, name string) {
	body := []byte(`{"name":"` + name + `"}`)
	key := "k-" + name
	for attempt := 0; attempt < 600; attempt++ {
		a := c.e.do(t, http.MethodPost, "/api/v1/projects", c.e.demo.PAT, body,
			"X-Workspace-ID", c.ws, "Idempotency-Key", key, "Content-Type", "application/json")
		switch {
		case a.status == http.StatusCreated:
			var p struct{ ID string }
			_ = json.Unmarshal(a.body, &p)
			c.mu.Lock()
			if prev, ok := c.acked[name]; ok && prev != p.ID {
				c.failures = append(c.failures, fmt.Sprintf("%s acknowledged as %s and %s", name, prev, p.ID))
			}
			c.acked[name] = p.ID
			c.mu.Unlock()
			c.writes.Add(1)
			return
		case a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") != "",
			a.status == http.StatusConflict && a.code == "IDEMPOTENCY_KEY_IN_FLIGHT":
			c.mu.Lock()
			c.retried[a.code]++
			c.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		default:
			c.fail("write %s: %d %s", name, a.status, a.body)
			return
		}
	}
	c.fail("write %s: never acknowledged", name)
}

// check asserts the workload's invariants against what the workspace holds now.
func (c *workload) check(t *testing.T, seeded int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) > 0 {
		t.Fatalf("%s: %d unexpected answers, first: %s", c.ws, len(c.failures), strings.Join(c.failures[:min(5, len(c.failures))], "\n"))
	}
	if c.foreign.Load() > 0 {
		t.Fatalf("%s: reads saw %d projects of another workspace", c.ws, c.foreign.Load())
	}
	names, _, a := c.e.listNames(t, c.ws)
	if a.status != 200 {
		t.Fatalf("final list: %d %s", a.status, a.body)
	}
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
	}
	for n, k := range seen {
		if k != 1 {
			t.Errorf("%s: project %s exists %d times (applied twice)", c.ws, n, k)
		}
		if strings.HasPrefix(n, c.prefix) {
			if _, ok := c.acked[n]; !ok {
				// Written but never acknowledged: only the last write of each writer may be in
				// flight when the loop stopped, and it was retried to an answer, so none.
				t.Errorf("%s: project %s exists but was never acknowledged", c.ws, n)
			}
		}
	}
	for n := range c.acked {
		if seen[n] != 1 {
			t.Errorf("%s: acknowledged write %s lost", c.ws, n)
		}
	}
	if len(names) != len(c.acked)+seeded {
		t.Errorf("%s: %d projects, want %d acknowledged + %d seeded", c.ws, len(names), len(c.acked), seeded)
	}
}

func pngOf(t *testing.T, side int, shade uint8) []byte {
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for i := range img.Pix {
		img.Pix[i] = shade + uint8(i%7)
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// seedWorkspace gives a workspace projects, an asset (a blob) and a page made by a job.
func (e *env) seedWorkspace(t *testing.T, ws string, projects int) (jobID string) {
	t.Helper()
	var first string
	for i := range projects {
		a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(fmt.Sprintf(`{"name":"seed-%d"}`, i)),
			"X-Workspace-ID", ws, "Idempotency-Key", fmt.Sprintf("seed-%s-%d", ws, i), "Content-Type", "application/json")
		if a.status != http.StatusCreated {
			t.Fatalf("seed project: %d %s", a.status, a.body)
		}
		if i == 0 {
			var p struct{ ID string }
			_ = json.Unmarshal(a.body, &p)
			first = p.ID
		}
	}
	a := e.do(t, http.MethodPost, "/api/v1/assets/content?name=logo", e.demo.PAT, pngOf(t, 64, 9),
		"X-Workspace-ID", ws, "Idempotency-Key", "seed-asset-"+ws, "Content-Type", "image/png")
	if a.status != http.StatusCreated {
		t.Fatalf("seed asset: %d %s", a.status, a.body)
	}
	body, _ := json.Marshal(map[string]string{"project_id": first, "key": "intro", "file_type": "tsx",
		"source": "export default function P() { return <h1>moved</h1> }"})
	a = e.do(t, http.MethodPost, "/api/v1/pages", e.demo.PAT, body,
		"X-Workspace-ID", ws, "Idempotency-Key", "seed-page-"+ws, "Content-Type", "application/json")
	if a.status != http.StatusAccepted {
		t.Fatalf("seed page: %d %s", a.status, a.body)
	}
	var job struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(a.body, &job)
	return job.JobID
}

// waitJob polls a job through the router until it is terminal.
func (e *env) waitJob(t *testing.T, ws, id string) (status string, attempts int) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, 100*time.Millisecond, "job "+id+" ends", func() error {
		a := e.get(t, "/api/v1/jobs/mutations/"+id, e.demo.PAT, "X-Workspace-ID", ws)
		var j struct {
			Status       string `json:"status"`
			AttemptCount int    `json:"attempt_count"`
		}
		_ = json.Unmarshal(a.body, &j)
		if a.status == 200 && (j.Status == "succeeded" || j.Status == "failed" || j.Status == "canceled") {
			status, attempts = j.Status, j.AttemptCount
			return nil
		}
		return fmt.Errorf("%d %s", a.status, a.body)
	})
	return status, attempts
}

// retrying sends a request until it gets an answer that is not a 503 with Retry-After (a cell
// that was just restarted, until the router's probe passes), for at most 30 s.
func (e *env) retrying(t *testing.T, method, path string, body []byte, hdr ...string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := e.do(t, method, path, e.demo.PAT, body, hdr...)
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || time.Now().After(deadline) {
			return a
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestMoveUnderLoad moves a workspace from cell-a to cell-b while clients keep writing and
// reading it through the router, and other workspaces on both cells are used too: no
// acknowledged write is lost, none is applied twice, reads never see another workspace, the
// other workspaces see no error, a job accepted before the move finishes exactly once, and a
// write retried with its Idempotency-Key after the flip replays.
func TestMoveUnderLoad(t *testing.T) {
	e := start(t, "", map[string][]string{"router": {"ROUTER_PLACEMENT_TTL=1s"}})
	ctx := context.Background()
	ws := e.demo.WorkspaceA
	// A third workspace on the source cell, of the same user: it must not notice the move.
	w, err := e.s.Directory.CreateWorkspace(ctx, "Demo C", "cell-a", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Directory.AddMember(ctx, w.ID, e.demo.UserID, "owner"); err != nil {
		t.Fatal(err)
	}
	jobID := e.seedWorkspace(t, ws, 3)
	e.seedWorkspace(t, w.ID, 1)
	e.seedWorkspace(t, e.demo.WorkspaceB, 1)
	firstKey := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"seed-before"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "before-move", "Content-Type", "application/json")
	if firstKey.status != http.StatusCreated {
		t.Fatalf("write before the move: %d %s", firstKey.status, firstKey.body)
	}

	stop := make(chan struct{})
	moving := newWorkload(e, ws, "load")
	bystanderSrc := newWorkload(e, w.ID, "src")
	bystanderDst := newWorkload(e, e.demo.WorkspaceB, "dst")
	wgs := []*sync.WaitGroup{moving.run(t, stop, 4, true), bystanderSrc.run(t, stop, 2, false), bystanderDst.run(t, stop, 2, false)}
	time.Sleep(500 * time.Millisecond) // the workload is under way before the move starts
	out, err := e.cellctl(t, nil, "workspaces", "move", ws, "--to", "cell-b", "--grace", "0")
	time.Sleep(1500 * time.Millisecond) // and goes on after it, through routers that learn by 421 and by TTL
	close(stop)
	for _, wg := range wgs {
		waitGroup(t, wg, 2*time.Minute)
	}
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	t.Logf("cellctl:\n%s", out)
	for _, step := range []string{"plan", "precopy", "fence", "drain", "copy", "verify", "flip", "clean"} {
		if !strings.Contains(out, "✓ "+step) {
			t.Errorf("no %s step in the output", step)
		}
	}
	if !strings.Contains(out, "writes unavailable for") {
		t.Errorf("no write window in the output")
	}
	if moving.writes.Load() == 0 || moving.reads.Load() == 0 || bystanderSrc.writes.Load() == 0 || bystanderDst.writes.Load() == 0 {
		t.Fatalf("workload too small: %d writes %d reads", moving.writes.Load(), moving.reads.Load())
	}
	t.Logf("moving workspace: %d writes, %d reads, retries %v; bystanders: %d and %d writes",
		moving.writes.Load(), moving.reads.Load(), moving.retried, bystanderSrc.writes.Load(), bystanderDst.writes.Load())
	moving.check(t, 4)
	bystanderSrc.check(t, 1)
	bystanderDst.check(t, 1)
	for code := range moving.retried {
		if code != "WORKSPACE_MOVING" && code != "SERVICE_UNAVAILABLE" && code != "IDEMPOTENCY_KEY_IN_FLIGHT" {
			t.Errorf("moving workspace retried on %s", code)
		}
	}
	// The workspace is on cell-b now, with everything.
	if _, cell, _ := e.listNames(t, ws); cell != "cell-b" {
		t.Fatalf("served by %s after the move", cell)
	}
	if p, _ := e.s.Directory.Placement(ctx, ws); p.CellID != "cell-b" || p.Epoch != 2 || p.State != "active" {
		t.Fatalf("placement %+v", p)
	}
	// The write made before the move replays from the target, the same answer.
	again := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"seed-before"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "before-move", "Content-Type", "application/json")
	if again.status != http.StatusCreated || again.header.Get("Idempotency-Replayed") != "true" || !bytes.Equal(again.body, firstKey.body) ||
		again.header.Get("X-Cell-ID") != "cell-b" {
		t.Fatalf("replay after the move: %d %v %s", again.status, again.header, again.body)
	}
	// The job finished exactly once; its page and the asset are served by the target.
	if status, _ := e.waitJob(t, ws, jobID); status != "succeeded" {
		t.Fatalf("job: %s", status)
	}
	a := e.get(t, "/api/v1/assets", e.demo.PAT, "X-Workspace-ID", ws)
	var assets struct {
		Items []struct {
			ID         string `json:"id"`
			ContentURL string `json:"content_url"`
		}
	}
	_ = json.Unmarshal(a.body, &assets)
	if a.status != 200 || len(assets.Items) != 1 {
		t.Fatalf("assets after the move: %d %s", a.status, a.body)
	}
	c := e.get(t, assets.Items[0].ContentURL, e.demo.PAT, "X-Workspace-ID", ws)
	if c.status != 200 || !bytes.Equal(c.body, pngOf(t, 64, 9)) || c.header.Get("X-Cell-ID") != "cell-b" {
		t.Fatalf("asset content after the move: %d (%d bytes) from %s", c.status, len(c.body), c.header.Get("X-Cell-ID"))
	}
	// cell-a kept nothing of the workspace (grace 0) but its moved tenancy row.
	src := dbtest.Open(t, e.s.CellDBURL["cell-a"])
	var n int
	if err := src.Pool.QueryRow(ctx, `SELECT count(*) FROM projects WHERE workspace_id = $1`, ws).Scan(&n); err != nil || n != 0 {
		t.Fatalf("source kept %d projects (%v)", n, err)
	}
	var state, hint string
	if err := src.Pool.QueryRow(ctx, `SELECT state, owner_hint FROM tenancy WHERE workspace_id = $1`, ws).Scan(&state, &hint); err != nil || state != "moved" || hint != "cell-b" {
		t.Fatalf("source tenancy %s %s %v", state, hint, err)
	}
	show, err := e.cellctl(t, nil, "moves", "list", "--workspace", ws)
	if err != nil || !strings.Contains(show, "done") {
		t.Fatalf("moves list: %v\n%s", err, show)
	}
	id := moveID.FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no move ID in:\n%s", out)
	}
	show, err = e.cellctl(t, nil, "moves", "show", id[1])
	if err != nil || !strings.Contains(show, "write unavailable") || !strings.Contains(show, "page_versions") || strings.Contains(show, "DIFFERS") {
		t.Fatalf("moves show: %v\n%s", err, show)
	}
}

// TestMoveSurvivesCrashes kills cellctl (kill -9, by a failpoint) after each step's work and
// before it is recorded, and kills the source or the target cell (kill -9) at that moment too;
// "cellctl moves resume" then finishes the move. The workspace goes back and forth between the
// cells, one crash per move, and keeps every write.
func TestMoveSurvivesCrashes(t *testing.T) {
	e := start(t, "", map[string][]string{"cell": {"CELL_JOB_LEASE=2s"}})
	ctx := context.Background()
	ws := e.demo.WorkspaceA
	jobID := e.seedWorkspace(t, ws, 2)
	if status, _ := e.waitJob(t, ws, jobID); status != "succeeded" {
		t.Fatalf("seed job: %s", status)
	}
	written := 3 // 2 seeded projects, and one per round below
	cells := []string{"cell-a", "cell-b"}
	for round, step := range []string{"plan", "precopy", "fence", "drain", "copy", "verify", "flip", "clean"} {
		from, to := cells[round%2], cells[(round+1)%2]
		kill := []string{from, from, to, to}[round%4] // each cell as the source and as the target
		t.Run(step, func(t *testing.T) {
			out, err := e.cellctl(t, []string{"CELLCTL_FAILPOINTS=move." + step + "=crash"},
				"workspaces", "move", ws, "--to", to, "--grace", "0", "--lease", "2s")
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("cellctl was not killed at %s: %v\n%s", step, err, out)
			}
			id := moveID.FindStringSubmatch(out)
			if id == nil {
				t.Fatalf("no move ID in:\n%s", out)
			}
			e.s.Cells[kill].Kill()
			if err := e.s.Cells[kill].Start(); err != nil {
				t.Fatal(err)
			}
			if err := e.s.Cells[kill].WaitLive(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			out, err = e.cellctl(t, nil, "moves", "resume", id[1], "--grace", "0", "--lease", "2s")
			if err != nil {
				t.Fatalf("resume after a crash at %s: %v\n%s", step, err, out)
			}
			m, err := e.s.Directory.GetMove(ctx, id[1])
			if err != nil || m.Status != directory.MoveDone {
				t.Fatalf("move %+v %v", m, err)
			}
			if p, _ := e.s.Directory.Placement(ctx, ws); p.CellID != to || p.Epoch != int64(round+2) {
				t.Fatalf("placement %+v after round %d", p, round)
			}
			// Everything is there, served by the new owner, and it takes writes (once the router
			// has seen the restarted cell pass a probe).
			a := e.retrying(t, http.MethodPost, "/api/v1/projects", []byte(`{"name":"after-`+step+`"}`),
				"X-Workspace-ID", ws, "Idempotency-Key", "after-"+step, "Content-Type", "application/json")
			if a.status != http.StatusCreated || a.header.Get("X-Cell-ID") != to {
				t.Fatalf("write after the move: %d %s %v", a.status, a.body, a.header)
			}
			names, cell, l := e.listNames(t, ws)
			if l.status != 200 || cell != to || len(names) != written+round {
				t.Fatalf("after a crash at %s: %d projects from %s (%d %s), want %d", step, len(names), cell, l.status, l.body, written+round)
			}
		})
	}
}

// TestMoveAbortKeepsTheSource: a move stopped after its copy (cellctl killed) and aborted
// leaves the workspace on its source, writable, and nothing of it on the target.
func TestMoveAbortKeepsTheSource(t *testing.T) {
	e := start(t, "", nil)
	ctx := context.Background()
	ws := e.demo.WorkspaceA
	e.seedWorkspace(t, ws, 2)
	out, err := e.cellctl(t, []string{"CELLCTL_FAILPOINTS=move.copy=crash"}, "workspaces", "move", ws, "--to", "cell-b", "--lease", "1s")
	id := moveID.FindStringSubmatch(out)
	if err == nil || id == nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	// Fenced meanwhile: reads go on, writes wait.
	if _, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-a" {
		t.Fatalf("read while fenced: %d %s", a.status, a.body)
	}
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"during"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "abort-during", "Content-Type", "application/json")
	if a.status != http.StatusServiceUnavailable || a.code != "WORKSPACE_MOVING" || a.header.Get("Retry-After") == "" {
		t.Fatalf("write while fenced: %d %s %v", a.status, a.body, a.header)
	}
	out, err = e.cellctl(t, nil, "moves", "abort", id[1], "--lease", "1s")
	if err != nil || !strings.Contains(out, "aborted") {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	// The same write, retried with its key, now runs on the source.
	a = e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"during"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "abort-during", "Content-Type", "application/json")
	if a.status != http.StatusCreated || a.header.Get("X-Cell-ID") != "cell-a" {
		t.Fatalf("write after the abort: %d %s", a.status, a.body)
	}
	if p, _ := e.s.Directory.Placement(ctx, ws); p.CellID != "cell-a" || p.Epoch != 1 || p.State != "active" {
		t.Fatalf("placement %+v", p)
	}
	dst := dbtest.Open(t, e.s.CellDBURL["cell-b"])
	var n int
	if err := dst.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM projects WHERE workspace_id = $1) + (SELECT count(*) FROM assets WHERE workspace_id = $1)`, ws).Scan(&n); err != nil || n != 0 {
		t.Fatalf("target kept %d rows (%v)", n, err)
	}
	if left, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(e.s.BlobURL("cell-b"), "file://"), "ws", ws, "*", "*")); len(left) != 0 {
		t.Fatalf("target kept blobs %v", left)
	}
	if out, err := e.cellctl(t, nil, "moves", "resume", id[1]); err == nil {
		t.Fatalf("an aborted move resumed:\n%s", out)
	}
}

// TestMoveVerifyCatchesTampering: a row changed in the target's copy between copy and verify
// (cellctl killed after the copy was recorded, the row tampered, the move resumed) fails
// verify: no flip, the source still owns the workspace; abort gives it back its writes.
func TestMoveVerifyCatchesTampering(t *testing.T) {
	e := start(t, "", nil)
	ctx := context.Background()
	ws := e.demo.WorkspaceA
	e.seedWorkspace(t, ws, 2)
	out, err := e.cellctl(t, []string{"CELLCTL_FAILPOINTS=move.verify.start=crash"}, "workspaces", "move", ws, "--to", "cell-b", "--lease", "1s")
	id := moveID.FindStringSubmatch(out)
	if err == nil || id == nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	dst := dbtest.Open(t, e.s.CellDBURL["cell-b"])
	tag, err := dst.Pool.Exec(ctx, `UPDATE projects SET name = 'tampered' WHERE workspace_id = $1 AND name = 'seed-1'`, ws)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tamper: %v %v", tag, err)
	}
	out, err = e.cellctl(t, nil, "moves", "resume", id[1], "--lease", "1s")
	if err == nil || !strings.Contains(out, "projects") {
		t.Fatalf("resume of a tampered copy: %v\n%s", err, out)
	}
	m, _ := e.s.Directory.GetMove(ctx, id[1])
	if m.Status != directory.MoveFailed || m.Step != directory.StepCopy || !strings.Contains(m.Error, "copies differ") {
		t.Fatalf("move after a failed verify: %+v", m)
	}
	if p, _ := e.s.Directory.Placement(ctx, ws); p.CellID != "cell-a" || p.Epoch != 1 {
		t.Fatalf("flipped: %+v", p)
	}
	if names, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-a" || strings.Contains(strings.Join(names, ","), "tampered") {
		t.Fatalf("reads after the failed verify: %d %s %v", a.status, cell, names)
	}
	show, _ := e.cellctl(t, nil, "moves", "show", id[1])
	if !strings.Contains(show, "DIFFERS") {
		t.Errorf("moves show does not point at the difference:\n%s", show)
	}
	if out, err := e.cellctl(t, nil, "moves", "abort", id[1], "--lease", "1s"); err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"after"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "after-tamper", "Content-Type", "application/json")
	if a.status != http.StatusCreated || a.header.Get("X-Cell-ID") != "cell-a" {
		t.Fatalf("write after the abort: %d %s", a.status, a.body)
	}
}

// TestDrainLeavesPinned drains cell-a: every unpinned workspace moves to cell-b, pinned ones
// stay, the cell takes no new workspace, and a second drain has nothing left to do.
func TestDrainLeavesPinned(t *testing.T) {
	e := start(t, "", nil)
	ctx := context.Background()
	var pinned, free []string
	for i := range 4 {
		w, err := e.s.Directory.CreateWorkspace(ctx, "Drain "+strconv.Itoa(i), "cell-a", i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.s.Directory.AddMember(ctx, w.ID, e.demo.UserID, "owner"); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			pinned = append(pinned, w.ID)
		} else {
			free = append(free, w.ID)
		}
		e.seedWorkspace(t, w.ID, 1)
	}
	free = append(free, e.demo.WorkspaceA, e.other)
	out, err := e.cellctl(t, nil, "cells", "drain", "cell-a", "--grace", "0", "--concurrency", "2")
	if err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	for _, ws := range free {
		if p, _ := e.s.Directory.Placement(ctx, ws); p.CellID != "cell-b" {
			t.Errorf("%s not drained: %+v\n%s", ws, p, out)
		}
	}
	for _, ws := range pinned {
		if p, _ := e.s.Directory.Placement(ctx, ws); p.CellID != "cell-a" || p.Epoch != 1 {
			t.Errorf("pinned %s moved: %+v", ws, p)
		}
		if !strings.Contains(out, ws+" is pinned") {
			t.Errorf("drain does not name pinned %s:\n%s", ws, out)
		}
		if names, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-a" || len(names) != 1 {
			t.Errorf("pinned %s: %d %s %v", ws, a.status, cell, names)
		}
	}
	for _, ws := range free[:2] {
		if names, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-b" || len(names) != 1 {
			t.Errorf("drained %s: %d %s %v", ws, a.status, cell, names)
		}
	}
	if c, _ := e.s.Directory.Cell(ctx, "cell-a"); c.State != "draining" {
		t.Fatalf("cell-a is %s", c.State)
	}
	if w, err := e.s.Directory.CreateWorkspace(ctx, "New", "", false); err != nil || w.CellID != "cell-b" {
		t.Fatalf("new workspace placed on %s (%v)", w.CellID, err)
	}
	out, err = e.cellctl(t, nil, "cells", "drain", "cell-a", "--grace", "0")
	if err != nil || !strings.Contains(out, "0 workspaces to move") {
		t.Fatalf("second drain: %v\n%s", err, out)
	}
}

// misdirects sums the router's router_misdirect_total (421 answers it handled).
func (e *env) misdirects(t *testing.T) float64 {
	t.Helper()
	resp, err := client.Get(e.s.RouterInternalURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "router_misdirect_total{") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// moveUnseen warms the router's placement of workspace A (on cell-a), moves it to cell-b and
// lets the router's 1 s TTL pass without a request for it. It returns the workspace and the
// router's misdirect count before the move.
func (e *env) moveUnseen(t *testing.T) (ws string, before float64) {
	t.Helper()
	ws = e.demo.WorkspaceA
	if _, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-a" {
		t.Fatalf("warm: %d %s", a.status, cell)
	}
	before = e.misdirects(t)
	out, err := e.cellctl(t, nil, "workspaces", "move", ws, "--to", "cell-b", "--grace", "0")
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	time.Sleep(1500 * time.Millisecond) // past the TTL, without a request
	return ws, before
}

// TestRouterLearnsMovesWithoutTraffic: a router that cached a workspace's placement and saw no
// request for it during a move sends the next request straight to the new owner once its TTL
// has passed (no 421 needed); one asked within the TTL heals through the 421 protocol.
func TestRouterLearnsMovesWithoutTraffic(t *testing.T) {
	// Without revalidation the first request after the TTL waits for the directory and goes
	// straight to the new owner.
	e := start(t, "", map[string][]string{"router": {"ROUTER_PLACEMENT_TTL=1s", "ROUTER_PLACEMENT_REVALIDATE=false"}})
	ws, before := e.moveUnseen(t)
	if _, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-b" {
		t.Fatalf("after the TTL: %d %s", a.status, cell)
	}
	if after := e.misdirects(t); after != before {
		t.Fatalf("the router needed a 421 (%v → %v) to learn a placement older than its TTL", before, after)
	}
	// Within the TTL: the cached placement is stale; the old owner's 421 sends the router on.
	out, err := e.cellctl(t, nil, "workspaces", "move", ws, "--to", "cell-a", "--grace", "0")
	if err != nil {
		t.Fatalf("move back: %v\n%s", err, out)
	}
	if _, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-a" {
		t.Fatalf("right after the move back: %d %s", a.status, cell)
	}
}

// TestRouterRevalidatesPlacementsInTheBackground: with ROUTER_PLACEMENT_REVALIDATE (the
// default) the first request after the TTL is routed with the cached placement at once while
// the directory is read in the background; after a move it meets the old owner's 421 and is
// sent on, and the next request goes straight to the new owner.
func TestRouterRevalidatesPlacementsInTheBackground(t *testing.T) {
	e := start(t, "", map[string][]string{"router": {"ROUTER_PLACEMENT_TTL=1s"}})
	ws, before := e.moveUnseen(t)
	if _, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-b" {
		t.Fatalf("first request after the TTL: %d %s", a.status, cell)
	}
	if after := e.misdirects(t); after != before+1 {
		t.Fatalf("misdirects %v → %v: the first request after the TTL should have met exactly one 421", before, after)
	}
	if _, cell, a := e.listNames(t, ws); a.status != 200 || cell != "cell-b" {
		t.Fatalf("second request: %d %s", a.status, cell)
	}
	if after := e.misdirects(t); after != before+1 {
		t.Fatalf("misdirects %v → %v: the second request should have gone straight to the new owner", before, after)
	}
}
