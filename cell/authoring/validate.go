package authoring

import (
	"context"

	"slidecells/cell/auth"
	"slidecells/shared/problem"
)

// EntityRequest is a validation of a page or component: its current source (mode current), a
// source given (content), or a source given as an edit of the entity at a version (edits).
type EntityRequest struct {
	EntityType string
	Mode       string
	EntityID   string
	Version    int64
	FileType   string
	Source     string
}

// ValidateEntity validates what the request names, after checking the entity kind's read scope.
func (s *Service) ValidateEntity(ctx context.Context, sc auth.Scope, r EntityRequest) (Validation, error) {
	need := func(ok bool, field, msg string) error {
		if ok {
			return nil
		}
		return problem.Invalid(problem.FieldError{Field: field, Message: msg})
	}
	if r.EntityType == "component" {
		if err := sc.Require(auth.ComponentRead); err != nil {
			return Validation{}, err
		}
		if r.Mode == "content" {
			if err := need(r.Source != "", "source", "required in content mode"); err != nil {
				return Validation{}, err
			}
			return s.ValidateComponent(ctx, sc, "", r.FileType, r.Source)
		}
		if err := need(r.EntityID != "", "entity_id", "required in "+r.Mode+" mode"); err != nil {
			return Validation{}, err
		}
		c, err := s.Store.ComponentDraft(ctx, sc, r.EntityID)
		if err != nil {
			return Validation{}, err
		}
		src, ft := c.Source, c.FileType
		if r.Mode == "edits" {
			if err := need(r.Source != "", "source", "required in edits mode"); err != nil {
				return Validation{}, err
			}
			src = r.Source
			if r.FileType != "" {
				ft = r.FileType
			}
		}
		return s.ValidateComponent(ctx, sc, c.Key, ft, src)
	}
	if err := sc.Require(auth.PageRead); err != nil {
		return Validation{}, err
	}
	switch r.Mode {
	case "content":
		if err := need(r.Source != "" && r.FileType != "", "source", "source and file_type are required in content mode"); err != nil {
			return Validation{}, err
		}
		return s.ValidatePage(ctx, sc, Target{}, r.FileType, r.Source)
	case "edits":
		if err := need(r.EntityID != "" && r.Version > 0 && r.Source != "", "entity_id", "entity_id, version and source are required in edits mode"); err != nil {
			return Validation{}, err
		}
		p, err := s.Store.CheckPageBaseline(ctx, sc, r.EntityID, r.Version)
		if err != nil {
			return Validation{}, err
		}
		ft := r.FileType
		if ft == "" {
			ft = p.FileType
		}
		return s.ValidatePage(ctx, sc, s.PageTarget(ctx, sc, r.EntityID), ft, r.Source)
	default:
		if err := need(r.EntityID != "", "entity_id", "required in current mode"); err != nil {
			return Validation{}, err
		}
		v, err := s.Store.PageVersion(ctx, sc, r.EntityID, 0)
		if err != nil {
			return Validation{}, err
		}
		return s.ValidatePage(ctx, sc, s.PageTarget(ctx, sc, r.EntityID), v.FileType, v.Source)
	}
}

// pageTarget is a saved page as a render target: its project's presentation applies.
func (s *Service) PageTarget(ctx context.Context, sc auth.Scope, pageID string) Target {
	t := Target{ID: pageID}
	if p, err := s.Store.GetPage(ctx, sc, pageID); err == nil {
		t.ProjectID, t.Key, t.Version = p.ProjectID, p.Key, p.Version
	}
	return t
}
