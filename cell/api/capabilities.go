package api

import (
	"context"
	"net/http"

	"slidecells/cell/auth"
)

// CapabilitiesOutput lists what the credential can do in a workspace. It is a hint for clients;
// the backend checks every call anyway.
type CapabilitiesOutput struct {
	Body struct {
		WorkspaceID string   `json:"workspace_id"`
		Role        string   `json:"role"`
		Scopes      []string `json:"scopes" doc:"effective scopes: token scopes ∩ role scopes"`
		Operations  []string `json:"operations" doc:"operation IDs this credential can use in the workspace: it holds their x-scopes and one set of their x-scopes-one-of"`
	}
}

func (s *Server) registerCapabilities() {
	Scoped(s, Operation{ID: "get-workspace-capabilities", Method: http.MethodGet, Path: "/api/v1/workspaces/{workspace_id}/capabilities",
		Summary: "Scopes and operations available to this credential in the workspace", Tags: []string{"workspaces"},
		Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, _ *struct{}) (*CapabilitiesOutput, error) {
			out := &CapabilitiesOutput{}
			out.Body.WorkspaceID, out.Body.Role, out.Body.Scopes = sc.WorkspaceID(), sc.Role(), sc.Scopes()
			out.Body.Operations = []string{}
			for _, op := range s.Operations() {
				if op.Allows(sc) == nil {
					out.Body.Operations = append(out.Body.Operations, op.ID)
				}
			}
			return out, nil
		})
}
