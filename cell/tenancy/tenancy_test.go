package tenancy

import (
	"context"
	"testing"

	"slidecells/migrations"
	"slidecells/shared/cellproto"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
	"slidecells/shared/directory/directorytest"
	"slidecells/shared/problem"
)

func TestGuard(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell))
	dir := directorytest.Placements{} // the directory's answers, fixed per case
	g := &Guard{DB: d, CellID: "cell-a", Dir: dir}
	const (
		served   = ""
		moving   = problem.WorkspaceMoving
		misdir   = problem.WorkspaceMisdirected
		notFound = problem.NotFound
	)
	for _, tc := range []struct {
		name      string
		row       *Row                 // the cell's tenancy row; nil: none
		placement *directory.Placement // the directory's; nil: unknown
		epoch     int64
		write     bool
		want      problem.Code
		owner     string // X-Owning-Cell of a 421
	}{
		{name: "active, same epoch, write", row: &Row{2, Active, ""}, epoch: 2, write: true, want: served},
		{name: "active, no epoch, read", row: &Row{2, Active, ""}, epoch: 0, want: served},
		{name: "active at epoch 1, no epoch, write", row: &Row{1, Active, ""}, epoch: 0, write: true, want: served},
		{name: "active after a move, no epoch, write: the router must assert it", row: &Row{2, Active, ""}, epoch: 0, write: true, want: misdir, owner: "cell-a"},
		{name: "active, router older", row: &Row{3, Active, ""}, epoch: 2, want: misdir, owner: "cell-a"},
		{name: "fenced, read goes on", row: &Row{2, Fenced, ""}, epoch: 2, want: served},
		{name: "fenced, read without epoch goes on", row: &Row{2, Fenced, ""}, epoch: 0, want: served},
		{name: "fenced, write waits", row: &Row{2, Fenced, ""}, epoch: 2, write: true, want: moving},
		{name: "fenced, write without epoch waits", row: &Row{2, Fenced, ""}, epoch: 0, write: true, want: moving},
		{name: "fenced, stale router", row: &Row{2, Fenced, ""}, epoch: 1, want: misdir, owner: "cell-a"},
		{name: "moved", row: &Row{3, Moved, "cell-b"}, epoch: 2, want: misdir, owner: "cell-b"},
		{name: "moved, read without epoch", row: &Row{3, Moved, "cell-b"}, epoch: 0, want: misdir, owner: "cell-b"},
		{name: "moved, came back", row: &Row{3, Moved, "cell-b"}, placement: &directory.Placement{CellID: "cell-a", Epoch: 4, State: "active"}, epoch: 4, write: true, want: served},
		{name: "moved, router newer but directory elsewhere", row: &Row{3, Moved, "cell-b"}, placement: &directory.Placement{CellID: "cell-b", Epoch: 4, State: "active"}, epoch: 4, want: misdir, owner: "cell-b"},
		{name: "no row, placed here", placement: &directory.Placement{CellID: "cell-a", Epoch: 1, State: "active"}, epoch: 1, write: true, want: served},
		{name: "no row, placed here, moving", placement: &directory.Placement{CellID: "cell-a", Epoch: 1, State: "moving"}, epoch: 1, want: misdir, owner: "cell-a"},
		{name: "no row, placed elsewhere (a move's target before its flip)", placement: &directory.Placement{CellID: "cell-b", Epoch: 2, State: "moving"}, epoch: 2, want: misdir, owner: "cell-b"},
		{name: "no row, unknown", epoch: 0, want: notFound},
		{name: "no row, adopted after a move, write without epoch", placement: &directory.Placement{CellID: "cell-a", Epoch: 5, State: "active"}, epoch: 0, write: true, want: misdir, owner: "cell-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := "ws_" + t.Name()
			if tc.row != nil {
				if err := g.Fence(ctx, ws, tc.row.Epoch, tc.row.State, tc.row.OwnerHint); err != nil {
					t.Fatal(err)
				}
			}
			if tc.placement != nil {
				dir[ws] = *tc.placement
			}
			err := g.Check(ctx, ws, tc.epoch, tc.write)
			if tc.want == served {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			pe := problem.As(err)
			if pe.Code != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if tc.want == moving && (pe.RetryAfter == 0 || !pe.Retryable) {
				t.Fatalf("503 without Retry-After: %+v", pe)
			}
			if tc.want == misdir && pe.Header.Get(cellproto.HeaderOwningCell) != tc.owner {
				t.Fatalf("owner hint %q, want %q", pe.Header.Get(cellproto.HeaderOwningCell), tc.owner)
			}
		})
	}
}

func TestWritable(t *testing.T) {
	ctx := context.Background()
	d := dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell))
	g := &Guard{DB: d, CellID: "cell-a"}
	for state, want := range map[string]problem.Code{Active: "", Fenced: problem.WorkspaceMoving, Moved: problem.WorkspaceMisdirected, "": problem.WorkspaceMisdirected} {
		ws := "ws_w" + state
		if state != "" {
			if err := g.Fence(ctx, ws, 2, state, "cell-b"); err != nil {
				t.Fatal(err)
			}
		}
		err := Writable(ctx, d.Pool, ws)
		if want == "" {
			if err != nil {
				t.Fatalf("%s: %v", state, err)
			}
			continue
		}
		if problem.As(err).Code != want || !NotWritable(err) {
			t.Fatalf("%q: %v, want %s", state, err, want)
		}
	}
	var n int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM (VALUES ('ws_wactive'), ('ws_wfenced'), ('ws_wmoved')) AS v(w) WHERE `+ActiveSQL("v.w")).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ActiveSQL: %d %v", n, err)
	}
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM (VALUES ('ws_wactive'), ('ws_wfenced'), ('ws_wmoved')) AS v(w) WHERE `+HostedSQL("v.w")).Scan(&n); err != nil || n != 2 {
		t.Fatalf("HostedSQL: %d %v", n, err)
	}
}
