package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"slidecells/cell/auth"
	"slidecells/cell/store"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// The generic resource layer: typed outputs, the object named by a path, and Kind, which
// declares the standard operations of a resource kind (get, list with cursor paging, archive,
// batch archive) and prefills the declarations of its create and versioned update.
// docs/adding-an-operation.md walks through it.

// Single is one object.
type Single[T any] struct {
	Body T
}

// Created is a new object: 201 with its address in Location.
type Created[T any] struct {
	Location string `header:"Location"`
	Body     T
}

// Accepted is work accepted for later: 202 with the address to poll in Location.
type Accepted[T any] struct {
	Location string `header:"Location"`
	Body     T
}

// Tagged is one object and its ETag: the quoted hash that is the baseline (If-Match) of its
// hash-locked edits.
type Tagged[T any] struct {
	ETag string `header:"ETag" doc:"the quoted hash that is the If-Match baseline of this object's hash-locked edits"`
	Body T
}

// Page is one page of a collection and the cursor of the next ("" on the last page).
type Page[T any] struct {
	Body struct {
		Items      []T    `json:"items"`
		NextCursor string `json:"next_cursor,omitempty"`
	}
}

// ListQuery pages a collection: limit, and the cursor of the previous page (opaque; see
// cursor.go). Its Resolve checks the cursor against the list it is sent to.
type ListQuery struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"200" default:"50" doc:"page size"`
	Cursor string `query:"cursor" maxLength:"512" doc:"next_cursor of the previous page of this same list; any other value is 422"`
	// list names the list the request reads; position is where the cursor says the page
	// starts after ("" for the first page).
	list, position string
}

// Resolve implements huma.Resolver: an unknown or foreign cursor is 422 at query.cursor.
func (q *ListQuery) Resolve(ctx huma.Context) []error {
	q.list = listIdentity(ctx)
	if q.Cursor == "" {
		return nil
	}
	pos, ok := decodeCursor(q.list, q.Cursor)
	if !ok {
		return []error{&huma.ErrorDetail{Location: "query.cursor", Value: q.Cursor,
			Message: "not a next_cursor of this list: send back the next_cursor of the previous page of the same list, or none for the first page"}}
	}
	q.position = pos
	return nil
}

// Position is where the requested page starts after: "" for the first page.
func (q ListQuery) Position() string { return q.position }

// paginate turns rows fetched with limit+1 into one page of views and the cursor of the next
// page: the extra row only says that more exist; position gives a row's place in the list.
func paginate[T, V any](rows []T, q ListQuery, position func(T) string, view func(T) (V, error)) (*Page[V], error) {
	out := &Page[V]{}
	out.Body.Items = make([]V, 0, min(len(rows), q.Limit))
	for i, r := range rows {
		if i == q.Limit {
			out.Body.NextCursor = encodeCursor(q.list, position(rows[i-1]))
			break
		}
		v, err := view(r)
		if err != nil {
			return nil, err
		}
		out.Body.Items = append(out.Body.Items, v)
	}
	return out, nil
}

// pageOf pages a list held in memory (small, bounded lists: workspaces, agents), ordered by
// position.
func pageOf[T any](items []T, q ListQuery, position func(T) string) *Page[T] {
	start := 0
	if q.position != "" {
		start = len(items)
		for i, it := range items {
			if position(it) > q.position {
				start = i
				break
			}
		}
	}
	out, _ := paginate(items[start:min(len(items), start+q.Limit+1)], q, position, func(t T) (T, error) { return t, nil })
	return out
}

// plain lifts a view that cannot fail.
func plain[T, V any](f func(T) V) func(T) (V, error) {
	return func(t T) (V, error) { return f(t), nil }
}

// ObjectID is the object an operation's path names: the last {…_id} path parameter other than
// workspace_id, checked against its shared/ids pattern (a 422 at path.<name> otherwise). The
// registry documents the parameter.
type ObjectID struct{ id string }

// ID is the object's ID.
func (o *ObjectID) ID() string { return o.id }

// Resolve implements huma.Resolver.
func (o *ObjectID) Resolve(ctx huma.Context) []error {
	ms := pathParam.FindAllStringSubmatch(ctx.Operation().Path, -1)
	for i := len(ms) - 1; i >= 0; i-- {
		name := ms[i][1]
		p, ok := idParams[name]
		if !ok || name == "workspace_id" {
			continue
		}
		o.id = ctx.Param(name)
		if !ids.Valid(p.prefix, o.id) {
			return []error{&huma.ErrorDetail{Location: "path." + name, Value: o.id,
				Message: "expected string to match pattern " + ids.Pattern(p.prefix)}}
		}
		return nil
	}
	return nil
}

// Table is what the resource layer needs of a kind's storage (store.Bind makes one of a
// store's table): its names, an object's ID, and the reads and the archive of live objects.
type Table[R any] interface {
	Plural() string   // e.g. "projects": the collection's path segment
	Singular() string // e.g. "project"
	ID(r R) string    // the object's ID, also the cursor of lists
	Get(ctx context.Context, sc auth.Scope, id string) (R, error)
	List(ctx context.Context, sc auth.Scope, cursor string, limit int) ([]R, error)
	Archive(ctx context.Context, sc auth.Scope, ids []string) error
}

// Kind declares a standard resource kind under /api/v1/<plural>: R is the domain object, V the
// view. Its table gives the get, list and archive operations their reads and writes.
type Kind[R, V any] struct {
	Rows  Table[R]
	Read  auth.Permission
	Write auth.Permission
	View  func(sc auth.Scope, r R) (V, error)
	// OwnList leaves the list operation to the kind (e.g. one with filters).
	OwnList bool
	// CreateSummary and UpdateSummary describe the kind's create and versioned update.
	CreateSummary, UpdateSummary string
	// ETag, when set, gives the detail read an ETag: the hash its hash-locked edits carry in
	// If-Match (a component's draft_hash).
	ETag func(R) string
	// Archived, when set, is told the IDs archived (after the archive committed): a page's
	// unfinished render work is cancelled.
	Archived func(ctx context.Context, sc auth.Scope, ids []string)
}

// RegisterKind registers a kind's standard operations (Register) with its create (201 with
// Location) and its versioned update. Their handlers get the store and return the row written.
func RegisterKind[R, V, C, U any](s *Server, st *store.Store, k Kind[R, V],
	create func(context.Context, *store.Store, auth.Scope, *C) (R, error), update func(context.Context, *store.Store, auth.Scope, *U) (R, error)) {
	k.Register(s)
	Scoped(s, k.CreateOp(k.CreateSummary), func(ctx context.Context, sc auth.Scope, in *C) (*Created[V], error) {
		r, err := create(ctx, st, sc, in)
		return k.Created(sc, r, err)
	})
	Scoped(s, k.UpdateOp(k.UpdateSummary), func(ctx context.Context, sc auth.Scope, in *U) (*Single[V], error) {
		return k.One(sc)(update(ctx, st, sc, in))
	})
}

func (k Kind[R, V]) collection() string { return "/api/v1/" + k.Rows.Plural() }
func (k Kind[R, V]) item() string       { return k.collection() + "/{" + k.Rows.Singular() + "_id}" }

func (k Kind[R, V]) op(id, method, path, summary string, scope auth.Permission) Operation {
	return Op(id, method, path, summary, k.Rows.Plural(), scope)
}

// CreateOp declares the kind's create: POST /api/v1/<plural>, 201 with Location.
func (k Kind[R, V]) CreateOp(summary string) Operation {
	op := k.op("create-"+k.Rows.Singular(), http.MethodPost, k.collection(), summary, k.Write)
	op.Lock = CreateOnly
	return op
}

// UpdateOp declares the kind's versioned update: PATCH /api/v1/<plural>/{id}.
func (k Kind[R, V]) UpdateOp(summary string) Operation {
	op := k.op("update-"+k.Rows.Singular(), http.MethodPatch, k.item(), summary, k.Write)
	op.Lock = VersionLock
	return op
}

// Created answers a new row: 201, its Location and its view.
func (k Kind[R, V]) Created(sc auth.Scope, r R, err error) (*Created[V], error) {
	if err != nil {
		return nil, err
	}
	v, err := k.View(sc, r)
	if err != nil {
		return nil, err
	}
	return &Created[V]{Location: k.collection() + "/" + k.Rows.ID(r), Body: v}, nil
}

// One answers a row read or written: its view.
func (k Kind[R, V]) One(sc auth.Scope) func(R, error) (*Single[V], error) {
	return one(sc, k.View)
}

// Page answers rows fetched with limit+1.
func (k Kind[R, V]) Page(sc auth.Scope, rows []R, q ListQuery, err error) (*Page[V], error) {
	if err != nil {
		return nil, err
	}
	return paginate(rows, q, k.Rows.ID, func(r R) (V, error) { return k.View(sc, r) })
}

// Register adds the standard operations: list (unless OwnList), get, archive, batch archive.
func (k Kind[R, V]) Register(s *Server) {
	one, many := k.Rows.Singular(), k.Rows.Plural()
	if !k.OwnList {
		Scoped(s, k.op("list-"+many, http.MethodGet, k.collection(), "List "+many, k.Read),
			func(ctx context.Context, sc auth.Scope, in *ListQuery) (*Page[V], error) {
				rows, err := k.Rows.List(ctx, sc, in.Position(), in.Limit+1)
				return k.Page(sc, rows, *in, err)
			})
	}
	get := k.op("get-"+one, http.MethodGet, k.item(), strings.ToUpper(one[:1])+one[1:]+" detail", k.Read)
	if k.ETag != nil {
		Scoped(s, get, func(ctx context.Context, sc auth.Scope, in *ObjectID) (*Tagged[V], error) {
			r, err := k.Rows.Get(ctx, sc, in.ID())
			out, err := k.One(sc)(r, err)
			if err != nil {
				return nil, err
			}
			return &Tagged[V]{ETag: `"` + k.ETag(r) + `"`, Body: out.Body}, nil
		})
	} else {
		Scoped(s, get, func(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[V], error) {
			return k.One(sc)(k.Rows.Get(ctx, sc, in.ID()))
		})
	}
	Scoped(s, k.op("archive-"+one, http.MethodPost, k.item()+"/archive", "Archive a "+one+" (no restore, no hard delete)", k.Write),
		func(ctx context.Context, sc auth.Scope, in *ObjectID) (*ArchiveOutput, error) {
			return k.archived(ctx, sc, k.Rows.Archive(ctx, sc, []string{in.ID()}), []string{in.ID()})
		})
	Scoped(s, k.op("archive-"+many, http.MethodPost, k.collection()+"/archive", "Archive up to 100 "+many+" at once, all or nothing", k.Write),
		func(ctx context.Context, sc auth.Scope, in *ArchiveBatch) (*ArchiveOutput, error) {
			if !in.Body.Confirm {
				return nil, problem.Invalid(problem.FieldError{Field: "body.confirm", Message: "must be true: archived objects cannot be restored"})
			}
			return k.archived(ctx, sc, k.Rows.Archive(ctx, sc, in.Body.IDs), in.Body.IDs)
		})
}

// ArchiveBatch archives several objects, all or nothing.
type ArchiveBatch struct {
	Body struct {
		IDs     []string `json:"ids" minItems:"1" maxItems:"100" doc:"IDs to archive; at most 100"`
		Confirm bool     `json:"confirm" doc:"must be true: archiving cannot be undone (there is no restore)"`
	}
}

// ArchiveOutput reports an archive.
type ArchiveOutput struct {
	Body struct {
		Archived []string `json:"archived"`
	}
}

func (k Kind[R, V]) archived(ctx context.Context, sc auth.Scope, err error, ids []string) (*ArchiveOutput, error) {
	if err == nil && k.Archived != nil {
		k.Archived(ctx, sc, ids)
	}
	return archived(err, ids)
}

func archived(err error, ids []string) (*ArchiveOutput, error) {
	if err != nil {
		return nil, err
	}
	out := &ArchiveOutput{}
	out.Body.Archived = ids
	return out, nil
}

// one answers a row read or written through its view.
func one[R, V any](sc auth.Scope, view func(auth.Scope, R) (V, error)) func(R, error) (*Single[V], error) {
	return func(r R, err error) (*Single[V], error) {
		if err != nil {
			return nil, err
		}
		v, err := view(sc, r)
		if err != nil {
			return nil, err
		}
		return &Single[V]{Body: v}, nil
	}
}
