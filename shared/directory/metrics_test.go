package directory_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
)

func moveGauges(t *testing.T, d *directory.Directory, cell string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(d.MovesCollector(cell))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			if len(m.GetLabel()) > 0 {
				key += "/" + m.GetLabel()[0].GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The moves gauges count the source cell's live moves by status and how long the oldest has
// been at its step; the destination and other cells see none.
func TestMovesCollector(t *testing.T) {
	ctx := context.Background()
	d, err := directory.Open(ctx, dbtest.NewDatabase(t, nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []string{"cell-a", "cell-b"} {
		if err := d.AddCell(ctx, directory.Cell{ID: c, InternalURL: "http://10.0.0.1:8081"}); err != nil {
			t.Fatal(err)
		}
	}
	if g := moveGauges(t, d, "cell-a"); g["cell_moves/active"] != 0 || g["cell_moves/failed"] != 0 || g["cell_moves_oldest_step_seconds"] != 0 || len(g) != 4 {
		t.Fatalf("no moves: %v", g)
	}
	var ids []string
	for _, name := range []string{"one", "two", "three"} {
		w, err := d.CreateWorkspace(ctx, name, "cell-a", false)
		if err != nil {
			t.Fatal(err)
		}
		m, err := d.CreateMove(ctx, w.ID, "cell-b", "manual")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	for _, stmt := range []struct{ sql, id string }{
		{`UPDATE moves SET status = 'failed', error = 'x' WHERE id = $1`, ids[0]},
		{`UPDATE moves SET updated_at = now() - interval '2 hours' WHERE id = $1`, ids[1]},
		{`UPDATE moves SET step = 'clean', updated_at = now() - interval '9 hours' WHERE id = $1`, ids[2]}, // waiting out its grace
	} {
		if _, err := d.DB.Exec(ctx, stmt.sql, stmt.id); err != nil {
			t.Fatal(err)
		}
	}
	g := moveGauges(t, d, "cell-a")
	if g["cell_moves/active"] != 2 || g["cell_moves/failed"] != 1 || g["cell_moves/aborting"] != 0 {
		t.Errorf("cell-a: %v", g)
	}
	if s := g["cell_moves_oldest_step_seconds"]; s < 7190 || s > 3*3600 {
		t.Errorf("oldest at its step %v s, want about 7200", s)
	}
	if g := moveGauges(t, d, "cell-b"); g["cell_moves/active"] != 0 || g["cell_moves/failed"] != 0 || g["cell_moves_oldest_step_seconds"] != 0 {
		t.Errorf("cell-b (the destination): %v", g)
	}
}
