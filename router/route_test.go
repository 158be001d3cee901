package router

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"slidecells/shared/cellproto"
	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	wsA := ids.New(ids.Workspace)
	wsB := ids.New(ids.Workspace)
	tests := []struct {
		name   string
		method string
		path   string
		header []string // X-Workspace-ID values
		kind   routeKind
		ws     string
		code   problem.Code // "" when routed
	}{
		{name: "workspace detail", path: "/api/v1/workspaces/" + wsA, kind: toWorkspace, ws: wsA},
		{name: "below workspace", path: "/api/v1/workspaces/" + wsA + "/capabilities", kind: toWorkspace, ws: wsA},
		{name: "editor fonts", path: "/workspaces/" + wsA + "/font-families", kind: toWorkspace, ws: wsA},
		{name: "header only", path: "/api/v1/projects/prj_x/configuration", header: []string{wsA}, kind: toWorkspace, ws: wsA},
		{name: "header on agent configs", path: "/ai/agent-configs", header: []string{wsA}, kind: toWorkspace, ws: wsA},
		{name: "path and header agree", path: "/api/v1/workspaces/" + wsA, header: []string{wsA}, kind: toWorkspace, ws: wsA},
		{name: "header on a route without workspace", path: "/api/v1/system/version", header: []string{wsA}, kind: toWorkspace, ws: wsA},
		{name: "empty header is absent", path: "/api/v1/system/version", header: []string{""}, kind: toAnyCell},
		{name: "repeated equal headers", path: "/api/v1/pages", header: []string{wsA, wsA}, kind: toWorkspace, ws: wsA},

		{name: "the path wins over a default header", path: "/api/v1/workspaces/" + wsA, header: []string{wsB}, kind: toWorkspace, ws: wsA},
		{name: "the path wins over a malformed header", path: "/api/v1/workspaces/" + wsA, header: []string{"nope"}, kind: toWorkspace, ws: wsA},
		{name: "headers differ", path: "/api/v1/pages", header: []string{wsA, wsB}, code: problem.WorkspaceIDConflict},
		{name: "malformed in path", path: "/api/v1/workspaces/ws_nope", code: problem.WorkspaceIDInvalid},
		{name: "wrong prefix in path", path: "/workspaces/prj_" + wsA[3:] + "/fonts", code: problem.WorkspaceIDInvalid},
		{name: "malformed header", path: "/api/v1/pages", header: []string{"WS_" + wsA[3:]}, code: problem.WorkspaceIDInvalid},
		{name: "malformed wins over conflict", path: "/api/v1/workspaces/ws_bad", header: []string{wsA}, code: problem.WorkspaceIDInvalid},

		{name: "list", method: http.MethodGet, path: "/api/v1/workspaces", kind: toAnyCell},
		{name: "list HEAD", method: http.MethodHead, path: "/api/v1/workspaces", kind: toAnyCell},
		{name: "other methods on the list reach a cell (405)", method: http.MethodPost, path: "/api/v1/workspaces", kind: toAnyCell},
		{name: "DELETE on the list reaches a cell (405)", method: http.MethodDelete, path: "/api/v1/workspaces", kind: toAnyCell},
		{name: "oauth discovery", path: "/.well-known/oauth-authorization-server", kind: toAnyCell},
		{name: "oauth token", method: http.MethodPost, path: "/oauth/token", kind: toAnyCell},
		{name: "oauth segment boundary", path: "/oauthx", code: problem.NotFound},
		{name: "trailing slash names none", path: "/api/v1/workspaces/", code: problem.WorkspaceRequired},
		{name: "whoami", path: "/api/v1/auth/whoami", kind: toAnyCell},
		{name: "version", path: "/api/v1/system/version", kind: toAnyCell},
		{name: "standards", path: "/api/v1/standards/page", kind: toAnyCell},
		{name: "runtime kit", path: "/api/v1/runtime-kit", kind: toAnyCell},
		{name: "runtime kit item", path: "/api/v1/runtime-kit/button.js", kind: toAnyCell},
		{name: "fonts", path: "/api/v1/fonts", kind: toAnyCell},
		{name: "openapi", path: "/openapi.json", kind: toAnyCell},
		{name: "agent catalog", path: "/ai/agent-catalog", kind: toAnyCell},

		{name: "projects need a workspace", path: "/api/v1/projects/prj_x/route-tree", code: problem.WorkspaceRequired},
		{name: "jobs need a workspace", method: http.MethodPost, path: "/api/v1/jobs/mutations/pages", code: problem.WorkspaceRequired},
		{name: "segment boundary", path: "/api/v1/fontsx", code: problem.WorkspaceRequired},
		{name: "agent configs need one", path: "/ai/agent-configs/x", code: problem.WorkspaceRequired},

		{name: "legacy prefix", path: "/api/external/v1/workspaces/" + wsA, code: problem.NotFound},
		{name: "legacy prefix with header", path: "/api/external/v1/pages", header: []string{wsA}, code: problem.NotFound},
		{name: "legacy root", path: "/api/external/v1", code: problem.NotFound},
		{name: "unknown path", path: "/admin", code: problem.NotFound},
		{name: "unknown path with header", path: "/admin", header: []string{wsA}, code: problem.NotFound},
		{name: "api root", path: "/api/v1", code: problem.NotFound},
		{name: "dot segments", path: "/api/v1/system/../workspaces/" + wsA, code: problem.NotFound},
		{name: "empty segment", path: "/api/v1/workspaces//" + wsA, code: problem.NotFound},

		{name: "preview document", path: "/preview/w/" + wsA + "/snapshots/snap_x", kind: toPreview, ws: wsA},
		{name: "preview asset", method: http.MethodHead, path: "/preview/w/" + wsA + "/assets/a.css", kind: toPreview, ws: wsA},
		{name: "preview ignores the header", path: "/preview/w/" + wsA + "/snapshots/snap_x", header: []string{wsB}, kind: toPreview, ws: wsA},
		{name: "preview workspace root", path: "/preview/w/" + wsA, kind: toPreview, ws: wsA},
		{name: "preview malformed", path: "/preview/w/ws_bad/snapshots/snap_x", code: problem.WorkspaceIDInvalid},
		{name: "preview without workspace", path: "/preview/w/", code: problem.WorkspaceIDInvalid},
		{name: "preview host's own form", path: "/preview/snapshots/snap_x", code: problem.NotFound},
		{name: "preview dot segments", path: "/preview/w/" + wsA + "/../../internal/preview/v1/x", code: problem.NotFound},
		{name: "internal", path: "/internal/render/v1/capabilities", code: problem.NotFound},
		{name: "internal with header", path: "/internal/preview/v1/snapshots/snap_x", header: []string{wsA}, code: problem.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			r := httptest.NewRequest(method, "http://router.test/", nil)
			r.URL.Path = tt.path // dot segments must reach classify as clients can send them
			for _, v := range tt.header {
				r.Header.Add(cellproto.HeaderWorkspaceID, v)
			}
			got, err := classify(r)
			if tt.code != "" {
				var pe *problem.Error
				if !errors.As(err, &pe) || pe.Code != tt.code {
					t.Fatalf("classify(%s %s) = %+v, %v; want %s", method, tt.path, got, err, tt.code)
				}
				return
			}
			if err != nil || got.kind != tt.kind || got.ws != tt.ws {
				t.Fatalf("classify(%s %s) = %+v, %v; want kind %d ws %q", method, tt.path, got, err, tt.kind, tt.ws)
			}
		})
	}
}
