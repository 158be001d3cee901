package render

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gauges gathers the coordinator's collectors and returns each gauge's value by name and label
// values ("name" or "name{v1,v2}").
func gauges(t *testing.T, c *Coordinator) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetGauge() == nil {
				continue
			}
			key := mf.GetName()
			for i, l := range m.GetLabel() {
				if i == 0 {
					key += "{"
				} else {
					key += ","
				}
				key += l.GetValue()
			}
			if len(m.GetLabel()) > 0 {
				key += "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The gauges the render alerts watch: renderers by state, the oldest waiting and executing
// requests, attempts whose outcome is unknown.
func TestAlertGauges(t *testing.T) {
	f := setup(t, 1)
	workers := f.addWorkers(t, 4)
	c := f.coordinator(t, workers, nil)
	ctx := context.Background()
	g := gauges(t, c)
	for key, want := range map[string]float64{
		"cell_render_workers{ready}": 4, "cell_render_workers{quarantined}": 0, "cell_render_workers{mismatch}": 0,
		"cell_render_workers{unready}": 0, "cell_render_oldest_seconds{waiting}": 0, "cell_render_oldest_seconds{executing}": 0,
		"cell_render_attempts_unknown": 0, "cell_render_workers_dispatchable": 4,
	} {
		if got, ok := g[key]; !ok || got != want {
			t.Errorf("idle: %s = %v (present %v), want %v", key, got, ok, want)
		}
	}

	for _, stmt := range []string{
		`UPDATE render_workers SET state = 'quarantined' WHERE worker_id = 'w00'`,
		`UPDATE render_workers SET state = 'mismatch' WHERE worker_id = 'w01'`,
		`INSERT INTO render_workers (worker_id, epoch, url, environment_digest, state, registered_at, heartbeat_at, last_dispatch_at)
			VALUES ('w03', 'e0', 'http://127.0.0.1:9', 'x', 'retired', now(), now(), now())`,
	} {
		if _, err := f.db.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	waiting := f.submit(t, c, f.scopes[0], 1, Interactive)
	executing := f.submit(t, c, f.scopes[0], 2, Interactive)
	if _, err := f.db.Exec(ctx, `UPDATE render_requests SET enqueued_at = now() - interval '10 minutes' WHERE id = $1`, waiting.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `UPDATE render_requests SET enqueued_at = now() - interval '1 hour', state = 'executing' WHERE id = $1`, executing.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `INSERT INTO render_attempts (workspace_id, request_id, seq, attempt_id, worker_id, epoch, slot_generation,
		state, driver, driver_until, created_at) VALUES ($1, $2, 1, 'att_unknown', 'w02', 'e1', 1, 'unknown', 'test', now(), now())`,
		f.scopes[0].WorkspaceID(), executing.ID); err != nil {
		t.Fatal(err)
	}
	g = gauges(t, c)
	for key, want := range map[string]float64{
		"cell_render_workers{ready}": 2, "cell_render_workers{quarantined}": 1, "cell_render_workers{mismatch}": 1,
		"cell_render_attempts_unknown": 1,
	} {
		if got := g[key]; got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	if w := g["cell_render_oldest_seconds{waiting}"]; w < 590 || w > 3000 {
		t.Errorf("oldest waiting %v s, want about 600", w)
	}
	if e := g["cell_render_oldest_seconds{executing}"]; e < 3590 {
		t.Errorf("oldest executing %v s, want about 3600", e)
	}
}
