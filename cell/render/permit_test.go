package render

import (
	"context"
	"testing"

	rc "slidecells/shared/rendercontract"
)

// A queued validation of a member removed since it was queued does not dispatch: the
// permission recheck cancels it (persisted) and releases its reserved attempt without counting
// it, before anything is sent; another owner's request is sent as usual.
func TestDispatchRechecksTheOwnersPermission(t *testing.T) {
	f := setup(t, 1)
	c := f.coordinator(t, f.addWorkers(t, 1), nil)
	var asked []string
	c.Permitted = func(_ context.Context, ws, owner string) (bool, error) {
		asked = append(asked, owner)
		return owner != "validation:u_removed", nil
	}
	sc := f.scopes[0]
	ctx := context.Background()
	r, err := c.Submit(ctx, sc, Spec{Owner: "validation:u_removed", Stage: "validate", Operation: rc.OpPageDiagnose,
		Category: Interactive, Snapshot: manifest(t, sc, 1)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.dispatchOne(ctx)
	if err != nil || res == nil || res.req.ID != r.ID {
		t.Fatalf("dispatch: %+v %v", res, err)
	}
	c.startDriver(ctx, res.attemptID, res, true)
	c.wg.Wait()
	got, err := c.Get(ctx, sc, r.ID)
	if err != nil || got.State != StateCancelled || got.AttemptsUsed != 0 || got.CancelVersion != 1 || got.ErrorCode != string(rc.CodeCancelled) {
		t.Fatalf("the removed member's request: %+v %v; want cancelled, no attempt counted", got, err)
	}
	var released bool
	var dispatched *string
	if err := f.db.Pool.QueryRow(ctx, `SELECT released, dispatched_at::TEXT FROM render_attempts WHERE attempt_id = $1`, res.attemptID).
		Scan(&released, &dispatched); err != nil || !released || dispatched != nil {
		t.Fatalf("its attempt: released %v, dispatched %v (%v); want released, never sent", released, dispatched, err)
	}
	if len(asked) != 1 || asked[0] != "validation:u_removed" {
		t.Fatalf("permission asked for %v", asked)
	}
}
