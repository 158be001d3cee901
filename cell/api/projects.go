package api

import (
	"context"

	"slidecells/cell/auth"
	"slidecells/cell/content"
	"slidecells/cell/store"
)

func (s *Server) registerProjects(st *store.Store) {
	RegisterKind(s, st, Kind[content.Project, ProjectView]{Rows: store.Bind(st, store.Projects), Read: auth.ProjectRead, Write: auth.ProjectWrite,
		View: ProjectOf, CreateSummary: "Create a project", UpdateSummary: "Rename or describe a project (version-locked)"}, createProject, updateProject)
}

type createProjectIn = struct {
	Body struct {
		Name        string `json:"name" minLength:"1" maxLength:"200"`
		Description string `json:"description,omitempty" maxLength:"2000"`
	}
}

func createProject(ctx context.Context, st *store.Store, sc auth.Scope, in *createProjectIn) (content.Project, error) {
	return st.CreateProject(ctx, sc, in.Body.Name, in.Body.Description)
}

type updateProjectIn = struct {
	ObjectID
	Body struct {
		Version     int64   `json:"version" minimum:"1" doc:"the version you read"`
		Name        *string `json:"name,omitempty" minLength:"1" maxLength:"200"`
		Description *string `json:"description,omitempty" maxLength:"2000"`
	}
}

func updateProject(ctx context.Context, st *store.Store, sc auth.Scope, in *updateProjectIn) (content.Project, error) {
	return st.UpdateProject(ctx, sc, in.ID(), in.Body.Version, in.Body.Name, in.Body.Description)
}
