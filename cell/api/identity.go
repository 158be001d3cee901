package api

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"slidecells/cell/auth"
	"slidecells/shared/problem"
)

// VersionOutput is the service version.
type VersionOutput struct {
	Body struct {
		Service    string `json:"service"`
		Version    string `json:"version"`
		APIVersion string `json:"api_version"`
		Cell       string `json:"cell"`
		GoVersion  string `json:"go_version"`
	}
}

// HealthOutput is the service health.
type HealthOutput struct {
	Body struct {
		Status    string            `json:"status" enum:"ok,degraded"`
		Cell      string            `json:"cell"`
		UptimeSec int64             `json:"uptime_seconds"`
		Checks    map[string]Health `json:"checks"`
		Jobs      *JobsHealth       `json:"jobs,omitempty" doc:"the mutation-job queue of this cell"`
	}
}

// JobsHealth is the depth of the mutation-job queue.
type JobsHealth struct {
	Pending              int     `json:"pending" doc:"runnable jobs waiting for a worker"`
	Running              int     `json:"running"`
	OldestPendingSeconds float64 `json:"oldest_pending_seconds" doc:"how long the oldest runnable job has waited"`
}

func (s *Server) registerSystem() {
	Register(s, Operation{ID: "get-system-version", Method: http.MethodGet, Path: "/api/v1/system/version",
		Summary: "Service version", Tags: []string{"system"}, Access: Public, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*VersionOutput, error) {
			out := &VersionOutput{}
			out.Body.Service, out.Body.Version, out.Body.APIVersion = "slidecells", Version, "v1"
			out.Body.Cell, out.Body.GoVersion = s.CellID, runtime.Version()
			return out, nil
		})
	Register(s, Operation{ID: "get-system-health", Method: http.MethodGet, Path: "/api/v1/system/health",
		Summary: "Service health, with database, directory and render capability", Tags: []string{"system"}, Access: Public, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*HealthOutput, error) {
			out := &HealthOutput{}
			out.Body.Cell = s.CellID
			out.Body.UptimeSec = int64(time.Since(s.StartedAt).Seconds())
			out.Body.Checks = map[string]Health{}
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			out.Body.Checks["database"] = Health{Status: "ok"}
			if err := s.DB.Pool.Ping(cctx); err != nil {
				out.Body.Checks["database"] = Health{Status: "unavailable", Detail: "cell database unreachable"}
			}
			out.Body.Checks["directory"] = Health{Status: "ok"}
			if err := s.Dir.Dir.DB.Pool.Ping(cctx); err != nil {
				out.Body.Checks["directory"] = Health{Status: "degraded", Detail: "directory unreachable; serving cached identities and placements"}
			}
			if s.Render != nil {
				out.Body.Checks["render"] = s.Render(cctx)
			} else {
				out.Body.Checks["render"] = Health{Status: "unavailable", Detail: "no renderer is configured for this cell"}
			}
			if s.Jobs != nil {
				if st, err := s.Jobs.Stats(cctx); err == nil {
					out.Body.Jobs = &JobsHealth{Pending: st.Pending, Running: st.Running, OldestPendingSeconds: st.OldestPending.Seconds()}
				}
			}
			out.Body.Status = "ok"
			for _, h := range out.Body.Checks {
				if h.Status != "ok" {
					out.Body.Status = "degraded"
				}
			}
			return out, nil
		})
}

// UserView is a user as the API shows it.
type UserView struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Name  string `json:"name"`
}

// TokenView is the calling token, without its secret.
type TokenView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Type      string    `json:"type" enum:"pat"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"expires_at"`
}

// WhoamiOutput is the identity of the credential.
type WhoamiOutput struct {
	Body struct {
		User  UserView  `json:"user"`
		Token TokenView `json:"token"`
	}
}

// WorkspaceView is a workspace as a member sees it.
type WorkspaceView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

// WorkspaceOutput is one workspace.
type WorkspaceOutput struct {
	Body WorkspaceView
}

func (s *Server) registerIdentity() {
	Register(s, Operation{ID: "get-whoami", Method: http.MethodGet, Path: "/api/v1/auth/whoami",
		Summary: "Identity of the credential", Tags: []string{"identity"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, _ *struct{}) (*WhoamiOutput, error) {
			p := PrincipalFrom(ctx)
			out := &WhoamiOutput{}
			out.Body.User = UserView{ID: p.UserID, Email: p.Email, Name: p.Name}
			out.Body.Token = TokenView{ID: p.TokenID, Name: p.TokenName, Type: "pat", Scopes: p.Scopes, ExpiresAt: p.ExpiresAt}
			return out, nil
		})
	Register(s, Operation{ID: "list-workspaces", Method: http.MethodGet, Path: "/api/v1/workspaces",
		Summary: "Workspaces of the caller", Tags: []string{"workspaces"}, Access: Authenticated, ReadOnly: true},
		func(ctx context.Context, in *ListQuery) (*Page[WorkspaceView], error) {
			ws, err := s.Dir.WorkspacesOf(ctx, PrincipalFrom(ctx).UserID)
			if err != nil {
				return nil, problem.ErrDirectoryUnavailable(err)
			}
			items := make([]WorkspaceView, 0, len(ws))
			for _, w := range ws {
				items = append(items, WorkspaceView{ID: w.ID, Name: w.Name, Role: w.Role, CreatedAt: w.CreatedAt})
			}
			slices.SortFunc(items, func(a, b WorkspaceView) int { return strings.Compare(a.ID, b.ID) })
			return pageOf(items, *in, func(w WorkspaceView) string { return w.ID }), nil
		})
	Scoped(s, Operation{ID: "get-workspace", Method: http.MethodGet, Path: "/api/v1/workspaces/{workspace_id}",
		Summary: "Workspace detail", Tags: []string{"workspaces"}, Scopes: []auth.Permission{auth.WorkspaceRead}, ReadOnly: true},
		func(ctx context.Context, sc auth.Scope, _ *struct{}) (*WorkspaceOutput, error) {
			w, err := s.Dir.Workspace(ctx, sc.WorkspaceID())
			if err != nil {
				return nil, problem.ErrNotFound()
			}
			return &WorkspaceOutput{Body: WorkspaceView{ID: w.ID, Name: w.Name, Role: sc.Role(), CreatedAt: w.CreatedAt}}, nil
		})
}
