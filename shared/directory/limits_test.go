package directory_test

import (
	"context"
	"testing"

	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
)

// TestJobConcurrencyOverrides: the job pool's per-workspace caps are the workspaces whose
// overrides name a job concurrency, and only those.
func TestJobConcurrencyOverrides(t *testing.T) {
	ctx := context.Background()
	d, err := directory.Open(ctx, dbtest.NewDatabase(t, nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.AddCell(ctx, directory.Cell{ID: "cell-a", InternalURL: "http://10.0.0.1:8081"}); err != nil {
		t.Fatal(err)
	}
	var ws [3]string
	for i := range ws {
		w, err := d.CreateWorkspace(ctx, "w"+string(rune('a'+i)), "cell-a", false)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w.ID
	}
	jobs, rate := int64(4), 50.0
	for _, l := range []directory.Limits{{WorkspaceID: ws[0], JobConcurrency: &jobs}, {WorkspaceID: ws[1], RequestsPerSecond: &rate}} {
		if err := d.SetLimits(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	got, err := directory.NewCached(d, directory.CacheOptions{}).JobConcurrency(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[ws[0]] != 4 {
		t.Fatalf("overrides %v, want only %s: 4", got, ws[0])
	}
}
