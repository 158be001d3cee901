package tenancy

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
)

// cell_workspaces counts the tenancy table by state, every state present even at 0.
func TestWorkspacesGauge(t *testing.T) {
	d := dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell))
	if _, err := d.Exec(context.Background(), `INSERT INTO tenancy (workspace_id, epoch, state) VALUES
		('ws_1', 1, 'active'), ('ws_2', 1, 'active'), ('ws_3', 2, 'fenced')`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister((&Guard{DB: d}).Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()+"/"+m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"cell_workspaces/active": 2, "cell_workspaces/fenced": 1, "cell_workspaces/moved": 0}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
