package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"slidecells/shared/ids"
	"slidecells/shared/testenv"
)

// pageJob creates a page through a mutation job and waits for it; it returns the page ID.
func (e *env) pageJob(t *testing.T, ws, projectID, key, source string) string {
	t.Helper()
	id, status, code := e.pageJobWith(t, ws, map[string]any{"project_id": projectID, "key": key, "file_type": "tsx", "source": source})
	if status != "succeeded" {
		t.Fatalf("page job %s: %s %s", key, status, code)
	}
	return id
}

// pageJobWith submits a page-create job with the given body and waits until it ends: the page
// ID, the job's status and its error code.
func (e *env) pageJobWith(t *testing.T, ws string, in map[string]any) (id, status, code string) {
	t.Helper()
	key, _ := in["key"].(string)
	body, _ := json.Marshal(in)
	a := e.do(t, http.MethodPost, "/api/v1/pages", e.demo.PAT, body, "X-Workspace-ID", ws, "Idempotency-Key", "e2e-page-"+key, "Content-Type", "application/json")
	if a.status != http.StatusAccepted {
		t.Fatalf("submit page %s: %d %s", key, a.status, a.body)
	}
	var job struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(a.body, &job)
	var st struct {
		Status string `json:"status"`
		Result struct {
			ObjectID string `json:"object_id"`
		} `json:"result"`
		ErrorCode string `json:"error_code"`
	}
	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "page job "+key+" finished", func() error {
		a = e.get(t, "/api/v1/jobs/mutations/"+job.JobID, e.demo.PAT, "X-Workspace-ID", ws)
		st.Status = ""
		_ = json.Unmarshal(a.body, &st)
		switch st.Status {
		case "succeeded", "failed", "canceled":
			return nil
		}
		return fmt.Errorf("job %s", a.body)
	})
	return st.Result.ObjectID, st.Status, st.ErrorCode
}

type validation struct {
	Valid  bool   `json:"valid"`
	Status string `json:"status"`
	Code   string `json:"code"`
	Stages struct {
		Compile struct{ Status string } `json:"compile"`
		Render  struct {
			Status   string `json:"status"`
			Code     string `json:"code"`
			Findings []struct {
				Code     string `json:"code"`
				Severity string `json:"severity"`
			} `json:"findings"`
		} `json:"render"`
	} `json:"stages"`
}

func (e *env) validate(t *testing.T, ws, pageID string) validation {
	t.Helper()
	a := e.do(t, http.MethodPost, "/api/v1/pages/"+pageID+"/validate", e.demo.PAT, []byte(`{}`), "X-Workspace-ID", ws, "Content-Type", "application/json")
	if a.status != http.StatusOK {
		t.Fatalf("validate: %d %s", a.status, a.body)
	}
	var v validation
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The whole render path through the router with real processes: two cells, each with its
// preview host and two renderers. A page made by a job validates with a real render stage,
// its screenshot is a PNG of the canvas, its preview URL opens in a browser through the public
// host without an API token and stops working when it expires; a throwing page is a content
// failure; with the renderers stopped, validation says unavailable while ordinary API traffic
// goes on.
func TestRenderThroughTheRouter(t *testing.T) {
	e := startWith(t, "", map[string][]string{"cell": {"CELL_PREVIEW_TTL=10s"}}, true)
	if len(e.s.Previews) == 0 {
		t.Fatal("the stack started no preview hosts")
	}
	e.waitRender(t)
	ws := e.demo.WorkspaceA
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"Render"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "e2e-render-project", "Content-Type", "application/json")
	if a.status != http.StatusCreated {
		t.Fatalf("project: %d %s", a.status, a.body)
	}
	var prj struct{ ID string }
	_ = json.Unmarshal(a.body, &prj)
	good := e.pageJob(t, ws, prj.ID, "hello", `import { Slide } from "@kit/layout";
import { Title, Body } from "@kit/text";
export default function Hello() {
  return <Slide><Title>Quarterly results</Title><Body>Revenue grew in every region.</Body></Slide>;
}`)
	bad := e.pageJob(t, ws, prj.ID, "thrower", `export default function Broken() { throw new Error("chart data missing"); }`)

	// Validation runs the render stage for real.
	if v := e.validate(t, ws, good); !v.Valid || v.Status != "passed" || v.Stages.Render.Status != "passed" {
		t.Fatalf("valid page: %+v", v)
	}
	if v := e.validate(t, ws, bad); v.Valid || v.Status != "failed" || v.Stages.Render.Status != "failed" || v.Stages.Compile.Status != "passed" {
		t.Fatalf("throwing page: %+v, want a failed render stage (content), not unavailable", v)
	}

	// Content naming an asset that cannot be pinned fails at preparation.
	missingAsset := `import { Image } from "@kit/media";
export default function M() { return <Image asset="` + ids.New(ids.Asset) + `" alt="logo" />; }`
	body, _ := json.Marshal(map[string]string{"entity_type": "page", "mode": "content", "file_type": "tsx", "source": missingAsset})
	a = e.do(t, http.MethodPost, "/api/v1/validate/entity", e.demo.PAT, body, "X-Workspace-ID", ws, "Content-Type", "application/json")
	var mv validation
	_ = json.Unmarshal(a.body, &mv)
	if a.status != http.StatusOK || mv.Valid || mv.Stages.Render.Status != "failed" || mv.Stages.Render.Code != "RENDER_INPUT_NOT_REPRODUCIBLE" {
		t.Fatalf("unpinnable asset: %d %s", a.status, a.body)
	}

	// A job that asks for a render check writes only when the rendered content has no errors.
	if _, status, code := e.pageJobWith(t, ws, map[string]any{"project_id": prj.ID, "key": "checked-bad", "file_type": "tsx",
		"source": `export default function B() { throw new Error("boom"); }`, "render_check": true}); status != "failed" || code != "RENDER_CHECK_FAILED" {
		t.Fatalf("render-checked throwing page: %s %s, want failed RENDER_CHECK_FAILED", status, code)
	}
	if _, status, code := e.pageJobWith(t, ws, map[string]any{"project_id": prj.ID, "key": "checked-good", "file_type": "tsx",
		"source": `export default function G() { return <h1>fine</h1>; }`, "render_check": true}); status != "succeeded" {
		t.Fatalf("render-checked good page: %s %s", status, code)
	}

	// The screenshot is the canvas at the device scale. A 504 RENDER_DEADLINE_EXCEEDED says
	// the render goes on and to ask again (a loaded machine can take longer than the wait):
	// the test asks again, as a client does, at most three times.
	a = e.get(t, "/api/v1/pages/"+good+"/screenshot", e.demo.PAT, "X-Workspace-ID", ws)
	for i := 0; i < 3 && a.status == http.StatusGatewayTimeout && a.code == "RENDER_DEADLINE_EXCEEDED"; i++ {
		a = e.get(t, "/api/v1/pages/"+good+"/screenshot", e.demo.PAT, "X-Workspace-ID", ws)
	}
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "image/png" {
		t.Fatalf("screenshot: %d %s", a.status, a.body)
	}
	img, err := png.DecodeConfig(bytes.NewReader(a.body))
	if err != nil || img.Width != 2560 || img.Height != 1440 {
		t.Fatalf("screenshot: %v %dx%d, want 2560x1440 (1280x720 at scale 2)", err, img.Width, img.Height)
	}
	// The same page again is the same render request: answered from its result.
	start := time.Now()
	if a2 := e.get(t, "/api/v1/pages/"+good+"/screenshot", e.demo.PAT, "X-Workspace-ID", ws); a2.status != 200 || !bytes.Equal(a2.body, a.body) {
		t.Fatalf("repeat screenshot: %d", a2.status)
	}
	t.Logf("repeat screenshot answered in %s", time.Since(start))

	// The preview URL opens in a browser through the router, with its fonts and assets, and
	// no API token. The browser starts before the URL is made: the URL lives CELL_PREVIEW_TTL,
	// and a browser starting on a loaded machine can take most of that.
	open := startBrowser(t)
	a = e.do(t, http.MethodPost, "/api/v1/pages/"+good+"/preview-artifact", e.demo.PAT, []byte(`{}`), "X-Workspace-ID", ws, "Content-Type", "application/json")
	if a.status != http.StatusOK {
		t.Fatalf("preview artifact: %d %s", a.status, a.body)
	}
	var pv struct {
		PreviewURL string    `json:"preview_url"`
		ExpiresAt  time.Time `json:"expires_at"`
	}
	_ = json.Unmarshal(a.body, &pv)
	if !strings.HasPrefix(pv.PreviewURL, e.s.RouterURL+"/preview/w/"+ws+"/snapshots/snap_") {
		t.Fatalf("preview URL %q is not on the public host", pv.PreviewURL)
	}
	text := open(pv.PreviewURL)
	if !strings.Contains(text, "Quarterly results") {
		t.Fatalf("the preview in a browser shows %q", text)
	}
	// Another workspace's prefix with the same token is refused.
	foreign := strings.Replace(pv.PreviewURL, "/w/"+ws+"/", "/w/"+e.other+"/", 1)
	if resp, err := client.Get(foreign); err != nil || resp.StatusCode == http.StatusOK {
		t.Fatalf("the token opened the snapshot under another workspace: %v", err)
	} else {
		resp.Body.Close()
	}
	// A bad token on a known workspace and any token on an unknown one get the same answer.
	ref := pv.PreviewURL[strings.Index(pv.PreviewURL, "/snapshots/")+len("/snapshots/") : strings.Index(pv.PreviewURL, "?")]
	fetch := func(u string) (int, string) {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	s1, b1 := fetch(e.s.RouterURL + "/preview/w/" + ws + "/snapshots/" + ref + "?access=forged")
	s2, b2 := fetch(e.s.RouterURL + "/preview/w/" + ids.New(ids.Workspace) + "/snapshots/" + ref + "?access=forged")
	if s1 != http.StatusNotFound || s1 != s2 || b1 != b2 {
		t.Fatalf("known workspace with a bad token: %d %q; unknown workspace: %d %q — must not differ", s1, b1, s2, b2)
	}
	time.Sleep(time.Until(pv.ExpiresAt) + time.Second)
	resp, err := client.Get(pv.PreviewURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("the preview URL still works after it expired")
	}

	// make run's demo content: made once (a second seeding finds it), and every demo page
	// compiles and renders without a finding.
	demo, err := e.s.SeedContent(context.Background(), e.demo.PAT, ws)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.s.SeedContent(context.Background(), e.demo.PAT, ws)
	if err != nil || again.ProjectID != demo.ProjectID || len(again.Pages) != len(demo.Pages) || len(demo.Pages) != 2 {
		t.Fatalf("seeding again: %+v %v, first %+v", again, err, demo)
	}
	for key, id := range demo.Pages {
		if again.Pages[key] != id {
			t.Fatalf("seeding again made page %s anew", key)
		}
		if v := e.validate(t, ws, id); !v.Valid || v.Status != "passed" || v.Stages.Render.Status != "passed" {
			t.Fatalf("demo page %s: %+v", key, v)
		}
	}

	// Renderers offline: validation is unavailable (never passed, never "source has errors"),
	// health says so, and ordinary traffic is unaffected.
	for _, r := range e.s.Renderers["cell-a"] {
		r.Stop()
	}
	testenv.Eventually(t, 20*time.Second, 200*time.Millisecond, "health reports render unavailable", func() error {
		if h := e.get(t, "/api/v1/system/health", ""); !bytes.Contains(h.body, []byte(`"render":{"status":"unavailable"`)) {
			return fmt.Errorf("health %s", h.body)
		}
		return nil
	})
	edited := e.pageJob(t, ws, prj.ID, "offline", `export default function Offline() { return <h1>written while renderers are down</h1>; }`)
	v := e.validate(t, ws, edited)
	if v.Valid || v.Status != "unavailable" || v.Stages.Render.Status != "unavailable" || !strings.HasPrefix(v.Code, "RENDER_") || v.Stages.Compile.Status != "passed" {
		t.Fatalf("validation with the renderers down: %+v", v)
	}
	if a := e.get(t, "/api/v1/projects/"+prj.ID, e.demo.PAT, "X-Workspace-ID", ws); a.status != http.StatusOK {
		t.Fatalf("ordinary read with the renderers down: %d", a.status)
	}
}

// startBrowser starts headless Debian Chromium (tests only: run as root, without the
// sandbox) and returns a function that opens a URL in it, waits for the preview runtime to mount
// with its fonts loaded, and returns the page's text. The browser is closed when the test ends.
func startBrowser(t *testing.T) func(url string) string {
	t.Helper()
	const chromium = "/usr/lib/chromium/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("Debian's chromium is not installed: %v", err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Flag("headless", "new"), chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()))
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil { // starts the browser now
		t.Fatalf("starting chromium: %v", err)
	}
	return func(url string) string {
		t.Helper()
		ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
		defer cancelT()
		var text string
		err := chromedp.Run(ctx, chromedp.Navigate(url),
			chromedp.Poll(`window.__renderReady && window.__renderReady.mount === "mounted" && document.fonts.status === "loaded"`, nil, chromedp.WithPollingTimeout(30*time.Second)),
			chromedp.Evaluate(`document.body.innerText`, &text))
		if err != nil {
			var state string
			dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
			_ = chromedp.Run(dctx, chromedp.Evaluate(`JSON.stringify({ready: window.__renderReady || null, fonts: document.fonts.status, text: document.body ? document.body.innerText.slice(0, 300) : ""})`, &state))
			dcancel()
			t.Fatalf("opening the preview: %v (page state: %s)", err, state)
		}
		return text
	}
}
