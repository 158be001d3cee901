package router

import (
	"net/http"
	"strings"

	"slidecells/shared/ids"
	"slidecells/shared/problem"
)

// routeKind says where a request goes.
type routeKind uint8

const (
	// toWorkspace: the request names a workspace and goes to the cell that hosts it.
	toWorkspace routeKind = iota
	// toAnyCell: a route without a workspace that every cell answers the same way.
	toAnyCell
	// toPreview: a public preview path, /preview/w/{ws}/…, for the preview host of the cell
	// that hosts the workspace.
	toPreview
)

// route is the routing decision for one request.
type route struct {
	kind routeKind
	ws   string
}

var (
	errInvalidWorkspace       = invalidWorkspace("path.workspace_id")
	errInvalidWorkspaceHeader = invalidWorkspace("header.X-Workspace-ID")
	errConflict               = problem.New(problem.WorkspaceIDConflict,
		"the workspace in the path and the X-Workspace-ID header differ")
	errWorkspaceRequired = problem.New(problem.WorkspaceRequired,
		"this route needs a workspace: put it in the path or in the X-Workspace-ID header")
	errNoRoute = problem.ErrNotFound()
)

// invalidWorkspace is the answer to a malformed workspace ID at field (422, naming it).
func invalidWorkspace(field string) *problem.Error {
	e := problem.New(problem.WorkspaceIDInvalid, "the workspace ID is not valid")
	e.Fields = []problem.FieldError{{Field: field, Message: "expected ws_ followed by 26 base32 characters"}}
	return e
}

// classify decides where a request goes, or returns the problem the router answers itself.
// It runs on every request, so it works on the path string without splitting or cleaning it.
//
// A workspace named by the path or by X-Workspace-ID sends any public route to that
// workspace's cell, including routes that do not need one (whoami, version): the answer is the
// same from every cell, and the client asked in that workspace's context.
func classify(r *http.Request) (route, error) {
	p := r.URL.Path
	if !canonical(p) {
		return route{}, errNoRoute
	}
	// The legacy prefix must not exist (external API "Versioning" 2): a plain 404, whatever
	// follows, and before a header could make it look routable.
	if p == "/api/external" || strings.HasPrefix(p, "/api/external/") {
		return route{}, errNoRoute
	}
	// Preview documents: the workspace is the path's, whatever X-Workspace-ID says (the
	// preview host does not read it).
	if strings.HasPrefix(p, previewPrefix) {
		ws := p[len(previewPrefix):]
		if i := strings.IndexByte(ws, '/'); i >= 0 {
			ws = ws[:i]
		}
		if !ids.Valid(ids.Workspace, ws) {
			return route{}, errInvalidWorkspace
		}
		return route{kind: toPreview, ws: ws}, nil
	}
	public := strings.HasPrefix(p, "/api/v1/") || strings.HasPrefix(p, "/workspaces/") ||
		p == "/openapi.json" || underSegment(p, "/ai/agent-catalog") || underSegment(p, "/ai/agent-configs") || oauthRoute(p)
	if !public {
		return route{}, errNoRoute
	}

	// A workspace in the path names the call's workspace: X-Workspace-ID is only the default
	// for paths that name none, so a client that always sends its default header still
	// reaches /workspaces/{other}.
	if pathWS, inPath := workspaceInPath(p); inPath {
		if !ids.Valid(ids.Workspace, pathWS) {
			return route{}, errInvalidWorkspace
		}
		return route{kind: toWorkspace, ws: pathWS}, nil
	}
	hdrWS, inHeader, err := workspaceInHeader(r.Header)
	if err != nil {
		return route{}, err
	}
	if inHeader && !ids.Valid(ids.Workspace, hdrWS) {
		return route{}, errInvalidWorkspaceHeader
	}
	if inHeader {
		return route{kind: toWorkspace, ws: hdrWS}, nil
	}
	if anyCellRoute(r.Method, p) {
		return route{kind: toAnyCell}, nil
	}
	return route{}, errWorkspaceRequired
}

// previewPrefix starts the public preview paths: /preview/w/{ws}/… is the preview host's
// public form of its documents. Nothing else under /preview is routed, and /internal/… never is.
const previewPrefix = "/preview/w/"

// workspaceInPath finds {id} in /api/v1/workspaces/{id}[/…] and /workspaces/{id}[/…]. An empty
// segment ("/api/v1/workspaces/") names no workspace.
func workspaceInPath(p string) (string, bool) {
	var rest string
	switch {
	case strings.HasPrefix(p, "/api/v1/workspaces/"):
		rest = p[len("/api/v1/workspaces/"):]
	case strings.HasPrefix(p, "/workspaces/"):
		rest = p[len("/workspaces/"):]
	default:
		return "", false
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return rest, rest != ""
}

// workspaceInHeader reads X-Workspace-ID. An empty header counts as absent; several values
// must agree, or the request is ambiguous.
func workspaceInHeader(h http.Header) (string, bool, error) {
	vs := h[keyWorkspaceID] // canonical key: Values would canonicalise, and allocate, per request
	ws := ""
	for _, v := range vs {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
		case ws == "":
			ws = v
		case ws != v:
			return "", false, errConflict
		}
	}
	return ws, ws != "", nil
}

// anyCellRoute lists the public routes that name no workspace. Every other public route needs
// one.
func anyCellRoute(method, p string) bool {
	switch {
	case p == "/api/v1/workspaces", oauthRoute(p):
		// Any method: the cell answers what it does not serve here (405 with Allow on the
		// workspace list, OAUTH_NOT_ENABLED on the OAuth endpoints).
		return true
	case strings.HasPrefix(p, "/api/v1/auth/"),
		strings.HasPrefix(p, "/api/v1/system/"),
		strings.HasPrefix(p, "/api/v1/standards/"),
		underSegment(p, "/api/v1/runtime-kit"),
		underSegment(p, "/api/v1/fonts"),
		p == "/openapi.json",
		underSegment(p, "/ai/agent-catalog"):
		return true
	}
	return false
}

// oauthRoute reports whether p is one of the OAuth endpoints the specification plans
// (discovery and /oauth/…): a cell answers them (OAUTH_NOT_ENABLED while sign-in by OAuth is
// not enabled), so clients see that clear code through the public host.
func oauthRoute(p string) bool {
	return p == "/.well-known/oauth-authorization-server" || underSegment(p, "/oauth")
}

// underSegment reports whether p is prefix or lies below it at a segment boundary, so that
// "/api/v1/fonts" matches "/api/v1/fonts/x" but not "/api/v1/fontsx".
func underSegment(p, prefix string) bool {
	return strings.HasPrefix(p, prefix) && (len(p) == len(prefix) || p[len(prefix)] == '/')
}

// canonical rejects paths with empty or dot segments. Cells clean paths differently from this
// router (a mux may redirect, another may not), so "/api/v1/system/../workspaces/ws_x" must not
// be classified as one route here and served as another there.
func canonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	return !strings.Contains(p, "//") && !strings.Contains(p, "/./") && !strings.Contains(p, "/../") &&
		!strings.HasSuffix(p, "/.") && !strings.HasSuffix(p, "/..")
}
