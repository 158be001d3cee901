package auth_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/auth/authtest"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// The scopes of the specification, spelled out here so that a change to the role table or to
// the scope list shows up as a failing test rather than passing through both sides.
var (
	allScopes = []string{
		"asset:read", "asset:write", "component:read", "component:write",
		"design-system:read", "design-system:write", "page:read", "page:write",
		"preview:run", "project:read", "project:write", "workspace:read",
	}
	readScopes = []string{
		"asset:read", "component:read", "design-system:read", "page:read", "project:read", "workspace:read",
	}
)

// fixture is a real directory (authtest: one cell, Ann owning two workspaces) with a second
// user, Bob, whose role in Ann's first workspace each test sets.
type fixture struct {
	tn     *authtest.Tenants
	wsA    string // Ann's first workspace; Bob is a member when a test adds him
	wsB    string // Ann's second workspace; Bob is never a member
	bob    directory.User
	authn  *auth.Authenticator
	annAll auth.Principal
}

func setup(t *testing.T) *fixture {
	t.Helper()
	t.Parallel()
	tn := authtest.New(t, 2)
	bob, err := tn.Dir.CreateUser(context.Background(), "bob@example.com", "Bob")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{tn: tn, wsA: tn.Scopes[0].WorkspaceID(), wsB: tn.Scopes[1].WorkspaceID(), bob: bob, authn: tn.Authn,
		annAll: auth.Principal{UserID: tn.UserID, Scopes: directory.Scopes}}
}

func (f *fixture) member(t *testing.T, userID, role string) {
	t.Helper()
	if err := f.tn.Dir.AddMember(context.Background(), f.wsA, userID, role); err != nil {
		t.Fatal(err)
	}
}

// code is the problem code of err, "" for nil.
func code(err error) problem.Code {
	if err == nil {
		return ""
	}
	return problem.As(err).Code
}

// TestRoleScopes: each role grants exactly its scopes to a token that holds every scope.
func TestRoleScopes(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for _, c := range []struct {
		role string
		want []string
	}{
		{"owner", allScopes},
		{"admin", allScopes},
		{"editor", allScopes},
		{"viewer", readScopes},
	} {
		t.Run(c.role, func(t *testing.T) {
			f.member(t, f.bob.ID, c.role)
			sc, err := f.authn.Authorize(ctx, auth.Principal{UserID: f.bob.ID, Scopes: directory.Scopes}, f.wsA)
			if err != nil {
				t.Fatal(err)
			}
			if sc.WorkspaceID() != f.wsA || sc.Role() != c.role || sc.Principal().UserID != f.bob.ID {
				t.Fatalf("scope: workspace %s role %s user %s", sc.WorkspaceID(), sc.Role(), sc.Principal().UserID)
			}
			if got := sc.Scopes(); !slices.Equal(got, c.want) {
				t.Fatalf("effective scopes %v, want %v", got, c.want)
			}
			for _, s := range allScopes {
				if sc.Has(s) != slices.Contains(c.want, s) {
					t.Errorf("Has(%s) = %v", s, sc.Has(s))
				}
			}
		})
	}
}

// TestRequire: Require passes what the scope holds and refuses the first missing permission with
// a 403 SCOPE_REQUIRED that names it.
func TestRequire(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.member(t, f.bob.ID, "viewer")
	viewer, err := f.authn.Authorize(ctx, auth.Principal{UserID: f.bob.ID, Scopes: directory.Scopes}, f.wsA)
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := f.authn.Authorize(ctx, auth.Principal{UserID: f.tn.UserID, Scopes: []string{"page:read"}}, f.wsA)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		sc      auth.Scope
		require []auth.Permission
		missing auth.Permission // "" when Require passes
	}{
		{"viewer reads pages", viewer, []auth.Permission{auth.PageRead, auth.ProjectRead}, ""},
		{"viewer writes pages", viewer, []auth.Permission{auth.PageWrite}, auth.PageWrite},
		{"viewer runs previews", viewer, []auth.Permission{auth.PreviewRun}, auth.PreviewRun},
		{"viewer: the first missing one is named", viewer, []auth.Permission{auth.PageRead, auth.ComponentWrite, auth.AssetWrite}, auth.ComponentWrite},
		{"owner with a page:read token reads pages", narrow, []auth.Permission{auth.PageRead}, ""},
		{"owner with a page:read token writes pages", narrow, []auth.Permission{auth.PageWrite}, auth.PageWrite},
		{"owner with a page:read token reads projects", narrow, []auth.Permission{auth.ProjectRead}, auth.ProjectRead},
		{"nothing required", narrow, nil, ""},
		{"zero scope", auth.Scope{}, []auth.Permission{auth.WorkspaceRead}, auth.WorkspaceRead},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.sc.Require(c.require...)
			if c.missing == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			pe := problem.As(err)
			if pe.Code != problem.ScopeRequired || problem.Status(pe.Code) != http.StatusForbidden {
				t.Fatalf("want 403 SCOPE_REQUIRED, got %v", err)
			}
			if !strings.Contains(pe.Message, string(c.missing)) {
				t.Fatalf("message %q does not name %s", pe.Message, c.missing)
			}
			for _, p := range c.require {
				if p != c.missing && strings.Contains(pe.Message, string(p)) {
					t.Fatalf("message %q names %s, which is not the first missing scope", pe.Message, p)
				}
			}
		})
	}
}

// TestTokenScopesNarrowNeverWiden: the effective scopes are the token's scopes intersected
// with the role's. A token never adds a scope the role lacks, and names outside the scope list
// never become effective.
func TestTokenScopesNarrowNeverWiden(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		role   string
		token  []string
		effect []string
	}{
		{"owner narrowed to page:read", "owner", []string{"page:read"}, []string{"page:read"}},
		{"editor narrowed to two", "editor", []string{"page:write", "asset:read"}, []string{"asset:read", "page:write"}},
		{"viewer with write scopes gains none", "viewer", []string{"page:write", "project:write", "preview:run"}, []string{}},
		{"viewer with mixed scopes keeps the reads", "viewer", []string{"page:write", "page:read", "design-system:write"}, []string{"page:read"}},
		{"unknown scope names are ignored", "owner", []string{"admin", "*", "workspace:*", "page:read "}, []string{}},
		{"a token without scopes", "owner", nil, []string{}},
		{"duplicates collapse", "editor", []string{"page:read", "page:read"}, []string{"page:read"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.member(t, f.bob.ID, c.role)
			sc, err := f.authn.Authorize(ctx, auth.Principal{UserID: f.bob.ID, Scopes: c.token}, f.wsA)
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.Scopes(); !slices.Equal(got, c.effect) {
				t.Fatalf("effective %v, want %v", got, c.effect)
			}
			for _, s := range sc.Scopes() {
				if !slices.Contains(c.token, s) || !slices.Contains(directory.RoleScopes[c.role], s) {
					t.Fatalf("%s is effective but not in both the token and the role", s)
				}
			}
		})
	}
}

// TestAuthorizeWorkspaceBoundary: a workspace the caller is not a member of and one that does
// not exist give the same answer, the one 404, so the answer does not tell them apart. A
// membership in one workspace grants nothing in another.
func TestAuthorizeWorkspaceBoundary(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.member(t, f.bob.ID, "owner")
	bob := auth.Principal{UserID: f.bob.ID, Scopes: directory.Scopes}
	if _, err := f.authn.Authorize(ctx, bob, f.wsA); err != nil {
		t.Fatalf("Bob in his own workspace: %v", err)
	}
	missing := ids.New(ids.Workspace)
	var answers []*problem.Error
	for _, c := range []struct {
		name string
		p    auth.Principal
		ws   string
	}{
		{"a member of another workspace", bob, f.wsB},
		{"a workspace that does not exist", bob, missing},
		{"a malformed workspace ID", bob, "ws_../" + f.wsB},
		{"no workspace", bob, ""},
		{"a user that does not exist", auth.Principal{UserID: ids.New(ids.User), Scopes: directory.Scopes}, f.wsA},
		{"no user", auth.Principal{Scopes: directory.Scopes}, f.wsA},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := f.authn.Authorize(ctx, c.p, c.ws)
			pe := problem.As(err)
			if err == nil || pe.Code != problem.NotFound || problem.Status(pe.Code) != http.StatusNotFound {
				t.Fatalf("want the one 404, got %v", err)
			}
			if sc.WorkspaceID() != "" || len(sc.Scopes()) != 0 || sc.Has("workspace:read") {
				t.Fatalf("a refused Authorize returned a usable scope: %s %v", sc.WorkspaceID(), sc.Scopes())
			}
			answers = append(answers, pe)
		})
	}
	for _, a := range answers[1:] {
		if a.Message != answers[0].Message || a.RetryAfter != answers[0].RetryAfter || len(a.Fields) != 0 {
			t.Fatalf("the 404s differ: %+v and %+v", answers[0], a)
		}
	}
	// Ann owns both; her scope in one names only that one.
	a, err := f.authn.Authorize(ctx, f.annAll, f.wsA)
	if err != nil || a.WorkspaceID() != f.wsA {
		t.Fatalf("Ann in A: %s %v", a.WorkspaceID(), err)
	}
}

// TestMembershipChangesApply: a role change and a removed membership decide the next Authorize
// (the cache here lives a nanosecond, as a TTL that ran out).
func TestMembershipChangesApply(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	bob := auth.Principal{UserID: f.bob.ID, Scopes: directory.Scopes}
	f.member(t, f.bob.ID, "editor")
	sc, err := f.authn.Authorize(ctx, bob, f.wsA)
	if err != nil || !sc.Has("page:write") {
		t.Fatalf("editor: %v %v", sc.Scopes(), err)
	}
	f.member(t, f.bob.ID, "viewer")
	sc, err = f.authn.Authorize(ctx, bob, f.wsA)
	if err != nil || sc.Has("page:write") || code(sc.Require(auth.PageWrite)) != problem.ScopeRequired {
		t.Fatalf("demoted to viewer: %v %v", sc.Scopes(), err)
	}
	if _, err := f.tn.Dir.DB.Pool.Exec(ctx, `DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2`, f.wsA, f.bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.authn.Authorize(ctx, bob, f.wsA); code(err) != problem.NotFound {
		t.Fatalf("removed member: want 404, got %v", err)
	}
}

// TestAuthorizeDirectoryDown: a directory that cannot answer (and no cached answer) is a 503
// DIRECTORY_UNAVAILABLE with Retry-After, never a 404 or a scope.
func TestAuthorizeDirectoryDown(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	down, err := directory.Connect(ctx, f.tn.Dir.DB.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	a := &auth.Authenticator{Dir: directory.NewCached(down, directory.CacheOptions{TTL: time.Nanosecond, MaxStale: time.Minute})}
	sc, err := a.Authorize(ctx, f.annAll, f.wsA)
	pe := problem.As(err)
	if pe.Code != problem.DirectoryUnavailable || problem.Status(pe.Code) != http.StatusServiceUnavailable || pe.RetryAfter <= 0 {
		t.Fatalf("want 503 DIRECTORY_UNAVAILABLE with Retry-After, got %+v", pe)
	}
	if sc.WorkspaceID() != "" {
		t.Fatalf("a scope for %s", sc.WorkspaceID())
	}
	if _, err := a.Authenticate(ctx, "Bearer "+directory.NewTokenSecret()); code(err) != problem.DirectoryUnavailable {
		t.Fatalf("Authenticate with the directory down: want 503, got %v", err)
	}
}

// TestAuthenticate: a live token gives its holder; every other credential (missing, malformed,
// another scheme, unknown, revoked, expired) is the same 401, whose message never repeats the
// credential.
func TestAuthenticate(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	live, tok, err := f.tn.Dir.CreateToken(ctx, f.tn.UserID, "laptop", []string{"page:read", "project:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	revoked, rtok, err := f.tn.Dir.CreateToken(ctx, f.tn.UserID, "old", []string{"page:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.tn.Dir.RevokeToken(ctx, rtok.ID); err != nil {
		t.Fatal(err)
	}

	p, err := f.authn.Authenticate(ctx, "Bearer "+live)
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != f.tn.UserID || p.Email != "ann@example.com" || p.Name != "Ann" || p.TokenID != tok.ID || p.TokenName != "laptop" ||
		!slices.Equal(p.Scopes, []string{"page:read", "project:read"}) || !p.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Fatalf("principal %+v", p)
	}
	if _, err := f.authn.Authenticate(ctx, "bearer "+live); err != nil {
		t.Fatalf("the scheme is case-insensitive: %v", err)
	}
	// The token's scopes narrow Ann's owner role.
	sc, err := f.authn.Authorize(ctx, p, f.wsA)
	if err != nil || !slices.Equal(sc.Scopes(), []string{"page:read", "project:read"}) {
		t.Fatalf("scope of the token: %v %v", sc.Scopes(), err)
	}

	at := func(when time.Time) *auth.Authenticator {
		return &auth.Authenticator{Dir: f.authn.Dir, Now: func() time.Time { return when }}
	}
	for _, c := range []struct {
		name  string
		a     *auth.Authenticator
		value string
	}{
		{"missing", f.authn, ""},
		{"scheme only", f.authn, "Bearer"},
		{"another scheme", f.authn, "Basic " + live},
		{"no space", f.authn, "Bearer" + live},
		{"two spaces", f.authn, "Bearer  " + live},
		{"wrong prefix", f.authn, "Bearer svc_dlg_" + strings.TrimPrefix(live, directory.TokenPrefix)},
		{"truncated", f.authn, "Bearer " + live[:len(live)-1]},
		{"trailing garbage", f.authn, "Bearer " + live + "x"},
		{"bad character", f.authn, "Bearer " + live[:len(live)-1] + "!"},
		{"unknown", f.authn, "Bearer " + directory.NewTokenSecret()},
		{"revoked", f.authn, "Bearer " + revoked},
		{"expired at its expiry", at(tok.ExpiresAt), "Bearer " + live},
		{"expired after", at(tok.ExpiresAt.Add(time.Minute)), "Bearer " + live},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.a.Authenticate(ctx, c.value)
			pe := problem.As(err)
			if pe.Code != problem.Unauthenticated || problem.Status(pe.Code) != http.StatusUnauthorized {
				t.Fatalf("want 401 UNAUTHENTICATED, got %v", err)
			}
			if p.UserID != "" || p.TokenID != "" || len(p.Scopes) != 0 {
				t.Fatalf("a refused token gave a principal: %+v", p)
			}
			if strings.Contains(pe.Message, strings.TrimPrefix(live, directory.TokenPrefix)[:8]) ||
				strings.Contains(pe.Message, strings.TrimPrefix(revoked, directory.TokenPrefix)[:8]) {
				t.Fatalf("the message repeats the credential: %q", pe.Message)
			}
			if want := problem.As(mustFail(f.authn.Authenticate(ctx, ""))).Message; pe.Message != want {
				t.Fatalf("401s differ: %q and %q", pe.Message, want)
			}
		})
	}
	// Just before its expiry the token is still good.
	if _, err := at(tok.ExpiresAt.Add(-time.Second)).Authenticate(ctx, "Bearer "+live); err != nil {
		t.Fatalf("a second before expiry: %v", err)
	}
}

func mustFail(_ auth.Principal, err error) error {
	if err == nil {
		return errors.New("no error")
	}
	return err
}

// TestScopeZeroValue: a Scope made outside Authorize is empty: no workspace, no scopes.
func TestScopeZeroValue(t *testing.T) {
	var sc auth.Scope
	if sc.WorkspaceID() != "" || sc.Role() != "" || len(sc.Scopes()) != 0 {
		t.Fatalf("zero scope: %q %q %v", sc.WorkspaceID(), sc.Role(), sc.Scopes())
	}
	for _, s := range allScopes {
		if sc.Has(s) {
			t.Fatalf("zero scope has %s", s)
		}
	}
}

// TestPermissionsAreTheScopeList: every permission constant is one of the directory's scope
// names and every scope name has its constant, so an operation cannot declare a scope no token
// can hold.
func TestPermissionsAreTheScopeList(t *testing.T) {
	perms := []auth.Permission{auth.WorkspaceRead, auth.ProjectRead, auth.ProjectWrite, auth.PageRead, auth.PageWrite,
		auth.ComponentRead, auth.ComponentWrite, auth.AssetRead, auth.AssetWrite, auth.DesignSystemRead,
		auth.DesignSystemWrite, auth.PreviewRun}
	var names []string
	for _, p := range perms {
		if !directory.ValidScope(string(p)) {
			t.Errorf("%s is not a directory scope", p)
		}
		names = append(names, string(p))
	}
	slices.Sort(names)
	if !slices.Equal(names, allScopes) {
		t.Fatalf("permissions %v, scopes %v", names, allScopes)
	}
	ds := slices.Clone(directory.Scopes)
	slices.Sort(ds)
	if !slices.Equal(ds, allScopes) {
		t.Fatalf("directory scopes %v", ds)
	}
}
