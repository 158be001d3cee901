package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/content"
	"slidecells/cell/store"
)

// componentsAPI are the component operations: a draft changed through mutation jobs, published
// as immutable versions.
type componentsAPI struct {
	*sources[content.Component, ComponentView]
}

func (s *Server) registerComponents(st *store.Store, svc *authoring.Service) {
	h := &componentsAPI{&sources[content.Component, ComponentView]{st: st, svc: svc, src: store.Components, draft: DraftOf,
		unpublished: func(c content.Component) bool { return c.PublishedVersion == 0 },
		Kind: Kind[content.Component, ComponentView]{Rows: store.Bind(st, store.Components.Table), Read: auth.ComponentRead, Write: auth.ComponentWrite, View: ComponentOf,
			ETag: func(c content.Component) string { return c.DraftHash }}}}
	h.register(s, sourceDocs{source: "A component's draft source, or a published version (?version=N)",
		versions:     "Published versions of a component, newest first",
		dependencies: "Components the latest published version uses, recursively, with the versions resolved (version 0 and none before the first publish)"})
	publish := h.op("publish-component", http.MethodPost, h.item()+"/publish", "Freeze the draft (its hash in If-Match) as the next published version; the draft must compile", h.Write)
	publish.Lock = HashLock
	Scoped(s, publish, h.publish)
	Scoped(s, h.jobOp("create-component", h.collection(), "Create a component (its first draft) through a mutation job", NoLock), h.create)
	Scoped(s, h.jobOp("submit-component-create-job", jobsPath+"/components", "Create a component through a mutation job", NoLock), h.create)
	Scoped(s, h.jobOp("edit-component", h.item()+"/edits", "Replace a component's draft through a mutation job (the draft hash read in If-Match)", HashLock), h.edit)
	Scoped(s, h.jobOp("submit-component-edit-job", jobsPath+"/components/edits",
		"Replace a component's draft through a mutation job (component_id in the body, the draft hash in If-Match)", HashLock), h.editJob)
	Scoped(s, h.UpdateOp("Change a component's safe metadata (title, description, tags; never its draft or versions), locked by metadata_version"), h.updateMetadata)
	Scoped(s, h.jobOp("submit-component-metadata-job", jobsPath+"/components/metadata",
		"Change a component's title, description or tags through a mutation job (metadata_version-locked)", VersionLock), h.metadata)
}

type publishIn = struct {
	ObjectID
	IfMatch string `header:"If-Match" required:"true" maxLength:"80" doc:"the draft_hash you read (the ETag of the component and of its draft source); a stale one is 409 VERSION_CONFLICT"`
}

func (h *componentsAPI) publish(ctx context.Context, sc auth.Scope, in *publishIn) (*Single[ComponentView], error) {
	c, err := h.svc.Publish(ctx, sc, in.ID(), unquote(in.IfMatch))
	return h.One(sc)(c, fieldAt(err, content.DraftHashField, "header.If-Match"))
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

func (h *componentsAPI) create(ctx context.Context, sc auth.Scope, in *createComponentIn) (*Accepted[JobView], error) {
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
	IfMatch string `header:"If-Match" required:"true" maxLength:"80" doc:"the draft_hash you read (the ETag of the component and of its draft source); a stale one is 409 VERSION_CONFLICT"`
	Body    ComponentEditBody
}

func (h *componentsAPI) edit(ctx context.Context, sc auth.Scope, in *editComponentIn) (*Accepted[JobView], error) {
	return h.submitEdit(ctx, sc, in.ID(), in.IfMatch, in.Body)
}

type editComponentJobIn = struct {
	IfMatch string `header:"If-Match" required:"true" maxLength:"80" doc:"the draft_hash you read (the ETag of the component and of its draft source); a stale one is 409 VERSION_CONFLICT"`
	Body    struct {
		ComponentID string `json:"component_id" pattern:"^cmp_[a-z2-7]{26}$"`
		ComponentEditBody
	}
}

func (h *componentsAPI) editJob(ctx context.Context, sc auth.Scope, in *editComponentJobIn) (*Accepted[JobView], error) {
	return h.submitEdit(ctx, sc, in.Body.ComponentID, in.IfMatch, in.Body.ComponentEditBody)
}

func (h *componentsAPI) submitEdit(ctx context.Context, sc auth.Scope, id, ifMatch string, b ComponentEditBody) (*Accepted[JobView], error) {
	j, err := h.svc.SubmitComponentEdit(ctx, sc, authoring.ComponentEdit{ComponentID: id, DraftHash: unquote(ifMatch),
		FileType: b.FileType, Source: b.Source}, b.MaxAttempts)
	return accepted(j, fieldAt(err, content.DraftHashField, "header.If-Match"))
}

type componentMetadataIn = struct {
	Body struct {
		ComponentID string `json:"component_id" pattern:"^cmp_[a-z2-7]{26}$"`
		MetadataEdit
		JobOptions
	}
}

func (h *componentsAPI) metadata(ctx context.Context, sc auth.Scope, in *componentMetadataIn) (*Accepted[JobView], error) {
	b := in.Body
	return accepted(h.svc.SubmitComponentMetadata(ctx, sc, authoring.ComponentMetadata{ComponentID: b.ComponentID, MetadataVersion: b.MetadataVersion,
		Title: b.Title, Description: b.Description, Tags: b.Tags}, b.MaxAttempts))
}

type updateComponentIn = struct {
	ObjectID
	Body struct{ MetadataEdit }
}

func (h *componentsAPI) updateMetadata(ctx context.Context, sc auth.Scope, in *updateComponentIn) (*Single[ComponentView], error) {
	b := in.Body
	return h.One(sc)(store.Components.UpdateMetadata(ctx, h.st, sc, in.ID(), b.MetadataVersion, b.Title, b.Description, b.Tags))
}

// unquote takes an If-Match value with or without its quotes.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
