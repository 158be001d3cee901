package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRateLimitsAndOverrides: a workspace over its request rate gets 429 RATE_LIMITED with
// Retry-After (the workspace scope) while another workspace of the same cell is served; a token
// over its rate gets the same (the token scope) while another token is served; an override set
// with cellctl lifts the workspace's limit within the cells' directory cache TTL.
func TestRateLimitsAndOverrides(t *testing.T) {
	e := start(t, "", map[string][]string{"cell": {
		"CELL_RATE_WORKSPACE=2", "CELL_RATE_WORKSPACE_BURST=5", "CELL_RATE_TOKEN=5", "CELL_RATE_TOKEN_BURST=30",
		"CELL_DIRECTORY_CACHE_TTL=1s",
	}})
	ctx := t.Context()
	// A second workspace on cell-a, the same user's.
	w, err := e.s.Directory.CreateWorkspace(ctx, "Quiet", "cell-a", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.Directory.AddMember(ctx, w.ID, e.demo.UserID, "owner"); err != nil {
		t.Fatal(err)
	}
	burst := func(ws, token string, n int) (ok int, limited answer) {
		for range n {
			a := e.get(t, "/api/v1/projects", token, "X-Workspace-ID", ws)
			switch a.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited = a
			default:
				t.Fatalf("%s: %d %s", ws, a.status, a.body)
			}
		}
		return ok, limited
	}
	ok, lim := burst(e.demo.WorkspaceA, e.demo.PAT, 12)
	if ok < 5 || ok > 8 || lim.code != "RATE_LIMITED" || lim.header.Get("Retry-After") == "" || lim.header.Get("X-RateLimit-Scope") != "workspace" {
		t.Fatalf("flooding workspace: %d served, then %d %s %v", ok, lim.status, lim.body, lim.header)
	}
	if ra, _ := strconv.Atoi(lim.header.Get("Retry-After")); ra < 1 {
		t.Fatalf("Retry-After %q", lim.header.Get("Retry-After"))
	}
	// The quiet workspace on the same cell is served, with the other (read-only) token.
	if ok, lim := burst(w.ID, e.demo.PATReadOnly, 5); ok != 5 {
		t.Fatalf("quiet workspace: %d served, %d %s", ok, lim.status, lim.body)
	}
	// An override lifts the flooding workspace's limit within the cache TTL.
	if out, err := e.cellctl(t, nil, "workspaces", "limit", e.demo.WorkspaceA, "--rate", "1000", "--burst", "1000", "--jobs", "4"); err != nil {
		t.Fatalf("limit: %v\n%s", err, out)
	}
	if out, err := e.cellctl(t, nil, "workspaces", "limits"); err != nil || !contains(out, e.demo.WorkspaceA, "rate 1000/s, burst 1000, jobs 4") {
		t.Fatalf("limits: %v\n%s", err, out)
	}
	time.Sleep(1200 * time.Millisecond)
	// Now the token is what limits: its burst of 30 (minus what it spent) and then 429 for the
	// token, while the other token still gets through to the same workspace.
	ok, lim = burst(e.demo.WorkspaceA, e.demo.PAT, 40)
	if ok < 10 || lim.header.Get("X-RateLimit-Scope") != "token" {
		t.Fatalf("with the override: %d served, then %d %s %v", ok, lim.status, lim.body, lim.header)
	}
	if a := e.get(t, "/api/v1/projects", e.demo.PATReadOnly, "X-Workspace-ID", e.demo.WorkspaceA); a.status != 200 {
		t.Fatalf("another token: %d %s", a.status, a.body)
	}
	// (Buckets are per cell process: the same token on a workspace of cell-b has cell-b's own.)
	if a := e.get(t, "/api/v1/projects", e.demo.PAT, "X-Workspace-ID", e.demo.WorkspaceB); a.status != 200 {
		t.Fatalf("the token on another cell: %d %s", a.status, a.body)
	}
	// Cleared: the default again.
	if out, err := e.cellctl(t, nil, "workspaces", "limit", e.demo.WorkspaceA, "--clear"); err != nil {
		t.Fatalf("clear: %v\n%s", err, out)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
