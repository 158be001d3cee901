package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"slidecells/cell/render"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
)

// cellctl renderers against a real cell database: list (table and JSON), the dry run without
// --confirm-terminated, the release that frees an unknown attempt and records who and why, and
// the refusals of bad input.
func TestRenderersCommands(t *testing.T) {
	cellURL := dbtest.NewDatabase(t, migrations.FS, migrations.Cell)
	d := dbtest.Open(t, cellURL)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO tenancy (workspace_id, epoch, state) VALUES ('ws_1', 1, 'active')`,
		`INSERT INTO render_workers (worker_id, epoch, url, environment_digest, state, detail, registered_at, heartbeat_at, last_dispatch_at,
			boot_id, cgroup_id, quarantined_at) VALUES
			('r1', 'ep_old', 'http://10.0.0.7:8090', 'sha256:x', 'quarantined', 'superseded by epoch ep_new on another host or cgroup', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', 'boot-a', 'cgroupns:1:2:/sys/fs/cgroup/r1', now()),
			('r1', 'ep_new', 'http://10.0.0.8:8090', 'sha256:x', 'ready', '', now(), now(), now(), 'boot-b', 'cgroupns:3:4:/sys/fs/cgroup/r1', NULL)`,
		`INSERT INTO render_requests (workspace_id, id, request_key, owner, stage, operation, category, snapshot_ref, input_digest, render_digest,
			cache_key, profile_digest, viewport, options, state, attempts_used, max_attempts, next_seq, deadline_at, not_before, enqueued_at, updated_at)
			VALUES ('ws_1', 'rrq_1', 'k', 'o', 's', 'page.diagnose', 'interactive', 'snp_1', 'sha256:i', 'sha256:r', 'c', 'sha256:x', '{}', '{}',
			'executing', 1, 3, 2, now() + interval '1 minute', now(), now(), now())`,
		`INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch, slot_generation, state, driver, driver_until, created_at)
			VALUES ('ws_1', 'rrq_1', 1, 'rat_1', 'r1', 'ep_old', 1, 'unknown', 'coord_x', now() + interval '1 hour', now())`,
	} {
		if _, err := d.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	cell := func(args ...string) (string, error) {
		return run(t, "postgres://unused@127.0.0.1:1/x", append(args, "--cell-database-url", cellURL)...)
	}
	out, err := cell("renderers", "list")
	if err != nil || !strings.Contains(out, "ep_old") || !strings.Contains(out, "superseded by epoch ep_new") || !strings.Contains(out, "boot-a") {
		t.Fatalf("renderers list: %v\n%s", err, out)
	}
	out, err = cell("renderers", "list", "--json")
	var eps []render.RendererEpoch
	if err != nil || json.Unmarshal([]byte(out), &eps) != nil || len(eps) != 2 {
		t.Fatalf("renderers list --json: %v\n%s", err, out)
	}
	for _, e := range eps {
		if e.Epoch == "ep_old" && (e.Unknown != 1 || e.Occupied != 1 || !e.Quarantined || len(e.Attempts) != 1 || e.Attempts[0] != "rat_1") {
			t.Fatalf("old epoch listed as %+v", e)
		}
	}
	for _, bad := range [][]string{
		{"renderers", "release", "r1", "--operator", "ann"},                                            // no reason
		{"renderers", "release", "r1", "--reason", "gone"},                                             // no operator
		{"renderers", "release", "nope", "--operator", "ann", "--reason", "x", "--confirm-terminated"}, // unknown renderer
		{"renderers", "release", "r 1", "--operator", "ann", "--reason", "x", "--confirm-terminated"},  // not an ID
		{"renderers", "release", "r1", "--operator", "ann", "--reason", "gone"},                        // dry run
		{"renderers", "unquarantine", "r1", "--operator", "ann", "--reason", "x"},                      // a superseded epoch's needs release
	} {
		if out, err := cell(bad...); err == nil {
			t.Fatalf("%v accepted:\n%s", bad, out)
		}
	}
	if out, err := run(t, "postgres://unused@127.0.0.1:1/x", "renderers", "list"); err == nil || !strings.Contains(err.Error(), "no cell") {
		t.Fatalf("renderers list without a cell: %v\n%s", err, out)
	}
	var released bool
	_ = d.Pool.QueryRow(ctx, `SELECT released FROM render_attempts WHERE attempt_id = 'rat_1'`).Scan(&released)
	if released {
		t.Fatal("a refused command released the attempt")
	}
	out, err = cell("renderers", "release", "r1", "--operator", "ann@example.com", "--reason", "node deleted (OPS-9)", "--confirm-terminated")
	if err != nil || !strings.Contains(out, "1 attempt(s) released") || !strings.Contains(out, "ep_old") {
		t.Fatalf("release: %v\n%s", err, out)
	}
	var state, attemptsUsed string
	_ = d.Pool.QueryRow(ctx, `SELECT a.released, r.state, r.attempts_used::TEXT FROM render_attempts a JOIN render_requests r ON r.id = a.request_id
		WHERE a.attempt_id = 'rat_1'`).Scan(&released, &state, &attemptsUsed)
	if !released || state != "retry_wait" {
		t.Fatalf("after the release: attempt released %v, request %s (%s attempts used)", released, state, attemptsUsed)
	}
	out, err = cell("renderers", "actions", "--json")
	var acts []render.OperatorAction
	if err != nil || json.Unmarshal([]byte(out), &acts) != nil || len(acts) != 1 || acts[0].Operator != "ann@example.com" ||
		acts[0].Reason != "node deleted (OPS-9)" || len(acts[0].Released) != 1 || acts[0].Released[0] != "rat_1" {
		t.Fatalf("actions: %v\n%s", err, out)
	}
	out, err = cell("renderers", "list")
	if err != nil || strings.Contains(out, "ep_old") {
		t.Fatalf("the released superseded epoch is still listed (want retired): %v\n%s", err, out)
	}
}
