package store_test

import (
	"context"
	"testing"

	"slidecells/cell/auth"
	"slidecells/cell/auth/authtest"
	"slidecells/cell/design"
	"slidecells/cell/store"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/problem"
)

// setup is a cell database hosting two workspaces of one owner, and their scopes.
func setup(t *testing.T) (*store.Store, []auth.Scope) {
	t.Helper()
	t.Parallel()
	tn := authtest.New(t, 2)
	st := &store.Store{DB: dbtest.Open(t, dbtest.NewDatabase(t, migrations.FS, migrations.Cell))}
	for _, sc := range tn.Scopes {
		if _, err := st.DB.Pool.Exec(context.Background(), `INSERT INTO tenancy (workspace_id, epoch, state) VALUES ($1, 1, 'active')`, sc.WorkspaceID()); err != nil {
			t.Fatal(err)
		}
	}
	return st, tn.Scopes
}

func createTheme(t *testing.T, st *store.Store, sc auth.Scope, key string) design.Theme {
	t.Helper()
	name := "Theme " + key
	th, err := design.ThemeChange{Key: key, Name: &name}.NewTheme()
	if err == nil {
		th, err = st.CreateTheme(context.Background(), sc, th)
	}
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// TestThemeByKey: a theme is found by its key among the workspace's live themes only.
func TestThemeByKey(t *testing.T) {
	st, scopes := setup(t)
	ctx := context.Background()
	a, b := scopes[0], scopes[1]
	brand := createTheme(t, st, a, "brand")
	createTheme(t, st, a, "other")
	createTheme(t, st, b, "elsewhere")
	got, err := st.ThemeByKey(ctx, a, "brand")
	if err != nil || got.ID != brand.ID || got.Name != "Theme brand" {
		t.Fatalf("brand: %+v %v", got, err)
	}
	for _, c := range []struct {
		name string
		sc   auth.Scope
		key  string
	}{
		{"unknown key", a, "nope"},
		{"another workspace's key", a, "elsewhere"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := st.ThemeByKey(ctx, c.sc, c.key); problem.As(err).Code != problem.NotFound {
				t.Fatalf("want the one 404, got %v", err)
			}
		})
	}
	if err := st.Archive(ctx, a, store.Themes.Kind, []string{brand.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ThemeByKey(ctx, a, "brand"); problem.As(err).Code != problem.NotFound {
		t.Fatalf("an archived theme was found: %v", err)
	}
	// The key is free again: a new theme takes it and is the one found.
	again := createTheme(t, st, a, "brand")
	if got, err := st.ThemeByKey(ctx, a, "brand"); err != nil || got.ID != again.ID {
		t.Fatalf("after the archive: %+v %v", got, err)
	}
}
