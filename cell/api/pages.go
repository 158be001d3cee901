package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/jobs"
	"slidecells/cell/store"
)

type pagesAPI struct {
	st  *store.Store
	svc *authoring.Service
}

var pagesKind = Kind[store.Page, authoring.PageView]{Store: store.Pages, Single: "page", Read: auth.PageRead, Write: auth.PageWrite,
	ID: func(p store.Page) string { return p.ID }, View: authoring.PageOf}

func (s *Server) registerPages(st *store.Store, svc *authoring.Service) {
	h := &pagesAPI{st: st, svc: svc}
	k := pagesKind
	k.Get, k.List = st.GetPage, st.ListPages
	k.Register(s, st)
	tags := []string{"pages"}
	read := []auth.Permission{auth.PageRead}
	write := []auth.Permission{auth.PageWrite}
	Scoped(s, Operation{ID: "get-page-source", Method: http.MethodGet, Path: "/api/v1/pages/{page_id}/source", Tags: tags, ReadOnly: true,
		Summary: "Current source of a page, or one version of it (?version=N)", Scopes: read}, h.source)
	Scoped(s, Operation{ID: "list-page-versions", Method: http.MethodGet, Path: "/api/v1/pages/{page_id}/versions", Tags: tags, ReadOnly: true,
		Summary: "History of a page's source versions, newest first", Scopes: read}, h.versions)
	Scoped(s, Operation{ID: "get-page-dependencies", Method: http.MethodGet, Path: "/api/v1/pages/{page_id}/dependencies", Tags: tags, ReadOnly: true,
		Summary: "Components the current version uses, recursively, with the versions resolved", Scopes: read}, h.dependencies)
	submit := func(id, path, summary string) Operation {
		return Operation{ID: id, Method: http.MethodPost, Path: path, Tags: tags, Idempotency: KeyRequired, Status: http.StatusAccepted,
			Summary: summary, Scopes: write, MaxBodyBytes: 1 << 20}
	}
	Scoped(s, submit("create-page", "/api/v1/pages", "Create a page through a mutation job (202; poll the job at Location)"), h.create)
	Scoped(s, submit("submit-page-create-job", jobsPath+"/pages", "Create a page through a mutation job"), h.create)
	Scoped(s, submit("copy-page", "/api/v1/pages/{page_id}/copy", "Copy a page's current source into a new page through a mutation job"), h.copy)
	meta := Operation{ID: "update-page", Method: http.MethodPatch, Path: "/api/v1/pages/{page_id}", Tags: tags, Idempotency: KeyRequired,
		Lock: VersionLock, Scopes: write, Summary: "Change a page's safe metadata (title, description, tags; never source), locked by metadata_version"}
	Scoped(s, meta, h.updateMetadata)
	edit := submit("edit-page", "/api/v1/pages/{page_id}/edits", "Edit a page's source through a mutation job; carries the version it read (stale: 409)")
	edit.Lock = VersionLock
	Scoped(s, edit, h.edit)
	editJob := submit("submit-page-edit-job", jobsPath+"/pages/edits", "Edit a page's source through a mutation job; carries page_id and the version it read")
	editJob.Lock = VersionLock
	Scoped(s, editJob, h.editJob)
}

type sourceIn = struct {
	ObjectID
	Version int64 `query:"version" minimum:"0" doc:"a version number; 0 or absent: the current one"`
}

func (h *pagesAPI) source(ctx context.Context, sc auth.Scope, in *sourceIn) (*Single[authoring.VersionView], error) {
	v, err := h.st.PageVersion(ctx, sc, in.ID(), in.Version)
	return single(authoring.VersionOf(v, true), err)
}

type versionsIn = struct {
	ObjectID
	Limit  int   `query:"limit" minimum:"1" maximum:"200" default:"50" doc:"page size"`
	Before int64 `query:"before" minimum:"0" doc:"next_before of the previous page: versions below it"`
}

// VersionPage is one page of a history.
type VersionPage struct {
	Body struct {
		Items      []authoring.VersionView `json:"items"`
		NextBefore int64                   `json:"next_before,omitempty"`
	}
}

func (h *pagesAPI) versions(ctx context.Context, sc auth.Scope, in *versionsIn) (*VersionPage, error) {
	vs, err := h.st.PageVersions(ctx, sc, in.ID(), in.Before, in.Limit+1)
	return versionPage(vs, in.Limit, err)
}

// versionPage answers versions fetched with limit+1.
func versionPage(vs []store.SourceVersion, limit int, err error) (*VersionPage, error) {
	if err != nil {
		return nil, err
	}
	out := &VersionPage{}
	out.Body.Items = []authoring.VersionView{}
	for i, v := range vs {
		if i == limit {
			out.Body.NextBefore = vs[i-1].Version
			break
		}
		out.Body.Items = append(out.Body.Items, authoring.VersionOf(v, false))
	}
	return out, nil
}

func (h *pagesAPI) dependencies(ctx context.Context, sc auth.Scope, in *ObjectID) (*Single[authoring.DependenciesView], error) {
	v, err := h.st.PageVersion(ctx, sc, in.ID(), 0)
	return single(authoring.DependenciesOf(in.ID(), v), err)
}

type createPageIn = struct {
	Body struct {
		ProjectID string `json:"project_id" pattern:"^prj_[a-z2-7]{26}$" doc:"the page's project"`
		Key       string `json:"key" pattern:"^[a-z][a-z0-9-]{0,63}$" doc:"names the page within its project"`
		Title     string `json:"title,omitempty" maxLength:"200"`
		FileType  string `json:"file_type" enum:"tsx,jsx,html"`
		Source    string `json:"source" minLength:"1" maxLength:"524288"`
		JobOptions
	}
}

func (h *pagesAPI) create(ctx context.Context, sc auth.Scope, in *createPageIn) (*Accepted[jobs.JobView], error) {
	b := in.Body
	return accepted(h.svc.SubmitPageCreate(ctx, sc, authoring.PageCreate{ProjectID: b.ProjectID, Key: b.Key, Title: b.Title,
		FileType: b.FileType, Source: b.Source, RenderCheck: b.RenderCheck}, b.MaxAttempts))
}

// PageEditBody is a page edit: the baseline it carries and the new source.
type PageEditBody struct {
	Version  int64  `json:"version" minimum:"1" doc:"the page version you read; a stale one is 409"`
	FileType string `json:"file_type,omitempty" enum:"tsx,jsx,html" doc:"default: the page's current file type"`
	Source   string `json:"source" minLength:"1" maxLength:"524288"`
	JobOptions
}

type editPageIn = struct {
	ObjectID
	Body PageEditBody
}

func (h *pagesAPI) edit(ctx context.Context, sc auth.Scope, in *editPageIn) (*Accepted[jobs.JobView], error) {
	return h.submitEdit(ctx, sc, in.ID(), in.Body)
}

type editPageJobIn = struct {
	Body struct {
		PageID string `json:"page_id" pattern:"^pg_[a-z2-7]{26}$"`
		PageEditBody
	}
}

func (h *pagesAPI) editJob(ctx context.Context, sc auth.Scope, in *editPageJobIn) (*Accepted[jobs.JobView], error) {
	return h.submitEdit(ctx, sc, in.Body.PageID, in.Body.PageEditBody)
}

func (h *pagesAPI) submitEdit(ctx context.Context, sc auth.Scope, pageID string, b PageEditBody) (*Accepted[jobs.JobView], error) {
	return accepted(h.svc.SubmitPageEdit(ctx, sc, authoring.PageEdit{PageID: pageID, Version: b.Version, FileType: b.FileType,
		Source: b.Source, RenderCheck: b.RenderCheck}, b.MaxAttempts))
}

type copyPageIn = struct {
	ObjectID
	Body struct {
		Key       string `json:"key" pattern:"^[a-z][a-z0-9-]{0,63}$" doc:"the copy's key in its project"`
		ProjectID string `json:"project_id,omitempty" pattern:"^prj_[a-z2-7]{26}$" doc:"default: the page's own project"`
		Title     string `json:"title,omitempty" maxLength:"200"`
		JobOptions
	}
}

func (h *pagesAPI) copy(ctx context.Context, sc auth.Scope, in *copyPageIn) (*Accepted[jobs.JobView], error) {
	b := in.Body
	return accepted(h.svc.SubmitPageCopy(ctx, sc, in.ID(), b.ProjectID, b.Key, b.Title, b.MaxAttempts))
}

type updatePageIn = struct {
	ObjectID
	Body struct {
		Version     int64    `json:"version" minimum:"1" doc:"the metadata_version you read"`
		Title       *string  `json:"title,omitempty" maxLength:"200"`
		Description *string  `json:"description,omitempty" maxLength:"2000"`
		Tags        []string `json:"tags,omitempty" maxItems:"32" doc:"replaces the tags"`
	}
}

func (h *pagesAPI) updateMetadata(ctx context.Context, sc auth.Scope, in *updatePageIn) (*Single[authoring.PageView], error) {
	p, err := h.st.UpdatePageMetadata(ctx, sc, in.ID(), in.Body.Version, in.Body.Title, in.Body.Description, in.Body.Tags)
	if err != nil {
		return nil, err
	}
	return pagesKind.One(sc, p, nil)
}
