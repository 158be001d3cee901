// Package auth authenticates personal access tokens, checks workspace membership and builds the
// values the rest of the cell trusts: a Principal (who is calling) and a Scope (a workspace the
// principal may act in, with its effective scopes).
//
// A Scope can only be made here, after membership has been checked; storage functions take a
// Scope, so a query that is not bound to an authorized workspace cannot be written.
package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"slidecells/cell/auth/internal/mint"
	"slidecells/cell/auth/scope"
	"slidecells/shared/directory"
	"slidecells/shared/problem"
)

// Principal is an authenticated token holder (scope.Principal).
type Principal = scope.Principal

// Scope is an authorized workspace context (scope.Scope): only Authorize makes one.
type Scope = scope.Scope

// Directory is what auth needs from the directory (satisfied by *directory.Cached).
type Directory interface {
	Token(ctx context.Context, hash []byte) (directory.Token, error)
	Role(ctx context.Context, workspaceID, userID string) (string, error)
}

// Authenticator checks credentials.
type Authenticator struct {
	Dir Directory
	Now func() time.Time
}

func unauthenticated() error {
	return problem.New(problem.Unauthenticated, "a valid personal access token is required (Authorization: Bearer svc_pat_…)")
}

// Authenticate checks the Authorization header. Every failure (missing, malformed, wrong
// prefix, unknown, expired, revoked) is the same 401; no other credential source is consulted.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !directory.TokenShapeValid(token) {
		return Principal{}, unauthenticated()
	}
	t, err := a.Dir.Token(ctx, directory.HashToken(token))
	if errors.Is(err, directory.ErrNotFound) {
		return Principal{}, unauthenticated()
	}
	if err != nil {
		return Principal{}, directoryDown(err)
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	if t.RevokedAt != nil || !now().Before(t.ExpiresAt) {
		return Principal{}, unauthenticated()
	}
	return Principal{UserID: t.UserID, Email: t.User.Email, Name: t.User.Name, TokenID: t.ID,
		TokenName: t.Name, Scopes: t.Scopes, ExpiresAt: t.ExpiresAt}, nil
}

// Authorize checks membership and returns the workspace scope. A workspace that does not exist
// and one the caller is not a member of give the same 404.
func (a *Authenticator) Authorize(ctx context.Context, p Principal, workspaceID string) (Scope, error) {
	role, err := a.Dir.Role(ctx, workspaceID, p.UserID)
	if errors.Is(err, directory.ErrNotFound) {
		return Scope{}, problem.ErrNotFound()
	}
	if err != nil {
		return Scope{}, directoryDown(err)
	}
	granted := map[string]bool{}
	for _, s := range directory.RoleScopes[role] {
		granted[s] = true
	}
	eff := map[string]bool{}
	for _, s := range p.Scopes {
		if granted[s] {
			eff[s] = true
		}
	}
	return scope.New(mint.Key{}, workspaceID, p, role, eff), nil
}

func directoryDown(err error) error { return problem.ErrDirectoryUnavailable(err) }
