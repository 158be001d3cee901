package api

import (
	"context"
	"net/http"
	"time"

	"slidecells/cell/store"
	"slidecells/shared/problem"
)

// ProjectView is a project as the API shows it.
type ProjectView struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Version     int64     `json:"version" doc:"optimistic-lock baseline: send it back with edits"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func projectView(p store.Project) ProjectView {
	return ProjectView{ID: p.ID, Name: p.Name, Description: p.Description, Version: p.Version,
		CreatedBy: p.CreatedBy, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// ProjectPath names a project.
type ProjectPath struct {
	ProjectID string `path:"project_id" pattern:"^prj_[a-z2-7]{26}$" doc:"Project ID (prj_…)"`
}

// WorkspaceHeader is the access context of workspace-scoped routes without the ID in the path.
type WorkspaceHeader struct {
	WorkspaceID string `header:"X-Workspace-ID" required:"true" pattern:"^ws_[a-z2-7]{26}$" doc:"workspace of the call"`
}

// IdempotencyHeader is required on writing operations.
type IdempotencyHeader struct {
	IdempotencyKey string `header:"Idempotency-Key" required:"true" minLength:"1" maxLength:"255" doc:"replays the first answer for the same request"`
}

// ProjectOutput is one project.
type ProjectOutput struct {
	Body ProjectView
}

// ProjectCreated is a new project.
type ProjectCreated struct {
	Location string `header:"Location"`
	Body     ProjectView
}

// ListQuery pages a collection.
type ListQuery struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"200" default:"50" doc:"page size"`
	Cursor string `query:"cursor" maxLength:"64" doc:"next_cursor of the previous page"`
}

// ProjectList is a page of projects.
type ProjectList struct {
	Body struct {
		Items      []ProjectView `json:"items"`
		NextCursor string        `json:"next_cursor,omitempty"`
	}
}

// ArchiveBatch archives several objects, all or nothing.
type ArchiveBatch struct {
	WorkspaceHeader
	IdempotencyHeader
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

func (s *Server) registerProjects(st *store.Store) {
	ds := []string{"projects"}
	Register(s, Operation{ID: "create-project", Method: http.MethodPost, Path: "/api/v1/projects", Summary: "Create a project",
		Tags: ds, Access: InWorkspace, Scopes: []string{"project:write"}, Idempotency: KeyRequired, Lock: CreateOnly},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			Body struct {
				Name        string `json:"name" minLength:"1" maxLength:"200"`
				Description string `json:"description,omitempty" maxLength:"2000"`
			}
		}) (*ProjectCreated, error) {
			p, err := st.CreateProject(ctx, ScopeFrom(ctx), in.Body.Name, in.Body.Description)
			if err != nil {
				return nil, err
			}
			return &ProjectCreated{Location: "/api/v1/projects/" + p.ID, Body: projectView(p)}, nil
		})
	Register(s, Operation{ID: "list-projects", Method: http.MethodGet, Path: "/api/v1/projects", Summary: "List projects",
		Tags: ds, Access: InWorkspace, Scopes: []string{"project:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ListQuery
		}) (*ProjectList, error) {
			ps, err := st.ListProjects(ctx, ScopeFrom(ctx), in.Cursor, in.Limit+1)
			if err != nil {
				return nil, err
			}
			out := &ProjectList{}
			out.Body.Items, out.Body.NextCursor = paginate(ps, in.Limit,
				func(p store.Project) string { return p.ID },
				func(p store.Project) ProjectView { return projectView(p) })
			return out, nil
		})
	Register(s, Operation{ID: "get-project", Method: http.MethodGet, Path: "/api/v1/projects/{project_id}", Summary: "Project detail",
		Tags: ds, Access: InWorkspace, Scopes: []string{"project:read"}, ReadOnly: true},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			ProjectPath
		}) (*ProjectOutput, error) {
			p, err := st.GetProject(ctx, ScopeFrom(ctx), in.ProjectID)
			if err != nil {
				return nil, err
			}
			return &ProjectOutput{Body: projectView(p)}, nil
		})
	Register(s, Operation{ID: "update-project", Method: http.MethodPatch, Path: "/api/v1/projects/{project_id}", Summary: "Rename or describe a project (version-locked)",
		Tags: ds, Access: InWorkspace, Scopes: []string{"project:write"}, Idempotency: KeyRequired, Lock: VersionLock},
		func(ctx context.Context, in *struct {
			WorkspaceHeader
			IdempotencyHeader
			ProjectPath
			Body struct {
				Version     int64   `json:"version" minimum:"1" doc:"the version you read"`
				Name        *string `json:"name,omitempty" minLength:"1" maxLength:"200"`
				Description *string `json:"description,omitempty" maxLength:"2000"`
			}
		}) (*ProjectOutput, error) {
			p, err := st.UpdateProject(ctx, ScopeFrom(ctx), in.ProjectID, in.Body.Version, in.Body.Name, in.Body.Description)
			if err != nil {
				return nil, err
			}
			return &ProjectOutput{Body: projectView(p)}, nil
		})
	registerArchive(s, st, store.Projects, "project", "project:write", func(in *archiveProject) string { return in.ProjectID })
}

type archiveProject struct {
	WorkspaceHeader
	IdempotencyHeader
	ProjectPath
}

// registerArchive adds the archive operations of one kind: one object, and a batch.
// I is the kind's input type (workspace, idempotency and path parameter); idOf reads the ID.
func registerArchive[I any](s *Server, st *store.Store, k store.Kind, single, scope string, idOf func(*I) string) {
	param := single + "_id"
	Register(s, Operation{ID: "archive-" + single, Method: http.MethodPost, Path: "/api/v1/" + k.Name + "/{" + param + "}/archive",
		Summary: "Archive a " + single + " (no restore, no hard delete)", Tags: []string{k.Name}, Access: InWorkspace,
		Scopes: []string{scope}, Idempotency: KeyRequired, Lock: NoLock},
		func(ctx context.Context, in *I) (*ArchiveOutput, error) {
			id := idOf(in)
			if err := st.Archive(ctx, ScopeFrom(ctx), k, []string{id}); err != nil {
				return nil, err
			}
			out := &ArchiveOutput{}
			out.Body.Archived = []string{id}
			return out, nil
		})
	Register(s, Operation{ID: "archive-" + k.Name, Method: http.MethodPost, Path: "/api/v1/" + k.Name + "/archive",
		Summary: "Archive up to 100 " + k.Name + " at once, all or nothing", Tags: []string{k.Name}, Access: InWorkspace,
		Scopes: []string{scope}, Idempotency: KeyRequired, Lock: NoLock},
		func(ctx context.Context, in *ArchiveBatch) (*ArchiveOutput, error) {
			if !in.Body.Confirm {
				return nil, errConfirm()
			}
			if err := st.Archive(ctx, ScopeFrom(ctx), k, in.Body.IDs); err != nil {
				return nil, err
			}
			out := &ArchiveOutput{}
			out.Body.Archived = in.Body.IDs
			return out, nil
		})
}

func errConfirm() error {
	return problem.Invalid(problem.FieldError{Field: "body.confirm", Message: "must be true: archived objects cannot be restored"})
}
