package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/jobs"
	"slidecells/cell/store"
)

type componentsAPI struct {
	st  *store.Store
	svc *authoring.Service
}

func (s *Server) registerComponents(st *store.Store, svc *authoring.Service) {
	h := &componentsAPI{st: st, svc: svc}
	k := Kind[store.Component, authoring.ComponentView]{Store: store.Components, Single: "component", Read: auth.ComponentRead, Write: auth.ComponentWrite,
		Get: st.GetComponent, List: st.ListComponents, ID: func(c store.Component) string { return c.ID }, View: authoring.ComponentOf}
	k.Register(s, st)
	tags := []string{"components"}
	read := []auth.Permission{auth.ComponentRead}
	write := []auth.Permission{auth.ComponentWrite}
	Scoped(s, Operation{ID: "get-component-source", Method: http.MethodGet, Path: "/api/v1/components/{component_id}/source", Tags: tags, ReadOnly: true,
		Summary: "A component's draft source, or a published version (?version=N)", Scopes: read}, h.source)
	Scoped(s, Operation{ID: "list-component-versions", Method: http.MethodGet, Path: "/api/v1/components/{component_id}/versions", Tags: tags, ReadOnly: true,
		Summary: "Published versions of a component, newest first", Scopes: read}, h.versions)
	Scoped(s, Operation{ID: "get-component-dependencies", Method: http.MethodGet, Path: "/api/v1/components/{component_id}/dependencies", Tags: tags, ReadOnly: true,
		Summary: "Components the latest published version uses, recursively, with the versions resolved", Scopes: read}, h.dependencies)
	Scoped(s, Operation{ID: "publish-component", Method: http.MethodPost, Path: "/api/v1/components/{component_id}/publish", Tags: tags,
		Idempotency: KeyRequired, Lock: HashLock, Scopes: write,
		Summary: "Freeze the draft (its hash in If-Match) as the next published version; the draft must compile"}, h.publish)
	submit := func(id, path, summary string) Operation {
		return Operation{ID: id, Method: http.MethodPost, Path: path, Tags: tags, Idempotency: KeyRequired, Status: http.StatusAccepted,
			Summary: summary, Scopes: write}
	}
	Scoped(s, submit("create-component", "/api/v1/components", "Create a component (its first draft) through a mutation job"), h.create)
	Scoped(s, submit("submit-component-create-job", jobsPath+"/components", "Create a component through a mutation job"), h.create)
	edit := submit("edit-component", "/api/v1/components/{component_id}/edits", "Replace a component's draft through a mutation job (the draft hash read in If-Match)")
	edit.Lock = HashLock
	Scoped(s, edit, h.edit)
	editJob := submit("submit-component-edit-job", jobsPath+"/components/edits", "Replace a component's draft through a mutation job (component_id in the body, the draft hash in If-Match)")
	editJob.Lock = HashLock
	Scoped(s, editJob, h.editJob)
	meta := submit("submit-component-metadata-job", jobsPath+"/components/metadata", "Change a component's title, description or tags through a mutation job (metadata_version-locked)")
	meta.Lock = VersionLock
	Scoped(s, meta, h.metadata)
}

func (h *componentsAPI) source(ctx context.Context, sc auth.Scope, in *sourceIn) (*Single[authoring.VersionView], error) {
	if in.Version == 0 {
		c, err := h.st.GetComponent(ctx, sc, in.ID())
		return single(authoring.DraftOf(c), err)
	}
	v, err := h.st.ComponentVersion(ctx, sc, in.ID(), in.Version)
	return single(authoring.VersionOf(v, true), err)
}

func (h *componentsAPI) versions(ctx context.Context, sc auth.Scope, in *versionsIn) (*VersionPage, error) {
	vs, err := h.st.ComponentVersions(ctx, sc, in.ID(), in.Before, in.Limit+1)
	return versionPage(vs, in.Limit, err)
}

func (h *componentsAPI) dependencies(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[authoring.DependenciesView], error) {
	v, err := h.st.ComponentVersion(ctx, sc, in.ID(), 0)
	return single(authoring.DependenciesOf(in.ID(), v), err)
}

type publishIn = struct {
	ObjectID
	IfMatch string `header:"If-Match" maxLength:"80" doc:"the draft_hash you read; a stale one is 409 VERSION_CONFLICT"`
}

func (h *componentsAPI) publish(ctx context.Context, sc auth.Scope, in *publishIn) (*Single[authoring.ComponentView], error) {
	c, err := h.svc.Publish(ctx, sc, in.ID(), unquote(in.IfMatch))
	if err != nil {
		return nil, err
	}
	v, err := authoring.ComponentOf(sc, c)
	return single(v, err)
}

type createComponentIn = struct {
	Body struct {
		Key      string `json:"key" pattern:"^[a-z][a-z0-9-]{0,63}$" doc:"imported as @components/<key>; unique among live components"`
		Title    string `json:"title,omitempty" maxLength:"200"`
		FileType string `json:"file_type" enum:"tsx,jsx"`
		Source   string `json:"source" minLength:"1" maxLength:"262144"`
		JobOptions
	}
}

func (h *componentsAPI) create(ctx context.Context, sc auth.Scope, in *createComponentIn) (*Accepted[jobs.JobView], error) {
	b := in.Body
	return accepted(h.svc.SubmitComponentCreate(ctx, sc, authoring.ComponentCreate{Key: b.Key, Title: b.Title, FileType: b.FileType, Source: b.Source}, b.MaxAttempts))
}

// ComponentEditBody is a new draft.
type ComponentEditBody struct {
	FileType string `json:"file_type,omitempty" enum:"tsx,jsx" doc:"default: the component's current file type"`
	Source   string `json:"source" minLength:"1" maxLength:"262144"`
	JobOptions
}

type editComponentIn = struct {
	ObjectID
	IfMatch string `header:"If-Match" maxLength:"80" doc:"the draft_hash you read; a stale one is 409 VERSION_CONFLICT"`
	Body    ComponentEditBody
}

func (h *componentsAPI) edit(ctx context.Context, sc auth.Scope, in *editComponentIn) (*Accepted[jobs.JobView], error) {
	return accepted(h.svc.SubmitComponentEdit(ctx, sc, authoring.ComponentEdit{ComponentID: in.ID(), DraftHash: unquote(in.IfMatch),
		FileType: in.Body.FileType, Source: in.Body.Source}, in.Body.MaxAttempts))
}

type editComponentJobIn = struct {
	IfMatch string `header:"If-Match" maxLength:"80" doc:"the draft_hash you read"`
	Body    struct {
		ComponentID string `json:"component_id" pattern:"^cmp_[a-z2-7]{26}$"`
		ComponentEditBody
	}
}

func (h *componentsAPI) editJob(ctx context.Context, sc auth.Scope, in *editComponentJobIn) (*Accepted[jobs.JobView], error) {
	return accepted(h.svc.SubmitComponentEdit(ctx, sc, authoring.ComponentEdit{ComponentID: in.Body.ComponentID, DraftHash: unquote(in.IfMatch),
		FileType: in.Body.FileType, Source: in.Body.Source}, in.Body.MaxAttempts))
}

type componentMetadataIn = struct {
	Body struct {
		ComponentID string   `json:"component_id" pattern:"^cmp_[a-z2-7]{26}$"`
		Version     int64    `json:"version" minimum:"1" doc:"the metadata_version you read"`
		Title       *string  `json:"title,omitempty" maxLength:"200"`
		Description *string  `json:"description,omitempty" maxLength:"2000"`
		Tags        []string `json:"tags,omitempty" maxItems:"32" doc:"replaces the tags"`
		JobOptions
	}
}

func (h *componentsAPI) metadata(ctx context.Context, sc auth.Scope, in *componentMetadataIn) (*Accepted[jobs.JobView], error) {
	b := in.Body
	return accepted(h.svc.SubmitComponentMetadata(ctx, sc, authoring.ComponentMetadata{ComponentID: b.ComponentID, MetadataVersion: b.Version,
		Title: b.Title, Description: b.Description, Tags: b.Tags}, b.MaxAttempts))
}

// unquote takes an If-Match value with or without its quotes.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
