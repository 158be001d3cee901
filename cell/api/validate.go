package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/store"
)

// Validations are read-only: no idempotency semantics, no business write (the render request
// they create is the render stage's own record). The render stage is a page.diagnose or
// component.diagnose through the render control plane; when it cannot run the answer is
// valid=false, status=unavailable and an infrastructure code — never "passed", never "source
// has errors".

type validateAPI struct {
	st  *store.Store
	svc *authoring.Service
}

func (s *Server) registerValidation(st *store.Store, svc *authoring.Service) {
	h := &validateAPI{st: st, svc: svc}
	Scoped(s, Operation{ID: "validate-page", Method: http.MethodPost, Path: "/api/v1/pages/{page_id}/validate", Tags: []string{"pages"},
		ReadOnly: true, Scopes: []auth.Permission{auth.PageRead}, Summary: "Validate a page's current source (compile and render stages)"}, h.page)
	Scoped(s, Operation{ID: "validate-component", Method: http.MethodPost, Path: "/api/v1/components/{component_id}/validate", Tags: []string{"components"},
		ReadOnly: true, Scopes: []auth.Permission{auth.ComponentRead}, Summary: "Validate a component's draft (compile and render stages)"}, h.component)
	Scoped(s, Operation{ID: "validate-entity", Method: http.MethodPost, Path: "/api/v1/validate/entity", Tags: []string{"validation"},
		ReadOnly: true, Scopes: []auth.Permission{auth.WorkspaceRead}, OneOf: [][]auth.Permission{{auth.PageRead}, {auth.ComponentRead}}, MaxBodyBytes: SourceBodyBytes,
		Summary: "Validate a page or component: its current source, a given content, or an edit of a version (needs the entity kind's read scope)"}, h.entity)
}

func (h *validateAPI) page(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[Validation], error) {
	v, err := h.st.PageVersion(ctx, sc, in.ID(), 0)
	if err != nil {
		return nil, err
	}
	return validationOf(h.svc.ValidatePage(ctx, sc, h.svc.PageTarget(ctx, sc, in.ID()), v.FileType, v.Source))
}

func (h *validateAPI) component(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[Validation], error) {
	c, err := h.st.ComponentDraft(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	return validationOf(h.svc.ValidateComponent(ctx, sc, c.Key, c.FileType, c.Source))
}

type validateEntityIn = struct {
	Body struct {
		EntityType string `json:"entity_type" enum:"page,component"`
		Mode       string `json:"mode" enum:"current,content,edits" doc:"current: the entity's current source; content: the source given; edits: the source given as an edit of entity_id at version (a stale version is 409)"`
		EntityID   string `json:"entity_id,omitempty" maxLength:"64" doc:"required for current and edits"`
		Version    int64  `json:"version,omitempty" minimum:"0" doc:"edits of a page: the version the edit is based on"`
		FileType   string `json:"file_type,omitempty" enum:"tsx,jsx,html"`
		Source     string `json:"source,omitempty" maxLength:"524288"`
	}
}

func (h *validateAPI) entity(ctx context.Context, sc auth.Scope, in *validateEntityIn) (*Single[Validation], error) {
	return validationOf(h.svc.ValidateEntity(ctx, sc, authoring.EntityRequest(in.Body)))
}

func single[T any](v T, err error) (*Single[T], error) {
	if err != nil {
		return nil, err
	}
	return &Single[T]{Body: v}, nil
}
