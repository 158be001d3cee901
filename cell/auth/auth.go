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
	"sort"
	"strings"
	"time"

	"slidecells/shared/directory"
	"slidecells/shared/problem"
)

// Principal is an authenticated token holder.
type Principal struct {
	UserID    string
	Email     string
	Name      string
	TokenID   string
	TokenName string
	Scopes    []string // the token's scopes
	ExpiresAt time.Time
}

// Scope is an authorized workspace context: the workspace, the caller and the effective scopes
// (token scopes ∩ role scopes). Its fields are unexported so only Authorize can make one.
type Scope struct {
	workspaceID string
	principal   Principal
	role        string
	scopes      map[string]bool
}

// WorkspaceID is the authorized workspace.
func (s Scope) WorkspaceID() string { return s.workspaceID }

// Principal is the caller.
func (s Scope) Principal() Principal { return s.principal }

// Role is the caller's role in the workspace.
func (s Scope) Role() string { return s.role }

// Has reports whether the effective scopes include name.
func (s Scope) Has(name string) bool { return s.scopes[name] }

// Scopes lists the effective scopes, sorted.
func (s Scope) Scopes() []string {
	out := make([]string, 0, len(s.scopes))
	for k := range s.scopes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Require returns a 403 naming the first missing scope.
func (s Scope) Require(names ...Permission) error {
	for _, n := range names {
		if !s.scopes[string(n)] {
			e := problem.New(problem.ScopeRequired, "this operation needs the %s scope in this workspace", n)
			return e
		}
	}
	return nil
}

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
	return Scope{workspaceID: workspaceID, principal: p, role: role, scopes: eff}, nil
}

func directoryDown(err error) error { return problem.ErrDirectoryUnavailable(err) }
