package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"slidecells/cell/auth"
	"slidecells/cell/auth/authtest"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/problem"
	"slidecells/shared/testenv"
)

type fixture struct {
	q       *Queue
	cellURL string
	tenants *authtest.Tenants
	scope   auth.Scope // owner of workspace A
	scopeB  auth.Scope // owner of workspace B (same user)
}

func setup(t testing.TB) *fixture {
	t.Helper()
	if tt, ok := t.(*testing.T); ok {
		tt.Parallel()
	}
	tn := authtest.New(t, 2)
	f := &fixture{cellURL: dbtest.NewDatabase(t, migrations.FS, migrations.Cell), tenants: tn, scope: tn.Scopes[0], scopeB: tn.Scopes[1]}
	f.q = &Queue{DB: dbtest.Open(t, f.cellURL), BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond}
	// The cell hosts both workspaces (what the tenancy guard's adoption writes on a first request).
	for _, sc := range []auth.Scope{f.scope, f.scopeB} {
		if _, err := f.q.DB.Pool.Exec(context.Background(), `INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, 1, 'active')`, sc.WorkspaceID()); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// pool starts a pool over f's queue that stops when the test ends.
func (f *fixture) pool(t *testing.T, handlers map[string]Handler, tune ...func(*Pool)) *Pool {
	t.Helper()
	p := &Pool{Queue: f.q, Handlers: handlers, Lease: 600 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		ShutdownGrace: 100 * time.Millisecond,
		Authorize: func(ctx context.Context, j Job) (auth.Scope, error) {
			return f.tenants.Authn.Authorize(ctx, auth.Principal{UserID: j.OwnerID, Scopes: directory.Scopes}, j.WorkspaceID)
		}}
	for _, fn := range tune {
		fn(p)
	}
	// Init before the queue is shared, as the cell does: the test enqueues (and notifies)
	// while Run starts.
	f.q.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("pool did not stop")
		}
	})
	return p
}

func (f *fixture) enqueue(t testing.TB, kind string, maxAttempts int) Job {
	t.Helper()
	j, err := f.q.Enqueue(context.Background(), f.scope, NewJob{Kind: kind, Input: map[string]string{"k": "v"}, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	f.q.Notify()
	return j
}

// wait polls a job until it reaches one of states.
func (f *fixture) wait(t *testing.T, id string, states ...string) Job {
	t.Helper()
	var j Job
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "job "+id+" in "+strings.Join(states, " or "), func() error {
		var err error
		if j, err = f.q.Get(context.Background(), f.scope, id); err != nil {
			return err
		}
		if slices.Contains(states, j.Status) {
			return nil
		}
		return fmt.Errorf("job %s is %s (stage %q)", id, j.Status, j.Stage)
	})
	return j
}

// writes counts the business writes made for a job (projects named after it).
func (f *fixture) writes(t *testing.T, jobID string) int {
	t.Helper()
	return dbtest.Count(t, f.q.DB, `SELECT count(*) FROM projects WHERE name = $1`, jobID)
}

// commitProject is the business write of the test job kinds.
func commitProject(ctx context.Context, r *Run) error {
	return r.Commit(ctx, func(ctx context.Context, s auth.Scope, tx pgx.Tx) (json.RawMessage, error) {
		_, err := tx.Exec(ctx, `INSERT INTO projects (workspace_id, id, name, created_by) VALUES ($1, $2, $3, $4)`,
			s.WorkspaceID(), "prj_"+r.Job.ID, r.Job.ID, s.Principal().UserID)
		return json.RawMessage(`{"object_id":"prj_` + r.Job.ID + `"}`), err
	})
}

func TestLifecycleAndProgress(t *testing.T) {
	f := setup(t)
	f.pool(t, map[string]Handler{"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) {
		if err := r.Progress(ctx, "compile", 40); err != nil {
			return nil, err
		}
		return nil, commitProject(ctx, r)
	}})
	j := f.enqueue(t, "ok", 0)
	if j.Status != Pending || j.AttemptCount != 0 || j.MaxAttempts != DefaultMaxAttempts || j.OwnerID != f.scope.Principal().UserID {
		t.Fatalf("enqueued: %+v", j)
	}
	done := f.wait(t, j.ID, Succeeded, Failed)
	if done.Status != Succeeded || done.Progress != 100 || done.Stage != "done" || done.AttemptCount != 0 ||
		string(done.Result) != `{"object_id": "prj_`+j.ID+`"}` || done.StartedAt == nil || done.FinishedAt == nil {
		t.Fatalf("finished: %+v result %s", done, done.Result)
	}
	if n := f.writes(t, j.ID); n != 1 {
		t.Fatalf("%d writes", n)
	}
	// Another workspace cannot see it.
	if _, err := f.q.Get(context.Background(), f.scopeB, j.ID); problem.As(err).Code != problem.NotFound {
		t.Fatalf("cross-workspace get: %v", err)
	}
}

func TestFailuresAndAutomaticRetries(t *testing.T) {
	f := setup(t)
	var runs sync.Map
	count := func(id string) int64 {
		v, _ := runs.LoadOrStore(id, new(atomic.Int64))
		return v.(*atomic.Int64).Add(1)
	}
	f.pool(t, map[string]Handler{
		"flaky": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			if count(r.Job.ID) <= 2 {
				return nil, &Failure{Code: "UPSTREAM_BUSY", Summary: "try later", Retryable: true}
			}
			return nil, commitProject(ctx, r)
		},
		"always-busy": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			count(r.Job.ID)
			return nil, &Failure{Code: "UPSTREAM_BUSY", Summary: "try later", Retryable: true}
		},
		"bad-source": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			count(r.Job.ID)
			return nil, Fail("COMPILE_SYNTAX", "page.tsx:3:7: unexpected token")
		},
		"infra": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			count(r.Job.ID)
			return nil, errors.New("database exploded")
		},
		"panics": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			count(r.Job.ID)
			panic("bug")
		},
	})
	for _, tc := range []struct {
		kind        string
		maxAttempts int
		status      string
		attempts    int
		code        string
		runs        int64
	}{
		{"flaky", 3, Succeeded, 2, "", 3},
		{"always-busy", 2, Failed, 1, "UPSTREAM_BUSY", 2},
		{"bad-source", 3, Failed, 0, "COMPILE_SYNTAX", 1},
		{"infra", 2, Failed, 1, CodeInternal, 2},
		{"panics", 3, Failed, 0, CodePanicked, 1},
		{"no-such-kind", 3, Failed, 0, CodeKindUnknown, 0},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			j := f.enqueue(t, tc.kind, tc.maxAttempts)
			done := f.wait(t, j.ID, Succeeded, Failed, Canceled)
			if done.Status != tc.status || done.AttemptCount != tc.attempts || done.ErrorCode != tc.code || done.ID != j.ID {
				t.Fatalf("got %s attempts %d code %q (%s), want %s %d %q", done.Status, done.AttemptCount, done.ErrorCode, done.ErrorSummary, tc.status, tc.attempts, tc.code)
			}
			if tc.code != "" && done.ErrorSummary == "" {
				t.Fatal("no diagnostic summary kept")
			}
			v, _ := runs.LoadOrStore(j.ID, new(atomic.Int64))
			if n := v.(*atomic.Int64).Load(); n != tc.runs {
				t.Fatalf("%d runs, want %d", n, tc.runs)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	t.Run("pending: at once, repeat is idempotent, finished is a conflict", func(t *testing.T) {
		j := f.enqueue(t, "nobody-runs-this", 0) // no pool yet
		c, err := f.q.Cancel(ctx, f.scope, j.ID)
		if err != nil || c.Status != Canceled || !c.CancelRequested || c.FinishedAt == nil {
			t.Fatalf("cancel: %+v %v", c, err)
		}
		if again, err := f.q.Cancel(ctx, f.scope, j.ID); err != nil || again.Status != Canceled {
			t.Fatalf("repeat cancel: %+v %v", again, err)
		}
		if _, err := f.q.Cancel(ctx, f.scopeB, j.ID); problem.As(err).Code != problem.NotFound {
			t.Fatalf("cross-workspace cancel: %v", err)
		}
	})
	release := make(chan struct{})
	started := make(chan string, 4)
	f.pool(t, map[string]Handler{
		"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) { return nil, commitProject(ctx, r) },
		// waits for the cancel to reach it through the lease renewal, then stops
		"cooperative": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			started <- r.Job.ID
			for !r.CancelRequested() {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
			return nil, ErrCanceled
		},
		// does not look: goes straight to its commit once released, which must refuse
		"hasty": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			started <- r.Job.ID
			<-release
			return nil, commitProject(ctx, r)
		},
	})
	t.Run("running, cooperative", func(t *testing.T) {
		j := f.enqueue(t, "cooperative", 0)
		if id := <-started; id != j.ID {
			t.Fatalf("started %s", id)
		}
		if c, err := f.q.Cancel(ctx, f.scope, j.ID); err != nil || c.Status != Running || !c.CancelRequested {
			t.Fatalf("cancel running: %+v %v", c, err)
		}
		if done := f.wait(t, j.ID, Canceled, Succeeded, Failed); done.Status != Canceled {
			t.Fatalf("want canceled: %+v", done)
		}
	})
	t.Run("running, cancel lands just before the commit: no write", func(t *testing.T) {
		j := f.enqueue(t, "hasty", 0)
		<-started
		if _, err := f.q.Cancel(ctx, f.scope, j.ID); err != nil {
			t.Fatal(err)
		}
		close(release)
		if done := f.wait(t, j.ID, Canceled, Succeeded, Failed); done.Status != Canceled {
			t.Fatalf("want canceled: %+v", done)
		}
		if n := f.writes(t, j.ID); n != 0 {
			t.Fatalf("a cancelled job wrote %d times", n)
		}
	})
	t.Run("succeeded: conflict", func(t *testing.T) {
		j := f.enqueue(t, "ok", 0)
		f.wait(t, j.ID, Succeeded)
		if _, err := f.q.Cancel(ctx, f.scope, j.ID); problem.As(err).Code != problem.StateConflict {
			t.Fatalf("cancel succeeded job: %v", err)
		}
	})
}

func TestManualRetry(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	var fail atomic.Bool
	fail.Store(true)
	f.pool(t, map[string]Handler{"maybe": func(ctx context.Context, r *Run) (json.RawMessage, error) {
		if fail.Load() {
			return nil, Fail("NOPE", "not now")
		}
		return nil, commitProject(ctx, r)
	}})
	first := f.enqueue(t, "maybe", 1)
	f.wait(t, first.ID, Failed)
	if _, err := f.q.Retry(ctx, f.scopeB, first.ID); problem.As(err).Code != problem.NotFound {
		t.Fatalf("cross-workspace retry: %v", err)
	}
	fail.Store(false)
	second, err := f.q.Retry(ctx, f.scope, first.ID)
	if err != nil || second.ID == first.ID || second.RetryOfJobID != first.ID || second.AttemptCount != 0 ||
		second.Status != Pending || string(second.Input) != string(first.Input) {
		t.Fatalf("retry: %+v %v", second, err)
	}
	f.q.Notify()
	done := f.wait(t, second.ID, Succeeded, Failed)
	if done.Status != Succeeded {
		t.Fatalf("retried job: %+v", done)
	}
	if _, err := f.q.Retry(ctx, f.scope, second.ID); problem.As(err).Code != problem.StateConflict {
		t.Fatalf("retry of a succeeded job: %v", err)
	}
	if orig, _ := f.q.Get(ctx, f.scope, first.ID); orig.Status != Failed {
		t.Fatalf("the original changed: %+v", orig)
	}
}

// A replica claims a job and dies without a word: after its lease the rescuer returns the job to
// the queue as an automatic retry, another replica runs it, and the dead one's late commit is
// refused: the job writes exactly once.
func TestLeaseExpiryTakeover(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	j := f.enqueue(t, "ok", 3)
	claimed, err := f.q.claim(ctx, "ghost", 1, 200*time.Millisecond, Caps{})
	if err != nil || len(claimed) != 1 || claimed[0].ID != j.ID || claimed[0].Status != Running {
		t.Fatalf("ghost claim: %+v %v", claimed, err)
	}
	p := f.pool(t, map[string]Handler{"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) { return nil, commitProject(ctx, r) }})
	done := f.wait(t, j.ID, Succeeded, Failed)
	if done.Status != Succeeded || done.AttemptCount != 1 {
		t.Fatalf("after takeover: %+v", done)
	}
	ghost := &Run{Job: claimed[0], pool: &Pool{Queue: f.q, Owner: "ghost", Authorize: p.Authorize}}
	if err := commitProject(ctx, ghost); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the dead replica's commit: %v", err)
	}
	if n := f.writes(t, j.ID); n != 1 {
		t.Fatalf("%d writes, want exactly 1", n)
	}
}

// TestHelperWorker is not a test: it is the worker process TestKilledWorkerProcess kills.
func TestHelperWorker(t *testing.T) {
	url := os.Getenv("JOBS_HELPER_DB")
	if url == "" {
		t.Skip("helper process only")
	}
	d := dbtest.Open(t, url)
	q := &Queue{DB: d}
	p := &Pool{Queue: q, Owner: "doomed", Lease: 500 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		Handlers: map[string]Handler{"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			fmt.Println("RUNNING", r.Job.ID)
			select {} // hold the job until killed
		}}}
	_ = p.Run(context.Background())
}

// helperProcess runs the test named test of this test binary in a child process with env added,
// and returns it with its standard output; the child is killed when the test ends.
func helperProcess(t *testing.T, test string, env ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out
}

// The worker's process is killed (SIGKILL) while it runs a job; a pool in another process takes
// the job over after its lease and it finishes exactly once.
func TestKilledWorkerProcess(t *testing.T) {
	f := setup(t)
	j := f.enqueue(t, "ok", 3)
	cmd, out := helperProcess(t, "TestHelperWorker", "JOBS_HELPER_DB="+f.cellURL)
	running := f.wait(t, j.ID, Running)
	buf := make([]byte, 256)
	_, _ = out.Read(buf)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if running.AttemptCount != 0 {
		t.Fatalf("running: %+v", running)
	}
	f.pool(t, map[string]Handler{"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) { return nil, commitProject(ctx, r) }})
	done := f.wait(t, j.ID, Succeeded, Failed)
	if done.Status != Succeeded || done.AttemptCount != 1 {
		t.Fatalf("after the kill: %+v", done)
	}
	if n := f.writes(t, j.ID); n != 1 {
		t.Fatalf("%d writes, want exactly 1", n)
	}
}

func TestSlotsBoundConcurrency(t *testing.T) {
	f := setup(t)
	var now, peak atomic.Int64
	f.pool(t, map[string]Handler{"slow": func(ctx context.Context, r *Run) (json.RawMessage, error) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		now.Add(-1)
		return nil, nil
	}}, func(p *Pool) { p.Slots = 2 })
	var ids []string
	for range 6 {
		ids = append(ids, f.enqueue(t, "slow", 0).ID)
	}
	for _, id := range ids {
		f.wait(t, id, Succeeded)
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
}

// A replica that stops gracefully returns the job it could not finish to the queue, without
// spending an attempt.
func TestShutdownReturnsUnfinishedJobs(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	p := &Pool{Queue: f.q, Lease: time.Second, PollInterval: 20 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond,
		Handlers: map[string]Handler{"long": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}}}
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	j := f.enqueue(t, "long", 0)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("job did not start")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("pool did not stop")
	}
	back, err := f.q.Get(context.Background(), f.scope, j.ID)
	if err != nil || back.Status != Pending || back.AttemptCount != 0 {
		t.Fatalf("after shutdown: %+v %v", back, err)
	}
}

func TestStats(t *testing.T) {
	f := setup(t)
	now := time.Now()
	f.q.Now = func() time.Time { return now }
	f.enqueue(t, "x", 0)
	now = now.Add(3 * time.Second)
	f.enqueue(t, "x", 0)
	st, err := f.q.Stats(context.Background())
	if err != nil || st.Pending != 2 || st.Running != 0 || st.OldestPending.Round(time.Millisecond) != 3*time.Second {
		t.Fatalf("%+v %v", st, err)
	}
}

// setTenancy writes the state of a workspace's tenancy row, as a move's fence, flip or abort does.
func (f *fixture) setTenancy(t *testing.T, sc auth.Scope, state string) {
	t.Helper()
	if _, err := f.q.DB.Pool.Exec(context.Background(), `UPDATE tenancy SET state = $2 WHERE workspace_id = $1`, sc.WorkspaceID(), state); err != nil {
		t.Fatal(err)
	}
}

func TestMoveFence(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan string, 4)
	var runs atomic.Int64
	f.pool(t, map[string]Handler{"gated": func(ctx context.Context, r *Run) (json.RawMessage, error) {
		runs.Add(1)
		started <- r.Job.ID
		<-release
		return nil, commitProject(ctx, r)
	}})
	// A job running when the fence lands: its commit is refused, nothing is written, and it goes
	// back to the queue with its attempt unused.
	j := f.enqueue(t, "gated", 1)
	<-started
	f.setTenancy(t, f.scope, "fenced")
	release <- struct{}{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := f.q.Get(ctx, f.scope, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == Pending && got.Stage == "waiting-for-move" {
			if got.AttemptCount != 0 || f.writes(t, j.ID) != 0 {
				t.Fatalf("requeued job used an attempt or wrote: %+v", got)
			}
			break
		}
		if got.Status != Running || time.Now().After(deadline) {
			t.Fatalf("job of a fenced workspace: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// While fenced: no job starts, and no job can be submitted or cancelled (503, retryable).
	time.Sleep(3 * FencedRetry / 2)
	if got, _ := f.q.Get(ctx, f.scope, j.ID); got.Status != Pending || runs.Load() != 1 {
		t.Fatalf("a job started in a fenced workspace: %+v, %d runs", got, runs.Load())
	}
	_, err := f.q.Enqueue(ctx, f.scope, NewJob{Kind: "gated"})
	if pe := problem.As(err); pe.Code != problem.WorkspaceMoving || pe.RetryAfter == 0 {
		t.Fatalf("enqueue while fenced: %v", err)
	}
	if _, err := f.q.Cancel(ctx, f.scope, j.ID); problem.As(err).Code != problem.WorkspaceMoving {
		t.Fatalf("cancel while fenced: %v", err)
	}
	// The other workspace of the cell is not affected.
	other, err := f.q.Enqueue(ctx, f.scopeB, NewJob{Kind: "gated", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if id := <-started; id != other.ID {
		t.Fatalf("started %s, want the other workspace's job", id)
	}
	release <- struct{}{}
	if got, _ := f.q.Get(ctx, f.scopeB, other.ID); got.WorkspaceID != f.scopeB.WorkspaceID() {
		t.Fatal("other job")
	}
	// Abort of the move: the workspace is active again and the job runs once, its only attempt.
	f.setTenancy(t, f.scope, "active")
	if id := <-started; id != j.ID {
		t.Fatalf("started %s", id)
	}
	release <- struct{}{}
	if done := f.wait(t, j.ID, Succeeded, Failed); done.Status != Succeeded || done.AttemptCount != 0 || f.writes(t, j.ID) != 1 {
		t.Fatalf("after the fence lifted: %+v, %d writes", done, f.writes(t, j.ID))
	}
	// Moved away: a pending job is never started here (the new owner runs its copy).
	f.setTenancy(t, f.scope, "moved")
	m, err := f.q.Enqueue(ctx, f.scope, NewJob{Kind: "gated"})
	if problem.As(err).Code != problem.WorkspaceMisdirected {
		t.Fatalf("enqueue after the move: %+v %v", m, err)
	}
}

func TestRescueWorkspace(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	j := f.enqueue(t, "x", 2)
	// A replica claimed it and died: running under a lease that has ended.
	if _, err := f.q.DB.Pool.Exec(ctx, `UPDATE mutation_jobs SET status = 'running', lease_owner = 'dead', lease_until = now() - INTERVAL '1 second'
		WHERE workspace_id = $1 AND id = $2`, j.WorkspaceID, j.ID); err != nil {
		t.Fatal(err)
	}
	// Moved away: the cell-wide rescuer leaves it alone; a move's drain rescues it anyway.
	f.setTenancy(t, f.scope, "moved")
	if got, err := f.q.rescue(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("rescue of a departed workspace: %v %v", got, err)
	}
	got, err := f.q.RescueWorkspace(ctx, f.scope.WorkspaceID())
	if err != nil || len(got) != 1 || got[0].Status != Pending {
		t.Fatalf("RescueWorkspace: %+v %v", got, err)
	}
	if after, _ := f.q.Get(ctx, f.scope, j.ID); after.Status != Pending || after.AttemptCount != 1 {
		t.Fatalf("rescued: %+v", after)
	}
}

// TestWorkspaceConcurrencyCap: a workspace runs at most its cap of jobs at once, whatever it
// has queued, while another workspace's jobs run beside them; an override raises the cap.
func TestWorkspaceConcurrencyCap(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	var mu sync.Mutex
	running := map[string]int{}
	peak := map[string]int{}
	release := make(chan struct{})
	var overrides atomic.Value
	overrides.Store(map[string]int{})
	f.pool(t, map[string]Handler{"slow": func(ctx context.Context, r *Run) (json.RawMessage, error) {
		mu.Lock()
		running[r.Job.WorkspaceID]++
		peak[r.Job.WorkspaceID] = max(peak[r.Job.WorkspaceID], running[r.Job.WorkspaceID])
		mu.Unlock()
		<-release
		mu.Lock()
		running[r.Job.WorkspaceID]--
		mu.Unlock()
		return nil, commitProject(ctx, r)
	}}, func(p *Pool) {
		p.Slots = 6
		p.WorkspaceConcurrency = 1
		p.WorkspaceOverrides = func(context.Context) (map[string]int, error) { return overrides.Load().(map[string]int), nil }
	})
	var a []Job
	for range 4 {
		a = append(a, f.enqueue(t, "slow", 1))
	}
	b, err := f.q.Enqueue(ctx, f.scopeB, NewJob{Kind: "slow", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.q.Notify()
	// One job of A and the one of B run; A's others wait for A's slot.
	counts := func(want map[string]int) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			for ws, n := range want {
				if running[ws] != n {
					return fmt.Errorf("running: %v, want %v", running, want)
				}
			}
			return nil
		}
	}
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "one job of A and one of B running",
		counts(map[string]int{f.scope.WorkspaceID(): 1, f.scopeB.WorkspaceID(): 1}))
	// A's cap goes up to 3 (an override): three of A's jobs run at once.
	overrides.Store(map[string]int{f.scope.WorkspaceID(): 3})
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "three of A's jobs running with the override",
		counts(map[string]int{f.scope.WorkspaceID(): 3}))
	close(release)
	for _, j := range append(a, b) {
		sc := f.scope
		if j.ID == b.ID {
			sc = f.scopeB
		}
		testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "job "+j.ID+" succeeded", func() error {
			done, err := f.q.Get(ctx, sc, j.ID)
			switch {
			case err != nil:
				return err
			case done.Status != Succeeded:
				return fmt.Errorf("%s", done.Status)
			case done.AttemptCount != 0:
				t.Fatalf("job %s used an attempt waiting for its slot: %+v", j.ID, done)
			}
			return nil
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if peak[f.scope.WorkspaceID()] != 3 || peak[f.scopeB.WorkspaceID()] != 1 {
		t.Fatalf("peaks: %v", peak)
	}
}

// TestClaimPastCappedAndFencedHeads: a claim takes no job beyond a workspace's free slots, and
// a workspace at its cap or fenced whose backlog fills the head of the queue does not keep the
// other workspaces' jobs from being claimed (the walk over workspaces finds them), oldest first.
func TestClaimPastCappedAndFencedHeads(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	a, b := f.scope.WorkspaceID(), f.scopeB.WorkspaceID()
	// A's backlog of 200 is older than anything of B's and longer than the head a claim reads.
	if _, err := f.q.DB.Pool.Exec(ctx, `INSERT INTO mutation_jobs (workspace_id, id, kind, owner_id, input, status, max_attempts, run_after, created_at, updated_at)
		SELECT $1, 'job_a' || lpad(i::TEXT, 4, '0'), 'x', 'usr_x', '{}', 'pending', 3, now() - INTERVAL '1 hour' + i * INTERVAL '1 millisecond', now(), now()
		FROM generate_series(0, 199) AS i`, a); err != nil {
		t.Fatal(err)
	}
	var bs []string
	for range 3 {
		j, err := f.q.Enqueue(ctx, f.scopeB, NewJob{Kind: "x"})
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, j.ID)
	}
	ids := func(js []Job) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	caps := Caps{Default: 2}
	got, err := f.q.claim(ctx, "wrk_1", 4, time.Minute, caps)
	if want := []string{"job_a0000", "job_a0001", bs[0], bs[1]}; err != nil || fmt.Sprint(ids(got)) != fmt.Sprint(want) {
		t.Fatalf("claim of 4 at cap 2: %v %v, want %v", ids(got), err, want)
	}
	// Both workspaces are at their cap: nothing more, however much is pending.
	if got, err := f.q.claim(ctx, "wrk_1", 4, time.Minute, caps); err != nil || len(got) != 0 {
		t.Fatalf("claim with every workspace at its cap: %v %v", ids(got), err)
	}
	// An override raises B's cap: its last job, not one of A's.
	caps.Overrides = map[string]int{b: 3}
	if got, err := f.q.claim(ctx, "wrk_1", 4, time.Minute, caps); err != nil || fmt.Sprint(ids(got)) != fmt.Sprint(bs[2:]) {
		t.Fatalf("claim after B's override: %v %v", ids(got), err)
	}
	// A fenced for a move: its backlog at the head is skipped, B's new job is claimed, and no
	// job of A starts although A is below no cap now.
	f.setTenancy(t, f.scope, "fenced")
	nb, err := f.q.Enqueue(ctx, f.scopeB, NewJob{Kind: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.q.claim(ctx, "wrk_1", 4, time.Minute, Caps{}); err != nil || fmt.Sprint(ids(got)) != fmt.Sprint([]string{nb.ID}) {
		t.Fatalf("claim with A fenced: %v %v, want only %s", ids(got), err, nb.ID)
	}
	if n := dbtest.Count(t, f.q.DB, `SELECT count(*) FROM mutation_jobs WHERE workspace_id = $1 AND status = 'running'`, a); n != 2 {
		t.Fatalf("%d of A's jobs running, want the 2 claimed before the fence", n)
	}
}
