package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	gen "slidecells/deploy/e2e/apiclient"
	"slidecells/shared/ids"
)

// TestGeneratedClientRoundTrips drives the stack through the router with a client generated
// from the served OpenAPI document alone (oapi-codegen, deploy/e2e/apiclient; make api-client
// regenerates it): a page created, edited and PATCHed, a component created, published and
// PATCHed, every request shaped only by the document's types and parameters.
func TestGeneratedClientRoundTrips(t *testing.T) {
	e := start(t, "", nil)
	ws := e.demo.WorkspaceA
	ctx := context.Background()
	c, err := gen.NewClientWithResponses(e.s.RouterURL, gen.WithHTTPClient(client),
		gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+e.demo.PAT)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	key := func() string { return ids.New("k") }
	wait := func(job *gen.JobView) string {
		t.Helper()
		if job == nil {
			t.Fatal("no job in the answer")
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			r, err := c.GetMutationJobWithResponse(ctx, job.JobId, &gen.GetMutationJobParams{XWorkspaceID: ws})
			if err != nil || r.JSON200 == nil {
				t.Fatalf("job: %v %s", err, r.Body)
			}
			switch r.JSON200.Status {
			case "succeeded":
				res, _ := r.JSON200.Result.(map[string]any)
				id, _ := res["object_id"].(string)
				return id
			case "failed", "canceled":
				t.Fatalf("job: %s", r.Body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("job still %s", r.JSON200.Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	prj, err := c.CreateProjectWithResponse(ctx, &gen.CreateProjectParams{XWorkspaceID: ws, IdempotencyKey: key()}, gen.CreateProjectJSONRequestBody{Name: "Generated"})
	if err != nil || prj.JSON201 == nil {
		t.Fatalf("project: %v %s", err, prj.Body)
	}
	created, err := c.CreatePageWithResponse(ctx, &gen.CreatePageParams{XWorkspaceID: ws, IdempotencyKey: key()},
		gen.CreatePageJSONRequestBody{ProjectId: prj.JSON201.Id, Key: "gen", FileType: "tsx", Source: `export default function P() { return <div>one</div> }`})
	if err != nil {
		t.Fatal(err)
	}
	page := wait(created.JSON202)
	pg, err := c.GetPageWithResponse(ctx, page, &gen.GetPageParams{XWorkspaceID: ws})
	if err != nil || pg.JSON200 == nil {
		t.Fatalf("get page: %v %s", err, pg.Body)
	}
	edited, err := c.EditPageWithResponse(ctx, page, &gen.EditPageParams{XWorkspaceID: ws, IdempotencyKey: key()},
		gen.EditPageJSONRequestBody{Version: pg.JSON200.Version, Source: `export default function P() { return <div>two</div> }`})
	if err != nil {
		t.Fatal(err)
	}
	wait(edited.JSON202)
	pg, _ = c.GetPageWithResponse(ctx, page, &gen.GetPageParams{XWorkspaceID: ws})
	title := "Generated page"
	patched, err := c.UpdatePageWithResponse(ctx, page, &gen.UpdatePageParams{XWorkspaceID: ws, IdempotencyKey: key()},
		gen.UpdatePageJSONRequestBody{MetadataVersion: pg.JSON200.MetadataVersion, Title: &title})
	if err != nil || patched.JSON200 == nil || patched.JSON200.Title != title || patched.JSON200.Version != 2 {
		t.Fatalf("page PATCH after a source edit: %v %d %s", err, patched.StatusCode(), patched.Body)
	}

	cc, err := c.CreateComponentWithResponse(ctx, &gen.CreateComponentParams{XWorkspaceID: ws, IdempotencyKey: key()},
		gen.CreateComponentJSONRequestBody{Key: "gen-badge", FileType: "tsx", Source: `export default function B() { return <b>b</b> }`})
	if err != nil {
		t.Fatal(err)
	}
	cmp := wait(cc.JSON202)
	got, err := c.GetComponentWithResponse(ctx, cmp, &gen.GetComponentParams{XWorkspaceID: ws})
	if err != nil || got.JSON200 == nil {
		t.Fatalf("get component: %v %s", err, got.Body)
	}
	pub, err := c.PublishComponentWithResponse(ctx, cmp, &gen.PublishComponentParams{XWorkspaceID: ws, IdempotencyKey: key(), IfMatch: got.HTTPResponse.Header.Get("ETag")})
	if err != nil || pub.JSON200 == nil || pub.JSON200.PublishedVersion != 1 {
		t.Fatalf("publish with the ETag as If-Match: %v %s", err, pub.Body)
	}
	ctitle := "Generated badge"
	cp, err := c.UpdateComponentWithResponse(ctx, cmp, &gen.UpdateComponentParams{XWorkspaceID: ws, IdempotencyKey: key()},
		gen.UpdateComponentJSONRequestBody{MetadataVersion: pub.JSON200.MetadataVersion, Title: &ctitle})
	if err != nil || cp.JSON200 == nil || cp.JSON200.Title != ctitle || cp.JSON200.PublishedVersion != 1 {
		t.Fatalf("component PATCH: %v %s", err, cp.Body)
	}
}
