package render

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"

	"slidecells/cell/auth"
	"slidecells/cell/snapshot"
	"slidecells/shared/ids"
	rc "slidecells/shared/rendercontract"
)

// retentionCase is one request the retention test sets up, with what must survive a round.
type retentionCase struct {
	req     Request
	pngs    []string // blob keys under the request's renders/ prefix
	attempt *attempt
}

// dispatchNew submits a capture for sc and dispatches it (the only queued request) to a worker.
func dispatchNew(t *testing.T, f *fixture, c *Coordinator, sc auth.Scope, n int) *retentionCase {
	t.Helper()
	r := f.submit(t, c, sc, n, Background)
	rsv, err := c.dispatchOne(context.Background())
	if err != nil || rsv == nil || rsv.req.ID != r.ID {
		t.Fatalf("dispatch of %s: %v, %+v", r.ID, err, rsv)
	}
	return &retentionCase{req: rsv.req, attempt: &attempt{req: rsv.req, attemptID: rsv.attemptID, workerID: rsv.workerID,
		epoch: rsv.epoch, url: rsv.url, slotGeneration: rsv.slotGeneration, state: "dispatched"}}
}

// png writes a PNG-sized blob under the request's prefix for attempt and returns its key.
func (rc *retentionCase) png(t *testing.T, b *gcblob.Bucket, attemptID string, size int) string {
	t.Helper()
	key := rendersPrefix(rc.req.WorkspaceID) + rc.req.ID + "/" + attemptID + "/" + fmt.Sprintf("%064x", size) + ".png"
	if err := b.WriteAll(context.Background(), key, bytes.Repeat([]byte{7}, size), nil); err != nil {
		t.Fatal(err)
	}
	rc.pngs = append(rc.pngs, key)
	return key
}

// succeed commits a capture result through the coordinator's commit (the renderer's
// consumption confirmation goes to an address nobody answers: it is only logged).
func (rc *retentionCase) succeed(t *testing.T, c *Coordinator) {
	t.Helper()
	key := rc.png(t, c.bucket, rc.attempt.attemptID, 4096)
	c.commit(context.Background(), rc.attempt, &Result{AttemptID: rc.attempt.attemptID, ArtifactKey: key,
		ArtifactSHA256: "sha256:" + fmt.Sprintf("%064x", 4096), Bytes: 4096, Width: 320, Height: 180, HostBuild: "preview-host-1"})
	var state string
	if err := c.db.Q(context.Background()).QueryRow(context.Background(), `SELECT state FROM render_requests WHERE id = $1`, rc.req.ID).Scan(&state); err != nil || state != StateSucceeded {
		t.Fatalf("commit of %s: state %q, %v", rc.req.ID, state, err)
	}
}

func exists(t *testing.T, b *gcblob.Bucket, key string) bool {
	t.Helper()
	ok, err := b.Exists(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func rowCount(t *testing.T, f *fixture, table, requestID string) int {
	t.Helper()
	col := "request_id"
	if table == "render_requests" {
		col = "id"
	}
	var n int
	if err := f.db.Q(context.Background()).QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, requestID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetentionReleasesWhatIsDoneAndKeepsWhatIsInUse sets up requests in every state the rules
// distinguish, runs two cleaners at once (two replicas), and checks what is gone and what is
// kept, row by row and blob by blob; a second round deletes nothing.
func TestRetentionReleasesWhatIsDoneAndKeepsWhatIsInUse(t *testing.T) {
	f := setup(t, 2)
	c := f.coordinator(t, f.addWorkers(t, 8), nil)
	ctx := context.Background()
	sc, other := f.scopes[0], f.scopes[1]
	ago := func(id string, col string, d time.Duration) {
		t.Helper()
		table := "render_requests"
		where := "id"
		if col == "consumed_at" {
			table, where = "render_results", "request_id"
		}
		if _, err := f.db.Exec(ctx, `UPDATE `+table+` SET `+col+` = $2 WHERE `+where+` = $1`, id, time.Now().UTC().Add(-d)); err != nil {
			t.Fatal(err)
		}
	}

	// old: succeeded and consumed two hours ago, with a PNG a late commit of an earlier
	// attempt left under its prefix: everything goes.
	old := dispatchNew(t, f, c, sc, 1)
	old.png(t, c.bucket, ids.New(ids.Attempt), 1000)
	old.succeed(t, c)
	if _, err := c.Result(ctx, sc, old.req.ID); err != nil {
		t.Fatal(err)
	}
	ago(old.req.ID, "finished_at", 2*time.Hour)
	ago(old.req.ID, "consumed_at", 2*time.Hour)
	// cached: succeeded and consumed a minute ago: its manifest goes (consumed past the grace),
	// its result and PNG stay for repeats within the window.
	cached := dispatchNew(t, f, c, sc, 2)
	cached.succeed(t, c)
	if _, err := c.Result(ctx, sc, cached.req.ID); err != nil {
		t.Fatal(err)
	}
	ago(cached.req.ID, "consumed_at", time.Minute)
	// fresh: succeeded, not consumed yet: everything stays.
	fresh := dispatchNew(t, f, c, sc, 3)
	fresh.succeed(t, c)
	// running: executing, its attempt unreleased: everything stays.
	running := dispatchNew(t, f, c, sc, 4)
	// stuck: expired two hours ago but its attempt is unknown (termination unproven): stays.
	stuck := dispatchNew(t, f, c, sc, 5)
	if _, err := f.db.Exec(ctx, `UPDATE render_requests SET state = 'expired', finished_at = $2 WHERE id = $1`, stuck.req.ID, time.Now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `UPDATE render_attempts SET state = 'unknown' WHERE request_id = $1`, stuck.req.ID); err != nil {
		t.Fatal(err)
	}
	// failed a minute ago (a content error, final): the manifest goes, the rows stay.
	failed := dispatchNew(t, f, c, sc, 6)
	c.finish(ctx, failed.attempt, rc.NewError(rc.CodeContentError, rc.StageCapture, "broken"), true)
	ago(failed.req.ID, "finished_at", time.Minute)
	// failedOld: failed two hours ago: everything goes.
	failedOld := dispatchNew(t, f, c, sc, 7)
	c.finish(ctx, failedOld.attempt, rc.NewError(rc.CodeContentError, rc.StageCapture, "broken"), true)
	ago(failedOld.req.ID, "finished_at", 2*time.Hour)
	// another workspace's old request goes too (the cleaner is the cell's), by its own rows.
	otherOld := dispatchNew(t, f, c, other, 8)
	otherOld.succeed(t, c)
	ago(otherOld.req.ID, "finished_at", 2*time.Hour)

	// Two replicas at once.
	cfg := RetentionConfig{Window: time.Hour, Batch: 2, OrphanAfter: time.Hour}
	r1 := NewRetention(cfg, c.db, c.bucket, nil)
	r2 := NewRetention(cfg, f.coordinator(t, nil, nil).db, c.bucket, nil)
	if reqs, snaps, err := r1.Backlog(ctx); err != nil || reqs != 3 || snaps != 5 {
		t.Fatalf("backlog before: %d requests, %d snapshots, %v; want 3 (old, failedOld, otherOld) and 5 (those and cached, failed)", reqs, snaps, err)
	}
	var total RetentionStats
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range []*Retention{r1, r2} {
		wg.Go(func() {
			st := r.Round(ctx)
			mu.Lock()
			total.add(st)
			mu.Unlock()
		})
	}
	wg.Wait()
	// old, failedOld and otherOld go with their rows (attempts: one each; results: old and
	// otherOld); manifests: those three and cached, failed; PNGs: old's two and otherOld's one.
	want := RetentionStats{Snapshots: 5, Requests: 3, Attempts: 3, Results: 2, PNGs: 3}
	total.Bytes = 0
	if total != want {
		t.Fatalf("two concurrent rounds deleted %+v, want exactly %+v (each thing once)", total, want)
	}
	for _, gone := range []*retentionCase{old, failedOld, otherOld} {
		for _, table := range []string{"render_requests", "render_attempts", "render_results"} {
			if n := rowCount(t, f, table, gone.req.ID); n != 0 {
				t.Errorf("%s of %s: %d rows left", table, gone.req.ID, n)
			}
		}
		if exists(t, c.bucket, snapshot.ManifestKey(gone.req.WorkspaceID, gone.req.SnapshotRef)) {
			t.Errorf("manifest of %s left", gone.req.ID)
		}
		for _, k := range gone.pngs {
			if exists(t, c.bucket, k) {
				t.Errorf("PNG %s left", k)
			}
		}
	}
	for _, released := range []*retentionCase{cached, failed} {
		if exists(t, c.bucket, snapshot.ManifestKey(sc.WorkspaceID(), released.req.SnapshotRef)) {
			t.Errorf("manifest of %s (consumed or failed past the grace) left", released.req.ID)
		}
		if rowCount(t, f, "render_requests", released.req.ID) != 1 || rowCount(t, f, "render_attempts", released.req.ID) != 1 {
			t.Errorf("rows of %s (within the window) deleted", released.req.ID)
		}
	}
	for _, kept := range []*retentionCase{fresh, running, stuck} {
		if !exists(t, c.bucket, snapshot.ManifestKey(sc.WorkspaceID(), kept.req.SnapshotRef)) {
			t.Errorf("manifest of %s (in use) deleted", kept.req.ID)
		}
		if rowCount(t, f, "render_requests", kept.req.ID) != 1 || rowCount(t, f, "render_attempts", kept.req.ID) != 1 {
			t.Errorf("rows of %s (in use) deleted", kept.req.ID)
		}
	}
	// The cached result is still served, PNG included.
	for _, kept := range []*retentionCase{cached, fresh} {
		res, err := c.Result(ctx, sc, kept.req.ID)
		if err != nil || !exists(t, c.bucket, res.ArtifactKey) {
			t.Errorf("cached result of %s: %v", kept.req.ID, err)
		}
	}
	if reqs, snaps, err := r1.Backlog(ctx); err != nil || reqs != 0 || snaps != 0 {
		t.Fatalf("backlog after: %d, %d, %v", reqs, snaps, err)
	}
	if st := r2.Round(ctx); st != (RetentionStats{}) {
		t.Fatalf("a repeated round deleted %+v", st)
	}

	// The sweep: a preview-artifact manifest past its expiry, a request manifest whose row
	// never came (a failed insert), a PNG whose request is gone — and a valid preview artifact
	// and the requests' own blobs that must stay.
	now := time.Now().UTC()
	preview := func(exp time.Time) string {
		m := manifest(t, sc, 100)
		m.Ref, m.Owner, m.CreatedAt, m.ExpiresAt = ids.New(ids.Snapshot), "preview:u", now, exp
		if err := snapshot.Save(ctx, c.bucket, m); err != nil {
			t.Fatal(err)
		}
		return snapshot.ManifestKey(sc.WorkspaceID(), m.Ref)
	}
	expiredPreview, validPreview, neverInserted := preview(now.Add(30*time.Minute)), preview(now.Add(24*time.Hour)), preview(now.Add(time.Hour))
	orphanPNG := rendersPrefix(sc.WorkspaceID()) + ids.New(ids.Render) + "/att_x/" + fmt.Sprintf("%064x", 1) + ".png"
	if err := c.bucket.WriteAll(ctx, orphanPNG, []byte("png"), nil); err != nil {
		t.Fatal(err)
	}
	// Written just now: younger than OrphanAfter, nothing goes.
	if st := r1.SweepOrphans(ctx); st != (RetentionStats{}) {
		t.Fatalf("a sweep deleted young blobs: %+v", st)
	}
	// Two hours later (the clock of both replicas), at once.
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	r1.now, r2.now = later, later
	total = RetentionStats{}
	for _, r := range []*Retention{r1, r2} {
		wg.Go(func() {
			st := r.SweepOrphans(ctx)
			mu.Lock()
			total.add(st)
			mu.Unlock()
		})
	}
	wg.Wait()
	total.Bytes = 0
	if want := (RetentionStats{OrphanSnapshots: 2, OrphanPNGs: 1}); total != want {
		t.Fatalf("two concurrent sweeps deleted %+v, want %+v", total, want)
	}
	for _, k := range []string{expiredPreview, neverInserted, orphanPNG} {
		if exists(t, c.bucket, k) {
			t.Errorf("orphan %s left", k)
		}
	}
	keep := []string{validPreview, cached.pngs[0], fresh.pngs[0]}
	for _, kept := range []*retentionCase{fresh, running, stuck} {
		keep = append(keep, snapshot.ManifestKey(sc.WorkspaceID(), kept.req.SnapshotRef))
	}
	for _, k := range keep {
		if !exists(t, c.bucket, k) {
			t.Errorf("%s (in use) deleted by the sweep", k)
		}
	}
}
