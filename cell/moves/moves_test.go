package moves

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	gcblob "gocloud.dev/blob"

	"slidecells/cell/auth/authtest"
	"slidecells/cell/tenancy"
	"slidecells/migrations"
	"slidecells/shared/db"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/failpoint"
)

type fixture struct {
	dir       *directory.Directory
	cells     map[string]*Endpoint
	ws        string // the workspace that moves, on cell-a
	bystander string // another workspace on cell-a, never touched
}

func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	ctx := context.Background()
	tn := authtest.New(t, 2) // the moving workspace and a bystander, on cell-a
	if err := tn.Dir.AddCell(ctx, directory.Cell{ID: "cell-b", InternalURL: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: tn.Dir, cells: map[string]*Endpoint{}, ws: tn.Scopes[0].WorkspaceID(), bystander: tn.Scopes[1].WorkspaceID()}
	for _, c := range []string{"cell-a", "cell-b"} {
		ep, err := OpenEndpoint(ctx, c, dbtest.NewDatabase(t, migrations.FS, migrations.Cell), "mem://")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ep.Close)
		f.cells[c] = ep
	}
	for _, ws := range []string{f.ws, f.bystander} {
		f.seed(t, f.cells["cell-a"], ws)
	}
	return f
}

func (f *fixture) engine(tune ...func(*Engine)) *Engine {
	e := &Engine{Dir: f.dir, Grace: -1, Lease: 3 * time.Second, DrainTimeout: 10 * time.Second,
		Open: func(_ context.Context, id string) (*Endpoint, error) {
			if ep := f.cells[id]; ep != nil {
				return ep, nil
			}
			return nil, fmt.Errorf("no cell %s", id)
		}}
	for _, fn := range tune {
		fn(e)
	}
	return e
}

// failedAt starts a move of f.ws to cell-b whose runner fails at the failpoint move.<stop>.
func (f *fixture) failedAt(t *testing.T, stop string) directory.Move {
	t.Helper()
	ctx := context.Background()
	e := f.engine(func(e *Engine) { e.Failpoint = failpoint.Points{"move." + stop: "error"}.Hit })
	m, err := e.Start(ctx, f.ws, "cell-b", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(ctx, m.ID); err == nil {
		t.Fatal("no failure")
	}
	return m
}

func exec(t *testing.T, d *db.DB, sql string, args ...any) {
	t.Helper()
	if _, err := d.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", strings.Fields(sql)[0:3], err)
	}
}

func putBlob(t *testing.T, b *gcblob.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.WriteAll(context.Background(), key, data, nil); err != nil {
		t.Fatal(err)
	}
}

// seed writes a workspace as a cell hosts it: a row in every workspace-owned table (a test
// below fails when a table has none) and blobs of every kind.
func (f *fixture) seed(t *testing.T, c *Endpoint, ws string) {
	t.Helper()
	d := c.DB
	exec(t, d, `INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, 1, 'active')`, ws)
	exec(t, d, `INSERT INTO projects (workspace_id, id, name, description, configuration, created_by) VALUES ($1, 'prj_1', 'Deck', 'with ''quotes'' and é', '{"b": 1, "a": [1.5, null]}', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO projects (workspace_id, id, name, created_by, archived_at) VALUES ($1, 'prj_2', 'Old', 'usr_1', '2026-01-02 03:04:05.123456+02')`, ws)
	asset := []byte("an asset's bytes for " + ws)
	sum := sha256.Sum256(asset)
	key := "ws/" + ws + "/sha256/" + hex.EncodeToString(sum[:])
	putBlob(t, c.Blobs, key, asset)
	putBlob(t, c.Blobs, "ws/"+ws+"/modules/"+hex.EncodeToString(sum[:])+".js", []byte("export default 1"))
	putBlob(t, c.Blobs, "ws/"+ws+"/snapshots/snap_1.json", []byte(`{"ref":"snap_1"}`))
	exec(t, d, `INSERT INTO assets (workspace_id, id, name, content_type, byte_size, sha256, blob_key, tags, metadata, created_by)
		VALUES ($1, 'ast_1', 'logo.png', 'image/png', $2, $3, $4, ARRAY['a,b', 'c"d', ''], '{}', 'usr_1')`, ws, len(asset), hex.EncodeToString(sum[:]), key)
	exec(t, d, `INSERT INTO font_families (workspace_id, id, name, name_key, created_by) VALUES ($1, 'ffam_1', 'Inter', 'inter', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO font_faces (workspace_id, id, family_id, asset_id, weight_min, weight_max, font_style, font_display, created_by)
		VALUES ($1, 'ffac_1', 'ffam_1', 'ast_1', 100, 900, 'normal', 'swap', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO themes (workspace_id, id, key, name, colors, spacing, radius, heading_font_family_id, body_font_preset, code_font_preset, created_by)
		VALUES ($1, 'thm_1', 'main', 'Main', '{"bg": "#fff"}', '{}', '{}', 'ffam_1', 'system-ui', 'monospace', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO styles (workspace_id, id, name, snapshot, snapshot_digest, theme_key, created_by) VALUES ($1, 'sty_1', 'S', '{"x": true}', 'sha256:00', 'main', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO pages (workspace_id, id, project_id, key, title, file_type, tags, created_by) VALUES ($1, 'pg_1', 'prj_1', 'intro', 'Intro', 'tsx', ARRAY['x'], 'usr_1')`, ws)
	exec(t, d, `INSERT INTO page_versions (workspace_id, page_id, version, file_type, source, source_digest, compiled_digest, dependencies, job_id, created_by)
		VALUES ($1, 'pg_1', 1, 'tsx', E'export default () => <h1>Hi\n\ttab \\ backslash</h1>', 'sha256:a', 'sha256:b', '[{"key": "btn"}]', 'job_1', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO components (workspace_id, id, key, file_type, draft_source, draft_hash, published_version, created_by) VALUES ($1, 'cmp_1', 'btn', 'tsx', 'x', 'h', 1, 'usr_1')`, ws)
	exec(t, d, `INSERT INTO component_versions (workspace_id, component_id, version, file_type, source, source_digest, compiled_digest, job_id, created_by)
		VALUES ($1, 'cmp_1', 1, 'tsx', 'x', 'sha256:c', 'sha256:d', 'job_2', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO agent_configs (workspace_id, agent_key, settings, updated_by) VALUES ($1, 'writer', '{"t": 0.5}', 'usr_1')`, ws)
	exec(t, d, `INSERT INTO mutation_jobs (workspace_id, id, kind, owner_id, input, status, max_attempts, run_after, created_at, updated_at)
		VALUES ($1, 'job_1', 'page.create', 'usr_1', '{"k": "v"}', 'pending', 3, now(), now(), now())`, ws)
	exec(t, d, `INSERT INTO render_requests (workspace_id, id, request_key, owner, stage, operation, category, snapshot_ref,
		input_digest, render_digest, cache_key, profile_digest, viewport, options, state, attempts_used, max_attempts, next_seq,
		deadline_at, not_before, enqueued_at, updated_at, finished_at)
		VALUES ($1, 'rrq_1', 'sha256:k', 'screenshot:pg_1', 'screenshot', 'page.capture', 'background', 'snap_1',
		'sha256:i', 'sha256:r', 'sha256:c', 'sha256:p', '{"width": 1280, "height": 720, "device_scale_factor": 2}', '{}',
		'succeeded', 1, 3, 2, now(), now(), now(), now(), now())`, ws)
	exec(t, d, `INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch, slot_generation, state,
		released, outcome, driver, driver_until, created_at, released_at)
		VALUES ($1, 'rrq_1', 1, 'rat_' || $1, 'cell-a-r1', 'e1', 7, 'terminal', true, 'succeeded', 'coord_1', now(), now(), now())`, ws)
	exec(t, d, `INSERT INTO render_results (workspace_id, request_id, attempt_id, operation, input_digest, render_digest,
		profile_digest, host_build, artifact_key, artifact_sha256, artifact_bytes, width, height, created_at)
		VALUES ($1, 'rrq_1', 'rat_' || $1, 'page.capture', 'sha256:i', 'sha256:r', 'sha256:p', 'preview-host-1',
		'ws/' || $1 || '/renders/rrq_1/rat_1/ab.png', 'sha256:ab', 10, 2560, 1440, now())`, ws)
	exec(t, d, `INSERT INTO idempotency_locks (workspace_id, user_id, operation_id, idem_key, expires_at) VALUES ($1, 'usr_1', 'create-project', 'k1', now() + INTERVAL '1 day')`, ws)
	exec(t, d, `INSERT INTO idempotency_keys (workspace_id, user_id, operation_id, idem_key, fingerprint, state, lease_until, status, headers, body, expires_at)
		VALUES ($1, 'usr_1', 'create-project', 'k1', '\x00ff10'::BYTEA, 'done', now(), 201, '{"Location": ["/x"]}', '\x7b7d'::BYTEA, now() + INTERVAL '1 day')`, ws)
}

func checksums(t *testing.T, ep *Endpoint, ws string) map[string]TableSum {
	t.Helper()
	s, err := ReadSchema(context.Background(), ep.DB.Pool)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := Checksums(context.Background(), ep.DB.Pool, s, ws)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func (f *fixture) tenancy(t *testing.T, cell string) (string, int64) {
	t.Helper()
	state, epoch, err := tenancyRow(context.Background(), f.cells[cell].DB, f.ws)
	if err != nil {
		t.Fatal(err)
	}
	return state, epoch
}

// TestSchemaCoversEveryWorkspaceTable: every table with a workspace_id column is carried by a
// move (all but CellOwned), keyed by workspace_id first, and the fixture seeds a row in each, so
// a new workspace-owned table fails this test until a move is shown to carry it.
func TestSchemaCoversEveryWorkspaceTable(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	a := f.cells["cell-a"]
	s, err := ReadSchema(ctx, a.DB.Pool)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := a.DB.Pool.Query(ctx, `SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'workspace_id' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tb := range s.Tables {
		got = append(got, tb.Name)
		if tb.Key[0] != "workspace_id" {
			t.Errorf("%s: key %v", tb.Name, tb.Key)
		}
	}
	for _, name := range all {
		if slices.Contains(CellOwned, name) {
			if slices.Contains(got, name) {
				t.Errorf("cell-owned table %s would be copied", name)
			}
			continue
		}
		if !slices.Contains(got, name) {
			t.Errorf("table %s has a workspace_id column but a move would not carry it", name)
		}
	}
	sums := checksums(t, a, f.ws)
	for _, tb := range s.Tables {
		if sums[tb.Name].Rows == 0 {
			t.Errorf("table %s has a workspace_id column but this test seeds no row in it: add one to seed() so that a move is shown to carry it", tb.Name)
		}
	}
	// Parents come before children (font faces reference font families).
	if slices.Index(got, "font_families") > slices.Index(got, "font_faces") {
		t.Errorf("order %v", got)
	}
	// A new table is picked up by itself; one a move cannot carry stops every move.
	exec(t, a.DB, `CREATE TABLE widgets (workspace_id TEXT NOT NULL, id TEXT NOT NULL, payload JSONB NOT NULL, PRIMARY KEY (workspace_id, id))`)
	if s, err := ReadSchema(ctx, a.DB.Pool); err != nil || !slices.ContainsFunc(s.Tables, func(tb Table) bool { return tb.Name == "widgets" }) {
		t.Fatalf("new table: %v", err)
	}
	exec(t, a.DB, `CREATE TABLE gadgets (id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL)`)
	if _, err := ReadSchema(ctx, a.DB.Pool); err == nil || !strings.Contains(err.Error(), "gadgets") {
		t.Fatalf("a table keyed without workspace_id: %v", err)
	}
}

func TestMoveCarriesEverythingAndCleans(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	a, b := f.cells["cell-a"], f.cells["cell-b"]
	before := checksums(t, a, f.ws)
	bystander := checksums(t, a, f.bystander)
	var steps []string
	e := f.engine(func(e *Engine) {
		e.Progress = func(ev Event) {
			if ev.Kind == "done" {
				steps = append(steps, ev.Step)
			}
		}
	})
	m, err := e.Start(ctx, f.ws, "cell-b", directory.ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := f.dir.Placement(ctx, f.ws); p.State != "moving" || p.CellID != "cell-a" {
		t.Fatalf("placement while planned: %+v", p)
	}
	m, err = e.Run(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != directory.MoveDone || m.Step != directory.StepDone {
		t.Fatalf("move: %+v", m)
	}
	if want := directory.MoveSteps[:len(directory.MoveSteps)-1]; !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for _, k := range []string{"plan", "precopy", "fence", "drain", "copy", "verify", "flip", "clean", "write_unavailable"} {
		if _, ok := m.Timings[k]; !ok {
			t.Errorf("no timing for %s: %v", k, m.Timings)
		}
	}
	if !strings.Contains(string(m.Report), `"page_versions"`) {
		t.Errorf("report: %s", m.Report)
	}
	p, _ := f.dir.Placement(ctx, f.ws)
	if p.CellID != "cell-b" || p.Epoch != 2 || p.State != "active" {
		t.Fatalf("placement: %+v", p)
	}
	if after := checksums(t, b, f.ws); !mapsEqual(after, before) {
		t.Fatalf("target differs:\n%v\n%v", after, before)
	}
	if state, epoch := f.tenancy(t, "cell-b"); state != "active" || epoch != 2 {
		t.Fatalf("target tenancy %s@%d", state, epoch)
	}
	if state, epoch := f.tenancy(t, "cell-a"); state != "moved" || epoch != 2 {
		t.Fatalf("source tenancy %s@%d", state, epoch)
	}
	if err := tenancy.Writable(ctx, a.DB.Pool, f.ws); tenancy.NotWritable(err) == false {
		t.Fatalf("source writable after the move: %v", err)
	}
	// Cleaned: the source keeps nothing of the workspace but its moved tenancy row.
	for name, sum := range checksums(t, a, f.ws) {
		if sum.Rows != 0 {
			t.Errorf("source still has %d rows in %s", sum.Rows, name)
		}
	}
	if left, _ := listBlobs(ctx, a.Blobs, blobPrefix(f.ws)); len(left) != 0 {
		t.Errorf("source blobs left: %v", left)
	}
	if got, _ := listBlobs(ctx, b.Blobs, blobPrefix(f.ws)); len(got) != 3 {
		t.Errorf("target blobs: %v", got)
	}
	// The other workspace of the source is untouched and not copied.
	if got := checksums(t, a, f.bystander); !mapsEqual(got, bystander) {
		t.Fatal("bystander changed")
	}
	for name, sum := range checksums(t, b, f.bystander) {
		if sum.Rows != 0 {
			t.Errorf("bystander copied into %s", name)
		}
	}
	// One live move per workspace; a finished one does not count. Moving back works.
	back, err := e.Start(ctx, f.ws, "cell-a", directory.ReasonManual)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(ctx, f.ws, "cell-a", directory.ReasonManual); !errors.Is(err, directory.ErrConflict) {
		t.Fatalf("second live move: %v", err)
	}
	if m, err := e.Run(ctx, back.ID); err != nil || m.Status != directory.MoveDone {
		t.Fatalf("move back: %+v %v", m, err)
	}
	if got := checksums(t, a, f.ws); !mapsEqual(got, before) {
		t.Fatal("round trip changed the workspace")
	}
	if p, _ := f.dir.Placement(ctx, f.ws); p.CellID != "cell-a" || p.Epoch != 3 {
		t.Fatalf("placement after the round trip: %+v", p)
	}
}

func mapsEqual(a, b map[string]TableSum) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCatchUpAfterPrecopy: what changed between the copy before the fence and the fence
// (inserts, updates, deletes, a key handed from an archived row to a new one) is carried, and
// only that.
func TestCatchUpAfterPrecopy(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	a, b := f.cells["cell-a"], f.cells["cell-b"]
	var copyNote string
	e := f.engine(func(e *Engine) {
		e.Failpoint = func(name string) error {
			if name != "move.precopy" {
				return nil
			}
			// Writes that land after the copy before the fence.
			exec(t, a.DB, `UPDATE projects SET name = 'Renamed', version = version + 1 WHERE workspace_id = $1 AND id = 'prj_1'`, f.ws)
			exec(t, a.DB, `DELETE FROM agent_configs WHERE workspace_id = $1`, f.ws)
			exec(t, a.DB, `INSERT INTO projects (workspace_id, id, name, created_by) VALUES ($1, 'prj_3', 'New', 'usr_1')`, f.ws)
			exec(t, a.DB, `UPDATE pages SET archived_at = now() WHERE workspace_id = $1 AND id = 'pg_1'`, f.ws)
			exec(t, a.DB, `INSERT INTO pages (workspace_id, id, project_id, key, file_type, created_by) VALUES ($1, 'pg_0', 'prj_1', 'intro', 'tsx', 'usr_1')`, f.ws)
			putBlob(t, a.Blobs, "ws/"+f.ws+"/snapshots/snap_2.json", []byte(`{}`))
			return nil
		}
		e.Progress = func(ev Event) {
			if ev.Step == directory.StepCopy && ev.Note != "" {
				copyNote = ev.Note
			}
		}
	})
	m, err := e.Start(ctx, f.ws, "cell-b", "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err = e.Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
		t.Fatalf("%+v %v", m, err)
	}
	// The catch-up wrote only what changed: the renamed project and the archived page (2
	// updates), the new project and page (2 inserts), the agent configuration (1 delete), and one
	// blob; unless the page key handed over met the unique index first, and the copy was
	// rewritten whole.
	if !strings.Contains(copyNote, "2 inserted, 2 updated, 1 deleted; 4 blobs") && !strings.Contains(copyNote, "rewritten whole") {
		t.Fatalf("copy after the fence: %s", copyNote)
	}
	if !strings.Contains(copyNote, "1 copied") {
		t.Fatalf("blobs after the fence: %s", copyNote)
	}
	t.Log(copyNote)
	var name string
	if err := b.DB.Pool.QueryRow(ctx, `SELECT name FROM projects WHERE workspace_id = $1 AND id = 'prj_1'`, f.ws).Scan(&name); err != nil || name != "Renamed" {
		t.Fatalf("update not carried: %q %v", name, err)
	}
	sums := checksums(t, b, f.ws)
	if sums["agent_configs"].Rows != 0 || sums["projects"].Rows != 3 || sums["pages"].Rows != 2 {
		t.Fatalf("target: %v", sums)
	}
	if got, _ := listBlobs(ctx, b.Blobs, blobPrefix(f.ws)); len(got) != 4 {
		t.Fatalf("target blobs: %v", got)
	}
}

// TestVerifyCatchesTamperingAndResumeRecopies: a row changed in the target's copy after the
// copy fails verify; nothing flips; the move goes back to its copy step; resuming copies again
// and finishes.
func TestVerifyCatchesTamperingAndResumeRecopies(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	b := f.cells["cell-b"]
	e := f.engine(func(e *Engine) {
		e.Failpoint = func(name string) error {
			if name == "move.copy" {
				exec(t, b.DB, `UPDATE page_versions SET source = 'tampered' WHERE workspace_id = $1`, f.ws)
			}
			return nil
		}
	})
	m, err := e.Start(ctx, f.ws, "cell-b", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err = e.Run(ctx, m.ID)
	if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "page_versions") {
		t.Fatalf("verify: %v", err)
	}
	if m.Status != directory.MoveFailed || m.Step != directory.StepCopy || !strings.Contains(m.Error, "page_versions") {
		t.Fatalf("after a failed verify: %+v", m)
	}
	if p, _ := f.dir.Placement(ctx, f.ws); p.CellID != "cell-a" || p.Epoch != 1 {
		t.Fatalf("flipped after a failed verify: %+v", p)
	}
	if state, _ := f.tenancy(t, "cell-b"); state != "" {
		t.Fatalf("target tenancy %q", state)
	}
	e.Failpoint = nil
	if m, err = e.Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
		t.Fatalf("resume: %+v %v", m, err)
	}
	var src string
	if err := b.DB.Pool.QueryRow(ctx, `SELECT source FROM page_versions WHERE workspace_id = $1`, f.ws).Scan(&src); err != nil || src == "tampered" {
		t.Fatalf("tampered row survived: %q %v", src, err)
	}
}

// TestAbortAtEveryStepBeforeFlip: a move stopped after any step up to its flip's work rolls
// back: the source serves the workspace at its epoch, writable, and the target keeps nothing.
func TestAbortAtEveryStepBeforeFlip(t *testing.T) {
	for _, stop := range []string{"plan", "precopy", "fence", "drain", "copy", "verify", "flip"} {
		t.Run(stop, func(t *testing.T) {
			f := setup(t)
			ctx := context.Background()
			a, b := f.cells["cell-a"], f.cells["cell-b"]
			before := checksums(t, a, f.ws)
			m := f.failedAt(t, stop)
			// Another cellctl aborts it.
			m, err := f.engine().Abort(ctx, m.ID)
			if stop == "flip" {
				// The flip's work was done (the directory names the target): only resume finishes.
				if !errors.Is(err, directory.ErrPastFlip) {
					t.Fatalf("abort after the flip: %v", err)
				}
				if m, err = f.engine().Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
					t.Fatalf("resume after the flip: %+v %v", m, err)
				}
				return
			}
			if err != nil || m.Status != directory.MoveAborted {
				t.Fatalf("abort: %+v %v", m, err)
			}
			if p, _ := f.dir.Placement(ctx, f.ws); p.CellID != "cell-a" || p.Epoch != 1 || p.State != "active" {
				t.Fatalf("placement: %+v", p)
			}
			if state, epoch := f.tenancy(t, "cell-a"); state != "active" || epoch != 1 {
				t.Fatalf("source tenancy %s@%d", state, epoch)
			}
			if err := tenancy.Writable(ctx, a.DB.Pool, f.ws); err != nil {
				t.Fatalf("source not writable: %v", err)
			}
			if got := checksums(t, a, f.ws); !mapsEqual(got, before) {
				t.Fatal("source changed")
			}
			for name, sum := range checksums(t, b, f.ws) {
				if sum.Rows != 0 {
					t.Errorf("target kept %d rows of %s", sum.Rows, name)
				}
			}
			if left, _ := listBlobs(ctx, b.Blobs, blobPrefix(f.ws)); len(left) != 0 {
				t.Errorf("target kept blobs %v", left)
			}
			if _, err := f.engine().Run(ctx, m.ID); err == nil {
				t.Fatal("an aborted move ran")
			}
		})
	}
}

// TestResumeAfterEveryStep: a move whose runner stopped after any step's work, before recording
// it, is finished by another runner, with the same end state as an uninterrupted move.
func TestResumeAfterEveryStep(t *testing.T) {
	for _, stop := range []string{"plan", "precopy", "precopy.mid", "fence", "drain", "copy", "copy.mid", "verify", "flip", "clean"} {
		t.Run(stop, func(t *testing.T) {
			f := setup(t)
			ctx := context.Background()
			before := checksums(t, f.cells["cell-a"], f.ws)
			m := f.failedAt(t, stop)
			if m, err := f.engine().Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
				t.Fatalf("resume: %+v %v", m, err)
			}
			if got := checksums(t, f.cells["cell-b"], f.ws); !mapsEqual(got, before) {
				t.Fatal("target differs")
			}
			if p, _ := f.dir.Placement(ctx, f.ws); p.CellID != "cell-b" || p.Epoch != 2 || p.State != "active" {
				t.Fatalf("placement: %+v", p)
			}
		})
	}
}

// TestLeaseExcludesASecondRunner: while one runner holds a move, another waits; it takes over
// once the first's lease has run out (a crashed cellctl).
func TestLeaseExcludesASecondRunner(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	m, err := f.engine().Start(ctx, f.ws, "cell-b", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.dir.ClaimMove(ctx, m.ID, "run_crashed", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dir.ClaimMove(ctx, m.ID, "run_other", time.Second); !errors.Is(err, directory.ErrMoveHeld) {
		t.Fatalf("second claim: %v", err)
	}
	if m, err = f.engine().Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
		t.Fatalf("takeover: %+v %v", m, err)
	}
	// The crashed runner cannot record anything any more.
	if _, err := f.dir.AdvanceMove(ctx, m.ID, "run_crashed", "plan", "precopy", directory.MoveUpdate{}); !errors.Is(err, directory.ErrMoveLost) {
		t.Fatalf("stale runner advanced: %v", err)
	}
}

// TestDrainWaitsForRunningJobs: the drain step waits while a job of the workspace runs on the
// source, rescues one whose lease ended, and reports what is left when it times out.
func TestDrainWaitsForRunningJobs(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	a := f.cells["cell-a"]
	exec(t, a.DB, `UPDATE mutation_jobs SET status = 'running', lease_owner = 'wrk_alive', lease_until = now() + INTERVAL '1 hour' WHERE workspace_id = $1`, f.ws)
	e := f.engine(func(e *Engine) { e.DrainTimeout = 300 * time.Millisecond })
	m, err := e.Start(ctx, f.ws, "cell-b", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err = e.Run(ctx, m.ID)
	if err == nil || !strings.Contains(err.Error(), "1 running mutation jobs") || m.Step != directory.StepDrain {
		t.Fatalf("drain with a live job: %+v %v", m, err)
	}
	// The replica running it died: its lease ends and the drain returns it to the queue.
	exec(t, a.DB, `UPDATE mutation_jobs SET lease_until = now() - INTERVAL '1 second' WHERE workspace_id = $1`, f.ws)
	if m, err = e.Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
		t.Fatalf("resume: %+v %v", m, err)
	}
	var status string
	var attempts int
	if err := f.cells["cell-b"].DB.Pool.QueryRow(ctx, `SELECT status, attempt_count FROM mutation_jobs WHERE workspace_id = $1`, f.ws).Scan(&status, &attempts); err != nil || status != "pending" || attempts != 1 {
		t.Fatalf("the job on the target: %s %d %v", status, attempts, err)
	}
}

// TestKeyConflictRewritesTheCopy: a key handed from an archived row to a new one is carried in
// place (updates go first); when the catch-up's order still meets a unique key held by a row it
// has not updated yet (two live rows swap keys), the target's copy is rewritten whole, and the
// result is exact either way.
func TestKeyConflictRewritesTheCopy(t *testing.T) {
	for _, tc := range []struct {
		name, note string
		change     func(t *testing.T, d *db.DB, ws string)
	}{
		{"handed over", "1 inserted, 1 updated, 0 deleted", func(t *testing.T, d *db.DB, ws string) {
			exec(t, d, `UPDATE pages SET archived_at = now() WHERE workspace_id = $1 AND id = 'pg_1'`, ws)
			exec(t, d, `INSERT INTO pages (workspace_id, id, project_id, key, file_type, created_by) VALUES ($1, 'pg_0', 'prj_1', 'intro', 'tsx', 'usr_1')`, ws)
		}},
		{"swapped", "rewritten whole", func(t *testing.T, d *db.DB, ws string) {
			exec(t, d, `INSERT INTO pages (workspace_id, id, project_id, key, file_type, created_by) VALUES ($1, 'pg_2', 'prj_1', 'outro', 'tsx', 'usr_1')`, ws)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			ctx := context.Background()
			a := f.cells["cell-a"]
			if tc.name == "swapped" {
				tc.change(t, a.DB, f.ws)
			}
			var copyNote string
			e := f.engine(func(e *Engine) {
				e.Failpoint = func(name string) error {
					if name != "move.precopy" {
						return nil
					}
					if tc.name == "swapped" {
						exec(t, a.DB, `UPDATE pages SET key = 'tmp' WHERE workspace_id = $1 AND id = 'pg_1'`, f.ws)
						exec(t, a.DB, `UPDATE pages SET key = 'intro' WHERE workspace_id = $1 AND id = 'pg_2'`, f.ws)
						exec(t, a.DB, `UPDATE pages SET key = 'outro' WHERE workspace_id = $1 AND id = 'pg_1'`, f.ws)
					} else {
						tc.change(t, a.DB, f.ws)
					}
					return nil
				}
			})
			m, err := e.Start(ctx, f.ws, "cell-b", "")
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]TableSum // the fenced source, as verify starts
			e.Progress = func(ev Event) {
				if ev.Step == directory.StepCopy && ev.Note != "" {
					copyNote = ev.Note
				}
				if ev.Step == directory.StepVerify && ev.Kind == "start" {
					want = checksums(t, a, f.ws)
				}
			}
			if m, err = e.Run(ctx, m.ID); err != nil || m.Status != directory.MoveDone {
				t.Fatalf("%+v %v", m, err)
			}
			if !strings.Contains(copyNote, tc.note) {
				t.Fatalf("copy after the fence: %s", copyNote)
			}
			if got := checksums(t, f.cells["cell-b"], f.ws); !mapsEqual(got, want) {
				t.Fatal("target differs from the fenced source")
			}
		})
	}
}
