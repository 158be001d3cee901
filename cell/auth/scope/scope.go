// Package scope holds the values the rest of the cell trusts, free of the directory and of
// SQL: a Principal (who is calling), a Scope (a workspace the principal may act in, with its
// effective scopes) and the Permission names operations require. cell/auth makes them (its
// auth.Principal, auth.Scope and auth.Permission are these types); domain packages, which must
// not link the database driver, name them from here.
//
// A Scope can only be made by cell/auth (New takes a key only cell/auth can write), after
// membership has been checked; storage functions take a Scope, so a query that is not bound to
// an authorized workspace cannot be written.
package scope

import (
	"sort"
	"time"

	"slidecells/cell/auth/internal/mint"
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

// Permission is a scope name an operation requires, as the specification lists them
// (directory.Scopes). Operations declare cell/auth's constants, never free strings.
type Permission string

// Scope is an authorized workspace context: the workspace, the caller and the effective scopes
// (token scopes ∩ role scopes). Its fields are unexported so only authorization can make one.
type Scope struct {
	workspaceID string
	principal   Principal
	role        string
	scopes      map[string]bool
}

// New makes a Scope; only cell/auth can call it (the key is internal to it).
func New(_ mint.Key, workspaceID string, p Principal, role string, effective map[string]bool) Scope {
	return Scope{workspaceID: workspaceID, principal: p, role: role, scopes: effective}
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
