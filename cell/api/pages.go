package api

import (
	"context"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/content"
	"slidecells/cell/store"
)

// pagesAPI are the page operations: their source changes only through mutation jobs.
type pagesAPI struct {
	*sources[content.Page, PageView]
}

func (s *Server) registerPages(st *store.Store, svc *authoring.Service) {
	h := &pagesAPI{&sources[content.Page, PageView]{st: st, svc: svc, src: store.Pages,
		Kind: Kind[content.Page, PageView]{Rows: store.Bind(st, store.Pages.Table), Read: auth.PageRead, Write: auth.PageWrite, View: PageOf,
			Archived: func(ctx context.Context, sc auth.Scope, ids []string) {
				// An archived page's screenshot renders are cancelled (persisted first, then
				// its renderer is told).
				for _, id := range ids {
					if svc != nil {
						_ = svc.CancelRenderWork(ctx, sc, "screenshot:"+id)
					}
				}
			}}}}
	h.register(s, sourceDocs{source: "Current source of a page, or one version of it (?version=N)",
		versions:     "History of a page's source versions, newest first",
		dependencies: "Components the current version uses, recursively, with the versions resolved"})
	Scoped(s, h.jobOp("create-page", h.collection(), "Create a page through a mutation job (202; poll the job at Location)", NoLock), h.create)
	Scoped(s, h.jobOp("submit-page-create-job", jobsPath+"/pages", "Create a page through a mutation job", NoLock), h.create)
	Scoped(s, h.jobOp("copy-page", h.item()+"/copy", "Copy a page's current source into a new page through a mutation job", NoLock), h.copy)
	Scoped(s, h.UpdateOp("Change a page's safe metadata (title, description, tags; never source), locked by metadata_version"), h.updateMetadata)
	Scoped(s, h.jobOp("edit-page", h.item()+"/edits", "Edit a page's source through a mutation job; carries the version it read (stale: 409)", VersionLock), h.edit)
	Scoped(s, h.jobOp("submit-page-edit-job", jobsPath+"/pages/edits", "Edit a page's source through a mutation job; carries page_id and the version it read", VersionLock), h.editJob)
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

func (h *pagesAPI) create(ctx context.Context, sc auth.Scope, in *createPageIn) (*Accepted[JobView], error) {
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

func (h *pagesAPI) edit(ctx context.Context, sc auth.Scope, in *editPageIn) (*Accepted[JobView], error) {
	return h.submitEdit(ctx, sc, in.ID(), in.Body)
}

type editPageJobIn = struct {
	Body struct {
		PageID string `json:"page_id" pattern:"^pg_[a-z2-7]{26}$"`
		PageEditBody
	}
}

func (h *pagesAPI) editJob(ctx context.Context, sc auth.Scope, in *editPageJobIn) (*Accepted[JobView], error) {
	return h.submitEdit(ctx, sc, in.Body.PageID, in.Body.PageEditBody)
}

func (h *pagesAPI) submitEdit(ctx context.Context, sc auth.Scope, pageID string, b PageEditBody) (*Accepted[JobView], error) {
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

func (h *pagesAPI) copy(ctx context.Context, sc auth.Scope, in *copyPageIn) (*Accepted[JobView], error) {
	b := in.Body
	return accepted(h.svc.SubmitPageCopy(ctx, sc, in.ID(), b.ProjectID, b.Key, b.Title, b.MaxAttempts))
}

type updatePageIn = struct {
	ObjectID
	Body struct{ MetadataEdit }
}

func (h *pagesAPI) updateMetadata(ctx context.Context, sc auth.Scope, in *updatePageIn) (*Single[PageView], error) {
	b := in.Body
	return h.One(sc)(store.Pages.UpdateMetadata(ctx, h.st, sc, in.ID(), b.MetadataVersion, b.Title, b.Description, b.Tags))
}
