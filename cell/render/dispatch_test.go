package render

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"

	"slidecells/cell/auth"

	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
	"slidecells/shared/testenv"
)

// drain dispatches until nothing more can be, returning the reservations in order.
func drain(t *testing.T, c *Coordinator) []*reservation {
	t.Helper()
	var out []*reservation
	for {
		r, err := c.dispatchOne(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			return out
		}
		out = append(out, r)
	}
}

// release frees every unreleased attempt as a terminal success would, without results.
func (f *fixture) releaseAll(t *testing.T) {
	t.Helper()
	if _, err := f.db.Exec(context.Background(), `UPDATE render_attempts SET state = 'terminal', released = true WHERE released = false`); err != nil {
		t.Fatal(err)
	}
}

func TestRotationThreeToOneAndWorkspaceRoundRobin(t *testing.T) {
	f := setup(t, 3)
	workers := f.addWorkers(t, 8)
	c := f.coordinator(t, workers, nil)
	a, b, bg := f.scopes[0], f.scopes[1], f.scopes[2]
	for i := range 6 {
		f.submit(t, c, a, 100+i, Interactive)
		f.submit(t, c, b, 200+i, Interactive)
	}
	for i := range 4 {
		f.submit(t, c, bg, 300+i, Background)
	}
	got := drain(t, c)
	if len(got) != 8 {
		t.Fatalf("dispatched %d, want one per worker (8)", len(got))
	}
	var cats, wss []string
	for _, r := range got {
		cats = append(cats, string(r.req.Category))
		wss = append(wss, r.req.WorkspaceID)
	}
	wantCats := []string{"interactive", "interactive", "interactive", "background", "interactive", "interactive", "interactive", "background"}
	for i := range wantCats {
		if cats[i] != wantCats[i] {
			t.Fatalf("categories %v, want the 3:1 rotation %v", cats, wantCats)
		}
	}
	// Interactive dispatches alternate between the two workspaces.
	var inter []string
	for i, r := range got {
		if cats[i] == "interactive" {
			inter = append(inter, r.req.WorkspaceID)
		}
	}
	for i := 1; i < len(inter); i++ {
		if inter[i] == inter[i-1] {
			t.Fatalf("interactive workspaces %v: not round-robin", inter)
		}
	}
	// Within a workspace, enqueue order.
	seen := map[string]time.Time{}
	for _, r := range got {
		if prev, ok := seen[r.req.WorkspaceID]; ok && r.req.EnqueuedAt.Before(prev) {
			t.Fatalf("workspace %s dispatched out of enqueue order", r.req.WorkspaceID)
		}
		seen[r.req.WorkspaceID] = r.req.EnqueuedAt
	}
	_ = wss
}

func TestFallsBackToTheOtherCategoryAndWorkspaceCap(t *testing.T) {
	f := setup(t, 2)
	workers := f.addWorkers(t, 4)
	c := f.coordinator(t, workers, func(cfg *Config) { cfg.WorkspaceConcurrency = 1 })
	for i := range 3 {
		f.submit(t, c, f.scopes[0], i, Background)
	}
	f.submit(t, c, f.scopes[1], 10, Background)
	got := drain(t, c)
	if len(got) != 2 || got[0].req.WorkspaceID == got[1].req.WorkspaceID {
		t.Fatalf("dispatched %d; want one per workspace at cap 1 although only background work and 4 workers exist", len(got))
	}
	f.releaseAll(t)
	if got := drain(t, c); len(got) != 1 || got[0].req.WorkspaceID != f.scopes[0].WorkspaceID() {
		t.Fatalf("after release: %d dispatched, want the next of workspace 0", len(got))
	}
}

func TestWaitPromotion(t *testing.T) {
	f := setup(t, 2)
	workers := f.addWorkers(t, 1)
	c := f.coordinator(t, workers, func(cfg *Config) { cfg.PromoteAfter = 300 * time.Millisecond })
	old := f.submit(t, c, f.scopes[1], 1, Background)
	time.Sleep(400 * time.Millisecond)
	for i := range 3 {
		f.submit(t, c, f.scopes[0], 10+i, Interactive)
	}
	got := drain(t, c)
	if len(got) != 1 || got[0].req.ID != old.ID {
		t.Fatalf("the request past the promotion threshold did not take the free slot (round 0 prefers interactive)")
	}
}

func TestConcurrentCoordinatorsNeverDoubleBook(t *testing.T) {
	f := setup(t, 4)
	workers := f.addWorkers(t, 3)
	coords := make([]*Coordinator, 4)
	for i := range coords {
		coords[i] = f.coordinator(t, workers, nil)
	}
	for i := range 40 {
		f.submit(t, coords[0], f.scopes[i%4], i, []Category{Interactive, Background}[i%2])
	}
	ctx := context.Background()
	dispatched := 0
	for round := 0; round < 10; round++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		n := 0
		for _, c := range coords {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					r, err := c.dispatchOne(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if r == nil {
						return
					}
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		var live, perWorkerMax, perRequestMax int
		if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM render_attempts WHERE released = false`).Scan(&live); err != nil {
			t.Fatal(err)
		}
		_ = f.db.Pool.QueryRow(ctx, `SELECT COALESCE(max(n), 0) FROM (SELECT count(*) AS n FROM render_attempts WHERE released = false GROUP BY worker_id) x`).Scan(&perWorkerMax)
		_ = f.db.Pool.QueryRow(ctx, `SELECT COALESCE(max(n), 0) FROM (SELECT count(*) AS n FROM render_attempts GROUP BY workspace_id, request_id) x`).Scan(&perRequestMax)
		if live != n || live > 3 || perWorkerMax > 1 || perRequestMax > 1 {
			t.Fatalf("round %d: %d dispatched, %d live attempts, %d max per worker, %d max per request", round, n, live, perWorkerMax, perRequestMax)
		}
		var gens int
		_ = f.db.Pool.QueryRow(ctx, `SELECT count(DISTINCT (worker_id, slot_generation)) FROM render_attempts`).Scan(&gens)
		dispatched += n
		if gens != dispatched {
			t.Fatalf("slot generations reused: %d distinct for %d attempts", gens, dispatched)
		}
		f.releaseAll(t)
	}
	if dispatched < 30 {
		t.Fatalf("only %d of 40 dispatched over 10 rounds of 3 slots", dispatched)
	}
}

func TestQueueFullAndRepeatsKeepTheirRequest(t *testing.T) {
	f := setup(t, 2)
	workers := f.addWorkers(t, 1)
	c := f.coordinator(t, workers, func(cfg *Config) { cfg.QueueSize = 3; cfg.WorkspaceQueueSize = 2 })
	a, b := f.scopes[0], f.scopes[1]
	first := f.submit(t, c, a, 1, Interactive)
	f.submit(t, c, a, 2, Interactive)
	_, err := c.Submit(context.Background(), a, Spec{Owner: "x", Stage: "test", Operation: rc.OpPageDiagnose, Category: Interactive, Snapshot: manifest(t, a, 3)})
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.RenderQueueFull || pe.RetryAfter == 0 || problem.Status(pe.Code) != 429 {
		t.Fatalf("third request of a workspace with queue 2: %v, want 429 RENDER_QUEUE_FULL with Retry-After", err)
	}
	f.submit(t, c, b, 4, Interactive)
	if _, err := c.Submit(context.Background(), b, Spec{Owner: "y", Stage: "test", Operation: rc.OpPageDiagnose, Category: Interactive, Snapshot: manifest(t, b, 5)}); !errors.As(err, &pe) || pe.Code != problem.RenderQueueFull {
		t.Fatalf("fourth request of the cell with queue 3: %v, want RENDER_QUEUE_FULL", err)
	}
	// The refused requests' snapshots are not kept: nothing refers to them.
	for _, w := range []struct {
		ws   string
		want int
	}{{a.WorkspaceID(), 2}, {b.WorkspaceID(), 1}} {
		n := 0
		it := c.bucket.List(&gcblob.ListOptions{Prefix: "ws/" + w.ws + "/snapshots/"})
		for {
			if _, err := it.Next(context.Background()); err != nil {
				break
			}
			n++
		}
		if n != w.want {
			t.Errorf("workspace %s keeps %d snapshot manifests, want %d (one per queued request)", w.ws, n, w.want)
		}
	}
	// A repeat of an existing need is not a new request: it is answered even with full queues.
	again := f.submit(t, c, a, 1, Interactive)
	if again.ID != first.ID {
		t.Fatalf("a repeat got request %s, want the same %s", again.ID, first.ID)
	}
}

func TestBudgetSurvivesRepeatsAndRestarts(t *testing.T) {
	f := setup(t, 1)
	workers := f.addWorkers(t, 1)
	c := f.coordinator(t, workers, func(cfg *Config) { cfg.MaxAttempts = 2 })
	sc := f.scopes[0]
	req := f.submit(t, c, sc, 1, Interactive)
	ctx := context.Background()
	for i := range 2 {
		got := drain(t, c)
		if len(got) != 1 {
			t.Fatalf("attempt %d: %d dispatched", i+1, len(got))
		}
		a := &attempt{req: got[0].req, attemptID: got[0].attemptID, workerID: got[0].workerID, epoch: got[0].epoch}
		c.finish(ctx, a, rc.NewError(rc.CodeBrowserLost, rc.StageLaunch, "crashed"), true)
		// A restarted coordinator (a new object) and a repeated submit see the same request.
		c = f.coordinator(t, workers, func(cfg *Config) { cfg.MaxAttempts = 2 })
		if again := f.submit(t, c, sc, 1, Interactive); again.ID != req.ID {
			t.Fatalf("repeat after attempt %d is a new request", i+1)
		}
		if _, err := f.db.Exec(ctx, `UPDATE render_requests SET not_before = now() WHERE id = $1`, req.ID); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Get(ctx, sc, req.ID)
	if err != nil || r.State != StateFailed || r.AttemptsUsed != 2 || r.ErrorCode != string(rc.CodeBrowserLost) {
		t.Fatalf("after the budget: %+v %v, want failed with RENDER_BROWSER_LOST after 2 attempts", r, err)
	}
	if got := drain(t, c); len(got) != 0 {
		t.Fatal("a failed request was dispatched again")
	}
	// Renew (a user asking again) starts a new request; a plain repeat does not.
	renewed, err := c.Submit(ctx, sc, Spec{Owner: "test-1", Stage: "test", Operation: rc.OpPageDiagnose, Category: Interactive, Snapshot: manifest(t, sc, 1), Renew: true})
	if err != nil || renewed.ID == req.ID || renewed.State != StateQueued {
		t.Fatalf("renewed: %+v %v", renewed, err)
	}
}

func TestCancelAndExpireWaitingRequests(t *testing.T) {
	f := setup(t, 2)
	c := f.coordinator(t, nil, func(cfg *Config) { cfg.RequestTimeout = 200 * time.Millisecond })
	sc := f.scopes[0]
	a := f.submit(t, c, sc, 1, Interactive)
	b := f.submit(t, c, sc, 2, Interactive)
	ctx := context.Background()
	got, err := c.Cancel(ctx, sc, a.ID)
	if err != nil || got.State != StateCancelled || got.CancelVersion != 1 {
		t.Fatalf("cancel of a queued request: %+v %v", got, err)
	}
	time.Sleep(250 * time.Millisecond)
	c.reconcile(ctx)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err = c.Wait(wctx, sc, b.ID)
	if err != nil || got.State != StateExpired || got.ErrorCode != string(rc.CodeDeadlineExceeded) {
		t.Fatalf("queued past its deadline: %+v %v, want expired", got, err)
	}
	// Another workspace's scope never sees the request.
	if _, err := c.Get(ctx, f.scopes[1], b.ID); err == nil {
		t.Fatal("a request was read through another workspace's scope")
	}
}

func TestCancelInRetryWaitAndExecuting(t *testing.T) {
	f := setup(t, 1)
	workers := f.addWorkers(t, 1)
	c := f.coordinator(t, workers, nil)
	sc := f.scopes[0]
	ctx := context.Background()
	req := f.submit(t, c, sc, 1, Interactive)
	got := drain(t, c)
	if len(got) != 1 {
		t.Fatal("not dispatched")
	}
	a := &attempt{req: got[0].req, attemptID: got[0].attemptID, workerID: got[0].workerID, epoch: got[0].epoch}
	c.finish(ctx, a, rc.NewError(rc.CodeBrowserLost, rc.StageLaunch, "crashed"), true)
	if r, _ := c.Get(ctx, sc, req.ID); r.State != StateRetryWait {
		t.Fatalf("after a retryable failure: %s, want retry_wait", r.State)
	}
	if r, err := c.Cancel(ctx, sc, req.ID); err != nil || r.State != StateCancelled {
		t.Fatalf("cancel in retry_wait: %+v %v", r, err)
	}
	// Executing: the cancel version is persisted first; the request ends when its attempt does.
	req2 := f.submit(t, c, sc, 2, Interactive)
	got = drain(t, c)
	if len(got) != 1 || got[0].req.ID != req2.ID {
		t.Fatal("second request not dispatched")
	}
	r, err := c.Cancel(ctx, sc, req2.ID)
	if err != nil || r.State != StateExecuting || r.CancelVersion != 1 {
		t.Fatalf("cancel while executing: %+v %v, want executing with cancel version 1", r, err)
	}
	a = &attempt{req: got[0].req, attemptID: got[0].attemptID, workerID: got[0].workerID, epoch: got[0].epoch}
	c.finish(ctx, a, rc.NewError(rc.CodeCancelled, rc.StageCleanup, "stopped"), true)
	if r, _ := c.Get(ctx, sc, req2.ID); r.State != StateCancelled {
		t.Fatalf("after the attempt stopped: %s, want cancelled", r.State)
	}
	// A terminal request cannot be cancelled again; the answer is its state.
	if r, err := c.Cancel(ctx, sc, req2.ID); err != nil || r.State != StateCancelled || r.CancelVersion != 1 {
		t.Fatalf("cancel of a cancelled request: %+v %v", r, err)
	}
}

// A workspace being moved starts no renders: new requests are refused with 503
// WORKSPACE_MOVING, and its waiting ones stay queued (they are copied to the target) while the
// other workspaces' are dispatched.
func TestFencedWorkspaceStartsNoRenders(t *testing.T) {
	f := setup(t, 2)
	workers := f.addWorkers(t, 2)
	c := f.coordinator(t, workers, nil)
	moving, other := f.scopes[0], f.scopes[1]
	ctx := context.Background()
	waiting := f.submit(t, c, moving, 1, Interactive)
	f.submit(t, c, other, 2, Interactive)
	if _, err := f.db.Exec(ctx, `UPDATE tenancy SET state = 'fenced' WHERE workspace_id = $1`, moving.WorkspaceID()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Submit(ctx, moving, Spec{Owner: "x", Stage: "test", Operation: rc.OpPageDiagnose, Category: Interactive, Snapshot: manifest(t, moving, 3)})
	var pe *problem.Error
	if !errors.As(err, &pe) || pe.Code != problem.WorkspaceMoving {
		t.Fatalf("a new request of a fenced workspace: %v, want WORKSPACE_MOVING", err)
	}
	got := drain(t, c)
	if len(got) != 1 || got[0].req.WorkspaceID != other.WorkspaceID() {
		t.Fatalf("dispatched %d; want only the other workspace's request", len(got))
	}
	if r, _ := c.Get(ctx, moving, waiting.ID); r.State != StateQueued {
		t.Fatalf("the fenced workspace's request is %s, want still queued", r.State)
	}
}

// TestBatchDispatchesAsOneByOne: a dispatch transaction that reserves several attempts makes
// exactly the dispatches that as many one-dispatch transactions in a row make (the same requests
// in the same order: rotation, round-robin cursors, workspace caps, promotion), and leaves the
// same occupancy: one unreleased attempt per busy worker, never more than the cell's and each
// workspace's limits.
func TestBatchDispatchesAsOneByOne(t *testing.T) {
	const workspaces, workers = 3, 7
	type fx struct {
		f *fixture
		c *Coordinator
		// label names a request the same way in both databases: its workspace's index and its
		// submission number.
		label map[string]string
	}
	build := func(tb testing.TB) fx {
		f := setup(tb, workspaces)
		c := f.coordinator(t, f.addWorkers(t, workers), func(cfg *Config) { cfg.WorkspaceConcurrency = 3; cfg.GlobalConcurrency = 6 })
		x := fx{f: f, c: c, label: map[string]string{}}
		// Workspaces in the order of their IDs (the round-robin's order), so that workspace i
		// plays the same part in both databases.
		scopes := slices.SortedFunc(slices.Values(f.scopes), func(a, b auth.Scope) int { return strings.Compare(a.WorkspaceID(), b.WorkspaceID()) })
		for i := range 20 {
			cat := Interactive
			if i%3 == 2 {
				cat = Background
			}
			w := (i * 7 / 3) % workspaces
			r := f.submit(t, c, scopes[w], i, cat)
			x.label[r.ID] = fmt.Sprintf("ws%d/%d", w, i)
		}
		return x
	}
	one, batch := build(t), build(serialTB{t}) // setup makes t parallel, once
	var want, got []string
	for round := range 4 {
		for _, r := range drain(t, one.c) {
			want = append(want, one.label[r.req.ID])
		}
		n := 0
		for {
			rs, _, err := batch.c.dispatchBatch(context.Background(), 8)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 {
				break
			}
			if n++; n == 1 && round == 0 && len(rs) != 6 {
				t.Fatalf("the first batch reserved %d attempts, want 6 (the cell's limit, with 7 idle workers)", len(rs))
			}
			for _, r := range rs {
				got = append(got, batch.label[r.req.ID])
			}
		}
		for _, x := range []fx{one, batch} {
			var attempts, busyWorkers, maxPerWorkspace int
			if err := x.f.db.Pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT worker_id),
				COALESCE((SELECT max(n) FROM (SELECT count(*) AS n FROM render_attempts WHERE released = false GROUP BY workspace_id) AS m), 0)
				FROM render_attempts WHERE released = false`).Scan(&attempts, &busyWorkers, &maxPerWorkspace); err != nil {
				t.Fatal(err)
			}
			if attempts != busyWorkers || attempts > 6 || maxPerWorkspace > 3 {
				t.Fatalf("round %d: %d unreleased attempts on %d workers, at most %d in one workspace", round, attempts, busyWorkers, maxPerWorkspace)
			}
			x.f.releaseAll(t)
		}
	}
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batched dispatches %v\nwant, as one by one, %v", got, want)
	}
}

// serialTB is a testing.TB that setup does not make parallel (a test's second fixture).
type serialTB struct{ testing.TB }

// TestDispatchThatLosesItsRequestReservesNothing: a request cancelled after the dispatch
// statement picked it (its update waits on the row, then finds it no longer waiting) gets no
// attempt; the transaction says so (more: another dispatch may find work), takes no capacity,
// leaves the rotation where it was, and the next dispatch takes the next request.
func TestDispatchThatLosesItsRequestReservesNothing(t *testing.T) {
	f := setup(t, 1)
	c := f.coordinator(t, f.addWorkers(t, 2), nil)
	ctx := context.Background()
	first := f.submit(t, c, f.scopes[0], 1, Interactive)
	second := f.submit(t, c, f.scopes[0], 2, Interactive)
	// Another transaction holds the first request's row, so the dispatch statement, which picks
	// it from its snapshot, waits on it at its update.
	blocker, err := f.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM render_requests WHERE workspace_id = $1 AND id = $2 FOR UPDATE`, first.WorkspaceID, first.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		rs   []*reservation
		more bool
		err  error
	}
	done := make(chan result, 1)
	go func() {
		rs, more, err := c.dispatchBatch(ctx, 1)
		done <- result{rs, more, err}
	}()
	testenv.Eventually(t, 30*time.Second, 10*time.Millisecond, "the dispatch statement waiting on the request's row", func() error {
		var waiting bool
		if err := f.db.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH wk AS%')`).Scan(&waiting); err != nil || !waiting {
			return fmt.Errorf("not waiting yet (%v)", err)
		}
		return nil
	})
	if _, err := blocker.Exec(ctx, `UPDATE render_requests SET state = 'cancelled', finished_at = now() WHERE workspace_id = $1 AND id = $2`, first.WorkspaceID, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.rs) != 0 || !r.more {
		t.Fatalf("dispatch of a request cancelled under it: %d reserved, more %v, %v; want none, more, no error", len(r.rs), r.more, r.err)
	}
	var attempts, round int
	if err := f.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM render_attempts), (SELECT round FROM render_scheduler_state WHERE id = 1)`).Scan(&attempts, &round); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || round != 0 {
		t.Fatalf("after the lost dispatch: %d attempts, round %d; want none and the rotation unmoved", attempts, round)
	}
	got := drain(t, c)
	if len(got) != 1 || got[0].req.ID != second.ID || got[0].req.State != StateExecuting || got[0].seq != 1 {
		t.Fatalf("next dispatches: %d; want the second request, executing, attempt 1", len(got))
	}
}
