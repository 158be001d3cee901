package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// fakePreviewBin is a bin folder with the real cell, router and renderer and, as "preview",
// testdata/fakepreview, which answers every request with its environment and what reached it.
func fakePreviewBin(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for _, name := range []string{"cell", "router", "renderer"} {
		if err := os.Symlink(filepath.Join(binDir, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "preview"), "./testdata/fakepreview")
	cmd.Dir = filepath.Dir(file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build fakepreview: %v\n%s", err, out)
	}
	return bin
}

type previewEcho struct {
	Path          string `json:"path"`
	Query         string `json:"query"`
	Authorization bool   `json:"authorization"`
	Cookie        string `json:"cookie"`
	Backend       string `json:"backend"`
	Credential    string `json:"credential"`
}

// TestStackRunsAPreviewHostPerCell: with a preview binary in the bin folder the stack starts one
// preview host per cell, pointed at its cell with a credential file it shares with that cell
// only, registers it in the directory, and the router sends each workspace's public preview
// paths to its cell's preview host, path and query unchanged, without the PAT, while
// /internal/… reaches nobody.
func TestStackRunsAPreviewHostPerCell(t *testing.T) {
	e := startIn(t, fakePreviewBin(t), "", nil, false)
	ctx := context.Background()
	creds := map[string]string{}
	for ws, cell := range map[string]string{e.demo.WorkspaceA: "cell-a", e.demo.WorkspaceB: "cell-b"} {
		pv := e.s.Previews[cell]
		if pv == nil {
			t.Fatalf("no preview host for %s", cell)
		}
		c, err := e.s.Directory.Cell(ctx, cell)
		if err != nil || c.PreviewURL != pv.URL {
			t.Fatalf("directory has %s preview URL %q (%v), the stack runs it at %s", cell, c.PreviewURL, err, pv.URL)
		}
		cenv := envMap(e.s.Cells[cell].Env())
		if cenv["CELL_PUBLIC_URL"] != e.s.RouterURL || cenv["RENDER_RUNTIME_NAVIGATION_BASE_URL"] != pv.URL+"/" ||
			cenv["RENDER_TICKET_SIGNING_KEY_FILE"] == "" {
			t.Errorf("%s env: %v", cell, cenv)
		}
		b, err := os.ReadFile(cenv["PREVIEW_SERVICE_CREDENTIAL_FILE"])
		if err != nil || len(strings.TrimSpace(string(b))) < 32 {
			t.Fatalf("%s preview credential: %v", cell, err)
		}
		sum := sha256.Sum256(b)
		creds[cell] = hex.EncodeToString(sum[:])

		path := "/preview/w/" + ws + "/snapshots/snap_x"
		a := e.get(t, path+"?access=tok", e.demo.PAT, "Cookie", "preview_session=s1")
		var echo previewEcho
		if err := json.Unmarshal(a.body, &echo); a.status != 200 || err != nil {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		if a.header.Get("X-Cell-ID") != cell || echo.Path != path || echo.Query != "access=tok" || echo.Authorization ||
			echo.Cookie != "preview_session=s1" || echo.Backend != e.s.Cells[cell].URL || echo.Credential != creds[cell] {
			t.Errorf("%s preview: X-Cell-ID %q, echo %+v", cell, a.header.Get("X-Cell-ID"), echo)
		}
	}
	if creds["cell-a"] == creds["cell-b"] {
		t.Error("both cells' preview hosts share one credential")
	}
	// An unknown workspace's preview path goes to a preview host too (the hashed cell's), like
	// its API paths go to a cell: whether the directory knows it does not show.
	unknown := "/preview/w/" + ids26() + "/snapshots/snap_x"
	if a := e.get(t, unknown, ""); a.status != 200 || a.header.Get("X-Cell-ID") == "" {
		t.Errorf("unknown workspace: %d %s, want it answered by a preview host", a.status, a.body)
	}
	for _, p := range []string{"/internal/preview/v1/snapshots/snap_x", "/internal/render/v1/capabilities", "/snapshots/snap_x"} {
		if a := e.get(t, p, e.demo.PAT, "X-Workspace-ID", e.demo.WorkspaceA); a.status != 404 || a.code != "NOT_FOUND" {
			t.Errorf("GET %s through the router: %d %s", p, a.status, a.body)
		}
	}
	resp, err := client.Get(e.s.Previews["cell-a"].URL + "/fake/paths")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	_ = json.NewDecoder(resp.Body).Decode(&paths)
	resp.Body.Close()
	if len(paths) == 0 || paths[0] != "/preview/w/"+e.demo.WorkspaceA+"/snapshots/snap_x" || len(paths) > 2 || (len(paths) == 2 && paths[1] != unknown) {
		t.Errorf("cell-a's preview host received %v", paths)
	}
	if r := e.get(t, "/api/v1/workspaces/"+e.demo.WorkspaceA, e.demo.PAT); r.status != http.StatusOK {
		t.Fatalf("API: %d %s", r.status, r.body)
	}
}

// TestStackWithoutPreviewBinary: without the binary no preview host runs, the directory lists
// none, and preview paths are 503 PREVIEW_UNAVAILABLE. The stack runs from a bin folder with
// every binary but preview.
func TestStackWithoutPreviewBinary(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"cell", "router", "renderer"} {
		if err := os.Symlink(filepath.Join(binDir, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	e := startIn(t, bin, "", nil, false)
	if len(e.s.Previews) != 0 {
		t.Fatalf("preview hosts without a binary: %v", e.s.Previews)
	}
	if c, err := e.s.Directory.Cell(context.Background(), "cell-a"); err != nil || c.PreviewURL != "" {
		t.Fatalf("cell-a = %+v, %v", c, err)
	}
	a := e.get(t, "/preview/w/"+e.demo.WorkspaceA+"/snapshots/snap_x", "")
	if a.status != 503 || a.code != "PREVIEW_UNAVAILABLE" || a.header.Get("X-Cell-ID") != "cell-a" {
		t.Fatalf("preview without a preview host: %d %s", a.status, a.body)
	}
}

func ids26() string { return "ws_" + strings.Repeat("b", 26) }
