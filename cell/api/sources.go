package api

import (
	"context"
	"net/http"
	"strconv"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/content"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// sources are the operations every kind of versioned source (pages, components) has, written
// once: the standard reads and archives of its Kind, its source (or one version of it), its
// history, the dependencies of its current version, and the declarations of its mutation-job
// submissions.
type sources[R store.Row, V any] struct {
	Kind[R, V]
	src store.Sourced[R]
	st  *store.Store
	svc *authoring.Service
	// draft shows the current source when it is not a version (a component's draft).
	draft func(R) VersionView
	// unpublished says an object has no version yet (a component before its first publish).
	unpublished func(R) bool
}

// sourceDocs are the summaries of a kind's source reads.
type sourceDocs struct{ source, versions, dependencies string }

// register adds the kind's standard operations and its source reads.
func (h *sources[R, V]) register(s *Server, docs sourceDocs) {
	h.Register(s)
	one := h.Rows.Singular()
	read := func(id, suffix, summary string) Operation {
		return h.op(id, http.MethodGet, h.item()+suffix, summary, h.Read)
	}
	Scoped(s, read("get-"+one+"-source", "/source", docs.source), h.source)
	Scoped(s, read("list-"+one+"-versions", "/versions", docs.versions), h.versions)
	Scoped(s, read("get-"+one+"-dependencies", "/dependencies", docs.dependencies), h.dependencies)
}

// jobOp declares the submission of one of the kind's mutation jobs: 202 with the job to poll at
// Location.
func (h *sources[R, V]) jobOp(id, path, summary string, lock Lock) Operation {
	op := h.op(id, http.MethodPost, path, summary, h.Write)
	op.Status, op.Lock, op.MaxBodyBytes = http.StatusAccepted, lock, SourceBodyBytes
	return op
}

type sourceIn = struct {
	ObjectID
	Version int64 `query:"version" minimum:"0" doc:"a version number; 0 or absent: the current one"`
}

// source answers a draft with its draft_hash as ETag (the If-Match baseline of its edits and
// publish); a version is immutable and has none.
func (h *sources[R, V]) source(ctx context.Context, sc auth.Scope, in *sourceIn) (*Tagged[VersionView], error) {
	if in.Version == 0 && h.draft != nil {
		r, err := h.Rows.Get(ctx, sc, in.ID())
		if err != nil {
			return nil, err
		}
		d := h.draft(r)
		return &Tagged[VersionView]{ETag: `"` + d.DraftHash + `"`, Body: d}, nil
	}
	v, err := h.src.Version(ctx, h.st, sc, in.ID(), in.Version)
	if err != nil {
		return nil, err
	}
	return &Tagged[VersionView]{Body: VersionOf(v, true)}, nil
}

type versionsIn = struct {
	ObjectID
	ListQuery
}

func (h *sources[R, V]) versions(ctx context.Context, sc auth.Scope, in *versionsIn) (*Page[VersionView], error) {
	var before int64
	if p := in.Position(); p != "" {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 1 {
			return nil, problem.Invalid(problem.FieldError{Field: "query.cursor", Message: "not a next_cursor of this list"})
		}
		before = n
	}
	vs, err := h.src.Versions(ctx, h.st, sc, in.ID(), before, in.Limit+1)
	if err != nil {
		return nil, err
	}
	return paginate(vs, in.ListQuery, func(v content.SourceVersion) string { return strconv.FormatInt(v.Version, 10) },
		plain(func(v content.SourceVersion) VersionView { return VersionOf(v, false) }))
}

func (h *sources[R, V]) dependencies(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[DependenciesView], error) {
	if h.unpublished != nil {
		// A live component never published has no resolved dependencies yet (they are
		// resolved at publish): version 0 and an empty list, not the 404 of an absent one.
		r, err := h.Rows.Get(ctx, sc, in.ID())
		if err != nil {
			return nil, err
		}
		if h.unpublished(r) {
			return single(DependenciesView{ObjectID: in.ID(), Dependencies: []DependencyView{}}, nil)
		}
	}
	v, err := h.src.Version(ctx, h.st, sc, in.ID(), 0)
	return single(DependenciesOf(in.ID(), v), err)
}

// MetadataEdit changes the safe metadata of a page or a component (never its source), locked by
// metadata_version; absent fields keep their value. The baseline is named for what it is: a
// page's `version` is its source version, which a metadata change does not use.
type MetadataEdit struct {
	MetadataVersion int64    `json:"metadata_version" minimum:"1" doc:"the metadata_version you read (not the source version); a stale one is 409 VERSION_CONFLICT naming the current metadata_version"`
	Title           *string  `json:"title,omitempty" maxLength:"200"`
	Description     *string  `json:"description,omitempty" maxLength:"2000"`
	Tags            []string `json:"tags,omitempty" maxItems:"32" doc:"replaces the tags"`
}

// Baseline is the metadata_version the edit was read at (the registry's version lock).
func (m *MetadataEdit) Baseline() int64 { return m.MetadataVersion }
