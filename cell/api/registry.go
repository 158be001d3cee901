// Package api is the cell's public API v1: the operation registry, the huma API built from it
// (routes, request validation, the OpenAPI document), authentication, the tenancy guard, scope
// checks and the one error mapping.
//
// Every operation is declared once with Register; nothing else adds routes under /api/v1, so the
// registry, the routes and /openapi.json cannot drift apart.
package api

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// Access says what an operation needs before its handler runs.
type Access int

const (
	// Public operations need no credential (version, health).
	Public Access = iota
	// Authenticated operations need a valid PAT but no workspace (whoami, workspace list).
	Authenticated
	// InWorkspace operations need a PAT, membership in the workspace, the tenancy guard and the
	// operation's scopes.
	InWorkspace
)

// Idempotency is an operation's Idempotency-Key rule.
type Idempotency string

const (
	// NoIdempotency is for read-only operations: no key semantics.
	NoIdempotency Idempotency = "none"
	// KeyRequired: the request must carry Idempotency-Key; replays return the first answer.
	KeyRequired Idempotency = "required"
)

// Lock is how an edit guards against lost updates.
type Lock string

const (
	// NoLock is for operations that edit nothing.
	NoLock Lock = "none"
	// VersionLock: the request carries the version it read; a stale one is a 409.
	VersionLock Lock = "version"
	// HashLock: the request carries the content hash it read; a stale one is a 409.
	HashLock Lock = "hash"
	// CreateOnly: the operation creates new objects and cannot overwrite.
	CreateOnly Lock = "create"
)

// Operation is one entry of the registry.
type Operation struct {
	ID          string
	Method      string
	Path        string
	Summary     string
	Tags        []string
	Access      Access
	Scopes      []string // all required, in the workspace
	ReadOnly    bool
	Idempotency Idempotency
	Lock        Lock
	// MaxBodyBytes caps the request body; 0 is the default (1 MiB).
	MaxBodyBytes int64
}

// Register declares an operation and its handler. It panics on an inconsistent declaration so a
// bad registry never starts.
func Register[I, O any](s *Server, op Operation, h func(context.Context, *I) (*O, error)) {
	if op.ID == "" || op.Method == "" || op.Path == "" {
		panic("api: operation needs ID, method and path")
	}
	if op.Idempotency == "" {
		op.Idempotency = NoIdempotency
	}
	if op.Lock == "" {
		op.Lock = NoLock
	}
	if !op.ReadOnly && op.Method == http.MethodGet {
		panic("api: GET operation " + op.ID + " must be read-only")
	}
	if op.Access == InWorkspace && len(op.Scopes) == 0 {
		panic("api: workspace operation " + op.ID + " declares no scope")
	}
	for _, existing := range s.ops {
		if existing.ID == op.ID {
			panic("api: duplicate operation " + op.ID)
		}
	}
	s.ops = append(s.ops, op)
	s.byPattern[op.Method+" "+op.Path] = op
	hop := huma.Operation{
		OperationID:  op.ID,
		Method:       op.Method,
		Path:         op.Path,
		Summary:      op.Summary,
		Tags:         op.Tags,
		MaxBodyBytes: op.MaxBodyBytes,
	}
	if op.Access != Public {
		hop.Security = []map[string][]string{{"bearer": {}}}
	}
	if len(op.Scopes) > 0 {
		hop.Description = "Required scopes: " + strings.Join(op.Scopes, ", ") + "."
	}
	hop.Extensions = map[string]any{
		"x-scopes":      append([]string{}, op.Scopes...),
		"x-idempotency": string(op.Idempotency),
		"x-read-only":   op.ReadOnly,
		"x-lock":        string(op.Lock),
	}
	huma.Register(s.API, hop, func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if err != nil {
			return nil, s.toHuma(ctx, err)
		}
		return out, nil
	})
}

// Operations returns the registry, sorted by ID.
func (s *Server) Operations() []Operation {
	out := append([]Operation(nil), s.ops...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
