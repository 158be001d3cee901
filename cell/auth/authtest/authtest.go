// Package authtest gives tests of the cell's domain packages real workspace scopes: a directory
// database with one cell, one user and workspaces that user owns, each scope authorized the way
// a request's is (auth.Scope has no other constructor).
package authtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"slidecells/cell/auth"
	"slidecells/migrations"
	"slidecells/shared/db/dbtest"
	"slidecells/shared/directory"
)

// Tenants is a directory with one user owning workspaces on cell "cell-a".
type Tenants struct {
	Dir    *directory.Directory
	Authn  *auth.Authenticator
	UserID string
	// Scopes are the owner's scopes, one per workspace, in creation order.
	Scopes []auth.Scope
}

// New creates the directory and n workspaces; it closes them when the test ends.
func New(t testing.TB, n int) *Tenants {
	t.Helper()
	ctx := context.Background()
	dir, err := directory.Connect(ctx, dbtest.NewDatabase(t, migrations.FS, migrations.Directory))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dir.Close)
	if err := dir.AddCell(ctx, directory.Cell{ID: "cell-a", InternalURL: "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	u, err := dir.CreateUser(ctx, "ann@example.com", "Ann")
	if err != nil {
		t.Fatal(err)
	}
	tn := &Tenants{Dir: dir, UserID: u.ID,
		Authn: &auth.Authenticator{Dir: directory.NewCached(dir, directory.CacheOptions{TTL: time.Nanosecond, MaxStale: time.Minute})}}
	for i := range n {
		w, err := dir.CreateWorkspace(ctx, fmt.Sprintf("ws %d", i), "cell-a", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.AddMember(ctx, w.ID, u.ID, "owner"); err != nil {
			t.Fatal(err)
		}
		sc, err := tn.Authorize(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		tn.Scopes = append(tn.Scopes, sc)
	}
	return tn
}

// Authorize authorizes the user in a workspace with every scope, as a request would.
func (tn *Tenants) Authorize(ctx context.Context, workspaceID string) (auth.Scope, error) {
	return tn.Authn.Authorize(ctx, auth.Principal{UserID: tn.UserID, Scopes: directory.Scopes}, workspaceID)
}
