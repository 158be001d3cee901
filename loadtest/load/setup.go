package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"slidecells/shared/directory"
	"slidecells/shared/ids"
)

// LoadUser is the directory user the load generator works as.
const LoadUser = "loadgen@example.com"

// Workspace is one workspace the load runs in, with a token of its own (the cells' per-token
// rate limit then applies per workspace) and a project.
type Workspace struct {
	ID, Cell, Token, TokenID, ProjectID string
}

// Page is a page created for render samples.
type Page struct {
	WS *Workspace
	ID string
}

// Fixture is what a run needs in the deployment: the load user, its workspaces on every cell,
// their tokens and projects. Workspaces are found by name and reused across runs; tokens are
// new per run and revoked by Close.
type Fixture struct {
	Base       string // the router's URL
	Dir        *directory.Directory
	RunID      string
	Workspaces []*Workspace
	Client     *http.Client
	log        func(string, ...any)
	seq        atomic.Int64
	follow     sync.WaitGroup // jobs being followed after their submission
}

// FixtureOptions say which workspaces to prepare.
type FixtureOptions struct {
	// PerCell workspaces on each cell (Cells, or every active cell of the directory).
	PerCell int
	Cells   []string
	// RaiseWorkspaceLimits gives the load workspaces a per-workspace rate override (the way
	// cellctl workspaces limit does) of this many requests per second, for deployments whose
	// cells keep their rate limits on (make run); 0 leaves them alone.
	RaiseWorkspaceLimits float64
	Log                  func(string, ...any)
}

// NewClient is the HTTP client of a run: keep-alive connections to the router, generous
// timeouts (a screenshot or validation waits up to 60 s for its render).
func NewClient() *http.Client {
	return &http.Client{Timeout: 3 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
	}}
}

// NewFixture prepares the workspaces of a run.
func NewFixture(ctx context.Context, base string, dir *directory.Directory, o FixtureOptions) (*Fixture, error) {
	if err := CheckLoopback(base); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	f := &Fixture{Base: strings.TrimRight(base, "/"), Dir: dir, RunID: strings.TrimPrefix(ids.New("r"), "r_")[:10], Client: NewClient(), log: o.Log}
	cells := o.Cells
	if len(cells) == 0 {
		all, err := dir.Cells(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range all {
			if c.State == "active" {
				cells = append(cells, c.ID)
			}
		}
	}
	if len(cells) == 0 {
		return nil, errors.New("the directory has no active cell")
	}
	u, err := dir.UserByEmail(ctx, LoadUser)
	if errors.Is(err, directory.ErrNotFound) {
		u, err = dir.CreateUser(ctx, LoadUser, "Load generator")
	}
	if err != nil {
		return nil, fmt.Errorf("load user: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close(context.WithoutCancel(ctx))
		}
	}()
	for _, cell := range cells {
		for i := range o.PerCell {
			name := fmt.Sprintf("loadgen %s %d", cell, i)
			w, err := dir.WorkspaceByName(ctx, name)
			if errors.Is(err, directory.ErrNotFound) {
				w, err = dir.CreateWorkspace(ctx, name, cell, false)
			}
			if err != nil {
				return nil, fmt.Errorf("workspace %s: %w", name, err)
			}
			if err := dir.AddMember(ctx, w.ID, u.ID, "owner"); err != nil {
				return nil, err
			}
			p, err := dir.Placement(ctx, w.ID)
			if err != nil {
				return nil, err
			}
			if o.RaiseWorkspaceLimits > 0 {
				rate, burst := o.RaiseWorkspaceLimits, int64(o.RaiseWorkspaceLimits)
				if err := dir.SetLimits(ctx, directory.Limits{WorkspaceID: w.ID, RequestsPerSecond: &rate, Burst: &burst}); err != nil {
					return nil, err
				}
			}
			secret, tok, err := dir.CreateToken(ctx, u.ID, "loadgen "+f.RunID, directory.Scopes, 24*time.Hour)
			if err != nil {
				return nil, err
			}
			f.Workspaces = append(f.Workspaces, &Workspace{ID: w.ID, Cell: p.CellID, Token: secret, TokenID: tok.ID})
		}
	}
	for _, w := range f.Workspaces {
		// A cell the router has just started to probe (or a loaded machine's slow probe) may
		// answer 503 for a moment: set-up waits for it, 30 s at most.
		for deadline := time.Now().Add(30 * time.Second); ; {
			w.ProjectID, err = f.project(ctx, w)
			if err == nil || !strings.Contains(err.Error(), ": 503 ") || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return nil, fmt.Errorf("project of workspace %s on %s: %w", w.ID, w.Cell, err)
		}
	}
	ok = true
	return f, nil
}

// Close revokes the run's tokens.
func (f *Fixture) Close(ctx context.Context) {
	for _, w := range f.Workspaces {
		if w.TokenID != "" {
			_ = f.Dir.RevokeToken(ctx, w.TokenID)
		}
	}
}

// Cells lists the cells the workspaces are on.
func (f *Fixture) Cells() []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range f.Workspaces {
		if !seen[w.Cell] {
			seen[w.Cell] = true
			out = append(out, w.Cell)
		}
	}
	return out
}

// Header is what every request of the workspace carries.
func (w *Workspace) Header() http.Header {
	return http.Header{"Authorization": {"Bearer " + w.Token}, "X-Workspace-ID": {w.ID}, "Content-Type": {"application/json"}}
}

// Key is a new Idempotency-Key of this run.
func (f *Fixture) Key() string {
	return fmt.Sprintf("lg-%s-%d", f.RunID, f.seq.Add(1))
}

// Do sends one API request of a workspace (writes with a new Idempotency-Key) and returns the
// status and body.
func (f *Fixture) Do(ctx context.Context, w *Workspace, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header = w.Header()
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", f.Key())
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

// project returns the workspace's first project, creating one if it has none.
func (f *Fixture) project(ctx context.Context, w *Workspace) (string, error) {
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	st, b, err := f.Do(ctx, w, http.MethodGet, "/api/v1/projects?limit=1", nil)
	if err != nil {
		return "", err
	}
	if st != http.StatusOK {
		return "", fmt.Errorf("list projects: %d %s", st, b)
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return "", err
	}
	if len(list.Items) > 0 {
		return list.Items[0].ID, nil
	}
	var p struct {
		ID string `json:"id"`
	}
	st, b, err = f.Do(ctx, w, http.MethodPost, "/api/v1/projects", map[string]string{"name": "loadgen"})
	if err != nil {
		return "", err
	}
	if st != http.StatusCreated && st != http.StatusOK {
		return "", fmt.Errorf("create project: %d %s", st, b)
	}
	return p.ID, json.Unmarshal(b, &p)
}

// PageSource is the TSX of load page n of a run: every page differs, so that no render result
// of an earlier page or run can answer for it.
func PageSource(runID string, n int64) string {
	return fmt.Sprintf(`import { Slide } from "@kit/layout";
import { Title, Body } from "@kit/text";
export default function P() { return <Slide><Title>Load %s slide %d</Title><Body>Revenue grew in every region; page %d of run %s.</Body></Slide>; }`,
		runID, n, n, runID)
}

// SubmitPage posts a page-create job and returns its ID.
func (f *Fixture) SubmitPage(ctx context.Context, w *Workspace) (string, error) {
	n := f.seq.Add(1)
	st, b, err := f.Do(ctx, w, http.MethodPost, "/api/v1/pages", PageBody(f.RunID, w.ProjectID, n))
	if err != nil {
		return "", err
	}
	if st != http.StatusAccepted {
		return "", fmt.Errorf("submit page: %d %s", st, b)
	}
	return JobID(b)
}

// PageBody is the body of a page-create job for page n.
func PageBody(runID, projectID string, n int64) map[string]string {
	return map[string]string{"project_id": projectID, "key": fmt.Sprintf("lg-%s-%d", runID, n), "file_type": "tsx", "source": PageSource(runID, n)}
}

// JobID reads the job ID of a 202 answer.
func JobID(body []byte) (string, error) {
	var j struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(body, &j); err != nil || j.JobID == "" {
		return "", fmt.Errorf("no job_id in %q", truncate(body, 200))
	}
	return j.JobID, nil
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// JobState is a polled job: its status, the object it made and its error code.
type JobState struct {
	Status string `json:"status"`
	Result struct {
		ObjectID string `json:"object_id"`
	} `json:"result"`
	ErrorCode string `json:"error_code"`
}

// Terminal says whether the job has finished.
func (j JobState) Terminal() bool {
	return j.Status == "succeeded" || j.Status == "failed" || j.Status == "canceled"
}

// PollJob reads a job once.
func (f *Fixture) PollJob(ctx context.Context, w *Workspace, id string) (int, JobState, error) {
	var j JobState
	st, b, err := f.Do(ctx, w, http.MethodGet, "/api/v1/jobs/mutations/"+id, nil)
	if err != nil || st != http.StatusOK {
		return st, j, err
	}
	return st, j, json.Unmarshal(b, &j)
}

// CreatePages makes n pages through mutation jobs, spread over the workspaces round robin,
// 8 at a time, and waits for them (setup, not measured).
func (f *Fixture) CreatePages(ctx context.Context, n int) ([]Page, error) {
	pages := make([]Page, n)
	var next atomic.Int64
	var done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				f.log("setup: %d of %d pages created", done.Load(), n)
			}
		}
	}()
	defer close(stop)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				w := f.Workspaces[i%len(f.Workspaces)]
				id, err := f.createPage(ctx, w)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				pages[i] = Page{WS: w, ID: id}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return pages, ctx.Err()
}

func (f *Fixture) createPage(ctx context.Context, w *Workspace) (string, error) {
	for attempt := 0; ; attempt++ {
		id, err := f.SubmitPage(ctx, w)
		if err != nil && attempt < 5 && strings.Contains(err.Error(), ": 429 ") {
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			return "", err
		}
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			st, j, err := f.PollJob(ctx, w, id)
			if err != nil {
				return "", err
			}
			if st == http.StatusOK && j.Terminal() {
				if j.Status != "succeeded" {
					return "", fmt.Errorf("page job %s %s (%s)", id, j.Status, j.ErrorCode)
				}
				return j.Result.ObjectID, nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return "", fmt.Errorf("page job %s did not finish in 2 minutes", id)
	}
}
