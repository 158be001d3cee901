package authoring

import (
	"context"
	"strings"

	"slidecells/cell/auth"
	"slidecells/cell/jobs"
	"slidecells/shared/directory"
)

// JobScopes are the permissions reading and changing a job of a kind need (the job operations
// declare workspace:read; the kind's own scope is checked once the job is loaded).
func JobScopes(kind string) (read, write auth.Permission) {
	if strings.HasPrefix(kind, "component.") {
		return auth.ComponentRead, auth.ComponentWrite
	}
	return auth.PageRead, auth.PageWrite
}

// Job reads a job of the scope's workspace that the caller may read, and with write also
// change (cancel, retry); a job of another workspace is the one 404.
func (s *Service) Job(ctx context.Context, sc auth.Scope, id string, write bool) (jobs.Job, error) {
	j, err := s.Jobs.Get(ctx, sc, id)
	if err != nil {
		return j, err
	}
	read, w := JobScopes(j.Kind)
	if err := sc.Require(read); err != nil {
		return jobs.Job{}, err
	}
	if write {
		if err := sc.Require(w); err != nil {
			return jobs.Job{}, err
		}
	}
	return j, nil
}

// JobAuthorizer is the job pool's Authorize: a job outlives the token that submitted it, so
// what counts when it runs is its owner's membership and role now, and the write scope of its
// kind.
func JobAuthorizer(a *auth.Authenticator) func(ctx context.Context, j jobs.Job) (auth.Scope, error) {
	return func(ctx context.Context, j jobs.Job) (auth.Scope, error) {
		sc, err := a.Authorize(ctx, auth.Principal{UserID: j.OwnerID, Scopes: directory.Scopes}, j.WorkspaceID)
		if err != nil {
			return sc, err
		}
		_, write := JobScopes(j.Kind)
		return sc, sc.Require(write)
	}
}
