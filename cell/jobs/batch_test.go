package jobs

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"slidecells/shared/db/dbtest"
	"slidecells/shared/testenv"
)

// TestFinishBatchSkipsLostLease: one statement writes the outcomes of several jobs, each only
// while the job is still running under the writer's lease: a job rescued and claimed by another
// replica meanwhile is left as it is (and is absent from what was written), a cancel request
// turns an outcome into canceled, and the claim that rides in the same transaction takes the
// next job.
func TestFinishBatchSkipsLostLease(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	var js []Job
	for range 5 {
		js = append(js, f.enqueue(t, "x", 3))
	}
	claimed, err := f.q.claim(ctx, "wrk_1", 4, time.Minute, Caps{})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	// js[1]'s lease ended and another replica holds it now; js[3] gets a cancel request.
	if _, err := f.q.DB.Pool.Exec(ctx, `UPDATE mutation_jobs SET lease_owner = 'wrk_2' WHERE workspace_id = $1 AND id = $2`,
		js[1].WorkspaceID, js[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.Cancel(ctx, f.scope, js[3].ID); err != nil {
		t.Fatal(err)
	}
	fin := []finishing{
		{js[0], outcome{status: Succeeded, result: json.RawMessage(`{"n":1}`)}},
		{js[1], outcome{status: Failed, code: "X_FAILED", summary: "lost"}},
		{js[2], outcome{status: Pending, code: CodeInternal, summary: "again", retryWait: time.Hour}},
		{js[3], outcome{status: Succeeded}},
	}
	next, written, err := f.q.finishAndClaim(ctx, "wrk_1", fin, 1, time.Minute, Caps{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{js[0].ID: Succeeded, js[2].ID: Pending, js[3].ID: Canceled}
	if fmt.Sprint(written) != fmt.Sprint(want) {
		t.Fatalf("written %v, want %v", written, want)
	}
	if len(next) != 1 || next[0].ID != js[4].ID || next[0].Status != Running {
		t.Fatalf("the claim riding with the finishes: %+v", next)
	}
	get := func(j Job) Job {
		t.Helper()
		g, err := f.q.Get(ctx, f.scope, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if g := get(js[0]); g.Status != Succeeded || g.Stage != "done" || g.Progress != 100 || string(g.Result) != `{"n": 1}` || g.FinishedAt == nil || g.AttemptCount != 0 {
		t.Fatalf("succeeded job: %+v result %s", g, g.Result)
	}
	if g := get(js[1]); g.Status != Running || g.ErrorCode != "" || g.FinishedAt != nil {
		t.Fatalf("the job another replica holds was written: %+v", g)
	}
	if owner := dbtest.Count(t, f.q.DB, `SELECT count(*) FROM mutation_jobs WHERE id = $1 AND lease_owner = 'wrk_2'`, js[1].ID); owner != 1 {
		t.Fatal("the job another replica holds lost its lease owner")
	}
	if g := get(js[2]); g.Status != Pending || g.Stage != "retry-wait" || g.AttemptCount != 1 || g.FinishedAt != nil ||
		g.ErrorCode != CodeInternal || !g.RunAfter.After(time.Now().Add(50*time.Minute)) {
		t.Fatalf("job waiting for its retry: %+v", g)
	}
	if g := get(js[3]); g.Status != Canceled || g.Stage != "canceled" || g.FinishedAt == nil || g.AttemptCount != 0 {
		t.Fatalf("cancelled job: %+v", g)
	}
	// The same outcomes again: nothing is this writer's any more, nothing is written twice.
	if _, written, err := f.q.finishAndClaim(ctx, "wrk_1", fin, 0, time.Minute, Caps{}); err != nil || len(written) != 0 {
		t.Fatalf("writing the outcomes again: %v %v", written, err)
	}
}

// TestFusedClaimKeepsCaps: the claim that rides with a batch of finishes counts the finished
// jobs out of their workspace's running jobs (same transaction), and takes no more than the
// slots they freed below the cap.
func TestFusedClaimKeepsCaps(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for range 6 {
		f.enqueue(t, "x", 3)
	}
	caps := Caps{Default: 2}
	first, err := f.q.claim(ctx, "wrk_1", 4, time.Minute, caps)
	if err != nil || len(first) != 2 {
		t.Fatalf("claim at cap 2: %d %v", len(first), err)
	}
	// One of the two finishes: exactly one more job starts, though four were asked for.
	next, written, err := f.q.finishAndClaim(ctx, "wrk_1", []finishing{{first[0], outcome{status: Succeeded}}}, 4, time.Minute, caps)
	if err != nil || written[first[0].ID] != Succeeded || len(next) != 1 {
		t.Fatalf("finish of 1 with a claim of 4: written %v, %d claimed, %v", written, len(next), err)
	}
	// Another replica's claim with nothing to finish: the workspace is at its cap.
	if more, err := f.q.claim(ctx, "wrk_2", 4, time.Minute, caps); err != nil || len(more) != 0 {
		t.Fatalf("claim at the cap: %d %v", len(more), err)
	}
	if n := dbtest.Count(t, f.q.DB, `SELECT count(*) FROM mutation_jobs WHERE status = 'running'`); n != 2 {
		t.Fatalf("%d jobs running, want the cap of 2", n)
	}
	// Both finish in one batch: two more start.
	next, written, err = f.q.finishAndClaim(ctx, "wrk_1", []finishing{{first[1], outcome{status: Failed, code: "X"}}, {next[0], outcome{status: Succeeded}}}, 4, time.Minute, caps)
	if err != nil || len(written) != 2 || len(next) != 2 {
		t.Fatalf("finish of 2 with a claim of 4: written %v, %d claimed, %v", written, len(next), err)
	}
}

// TestPoolBatchesOutcomes: many short jobs ending together in a pool (their outcomes written in
// batches with the claims) all reach their state once, the one whose result is not JSON fails
// alone instead of holding back the others' writes, and the replica's cap holds.
func TestPoolBatchesOutcomes(t *testing.T) {
	f := setup(t)
	var runs, peak, now atomic.Int64
	f.pool(t, map[string]Handler{
		"ok": func(ctx context.Context, r *Run) (json.RawMessage, error) {
			n := now.Add(1)
			defer now.Add(-1)
			for {
				if p := peak.Load(); n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			runs.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		},
		"fail":   func(context.Context, *Run) (json.RawMessage, error) { return nil, Fail("X_BAD", "no") },
		"badout": func(context.Context, *Run) (json.RawMessage, error) { return json.RawMessage(`{not json`), nil },
	}, func(p *Pool) { p.Slots = 4; p.WorkspaceConcurrency = 3 })
	var ok, failed []Job
	var bad Job
	for i := range 60 {
		switch {
		case i == 30:
			bad = f.enqueue(t, "badout", 1)
		case i%5 == 0:
			failed = append(failed, f.enqueue(t, "fail", 1))
		default:
			ok = append(ok, f.enqueue(t, "ok", 1))
		}
	}
	for _, j := range ok {
		if g := f.wait(t, j.ID, Succeeded, Failed); g.Status != Succeeded || string(g.Result) != `{"ok": true}` {
			t.Fatalf("ok job: %+v %s", g, g.Result)
		}
	}
	for _, j := range failed {
		if g := f.wait(t, j.ID, Succeeded, Failed); g.Status != Failed || g.ErrorCode != "X_BAD" {
			t.Fatalf("failed job: %+v", g)
		}
	}
	if g := f.wait(t, bad.ID, Succeeded, Failed); g.Status != Failed || g.ErrorCode != CodeInternal || g.Result != nil {
		t.Fatalf("job with a result that is not JSON: %+v", g)
	}
	if n := runs.Load(); n != int64(len(ok)) {
		t.Fatalf("%d runs of %d ok jobs", n, len(ok))
	}
	if p := peak.Load(); p > 3 {
		t.Fatalf("%d jobs of the workspace ran at once, cap 3", p)
	}
}

// The pool stops while a job runs; the job ends within the shutdown grace: its outcome is
// written (it is not returned to the queue to run again).
func TestShutdownWritesOutcomesOfJobsEndingInGrace(t *testing.T) {
	f := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	p := &Pool{Queue: f.q, Lease: time.Second, PollInterval: 20 * time.Millisecond, ShutdownGrace: 20 * time.Second,
		Handlers: map[string]Handler{"x": func(context.Context, *Run) (json.RawMessage, error) {
			close(started)
			<-release
			return nil, Fail("X_DONE", "ended during the grace")
		}}}
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	j := f.enqueue(t, "x", 1)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("job did not start")
	}
	cancel()
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("pool did not stop")
	}
	if g, err := f.q.Get(context.Background(), f.scope, j.ID); err != nil || g.Status != Failed || g.ErrorCode != "X_DONE" {
		t.Fatalf("after shutdown: %+v %v", g, err)
	}
}

// TestHelperDiesBeforeWrite is not a test: it is the worker process TestCrashBeforeOutcomeWritten
// kills after its job ended and before the outcome is written.
func TestHelperDiesBeforeWrite(t *testing.T) {
	url := os.Getenv("JOBS_HELPER_WRITE_DB")
	if url == "" {
		t.Skip("helper process only")
	}
	p := &Pool{Queue: &Queue{DB: dbtest.Open(t, url)}, Owner: "doomed", Lease: 500 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		Handlers: map[string]Handler{"noop": func(context.Context, *Run) (json.RawMessage, error) { return nil, nil }}}
	p.beforeWrite = func() {
		fmt.Println("ENDED")
		select {} // hold the outcome until killed
	}
	_ = p.Run(context.Background())
}

// A replica's process is killed after its job ended and before its outcome was written: the
// job's lease ends, the rescuer returns it to the queue and another replica runs it again.
func TestCrashBeforeOutcomeWritten(t *testing.T) {
	f := setup(t)
	j := f.enqueue(t, "noop", 3)
	cmd, out := helperProcess(t, "TestHelperDiesBeforeWrite", "JOBS_HELPER_WRITE_DB="+f.cellURL)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the worker process exited before its job ended")
			}
			if strings.Contains(line, "ENDED") {
				break wait
			}
		case <-deadline:
			t.Fatal("the worker process's job did not end")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if g, err := f.q.Get(context.Background(), f.scope, j.ID); err != nil || g.Status != Running || g.AttemptCount != 0 {
		t.Fatalf("after the kill: %+v %v (want running: the outcome was not written)", g, err)
	}
	var runs atomic.Int64
	f.pool(t, map[string]Handler{"noop": func(context.Context, *Run) (json.RawMessage, error) { runs.Add(1); return nil, nil }})
	done := f.wait(t, j.ID, Succeeded, Failed)
	if done.Status != Succeeded || done.AttemptCount != 1 {
		t.Fatalf("after the rescue: %+v", done)
	}
	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "the job ran again", func() error {
		if runs.Load() != 1 {
			return fmt.Errorf("%d runs", runs.Load())
		}
		return nil
	})
}

// TestRenewalWaitsForOutcomeWrites: a batch of outcomes and the lease renewal each lock several
// of the pool's running jobs, in orders of their own; the pool never runs them side by side (a
// deadlock PostgreSQL would break after deadlock_timeout). Checked where the write starts: the
// lock renew takes is held, and a renewal started then ends only after the write.
func TestRenewalWaitsForOutcomeWrites(t *testing.T) {
	f := setup(t)
	var checked, renewedFirst atomic.Int64
	f.pool(t, map[string]Handler{"noop": func(context.Context, *Run) (json.RawMessage, error) { return nil, nil }}, func(p *Pool) {
		p.beforeWrite = func() {
			if p.writes.TryLock() {
				p.writes.Unlock()
				renewedFirst.Add(1)
			}
			checked.Add(1)
		}
	})
	var js []Job
	for range 20 {
		js = append(js, f.enqueue(t, "noop", 1))
	}
	for _, j := range js {
		f.wait(t, j.ID, Succeeded, Failed)
	}
	if checked.Load() == 0 {
		t.Fatal("no outcome batch was written")
	}
	if n := renewedFirst.Load(); n != 0 {
		t.Fatalf("%d outcome writes ran without the lock the renewal takes", n)
	}
}

// TestFinishAloneWritesWhatTheBatchWrites: the one-by-one write a pool falls back to after a
// failed batch is the batch statement with one row: the same guards and states.
func TestFinishAloneWritesWhatTheBatchWrites(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	var js []Job
	for range 3 {
		js = append(js, f.enqueue(t, "x", 3))
	}
	if claimed, err := f.q.claim(ctx, "wrk_1", 3, time.Minute, Caps{}); err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	if _, err := f.q.Cancel(ctx, f.scope, js[2].ID); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		owner string
		o     outcome
		want  string
	}{
		{"wrk_1", outcome{status: Pending, code: CodeInternal, summary: "again", retryWait: time.Hour}, Pending},
		{"wrk_2", outcome{status: Succeeded}, ""}, // not its owner: nothing written
		{"wrk_1", outcome{status: Succeeded}, Canceled},
	} {
		state, err := f.q.finish(ctx, js[i], c.owner, c.o)
		if err != nil || state != c.want {
			t.Fatalf("finish %d: %q %v, want %q", i, state, err, c.want)
		}
	}
	if g, err := f.q.Get(ctx, f.scope, js[0].ID); err != nil || g.Stage != "retry-wait" || g.AttemptCount != 1 || g.FinishedAt != nil {
		t.Fatalf("job waiting for its retry: %+v %v", g, err)
	}
	if g, err := f.q.Get(ctx, f.scope, js[1].ID); err != nil || g.Status != Running {
		t.Fatalf("a job finished by a replica that does not own it: %+v %v", g, err)
	}
}
