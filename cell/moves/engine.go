package moves

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	gcblob "gocloud.dev/blob"
	"golang.org/x/sync/errgroup"

	"slidecells/cell/jobs"
	"slidecells/shared/db"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
)

// Endpoint is what a move reaches of one cell: its database and its blob store.
type Endpoint struct {
	ID    string
	DB    *db.DB
	Blobs *gcblob.Bucket
}

// Defaults of Engine.
const (
	DefaultLease        = 15 * time.Second
	DefaultGrace        = 15 * time.Minute
	DefaultDrainTimeout = 2 * time.Minute
)

// Event is what Engine.Progress is told.
type Event struct {
	Move    directory.Move
	Step    string
	Kind    string // "start", "progress", "done", "wait", "failed"
	Done    int64  // with Kind "progress": units done of Total
	Total   int64
	Unit    string // "rows", "bytes", "jobs"
	Elapsed time.Duration
	Note    string
}

// DrainCheck counts a workspace's work in flight on its source cell that a move's drain waits
// for; SQL takes the workspace ID as $1 and returns one count.
type DrainCheck struct {
	Name string
	SQL  string
}

// DrainChecks are what the drain waits for. Mutation jobs are claimed only while their
// workspace is active (tenancy.ActiveSQL), and a running job's commit is refused once it is
// fenced and the job returns to the queue (jobs.ErrFenced), so after the fence this count only
// falls. A render coordinator adds its in-flight requests here.
var DrainChecks = []DrainCheck{
	{Name: "running mutation jobs", SQL: `SELECT count(*) FROM mutation_jobs WHERE workspace_id = $1 AND status = 'running'`},
	// A render coordinator dispatches only for active workspaces (tenancy.ActiveSQL), so after
	// the fence executing requests only end: their results commit (they write no business data)
	// and waiting ones are copied as they are and run on the target.
	{Name: "executing render requests", SQL: `SELECT count(*) FROM render_requests WHERE workspace_id = $1 AND state = 'executing'`},
}

// Engine runs moves. It writes the directory and both cells' databases and blob stores
// directly (it runs in cellctl, an operator tool with access to all of them); see CELLS.md,
// "Moving a workspace".
type Engine struct {
	Dir *directory.Directory
	// Open returns a cell's endpoint; the engine does not close it.
	Open func(ctx context.Context, cellID string) (*Endpoint, error)
	// Runner names this process's leases; empty is a fresh name.
	Runner string
	// Lease is how long a move stays this runner's without renewal (renewed every third);
	// another runner can take the move over after it. Zero is DefaultLease.
	Lease time.Duration
	// Grace is how long after its flip a move keeps the source's copy before its clean step
	// deletes it. Zero is DefaultGrace; a negative value cleans at once.
	Grace time.Duration
	// DrainTimeout bounds the drain step; zero is DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Progress, when set, is told each step's start, progress and end.
	Progress func(Event)
	// Failpoint, when set, is consulted at "move.<step>.start" before each step's work, at
	// "move.<step>" after it and before it is recorded, and at "move.<step>.mid" in the middle of
	// the copying steps (fault tests).
	Failpoint func(name string) error
	// Now is the clock; nil is time.Now.
	Now func() time.Time

	mu    sync.Mutex
	cache map[string]Schema // by cell
}

func (e *Engine) lease() time.Duration { return cmp.Or(e.Lease, DefaultLease) }

func (e *Engine) grace() time.Duration {
	if e.Grace < 0 {
		return 0
	}
	return cmp.Or(e.Grace, DefaultGrace)
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) runner() string {
	if e.Runner == "" {
		e.Runner = ids.New("run")
	}
	return e.Runner
}

func (e *Engine) emit(ev Event) {
	if e.Progress != nil {
		e.Progress(ev)
	}
}

func (e *Engine) failpoint(name string) error {
	if e.Failpoint != nil {
		return e.Failpoint(name)
	}
	return nil
}

// ErrVerify is the error of a verify step that found the copies different; the move goes back
// to its copy step.
var ErrVerify = errors.New("moves: the copies differ")

// Start records a move of ws to toCell (directory.CreateMove) after making sure the source has
// a tenancy row for it (a workspace never used there has none yet; it gets the one the cell
// would write on a first request), so that the source keeps serving it while it moves.
func (e *Engine) Start(ctx context.Context, ws, toCell, reason string) (directory.Move, error) {
	p, err := e.Dir.Placement(ctx, ws)
	if err != nil {
		return directory.Move{}, fmt.Errorf("workspace %s: %w", ws, err)
	}
	if p.State == "active" {
		src, err := e.Open(ctx, p.CellID)
		if err != nil {
			return directory.Move{}, err
		}
		if _, err := src.DB.Exec(ctx, `
			INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, $2, 'active')
			ON CONFLICT (workspace_id) DO UPDATE SET epoch = excluded.epoch, state = 'active', owner_hint = '', updated_at = now()
			WHERE tenancy.epoch < excluded.epoch`, ws, p.Epoch); err != nil {
			return directory.Move{}, fmt.Errorf("%s: tenancy: %w", p.CellID, err)
		}
	}
	return e.Dir.CreateMove(ctx, ws, toCell, reason)
}

// claim takes the move's lease, waiting for another runner's to end (a crashed cellctl's lease
// runs out after Lease).
func (e *Engine) claim(ctx context.Context, id string) (directory.Move, error) {
	for {
		m, err := e.Dir.ClaimMove(ctx, id, e.runner(), e.lease())
		if !errors.Is(err, directory.ErrMoveHeld) {
			return m, err
		}
		e.emit(Event{Move: directory.Move{ID: id}, Kind: "wait", Note: err.Error()})
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// hold renews the lease until stop is called; when the lease is lost, the returned context
// ends, so that the run stops before touching anything more.
func (e *Engine) hold(ctx context.Context, id string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(e.lease() / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				rctx, rc := context.WithTimeout(ctx, e.lease()/3)
				err := e.Dir.RenewMove(rctx, id, e.runner(), e.lease())
				rc()
				if errors.Is(err, directory.ErrMoveLost) {
					cancel(err)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); wg.Wait(); cancel(nil) }
}

// Run runs a move from its current step to its end, or to its clean step when the grace
// period has not passed yet (the move then waits; Run again, or cellctl moves clean, later).
// A step that fails leaves the move failed at that step with the error recorded: Run again
// retries it, Abort rolls the move back. A crash of the process, or of either cell, anywhere
// leaves a move that Run finishes or Abort rolls back: every step can run again.
func (e *Engine) Run(ctx context.Context, id string) (directory.Move, error) {
	return e.run(ctx, id, false)
}

// Clean is Run for a move waiting at its clean step; force skips the rest of the grace period.
func (e *Engine) Clean(ctx context.Context, id string, force bool) (directory.Move, error) {
	return e.run(ctx, id, force)
}

func (e *Engine) run(ctx context.Context, id string, force bool) (directory.Move, error) {
	m, err := e.claim(ctx, id)
	if err != nil {
		return m, err
	}
	if m.Status == directory.MoveAborting {
		_ = e.Dir.ReleaseMove(ctx, id, e.runner())
		return m, fmt.Errorf("move %s is being aborted: run cellctl moves abort %s again to finish it", id, id)
	}
	hctx, stop := e.hold(ctx, id)
	defer stop()
	for m.Step != directory.StepDone {
		if m.Step == directory.StepClean && !force && m.CleanAfter != nil && e.now().Before(*m.CleanAfter) {
			e.emit(Event{Move: m, Step: m.Step, Kind: "wait", Note: "the source's copy is kept until " + m.CleanAfter.UTC().Format(time.RFC3339)})
			return m, e.Dir.ReleaseMove(ctx, id, e.runner())
		}
		start := time.Now()
		e.emit(Event{Move: m, Step: m.Step, Kind: "start"})
		err := e.failpoint("move." + m.Step + ".start")
		var u directory.MoveUpdate
		if err == nil {
			u, err = e.step(hctx, m)
		}
		if err == nil {
			err = e.failpoint("move." + m.Step)
		}
		if err != nil {
			if cause := context.Cause(hctx); cause != nil && hctx.Err() != nil && ctx.Err() == nil {
				err = cause // the lease was lost
			}
			e.emit(Event{Move: m, Step: m.Step, Kind: "failed", Elapsed: time.Since(start), Note: err.Error()})
			if errors.Is(err, directory.ErrMoveLost) {
				return m, err
			}
			back := ""
			if errors.Is(err, ErrVerify) {
				back = directory.StepCopy
			}
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if ferr := e.Dir.FailMove(fctx, id, e.runner(), back, err.Error(), u.Report); ferr != nil && !errors.Is(ferr, directory.ErrMoveLost) {
				err = errors.Join(err, ferr)
			}
			if got, gerr := e.Dir.GetMove(fctx, id); gerr == nil {
				m = got
			}
			return m, fmt.Errorf("move %s, step %s: %w", id, m.Step, err)
		}
		u.Timing = time.Since(start)
		next := nextStep(m.Step)
		done := m
		m, err = e.Dir.AdvanceMove(ctx, id, e.runner(), m.Step, next, u)
		if err != nil {
			return m, err
		}
		e.emit(Event{Move: m, Step: done.Step, Kind: "done", Elapsed: u.Timing})
	}
	return m, nil
}

func nextStep(s string) string {
	for i, x := range directory.MoveSteps {
		if x == s && i+1 < len(directory.MoveSteps) {
			return directory.MoveSteps[i+1]
		}
	}
	return directory.StepDone
}

// cells opens the move's two endpoints.
func (e *Engine) cells(ctx context.Context, m directory.Move) (src, dst *Endpoint, err error) {
	if src, err = e.Open(ctx, m.FromCell); err != nil {
		return nil, nil, fmt.Errorf("source %s: %w", m.FromCell, err)
	}
	if dst, err = e.Open(ctx, m.ToCell); err != nil {
		return nil, nil, fmt.Errorf("target %s: %w", m.ToCell, err)
	}
	return src, dst, nil
}

// schemas reads both cells' workspace-owned tables; they must be the same. They are read once
// per engine and cell (information_schema is slow to query, and a move's write window should not
// pay for it twice).
func (e *Engine) schemas(ctx context.Context, src, dst *Endpoint) (Schema, error) {
	s, err := e.schema(ctx, src)
	if err != nil {
		return s, err
	}
	t, err := e.schema(ctx, dst)
	if err != nil {
		return s, err
	}
	if s.Signature() != t.Signature() {
		return s, fmt.Errorf("%s (migration %d) and %s (migration %d) have different workspace tables: upgrade both to the same release first",
			src.ID, s.Version, dst.ID, t.Version)
	}
	return s, nil
}

func (e *Engine) schema(ctx context.Context, c *Endpoint) (Schema, error) {
	e.mu.Lock()
	s, ok := e.cache[c.ID]
	e.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := ReadSchema(ctx, c.DB.Pool)
	if err != nil {
		return s, fmt.Errorf("%s: %w", c.ID, err)
	}
	e.mu.Lock()
	if e.cache == nil {
		e.cache = map[string]Schema{}
	}
	e.cache[c.ID] = s
	e.mu.Unlock()
	return s, nil
}

func tenancyRow(ctx context.Context, d *db.DB, ws string) (state string, epoch int64, err error) {
	err = d.Pool.QueryRow(ctx, `SELECT state, epoch FROM tenancy WHERE workspace_id = $1`, ws).Scan(&state, &epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, nil
	}
	return state, epoch, err
}

func (e *Engine) step(ctx context.Context, m directory.Move) (directory.MoveUpdate, error) {
	var u directory.MoveUpdate
	src, dst, err := e.cells(ctx, m)
	if err != nil {
		return u, err
	}
	switch m.Step {
	case directory.StepPlan:
		return u, e.plan(ctx, m, src, dst)
	case directory.StepPrecopy:
		return u, e.copy(ctx, m, src, dst, false)
	case directory.StepFence:
		u.Fenced = true
		return u, e.fence(ctx, m, src)
	case directory.StepDrain:
		return u, e.drain(ctx, m, src)
	case directory.StepCopy:
		return u, e.copy(ctx, m, src, dst, true)
	case directory.StepVerify:
		u.Report, err = e.verify(ctx, m, src, dst)
		return u, err
	case directory.StepFlip:
		u.Window = true
		after := e.now().Add(e.grace())
		u.CleanAfter = &after
		return u, e.flip(ctx, m, src, dst)
	case directory.StepClean:
		return u, e.clean(ctx, m, src)
	}
	return u, fmt.Errorf("unknown step %q", m.Step)
}

// plan checks that the move can run: both cells reachable with the same workspace tables, the
// source hosting the workspace at the move's epoch, the target not serving it.
func (e *Engine) plan(ctx context.Context, m directory.Move, src, dst *Endpoint) error {
	e.mu.Lock()
	e.cache = nil // a plan reads the schemas afresh
	e.mu.Unlock()
	if _, err := e.schemas(ctx, src, dst); err != nil {
		return err
	}
	state, epoch, err := tenancyRow(ctx, src.DB, m.WorkspaceID)
	if err != nil {
		return fmt.Errorf("%s: %w", src.ID, err)
	}
	if epoch != m.FromEpoch || (state != "active" && state != "fenced") {
		return fmt.Errorf("%s does not host %s at epoch %d (its tenancy row: %q at %d)", src.ID, m.WorkspaceID, m.FromEpoch, state, epoch)
	}
	state, _, err = tenancyRow(ctx, dst.DB, m.WorkspaceID)
	if err != nil {
		return fmt.Errorf("%s: %w", dst.ID, err)
	}
	if state == "active" || state == "fenced" {
		return fmt.Errorf("%s already has %s %s", dst.ID, m.WorkspaceID, state)
	}
	return nil
}

// Precopy passes: at most maxPrecopyPasses, until one writes at most precopySettled rows.
const (
	maxPrecopyPasses = 3
	precopySettled   = 200
)

// copy makes the target's rows and blobs equal to the source's. Before the fence (precopy) the
// source is read from a plain snapshot while it keeps taking writes; after the fence and the
// drain, from a snapshot that includes every write that got past the fence (db.Snapshot).
func (e *Engine) copy(ctx context.Context, m directory.Move, src, dst *Endpoint, fenced bool) error {
	s, err := e.schemas(ctx, src, dst)
	if err != nil {
		return err
	}
	if err := e.targetNotServing(ctx, m, dst); err != nil {
		return err
	}
	read := src.DB.ReadOnly
	if fenced {
		read = src.DB.Snapshot
		if err := e.checkFenced(ctx, m, src); err != nil {
			return err
		}
	}
	blobs := func() (BlobStats, error) {
		return syncBlobs(ctx, src.Blobs, dst.Blobs, m.WorkspaceID, func(done, total int64) {
			e.emit(Event{Move: m, Step: m.Step, Kind: "progress", Done: done, Total: total, Unit: "bytes"})
		})
	}
	if !fenced {
		// The bulk of the bytes first, so that the row passes end close to the fence.
		if _, err := blobs(); err != nil {
			return err
		}
	}
	var rs RowStats
	// Before the fence, passes repeat while the last one still had much to write: each copies
	// what the workspace wrote during the one before, so the copy after the fence, which writes
	// wait for, has little left.
	for pass := 1; ; pass++ {
		err = read(ctx, func(tx pgx.Tx) error {
			var err error
			rs, err = syncRows(ctx, tx, dst.DB, s, m.WorkspaceID, func(done, total int64) {
				e.emit(Event{Move: m, Step: m.Step, Kind: "progress", Done: done, Total: total, Unit: "rows"})
			})
			return err
		})
		if err != nil {
			return err
		}
		if fenced || pass == maxPrecopyPasses || rs.Inserted+rs.Updated+rs.Deleted <= precopySettled {
			break
		}
	}
	if err := e.failpoint("move." + m.Step + ".mid"); err != nil {
		return err
	}
	bs, err := blobs()
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d rows (%s): %d inserted, %d updated, %d deleted; %d blobs (%s): %d copied (%s), %d deleted",
		rs.Rows, human(rs.Bytes), rs.Inserted, rs.Updated, rs.Deleted, bs.Blobs, human(bs.Bytes), bs.Copied, human(bs.Written), bs.Deleted)
	if rs.Replaced {
		note += "; the target's copy was rewritten whole after a key conflict"
	}
	e.emit(Event{Move: m, Step: m.Step, Kind: "progress", Note: note})
	return nil
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func (e *Engine) targetNotServing(ctx context.Context, m directory.Move, dst *Endpoint) error {
	state, _, err := tenancyRow(ctx, dst.DB, m.WorkspaceID)
	if err != nil {
		return err
	}
	if state == "active" || state == "fenced" {
		return fmt.Errorf("%s serves %s (%s): the copy would overwrite a live workspace", dst.ID, m.WorkspaceID, state)
	}
	return nil
}

func (e *Engine) checkFenced(ctx context.Context, m directory.Move, src *Endpoint) error {
	state, epoch, err := tenancyRow(ctx, src.DB, m.WorkspaceID)
	if err != nil {
		return err
	}
	if state != "fenced" || epoch != m.FromEpoch {
		return fmt.Errorf("%s's tenancy row of %s is %q at %d, not fenced at %d", src.ID, m.WorkspaceID, state, epoch, m.FromEpoch)
	}
	return nil
}

// fence stops the source taking writes for the workspace: its tenancy row becomes fenced.
// Reads go on; writes get 503 WORKSPACE_MOVING; no job starts; a job's commit is refused and
// the job returns to the queue. A write transaction that read the row before the fence
// committed either commits before the copy's snapshot or is aborted and retried (and then sees
// the fence): every write path checks the row in its own transaction (tenancy.Writable).
func (e *Engine) fence(ctx context.Context, m directory.Move, src *Endpoint) error {
	tag, err := src.DB.Exec(ctx, `UPDATE tenancy SET state = 'fenced', owner_hint = '', updated_at = now()
		WHERE workspace_id = $1 AND epoch = $2 AND state IN ('active', 'fenced')`, m.WorkspaceID, m.FromEpoch)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%s does not host %s at epoch %d any more", src.ID, m.WorkspaceID, m.FromEpoch)
	}
	return nil
}

// drain waits until no work of the workspace is in flight on the source (DrainChecks): running
// jobs reach their commit, are refused by the fence and go back to the queue, to be copied as
// pending and run on the target. Jobs of a source replica that died are returned to the queue
// once their lease ends, by the source's rescuer or by the drain itself (so a source with no
// replica left still drains).
func (e *Engine) drain(ctx context.Context, m directory.Move, src *Endpoint) error {
	if err := e.checkFenced(ctx, m, src); err != nil {
		return err
	}
	q := &jobs.Queue{DB: src.DB}
	deadline := time.Now().Add(cmp.Or(e.DrainTimeout, DefaultDrainTimeout))
	var first int64 = -1
	for {
		if _, err := q.RescueWorkspace(ctx, m.WorkspaceID); err != nil {
			return err
		}
		var total int64
		var what []string
		for _, c := range DrainChecks {
			var n int64
			if err := src.DB.Pool.QueryRow(ctx, c.SQL, m.WorkspaceID).Scan(&n); err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
			if n > 0 {
				what = append(what, fmt.Sprintf("%d %s", n, c.Name))
			}
			total += n
		}
		if first < 0 {
			first = total
		}
		e.emit(Event{Move: m, Step: m.Step, Kind: "progress", Done: first - total, Total: first, Unit: "jobs"})
		if total == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still in flight after %s: %s (resume waits again; abort gives the workspace back to %s)",
				cmp.Or(e.DrainTimeout, DefaultDrainTimeout), strings.Join(what, ", "), src.ID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Report is what verify records on the move: per table, the row count and checksum of each
// side, and the same for blobs.
type Report struct {
	Tables map[string]Pair[TableSum] `json:"tables"`
	Blobs  Pair[BlobSum]             `json:"blobs"`
}

// Pair is one measure on the source and on the target.
type Pair[T any] struct {
	Source T `json:"source"`
	Target T `json:"target"`
}

// verify compares both sides: per table the row count and checksum, and the blobs' keys,
// sizes and digests, must be equal. Any difference fails the step (ErrVerify) and sends the
// move back to its copy step; nothing flips.
func (e *Engine) verify(ctx context.Context, m directory.Move, src, dst *Endpoint) (json.RawMessage, error) {
	s, err := e.schemas(ctx, src, dst)
	if err != nil {
		return nil, err
	}
	if err := e.checkFenced(ctx, m, src); err != nil {
		return nil, err
	}
	// Both sides at once. The source is fenced and drained, and the copy's snapshot already
	// waited for every transaction that began before the fence, so a plain snapshot is exact.
	var a, b map[string]TableSum
	var sa, sb BlobSum
	var badBlobs []string
	var g errgroup.Group
	g.Go(func() error {
		return src.DB.ReadOnly(ctx, func(tx pgx.Tx) error {
			var err error
			a, err = Checksums(ctx, tx, s, m.WorkspaceID)
			return err
		})
	})
	g.Go(func() error {
		return dst.DB.ReadOnly(ctx, func(tx pgx.Tx) error {
			var err error
			b, err = Checksums(ctx, tx, s, m.WorkspaceID)
			return err
		})
	})
	g.Go(func() error {
		var err error
		sa, sb, badBlobs, err = verifyBlobs(ctx, src.Blobs, dst.Blobs, m.WorkspaceID)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	r := Report{Tables: map[string]Pair[TableSum]{}}
	var bad []string
	for _, t := range s.Tables {
		r.Tables[t.Name] = Pair[TableSum]{Source: a[t.Name], Target: b[t.Name]}
		if a[t.Name] != b[t.Name] {
			bad = append(bad, fmt.Sprintf("%s: %d rows %.12s… on the source, %d rows %.12s… on the target",
				t.Name, a[t.Name].Rows, a[t.Name].SHA256, b[t.Name].Rows, b[t.Name].SHA256))
		}
	}
	r.Blobs = Pair[BlobSum]{Source: sa, Target: sb}
	if len(badBlobs) > 5 {
		badBlobs = append(badBlobs[:5], fmt.Sprintf("… %d more blobs", len(badBlobs)-5))
	}
	bad = append(bad, badBlobs...)
	report, _ := json.Marshal(r)
	if len(bad) > 0 {
		sort.Strings(bad)
		return report, fmt.Errorf("%w: %s", ErrVerify, strings.Join(bad, "; "))
	}
	var rows int64
	for _, p := range r.Tables {
		rows += p.Source.Rows
	}
	e.emit(Event{Move: m, Step: m.Step, Kind: "progress", Note: fmt.Sprintf("%d tables, %d rows and %d blobs (%s) equal on both sides",
		len(r.Tables), rows, sa.Blobs, human(sa.Bytes))})
	return report, nil
}

// flip makes the target the owner: the source's row becomes moved (pointing at the target) at
// the next epoch, the directory's placement names the target at that epoch (the commit point:
// directory.FlipMove), and the target's row becomes active. Routers holding the old placement
// get 421 from the source and find the target; those that ask the directory find it at once.
func (e *Engine) flip(ctx context.Context, m directory.Move, src, dst *Endpoint) error {
	next := m.FromEpoch + 1
	if _, err := src.DB.Exec(ctx, `UPDATE tenancy SET state = 'moved', epoch = $2, owner_hint = $3, updated_at = now()
		WHERE workspace_id = $1 AND epoch IN ($4, $2) AND state IN ('fenced', 'moved')`, m.WorkspaceID, next, dst.ID, m.FromEpoch); err != nil {
		return err
	}
	if state, epoch, err := tenancyRow(ctx, src.DB, m.WorkspaceID); err != nil || state != "moved" || epoch != next {
		return fmt.Errorf("%s's tenancy row of %s is %q at %d, not moved at %d (%v)", src.ID, m.WorkspaceID, state, epoch, next, err)
	}
	if _, err := e.Dir.FlipMove(ctx, m.ID, e.runner()); err != nil {
		return err
	}
	_, err := dst.DB.Exec(ctx, `
		INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, $2, 'active')
		ON CONFLICT (workspace_id) DO UPDATE SET epoch = excluded.epoch, state = 'active', owner_hint = '', updated_at = now()
		WHERE tenancy.epoch <= excluded.epoch`, m.WorkspaceID, next)
	return err
}

// clean deletes the source's copy once the grace period has passed: its rows (children first,
// in batches) and its blobs. The source keeps its moved tenancy row, which answers 421 with the
// new owner for as long as a router asks.
func (e *Engine) clean(ctx context.Context, m directory.Move, src *Endpoint) error {
	p, err := e.Dir.Placement(ctx, m.WorkspaceID)
	if err != nil {
		return err
	}
	if p.CellID == src.ID {
		return fmt.Errorf("the directory places %s on %s again: its copy there is live, not cleaned", m.WorkspaceID, src.ID)
	}
	state, _, err := tenancyRow(ctx, src.DB, m.WorkspaceID)
	if err != nil {
		return err
	}
	if state != "moved" {
		return fmt.Errorf("%s's tenancy row of %s is %q, not moved: not cleaned", src.ID, m.WorkspaceID, state)
	}
	s, err := ReadSchema(ctx, src.DB.Pool)
	if err != nil {
		return err
	}
	if err := deleteWorkspace(ctx, src.DB, s, m.WorkspaceID); err != nil {
		return err
	}
	n, err := deleteBlobs(ctx, src.Blobs, m.WorkspaceID)
	if err != nil {
		return err
	}
	e.emit(Event{Move: m, Step: m.Step, Kind: "progress", Note: fmt.Sprintf("the source's rows and %d blobs deleted", n)})
	return nil
}

// Abort rolls a move back before its flip: the directory places the workspace on the source as
// active again (the decision; nothing can flip after it), the source's tenancy row becomes
// active at the move's epoch, and the target's partial copy (rows and blobs) is deleted. The
// source stays authoritative throughout. A crash in the middle leaves the move aborting: Abort
// again finishes it. After the flip, Abort refuses (directory.ErrPastFlip).
func (e *Engine) Abort(ctx context.Context, id string) (directory.Move, error) {
	m, err := e.claim(ctx, id)
	if err != nil {
		return m, err
	}
	hctx, stop := e.hold(ctx, id)
	defer stop()
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = e.Dir.ReleaseMove(rctx, id, e.runner())
	}
	if m.Step == directory.StepClean || m.Step == directory.StepDone {
		release()
		return m, directory.ErrPastFlip
	}
	if m, err = e.Dir.BeginAbort(hctx, id, e.runner()); err != nil {
		release()
		return m, err
	}
	src, dst, err := e.cells(hctx, m)
	if err != nil {
		release()
		return m, err
	}
	if _, err := src.DB.Exec(hctx, `UPDATE tenancy SET state = 'active', epoch = $2, owner_hint = '', updated_at = now()
		WHERE workspace_id = $1 AND epoch IN ($2, $3) AND state IN ('fenced', 'moved')`, m.WorkspaceID, m.FromEpoch, m.FromEpoch+1); err != nil {
		release()
		return m, fmt.Errorf("%s: %w", src.ID, err)
	}
	if err := e.targetNotServing(hctx, m, dst); err != nil {
		release()
		return m, err
	}
	s, err := ReadSchema(hctx, dst.DB.Pool)
	if err == nil {
		err = deleteWorkspace(hctx, dst.DB, s, m.WorkspaceID)
	}
	if err == nil {
		_, err = deleteBlobs(hctx, dst.Blobs, m.WorkspaceID)
	}
	if err != nil {
		release()
		return m, fmt.Errorf("%s: removing the partial copy: %w", dst.ID, err)
	}
	if err := e.Dir.FinishAbort(hctx, id, e.runner()); err != nil {
		return m, err
	}
	return e.Dir.GetMove(ctx, id)
}
