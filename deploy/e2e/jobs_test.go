package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"slidecells/shared/db/dbtest"
	"slidecells/shared/testenv"
)

// Two processes of one cell share its database. The replica that claims a page job is killed
// (SIGKILL, by a failpoint between its compile and its commit); once its lease ends the other
// replica takes the job over and finishes it: exactly one page, one automatic retry counted.
func TestJobSurvivesKilledReplica(t *testing.T) {
	e := start(t, "", map[string][]string{"cell-a": {"CELL_FAILPOINTS=authoring.before-commit=crash", "CELL_JOB_LEASE=2s"}})
	ws := e.demo.WorkspaceA
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"Jobs"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "e2e-jobs-project", "Content-Type", "application/json")
	if a.status != http.StatusCreated {
		t.Fatalf("project: %d %s", a.status, a.body)
	}
	var prj struct{ ID string }
	_ = json.Unmarshal(a.body, &prj)
	body, _ := json.Marshal(map[string]string{"project_id": prj.ID, "key": "survivor", "file_type": "tsx",
		"source": "export default function P() { return <h1>still here</h1> }"})
	a = e.do(t, http.MethodPost, "/api/v1/pages", e.demo.PAT, body,
		"X-Workspace-ID", ws, "Idempotency-Key", "e2e-jobs-page", "Content-Type", "application/json")
	if a.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	var job struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(a.body, &job)

	cell := e.s.Cells["cell-a"]
	select {
	case <-cell.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("cell-a was not killed by the failpoint")
	}
	d := dbtest.Open(t, e.s.CellDBURL["cell-a"])
	ctx := context.Background()
	var status string
	var attempts int
	if err := d.Pool.QueryRow(ctx, `SELECT status, attempt_count FROM mutation_jobs WHERE id = $1`, job.JobID).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "running" || attempts != 0 {
		t.Fatalf("after the kill: %s, %d attempts", status, attempts)
	}
	if _, err := e.s.StartReplica("cell-a", "CELL_JOB_LEASE=2s"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "the job ends on the new replica", func() error {
		if err := d.Pool.QueryRow(ctx, `SELECT status, attempt_count FROM mutation_jobs WHERE id = $1`, job.JobID).Scan(&status, &attempts); err != nil {
			return err
		}
		if status == "succeeded" || status == "failed" {
			return nil
		}
		return fmt.Errorf("job %s", status)
	})
	if status != "succeeded" || attempts != 1 {
		t.Fatalf("after the takeover: %s, %d attempts", status, attempts)
	}
	var pages, versions int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM pages WHERE workspace_id = $1 AND key = 'survivor'`, ws).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM page_versions WHERE workspace_id = $1 AND job_id = $2`, ws, job.JobID).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if pages != 1 || versions != 1 {
		t.Fatalf("%d pages and %d versions, want exactly 1 each", pages, versions)
	}
}
