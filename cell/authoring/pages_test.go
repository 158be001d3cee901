package authoring

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"slidecells/cell/auth"
	"slidecells/cell/blob"
	"slidecells/cell/jobs"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/digest"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// TestPageCreateEndToEnd: a page create goes from submission through its job to a page at
// version 1 whose version records the source, its digest, the compiled module (stored by its
// content address in the workspace) and the job.
func TestPageCreateEndToEnd(t *testing.T) {
	f, ctx := setup(t)
	j, err := f.svc.SubmitPageCreate(ctx, f.a, PageCreate{ProjectID: f.prjA, Key: "intro", Title: "Intro", FileType: "tsx", Source: simplePage}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobs.Pending || j.Kind != KindPageCreate || j.OwnerID != f.a.Principal().UserID || j.WorkspaceID != f.a.WorkspaceID() || j.MaxAttempts != jobs.DefaultMaxAttempts {
		t.Fatalf("submitted %+v", j)
	}
	// Nothing is written before the job runs.
	if n := dbtest.Count(t, f.svc.Store.DB, `SELECT count(*) FROM pages`); n != 0 {
		t.Fatalf("%d pages before the job ran", n)
	}
	f.run(t)
	done := f.finished(t, f.a, j.ID)
	if done.Status != jobs.Succeeded {
		t.Fatalf("job %s %s %s", done.Status, done.ErrorCode, done.ErrorSummary)
	}
	var res Result
	if err := json.Unmarshal(done.Result, &res); err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.Store.GetPage(ctx, f.a, res.ObjectID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || p.Version != 1 || p.Key != "intro" || p.Title != "Intro" || p.FileType != "tsx" || p.ProjectID != f.prjA || p.CreatedBy != f.a.Principal().UserID {
		t.Fatalf("result %+v page %+v", res, p)
	}
	v, err := f.svc.Store.PageVersion(ctx, f.a, p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Version != 1 || v.Source != simplePage || v.SourceDigest != digest.Bytes([]byte(simplePage)) || v.CompiledDigest != res.CompiledDigest ||
		v.JobID != j.ID || v.FileType != "tsx" || len(v.Dependencies) != 0 {
		t.Fatalf("version %+v", v)
	}
	module, err := f.svc.Modules.ReadDerived(ctx, f.a, res.CompiledDigest, ".js", 1<<20)
	if err != nil || digest.Bytes(module) != res.CompiledDigest || !strings.Contains(string(module), "page") {
		t.Fatalf("stored module: %v", err)
	}
	if got := f.modules(t, f.a); !slices.Equal(got, []string{blob.ModuleKey(f.a.WorkspaceID(), res.CompiledDigest)}) {
		t.Fatalf("modules of A: %v", got)
	}
	if got := f.modules(t, f.b); len(got) != 0 {
		t.Fatalf("modules of B: %v", got)
	}
	// The page is A's only.
	if _, err := f.svc.Store.GetPage(ctx, f.b, p.ID); code(err) != problem.NotFound {
		t.Fatalf("B reads A's page: %v", err)
	}
}

// TestPageSubmissionChecks: bad input is a 422 naming every bad field, a project that is not
// the workspace's a 404, a taken key a 409; none of them enqueues a job.
func TestPageSubmissionChecks(t *testing.T) {
	f, ctx := running(t)
	f.createPage(t, f.a, f.prjA, "taken", simplePage)
	before := f.jobCount(t, f.a)
	ok := PageCreate{ProjectID: f.prjA, Key: "fresh", Title: "Fresh", FileType: "tsx", Source: simplePage}
	with := func(change func(*PageCreate)) PageCreate {
		in := ok
		change(&in)
		return in
	}
	for _, c := range []struct {
		name   string
		in     PageCreate
		code   problem.Code
		fields []string
	}{
		{"a key with capitals", with(func(in *PageCreate) { in.Key = "Intro" }), problem.ValidationFailed, []string{"key"}},
		{"a key starting with a digit", with(func(in *PageCreate) { in.Key = "1st" }), problem.ValidationFailed, []string{"key"}},
		{"an empty key", with(func(in *PageCreate) { in.Key = "" }), problem.ValidationFailed, []string{"key"}},
		{"a key of 65 characters", with(func(in *PageCreate) { in.Key = "k" + strings.Repeat("a", 64) }), problem.ValidationFailed, []string{"key"}},
		{"a file type outside the standard", with(func(in *PageCreate) { in.FileType = "vue" }), problem.ValidationFailed, []string{"file_type"}},
		{"white space only", with(func(in *PageCreate) { in.Source = " \n\t" }), problem.ValidationFailed, []string{"source"}},
		{"one byte over the source limit", with(func(in *PageCreate) { in.Source = strings.Repeat("x", 512<<10+1) }), problem.ValidationFailed, []string{"source"}},
		{"a title of 201 characters", with(func(in *PageCreate) { in.Title = strings.Repeat("t", 201) }), problem.ValidationFailed, []string{"title"}},
		{"every field wrong", PageCreate{ProjectID: f.prjA, Key: "-", FileType: "md", Title: strings.Repeat("t", 201)}, problem.ValidationFailed,
			[]string{"file_type", "source", "key", "title"}},
		{"another workspace's project", with(func(in *PageCreate) { in.ProjectID = f.prjB }), problem.NotFound, nil},
		{"a project that does not exist", with(func(in *PageCreate) { in.ProjectID = ids.New(ids.Project) }), problem.NotFound, nil},
		{"a taken key", with(func(in *PageCreate) { in.Key = "taken" }), problem.NameConflict, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.svc.SubmitPageCreate(ctx, f.a, c.in, 1)
			pe := problem.As(err)
			if err == nil || pe.Code != c.code {
				t.Fatalf("want %s, got %v", c.code, err)
			}
			var fields []string
			for _, fe := range pe.Fields {
				fields = append(fields, fe.Field)
			}
			if !slices.Equal(fields, c.fields) {
				t.Fatalf("fields %v, want %v", fields, c.fields)
			}
		})
	}
	// The limit itself is accepted (and fails to compile later, not here).
	if _, err := f.svc.SubmitPageCreate(ctx, f.a, with(func(in *PageCreate) { in.Key = "big"; in.Source = strings.Repeat("x", 512<<10) }), 1); err != nil {
		t.Fatalf("a source of exactly the limit: %v", err)
	}
	if n := f.jobCount(t, f.a) - before; n != 1 {
		t.Fatalf("%d jobs enqueued, want only the one accepted", n)
	}
}

// TestPageEdit: an edit on the current version writes the next one; an edit on a stale version
// is a 409 at submission, and one that went stale while queued fails at its commit with
// VERSION_CONFLICT and writes nothing.
func TestPageEdit(t *testing.T) {
	f, ctx := running(t)
	p := f.createPage(t, f.a, f.prjA, "intro", simplePage)

	edited := strings.Replace(simplePage, "page", "edited", 1)
	j, err := f.svc.SubmitPageEdit(ctx, f.a, PageEdit{PageID: p.ID, Version: 1, Source: edited}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if done := f.finished(t, f.a, j.ID); done.Status != jobs.Succeeded || !strings.Contains(string(done.Result), `"version": 2`) {
		t.Fatalf("edit: %s %s %s %s", done.Status, done.ErrorCode, done.ErrorSummary, done.Result)
	}
	v, err := f.svc.Store.PageVersion(ctx, f.a, p.ID, 0)
	if err != nil || v.Version != 2 || v.Source != edited || v.FileType != "tsx" || v.JobID != j.ID {
		t.Fatalf("version 2: %+v %v", v, err)
	}
	if v1, err := f.svc.Store.PageVersion(ctx, f.a, p.ID, 1); err != nil || v1.Source != simplePage {
		t.Fatalf("version 1 changed: %+v %v", v1, err)
	}

	before := f.jobCount(t, f.a)
	for _, c := range []struct {
		name string
		in   PageEdit
		sc   auth.Scope // Ann in A when zero
		code problem.Code
	}{
		{name: "a stale version", in: PageEdit{PageID: p.ID, Version: 1, Source: simplePage}, code: problem.VersionConflict},
		{name: "a version from the future", in: PageEdit{PageID: p.ID, Version: 3, Source: simplePage}, code: problem.VersionConflict},
		{name: "another workspace's page", in: PageEdit{PageID: p.ID, Version: 2, Source: simplePage}, sc: f.b, code: problem.NotFound},
		{name: "a page that does not exist", in: PageEdit{PageID: ids.New(ids.Page), Version: 1, Source: simplePage}, code: problem.NotFound},
		{name: "an empty source", in: PageEdit{PageID: p.ID, Version: 2, Source: ""}, code: problem.ValidationFailed},
		{name: "a file type outside the standard", in: PageEdit{PageID: p.ID, Version: 2, FileType: "svelte", Source: simplePage}, code: problem.ValidationFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := c.sc
			if sc.WorkspaceID() == "" {
				sc = f.a
			}
			if _, err := f.svc.SubmitPageEdit(ctx, sc, c.in, 1); code(err) != c.code {
				t.Fatalf("want %s, got %v", c.code, err)
			}
		})
	}
	if n := f.jobCount(t, f.a) - before; n != 0 {
		t.Fatalf("%d refused edits enqueued jobs", n)
	}
}

// TestPageEditConflictAtCommit: two edits of version 1 accepted before either ran: one writes
// version 2, the other fails at its commit with VERSION_CONFLICT.
func TestPageEditConflictAtCommit(t *testing.T) {
	f, ctx := setup(t)
	stop := f.run(t)
	p := f.createPage(t, f.a, f.prjA, "intro", simplePage)
	stop() // both edits are accepted before either runs
	var jobIDs []string
	for _, word := range []string{"first", "second"} {
		j, err := f.svc.SubmitPageEdit(ctx, f.a, PageEdit{PageID: p.ID, Version: 1, Source: strings.Replace(simplePage, "page", word, 1)}, 3)
		if err != nil {
			t.Fatal(err)
		}
		jobIDs = append(jobIDs, j.ID)
	}
	f.run(t)
	var won, lost int
	for _, id := range jobIDs {
		j := f.finished(t, f.a, id)
		switch {
		case j.Status == jobs.Succeeded:
			won++
		case j.Status == jobs.Failed && j.ErrorCode == string(problem.VersionConflict) && j.AttemptCount == 0:
			lost++
		default:
			t.Fatalf("job %s: %s %s %s (%d retries)", id, j.Status, j.ErrorCode, j.ErrorSummary, j.AttemptCount)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("%d won, %d lost", won, lost)
	}
	if got, err := f.svc.Store.GetPage(ctx, f.a, p.ID); err != nil || got.Version != 2 {
		t.Fatalf("page after both: %+v %v", got, err)
	}
	if n := dbtest.Count(t, f.svc.Store.DB, `SELECT count(*) FROM page_versions WHERE page_id = $1`, p.ID); n != 2 {
		t.Fatalf("%d versions, want 2", n)
	}
}

// TestPageCompileFailure: a source that does not compile fails its job with COMPILE_FAILED,
// not retried, a summary of file:line:col: CODE: message lines, and nothing written: no page,
// no version, no module.
func TestPageCompileFailure(t *testing.T) {
	f, ctx := running(t)
	j, err := f.svc.SubmitPageCreate(ctx, f.a, PageCreate{ProjectID: f.prjA, Key: "broken", FileType: "tsx", Source: brokenPage}, 3)
	if err != nil {
		t.Fatal(err)
	}
	done := f.finished(t, f.a, j.ID)
	if done.Status != jobs.Failed || done.ErrorCode != CodeCompileFailed || done.AttemptCount != 0 || done.Result != nil {
		t.Fatalf("job %s %s (%d retries) %s", done.Status, done.ErrorCode, done.AttemptCount, done.Result)
	}
	if !strings.HasPrefix(done.ErrorSummary, "page.tsx:1:") || !strings.Contains(done.ErrorSummary, ": COMPILE_SYNTAX: ") {
		t.Fatalf("summary %q", done.ErrorSummary)
	}
	if n := dbtest.Count(t, f.svc.Store.DB, `SELECT count(*) FROM pages WHERE workspace_id = $1`, f.a.WorkspaceID()); n != 0 {
		t.Fatalf("%d pages written", n)
	}
	if m := f.modules(t, f.a); len(m) != 0 {
		t.Fatalf("modules written: %v", m)
	}
	// An edit that does not compile leaves the page at its version.
	p := f.createPage(t, f.a, f.prjA, "intro", simplePage)
	j, err = f.svc.SubmitPageEdit(ctx, f.a, PageEdit{PageID: p.ID, Version: 1, Source: brokenPage}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if done := f.finished(t, f.a, j.ID); done.Status != jobs.Failed || done.ErrorCode != CodeCompileFailed {
		t.Fatalf("broken edit: %s %s", done.Status, done.ErrorCode)
	}
	if got, err := f.svc.Store.GetPage(ctx, f.a, p.ID); err != nil || got.Version != 1 {
		t.Fatalf("page after a broken edit: %+v %v", got, err)
	}
}

// TestPageImportsPublishedComponentsOfItsWorkspace: a page's @components/<key> resolves to the
// latest published version of its own workspace's component: one of another workspace, or one
// never published, is a missing component.
func TestPageImportsPublishedComponentsOfItsWorkspace(t *testing.T) {
	f, ctx := running(t)
	f.publish(t, f.b, "card", cardSource) // B's card

	submit := func(key string) jobs.Job {
		t.Helper()
		j, err := f.svc.SubmitPageCreate(ctx, f.a, PageCreate{ProjectID: f.prjA, Key: key, FileType: "tsx", Source: cardPage}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return f.finished(t, f.a, j.ID)
	}
	if j := submit("before"); j.Status != jobs.Failed || j.ErrorCode != CodeCompileFailed || !strings.Contains(j.ErrorSummary, "COMPILE_COMPONENT_MISSING") {
		t.Fatalf("B's card resolved for A: %s %s %q", j.Status, j.ErrorCode, j.ErrorSummary)
	}
	// A draft is not enough: only published versions resolve.
	cj, err := f.svc.SubmitComponentCreate(ctx, f.a, ComponentCreate{Key: "card", FileType: "tsx", Source: cardSource}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cdone := f.finished(t, f.a, cj.ID)
	if cdone.Status != jobs.Succeeded {
		t.Fatalf("component create: %s %s", cdone.ErrorCode, cdone.ErrorSummary)
	}
	if j := submit("draft-only"); j.Status != jobs.Failed || !strings.Contains(j.ErrorSummary, "COMPILE_COMPONENT_MISSING") {
		t.Fatalf("a draft resolved: %s %q", j.Status, j.ErrorSummary)
	}
	var created struct {
		ObjectID  string `json:"object_id"`
		DraftHash string `json:"draft_hash"`
	}
	if err := json.Unmarshal(cdone.Result, &created); err != nil {
		t.Fatal(err)
	}
	if created.DraftHash != DraftHash("tsx", cardSource) {
		t.Fatalf("draft hash %s", created.DraftHash)
	}
	if _, err := f.svc.Publish(ctx, f.a, created.ObjectID, DraftHash("tsx", "stale")); code(err) != problem.VersionConflict {
		t.Fatalf("publish with a stale draft hash: %v", err)
	}
	if _, err := f.svc.Publish(ctx, f.b, created.ObjectID, created.DraftHash); code(err) != problem.NotFound {
		t.Fatalf("B publishes A's component: %v", err)
	}
	c, err := f.svc.Publish(ctx, f.a, created.ObjectID, created.DraftHash)
	if err != nil || c.PublishedVersion != 1 {
		t.Fatalf("publish: %+v %v", c, err)
	}
	j := submit("after")
	if j.Status != jobs.Succeeded {
		t.Fatalf("after publishing: %s %q", j.ErrorCode, j.ErrorSummary)
	}
	var res Result
	if err := json.Unmarshal(j.Result, &res); err != nil {
		t.Fatal(err)
	}
	v, err := f.svc.Store.PageVersion(ctx, f.a, res.ObjectID, 0)
	if err != nil || len(v.Dependencies) != 1 {
		t.Fatalf("version %+v %v", v, err)
	}
	if d := v.Dependencies[0]; d.ComponentID != c.ID || d.Key != "card" || d.Version != 1 || d.Depth != 1 {
		t.Fatalf("dependency %+v, want A's card %s at version 1", d, c.ID)
	}
}

// TestRenderCheckWithoutRenderer: a job that asks for a render check on a cell with no renderer
// is blocked with RENDER_SERVICE_UNAVAILABLE (never a content failure) and writes nothing.
func TestRenderCheckWithoutRenderer(t *testing.T) {
	f, ctx := running(t)
	j, err := f.svc.SubmitPageCreate(ctx, f.a, PageCreate{ProjectID: f.prjA, Key: "checked", FileType: "tsx", Source: simplePage, RenderCheck: true}, 2)
	if err != nil {
		t.Fatal(err)
	}
	done := f.finished(t, f.a, j.ID)
	if done.Status != jobs.Failed || done.ErrorCode != CodeRenderUnavailable || done.AttemptCount != 1 {
		t.Fatalf("job %s %s %q after %d retries", done.Status, done.ErrorCode, done.ErrorSummary, done.AttemptCount)
	}
	if n := dbtest.Count(t, f.svc.Store.DB, `SELECT count(*) FROM pages WHERE workspace_id = $1`, f.a.WorkspaceID()); n != 0 {
		t.Fatalf("%d pages written", n)
	}
}
