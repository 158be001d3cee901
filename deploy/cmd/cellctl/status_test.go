package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"slidecells/deploy/stack"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
)

// cellctl status against a real stack (router, two cells on PostgreSQL) with cell-b stopped:
// the table and the JSON show cell-a healthy with its workspaces, pinned tenant and live move,
// cell-b unreachable, and the command fails; once cell-b is marked down it passes.
func TestStatusWithOneCellStopped(t *testing.T) {
	bin := os.Getenv("SLIDECELLS_BIN")
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SLIDECELLS_BIN is not set (make test sets it)")
		}
		t.Skip("needs the built binaries: SLIDECELLS_BIN=$PWD/bin")
	}
	ctx := context.Background()
	dirURL := dbtest.NewDatabase(t, nil, "")
	s, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), BinDir: bin, Cells: []string{"cell-a", "cell-b"}, DirectoryURL: dirURL,
		CellURLs: map[string]string{
			"cell-a": dbtest.NewDatabase(t, migrations.FS, migrations.Cell),
			"cell-b": dbtest.NewDatabase(t, migrations.FS, migrations.Cell),
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	d := s.Directory
	if _, err := d.CreateWorkspace(ctx, "Pinned", "cell-a", true); err != nil {
		t.Fatal(err)
	}
	moving, err := d.CreateWorkspace(ctx, "Moving", "cell-a", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateWorkspace(ctx, "On B", "cell-b", false); err != nil {
		t.Fatal(err)
	}
	mv, err := d.CreateMove(ctx, moving.ID, "cell-b", "manual")
	if err != nil {
		t.Fatal(err)
	}

	if out, err := run(t, dirURL, "status"); err != nil || !strings.Contains(out, "fleet: healthy") {
		t.Fatalf("all cells up: %v\n%s", err, out)
	}

	s.Cells["cell-b"].Stop()
	out, err := run(t, dirURL, "status", "--json")
	if err == nil || !strings.Contains(err.Error(), "cell-b (unreachable)") || strings.Contains(err.Error(), "cell-a") {
		t.Fatalf("status with cell-b stopped: err %v", err)
	}
	var st fleetStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if st.Healthy || len(st.Cells) != 2 {
		t.Fatalf("status %+v", st)
	}
	a, b := st.Cells[0], st.Cells[1]
	if a.ID != "cell-a" || !a.Healthy || a.Health != "ok" && a.Health != "degraded" || a.Workspaces != 2 || a.Pinned != 1 ||
		a.Checks["database"].Status != "ok" || a.Jobs == nil {
		t.Errorf("cell-a: %+v", a)
	}
	if b.ID != "cell-b" || b.Healthy || b.Health != "unreachable" || b.Error == "" || b.Workspaces != 1 || b.Pinned != 0 {
		t.Errorf("cell-b: %+v", b)
	}
	if len(st.Moves) != 1 || st.Moves[0].ID != mv.ID || st.Moves[0].WorkspaceID != moving.ID || st.Moves[0].To != "cell-b" || st.Moves[0].Status != "active" {
		t.Errorf("moves: %+v", st.Moves)
	}

	table, err := run(t, dirURL, "status")
	if err == nil {
		t.Fatal("the table run passed with a cell stopped")
	}
	lines := strings.Split(table, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "CELL") || !strings.HasPrefix(lines[1], "cell-a") ||
		!strings.HasPrefix(lines[2], "cell-b") || !strings.Contains(lines[2], "unreachable") ||
		!strings.Contains(table, mv.ID) || !strings.Contains(table, "fleet: UNHEALTHY") {
		t.Fatalf("table:\n%s", table)
	}

	// A cell marked down is meant to be out: the fleet is healthy again.
	if _, err := run(t, dirURL, "cells", "set", "--id", "cell-b", "--state", "down"); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, dirURL, "status"); err != nil || !strings.Contains(out, "fleet: healthy") {
		t.Fatalf("cell-b down: %v\n%s", err, out)
	}
}
