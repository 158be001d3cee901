// Package api is the cell's public API v1 over HTTP: the operation registry, the huma API built
// from it (routes, request validation, the OpenAPI document), authentication, the tenancy
// guard, scope checks and the one error mapping. It holds no business rule and no SQL: domain
// rules live in cell/design and cell/content, storage in cell/store.
//
// Every operation is declared once with Register (or a resource Kind); nothing else adds routes
// under /api/v1 or touches the OpenAPI document, so the registry, the routes and /openapi.json
// cannot drift apart.
package api

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/auth"
	"slidecells/shared/cellproto"
	"slidecells/shared/ids"
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
	// VersionLock: the request body carries the version it read; a stale one is a 409.
	VersionLock Lock = "version"
	// HashLock: the request carries the content hash it read in If-Match; a stale one is a 409.
	HashLock Lock = "hash"
	// CreateOnly: the operation creates new objects and cannot overwrite; it answers 201 with
	// Location.
	CreateOnly Lock = "create"
)

// Operation is one entry of the registry.
type Operation struct {
	ID      string
	Method  string
	Path    string
	Summary string
	Tags    []string
	Access  Access
	Scopes  []auth.Permission // all required, in the workspace
	// OneOf, when set, are alternatives of further scopes of which the caller needs one set
	// (all of its scopes), by the kind of object the call turns out to be about (a job's kind,
	// an entity type): checked with Scopes before the handler for "any", and by the handler for
	// the object's own.
	OneOf       [][]auth.Permission
	ReadOnly    bool
	Idempotency Idempotency
	Lock        Lock
	// Status is the success status; 0 is 200, and a CreateOnly operation is always 201.
	Status int
	// MaxBodyBytes caps the request body; 0 is the default (1 MiB).
	MaxBodyBytes int64
	// RawBody, when set, says the request body is bytes the handler streams, not JSON.
	RawBody *Media
	// Produces, when set, says the success answer's body is not JSON.
	Produces *Media
	// Also documents further success answers by status (e.g. 304).
	Also map[int]string
}

// Media is a body that is not JSON: its media types and what it holds.
type Media struct {
	Types       []string
	Description string
}

// idParam is a path parameter holding an ID: its prefix in shared/ids and its description.
type idParam struct{ prefix, doc string }

// idParams are the ID path parameters an operation path may use; their patterns come from
// shared/ids. A path parameter ending in _id that is not listed here does not start.
var idParams = map[string]idParam{
	"workspace_id": {ids.Workspace, "Workspace ID (ws_…)"},
	"project_id":   {ids.Project, "Project ID (prj_…)"},
	"theme_id":     {ids.Theme, "Theme ID (thm_…)"},
	"style_id":     {ids.Style, "Style ID (sty_…)"},
	"asset_id":     {ids.Asset, "Asset ID (ast_…)"},
	"family_id":    {ids.FontFamily, "Font family ID (ffam_…)"},
	"font_id":      {ids.FontFace, "Font face ID (ffac_…)"},
	"page_id":      {ids.Page, "Page ID (pg_…)"},
	"job_id":       {ids.Job, "Mutation job ID (job_…)"},
	"component_id": {ids.Component, "Component ID (cmp_…)"},
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// Op declares a workspace operation with the usual rules: a GET is read-only, any other method
// writes and needs an Idempotency-Key. Set Lock, Status or bodies on the result as needed.
func Op(id, method, path, summary, tag string, scopes ...auth.Permission) Operation {
	op := Operation{ID: id, Method: method, Path: path, Summary: summary, Tags: []string{tag}, Access: InWorkspace, Scopes: scopes}
	if method == http.MethodGet {
		op.ReadOnly = true
	} else {
		op.Idempotency = KeyRequired
	}
	return op
}

// Register declares an operation and its handler. It panics on an inconsistent declaration so a
// bad registry never starts.
func Register[I, O any](s *Server, op Operation, h func(context.Context, *I) (*O, error)) {
	op = op.normalize()
	checkDeclaration[I, O](op)
	for _, existing := range s.ops {
		if existing.ID == op.ID {
			panic("api: duplicate operation " + op.ID)
		}
	}
	s.ops = append(s.ops, op)
	s.byPattern[op.Method+" "+op.Path] = op
	if _, ok := reflect.TypeFor[I]().FieldByName("Body"); ok && op.RawBody == nil {
		s.jsonBody[op.ID] = true // edgeCheck: a body needs a JSON Content-Type
	}
	huma.Register(s.API, *op.huma(reflect.TypeFor[I]()), func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if err != nil {
			failed(ctx, err) // the answer is written: huma has nothing left to send
			return nil, nil
		}
		return out, nil
	})
}

// Scoped declares an InWorkspace operation whose handler receives the authorized workspace
// scope.
func Scoped[I, O any](s *Server, op Operation, h func(context.Context, auth.Scope, *I) (*O, error)) {
	op.Access = InWorkspace
	Register(s, op, func(ctx context.Context, in *I) (*O, error) { return h(ctx, ScopeFrom(ctx), in) })
}

func (op Operation) normalize() Operation {
	if op.Idempotency == "" {
		op.Idempotency = NoIdempotency
	}
	if op.Lock == "" {
		op.Lock = NoLock
	}
	if op.Status == 0 {
		op.Status = http.StatusOK
		if op.Lock == CreateOnly {
			op.Status = http.StatusCreated
		}
	}
	return op
}

// checkDeclaration enforces the registry's rules on an operation and its Go types.
func checkDeclaration[I, O any](op Operation) {
	fail := func(format string, args ...any) { panic(fmt.Sprintf("api: operation "+op.ID+": "+format, args...)) }
	if op.ID == "" || op.Method == "" || op.Path == "" {
		panic("api: operation needs ID, method and path")
	}
	if !op.ReadOnly && op.Method == http.MethodGet {
		fail("a GET operation must be read-only")
	}
	if !op.ReadOnly && op.Idempotency == NoIdempotency {
		fail("writes but declares no idempotency rule")
	}
	if op.Access == InWorkspace && len(op.Scopes) == 0 {
		fail("a workspace operation declares no scope")
	}
	if op.Lock == CreateOnly && op.Status != http.StatusCreated {
		fail("a create answers 201")
	}
	in, out := reflect.TypeFor[I](), reflect.TypeFor[O]()
	if op.Status == http.StatusCreated && !hasField(out, "header", "Location") {
		fail("a 201 answer needs a Location header (use Created[T])")
	}
	if op.Status == http.StatusAccepted && !hasField(out, "header", "Location") {
		fail("a 202 answer needs a Location header to poll (use Accepted[T])")
	}
	switch op.Lock {
	case VersionLock:
		if body, ok := in.FieldByName("Body"); !ok || !hasField(body.Type, "json", "version") && !reflect.PointerTo(body.Type).Implements(baselineType) {
			fail("version-locked, but its body carries no version baseline")
		}
	case HashLock:
		if !hasField(in, "header", "If-Match") {
			fail("hash-locked, but its input carries no If-Match baseline")
		}
	}
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		if _, ok := idParams[m[1]]; !ok && strings.HasSuffix(m[1], "_id") {
			fail("path parameter %s is not an ID parameter of the registry", m[1])
		}
	}
}

// baselineType is what a version-locked body whose schema is its own says its baseline with.
var baselineType = reflect.TypeFor[interface{ Baseline() int64 }]()

// hasField reports whether t (a struct, through embedded structs) has a field whose tag key
// names name ("" for any name).
func hasField(t reflect.Type, key, name string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if v, _, _ := strings.Cut(f.Tag.Get(key), ","); v != "" && (name == "" || v == name) {
			return true
		}
		if f.Anonymous && hasField(f.Type, key, name) {
			return true
		}
	}
	return false
}

// huma is the huma operation the registry entry stands for: parameters derived from the access
// and idempotency rules and the path, error answers derived from the rules, declared bodies.
func (op Operation) huma(in reflect.Type) *huma.Operation {
	hop := &huma.Operation{
		OperationID:   op.ID,
		Method:        op.Method,
		Path:          op.Path,
		Summary:       op.Summary,
		Tags:          op.Tags,
		MaxBodyBytes:  op.MaxBodyBytes,
		DefaultStatus: op.Status,
		Security:      []map[string][]string{},
		Responses:     map[string]*huma.Response{},
		Errors:        op.errors(in),
	}
	if op.Access != Public {
		hop.Security = []map[string][]string{{"bearer": {}}}
	}
	if len(op.Scopes) > 0 {
		hop.Description = "Required scopes: " + strings.Join(scopeNames(op.Scopes), ", ") + "."
	}
	if len(op.OneOf) > 0 {
		var alts []string
		for _, a := range op.OneOf {
			alts = append(alts, strings.Join(scopeNames(a), " and "))
		}
		hop.Description += " And, by the kind of object it is about: " + strings.Join(alts, ", or ") + "."
	}
	hop.Extensions = map[string]any{
		"x-scopes":      scopeNames(op.Scopes),
		"x-idempotency": string(op.Idempotency),
		"x-read-only":   op.ReadOnly,
		"x-lock":        string(op.Lock),
	}
	if len(op.OneOf) > 0 {
		alts := make([][]string, len(op.OneOf))
		for i, a := range op.OneOf {
			alts[i] = scopeNames(a)
		}
		hop.Extensions["x-scopes-one-of"] = alts
	}
	if op.Access == InWorkspace && !strings.Contains(op.Path, "{workspace_id}") {
		hop.Parameters = append(hop.Parameters, &huma.Param{Name: cellproto.HeaderWorkspaceID, In: "header", Required: true,
			Description: "workspace of the call",
			Schema:      &huma.Schema{Type: huma.TypeString, Description: "workspace of the call", Pattern: ids.Pattern(ids.Workspace)}})
	}
	if op.Idempotency == KeyRequired {
		one, most := 1, 255
		hop.Parameters = append(hop.Parameters, &huma.Param{Name: "Idempotency-Key", In: "header", Required: true,
			Description: "replays the first answer for the same request",
			Schema: &huma.Schema{Type: huma.TypeString, Description: "replays the first answer for the same request",
				MinLength: &one, MaxLength: &most}})
	}
	for _, m := range pathParam.FindAllStringSubmatch(op.Path, -1) {
		if p, ok := idParams[m[1]]; ok {
			hop.Parameters = append(hop.Parameters, &huma.Param{Name: m[1], In: "path", Required: true, Description: p.doc,
				Schema: &huma.Schema{Type: huma.TypeString, Description: p.doc, Pattern: ids.Pattern(p.prefix)}})
		}
	}
	if op.RawBody != nil {
		hop.RequestBody = &huma.RequestBody{Required: true, Description: op.RawBody.Description, Content: binary(op.RawBody.Types)}
	}
	if op.Produces != nil {
		hop.Responses[fmt.Sprint(op.Status)] = &huma.Response{Description: op.Produces.Description, Content: binary(op.Produces.Types)}
	}
	for status, doc := range op.Also {
		hop.Responses[fmt.Sprint(status)] = &huma.Response{Description: doc}
	}
	return hop
}

// errors are the error statuses an operation can answer, from its rules and input (huma adds
// 500).
func (op Operation) errors(in reflect.Type) []int {
	var out []int
	if op.Access != Public {
		out = append(out, http.StatusUnauthorized)
	}
	if op.Access == InWorkspace {
		out = append(out, http.StatusForbidden)
	}
	if op.Access == InWorkspace || strings.Contains(op.Path, "{") {
		out = append(out, http.StatusNotFound)
	}
	if op.Idempotency == KeyRequired || op.Lock == VersionLock || op.Lock == HashLock {
		out = append(out, http.StatusConflict)
	}
	// 422: a request-schema error, including a missing or malformed X-Workspace-ID or
	// Idempotency-Key (the catalogue has no 400).
	if _, body := in.FieldByName("Body"); body || strings.Contains(op.Path, "{") || hasField(in, "query", "") ||
		op.Access == InWorkspace || op.Idempotency == KeyRequired || op.RawBody != nil {
		out = append(out, http.StatusUnprocessableEntity)
	}
	if op.RawBody != nil || op.MaxBodyBytes > 0 {
		out = append(out, http.StatusRequestEntityTooLarge)
	}
	if op.RawBody != nil {
		out = append(out, http.StatusUnsupportedMediaType)
	}
	if op.Access != Public {
		out = append(out, http.StatusTooManyRequests, http.StatusServiceUnavailable)
	}
	return append(out, http.StatusInternalServerError)
}

func binary(types []string) map[string]*huma.MediaType {
	content := map[string]*huma.MediaType{}
	for _, t := range types {
		if strings.HasPrefix(t, "text/") {
			content[t] = &huma.MediaType{Schema: &huma.Schema{Type: huma.TypeString}}
			continue
		}
		content[t] = &huma.MediaType{Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}
	}
	return content
}

func scopeNames(ps []auth.Permission) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// Allows reports whether a scope may call op at all: it holds op's scopes and one of its OneOf
// alternatives (the capabilities answer lists only such operations; the pipeline refuses the
// others with 403 before the handler).
func (op Operation) Allows(sc auth.Scope) error {
	if err := sc.Require(op.Scopes...); err != nil {
		return err
	}
	if len(op.OneOf) == 0 {
		return nil
	}
	var first error
	for _, a := range op.OneOf {
		err := sc.Require(a...)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Operations returns the registry, sorted by ID.
func (s *Server) Operations() []Operation {
	out := append([]Operation(nil), s.ops...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// OperationFor returns the operation routed at a mux pattern ("METHOD /path"), e.g. for metric
// labels.
func (s *Server) OperationFor(pattern string) (Operation, bool) {
	op, ok := s.byPattern[pattern]
	return op, ok
}
