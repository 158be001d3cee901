package authoring

import (
	"net/http"
	"strings"
	"testing"

	"slidecells/cell/auth"
	"slidecells/cell/jobs"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

func TestJobScopes(t *testing.T) {
	for _, c := range []struct {
		kind        string
		read, write auth.Permission
	}{
		{KindPageCreate, auth.PageRead, auth.PageWrite},
		{KindPageEdit, auth.PageRead, auth.PageWrite},
		{KindComponentCreate, auth.ComponentRead, auth.ComponentWrite},
		{KindComponentEdit, auth.ComponentRead, auth.ComponentWrite},
		{KindComponentMetadata, auth.ComponentRead, auth.ComponentWrite},
		// Kinds this build does not know are treated as page jobs, never as unscoped.
		{"component", auth.PageRead, auth.PageWrite},
		{"components.create", auth.PageRead, auth.PageWrite},
		{"", auth.PageRead, auth.PageWrite},
	} {
		t.Run(c.kind, func(t *testing.T) {
			r, w := JobScopes(c.kind)
			if r != c.read || w != c.write {
				t.Fatalf("JobScopes(%q) = %s, %s; want %s, %s", c.kind, r, w, c.read, c.write)
			}
		})
	}
	// Every kind the service runs has its scopes here.
	for kind := range (&Service{}).Handlers() {
		if r, _ := JobScopes(kind); !strings.HasPrefix(string(r), strings.SplitN(kind, ".", 2)[0]+":") {
			t.Errorf("kind %s is read with %s", kind, r)
		}
	}
}

// TestServiceJob: a job is read only in its workspace (another workspace's job and a job that
// does not exist are the same 404), and only with its kind's read scope; changing it needs the
// kind's write scope.
func TestServiceJob(t *testing.T) {
	f, ctx := setup(t)
	page, err := f.svc.SubmitPageCreate(ctx, f.a, PageCreate{ProjectID: f.prjA, Key: "intro", FileType: "tsx", Source: simplePage}, 1)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := f.svc.SubmitComponentCreate(ctx, f.a, ComponentCreate{Key: "card", FileType: "tsx", Source: cardSource}, 1)
	if err != nil {
		t.Fatal(err)
	}
	viewer := f.user(t, "vera@example.com", "viewer", nil)
	pagesOnly := f.user(t, "pat@example.com", "editor", []string{"page:read", "page:write"})
	componentReader := f.user(t, "cora@example.com", "editor", []string{"component:read"})

	for _, c := range []struct {
		name  string
		sc    auth.Scope
		id    string
		write bool
		code  problem.Code
		scope auth.Permission // named by a 403
	}{
		{"owner reads a page job", f.a, page.ID, false, "", ""},
		{"owner changes a component job", f.a, comp.ID, true, "", ""},
		{"viewer reads a page job", viewer, page.ID, false, "", ""},
		{"viewer reads a component job", viewer, comp.ID, false, "", ""},
		{"viewer cancels a page job", viewer, page.ID, true, problem.ScopeRequired, auth.PageWrite},
		{"viewer cancels a component job", viewer, comp.ID, true, problem.ScopeRequired, auth.ComponentWrite},
		{"a page token changes a page job", pagesOnly, page.ID, true, "", ""},
		{"a page token reads a component job", pagesOnly, comp.ID, false, problem.ScopeRequired, auth.ComponentRead},
		{"a component reader reads a page job", componentReader, page.ID, false, problem.ScopeRequired, auth.PageRead},
		{"a component reader changes a component job", componentReader, comp.ID, true, problem.ScopeRequired, auth.ComponentWrite},
		{"another workspace's job", f.b, page.ID, false, problem.NotFound, ""},
		{"another workspace's job, to change", f.b, comp.ID, true, problem.NotFound, ""},
		{"a job that does not exist", f.a, ids.New(ids.Job), false, problem.NotFound, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := f.svc.Job(ctx, c.sc, c.id, c.write)
			if code(err) != c.code {
				t.Fatalf("want %q, got %v", c.code, err)
			}
			switch c.code {
			case "":
				if j.ID != c.id || j.WorkspaceID != f.a.WorkspaceID() {
					t.Fatalf("job %+v", j)
				}
			case problem.NotFound:
				if j.ID != "" || problem.Status(c.code) != http.StatusNotFound || problem.As(err).Message != problem.ErrNotFound().Message {
					t.Fatalf("not the one 404: %+v %v", j, err)
				}
			case problem.ScopeRequired:
				if !strings.Contains(problem.As(err).Message, string(c.scope)) {
					t.Fatalf("the 403 does not name %s: %v", c.scope, err)
				}
				if !c.write && j.ID != "" {
					t.Fatalf("a refused read returned the job %+v", j)
				}
			}
		})
	}
}

// TestJobAuthorizer: a job runs under its owner's membership and role now, whatever token
// submitted it: the kind's write scope must be in the role, and the owner must still be a
// member of the job's workspace.
func TestJobAuthorizer(t *testing.T) {
	f, ctx := setup(t)
	authorize := JobAuthorizer(f.tn.Authn)
	editor := f.user(t, "ed@example.com", "editor", []string{"page:read"}) // a narrow token: it does not matter
	viewer := f.user(t, "vi@example.com", "viewer", nil)
	for _, c := range []struct {
		name  string
		owner auth.Scope
		ws    string
		kind  string
		code  problem.Code
	}{
		{"owner, page job", f.a, f.a.WorkspaceID(), KindPageCreate, ""},
		{"editor, page job (the token's scopes do not apply)", editor, f.a.WorkspaceID(), KindPageEdit, ""},
		{"editor, component job", editor, f.a.WorkspaceID(), KindComponentMetadata, ""},
		{"viewer, page job", viewer, f.a.WorkspaceID(), KindPageCreate, problem.ScopeRequired},
		{"viewer, component job", viewer, f.a.WorkspaceID(), KindComponentCreate, problem.ScopeRequired},
		{"viewer, unknown kind", viewer, f.a.WorkspaceID(), "export.pdf", problem.ScopeRequired},
		{"editor's job in a workspace they are not in", editor, f.b.WorkspaceID(), KindPageCreate, problem.NotFound},
		{"a job in a workspace that does not exist", f.a, ids.New(ids.Workspace), KindPageCreate, problem.NotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := authorize(ctx, jobs.Job{WorkspaceID: c.ws, ID: ids.New(ids.Job), Kind: c.kind, OwnerID: c.owner.Principal().UserID})
			if code(err) != c.code {
				t.Fatalf("want %q, got %v", c.code, err)
			}
			if c.code == "" && (sc.WorkspaceID() != c.ws || sc.Principal().UserID != c.owner.Principal().UserID) {
				t.Fatalf("scope of %s for %s", sc.WorkspaceID(), sc.Principal().UserID)
			}
			if c.code == problem.NotFound && sc.WorkspaceID() != "" {
				t.Fatalf("a refused job got a scope of %s", sc.WorkspaceID())
			}
		})
	}
}

// TestDemotedOwnerJobRefused: a page job whose owner was demoted to viewer after submitting it
// fails with SCOPE_REQUIRED when it runs, and one whose owner left the workspace with the one
// 404; neither writes a page or a module.
func TestDemotedOwnerJobRefused(t *testing.T) {
	f, ctx := setup(t)
	demoted := f.user(t, "dee@example.com", "editor", nil)
	gone := f.user(t, "gus@example.com", "editor", nil)
	jd, err := f.svc.SubmitPageCreate(ctx, demoted, PageCreate{ProjectID: f.prjA, Key: "by-dee", FileType: "tsx", Source: simplePage}, 3)
	if err != nil {
		t.Fatal(err)
	}
	jg, err := f.svc.SubmitPageCreate(ctx, gone, PageCreate{ProjectID: f.prjA, Key: "by-gus", FileType: "tsx", Source: simplePage}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.tn.Dir.AddMember(ctx, f.a.WorkspaceID(), demoted.Principal().UserID, "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.tn.Dir.DB.Pool.Exec(ctx, `DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2`,
		f.a.WorkspaceID(), gone.Principal().UserID); err != nil {
		t.Fatal(err)
	}
	f.run(t)
	for _, c := range []struct {
		name string
		id   string
		code problem.Code
	}{
		{"demoted to viewer", jd.ID, problem.ScopeRequired},
		{"no longer a member", jg.ID, problem.NotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := f.finished(t, f.a, c.id)
			if j.Status != jobs.Failed || j.ErrorCode != string(c.code) || j.AttemptCount != 0 {
				t.Fatalf("job %s: %s %s %q after %d retries", c.id, j.Status, j.ErrorCode, j.ErrorSummary, j.AttemptCount)
			}
		})
	}
	if n := dbtest.Count(t, f.svc.Store.DB, `SELECT count(*) FROM pages WHERE workspace_id = $1`, f.a.WorkspaceID()); n != 0 {
		t.Fatalf("%d pages written", n)
	}
	if m := f.modules(t, f.a); len(m) != 0 {
		t.Fatalf("modules written: %v", m)
	}
	// The owner who stayed runs the same job kind.
	if p := f.createPage(t, f.a, f.prjA, "by-ann", simplePage); p.Version != 1 {
		t.Fatalf("page %+v", p)
	}
}
