package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// Validations are read-only: no idempotency semantics, nothing written. Their render stage needs
// the render control plane, which is not built yet: a source that compiles answers valid=false,
// status=unavailable and an infrastructure code — never "passed", never "source has errors".

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
		ReadOnly: true, Scopes: []auth.Permission{auth.WorkspaceRead}, MaxBodyBytes: 1 << 20,
		Summary: "Validate a page or component: its current source, a given content, or an edit of a version (needs the entity kind's read scope)"}, h.entity)
}

func (h *validateAPI) page(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[authoring.Validation], error) {
	v, err := h.st.PageVersion(ctx, sc, in.ID(), 0)
	if err != nil {
		return nil, err
	}
	return single(h.svc.ValidatePage(ctx, sc, v.FileType, v.Source))
}

func (h *validateAPI) component(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[authoring.Validation], error) {
	c, err := h.st.ComponentDraft(ctx, sc, in.ID())
	if err != nil {
		return nil, err
	}
	return single(h.svc.ValidateComponent(ctx, sc, c.Key, c.FileType, c.Source))
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

func (h *validateAPI) entity(ctx context.Context, sc auth.Scope, in *validateEntityIn) (*Single[authoring.Validation], error) {
	b := in.Body
	need := func(ok bool, field, msg string) error {
		if ok {
			return nil
		}
		return problem.Invalid(problem.FieldError{Field: "body." + field, Message: msg})
	}
	if b.EntityType == "component" {
		if err := sc.Require(auth.ComponentRead); err != nil {
			return nil, err
		}
		if b.Mode == "content" {
			if err := need(b.Source != "", "source", "required in content mode"); err != nil {
				return nil, err
			}
			return single(h.svc.ValidateComponent(ctx, sc, "", b.FileType, b.Source))
		}
		if err := need(b.EntityID != "", "entity_id", "required in "+b.Mode+" mode"); err != nil {
			return nil, err
		}
		c, err := h.st.ComponentDraft(ctx, sc, b.EntityID)
		if err != nil {
			return nil, err
		}
		src, ft := c.Source, c.FileType
		if b.Mode == "edits" {
			if err := need(b.Source != "", "source", "required in edits mode"); err != nil {
				return nil, err
			}
			src = b.Source
			if b.FileType != "" {
				ft = b.FileType
			}
		}
		return single(h.svc.ValidateComponent(ctx, sc, c.Key, ft, src))
	}
	if err := sc.Require(auth.PageRead); err != nil {
		return nil, err
	}
	switch b.Mode {
	case "content":
		if err := need(b.Source != "" && b.FileType != "", "source", "source and file_type are required in content mode"); err != nil {
			return nil, err
		}
		return single(h.svc.ValidatePage(ctx, sc, b.FileType, b.Source))
	case "edits":
		if err := need(b.EntityID != "" && b.Version > 0 && b.Source != "", "entity_id", "entity_id, version and source are required in edits mode"); err != nil {
			return nil, err
		}
		p, err := h.st.CheckPageBaseline(ctx, sc, b.EntityID, b.Version)
		if err != nil {
			return nil, err
		}
		ft := b.FileType
		if ft == "" {
			ft = p.FileType
		}
		return single(h.svc.ValidatePage(ctx, sc, ft, b.Source))
	default:
		if err := need(b.EntityID != "", "entity_id", "required in current mode"); err != nil {
			return nil, err
		}
		v, err := h.st.PageVersion(ctx, sc, b.EntityID, 0)
		if err != nil {
			return nil, err
		}
		return single(h.svc.ValidatePage(ctx, sc, v.FileType, v.Source))
	}
}

func single[T any](v T, err error) (*Single[T], error) {
	if err != nil {
		return nil, err
	}
	return &Single[T]{Body: v}, nil
}
