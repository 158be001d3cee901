package load

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAPI answers the few routes the scenarios use, on loopback, and records what it saw.
type fakeAPI struct {
	mu        sync.Mutex
	byPath    map[string]int
	noAuth    int
	keys      map[string]int // method+route → requests carrying an Idempotency-Key
	validates atomic.Int64
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := r.URL.Path
	switch {
	case strings.HasSuffix(route, "/validate"):
		route = "validate"
	case strings.HasSuffix(route, "/screenshot"):
		route = "screenshot"
	}
	f.mu.Lock()
	f.byPath[r.Method+" "+route]++
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer tok-") || !strings.HasPrefix(r.Header.Get("X-Workspace-ID"), "ws_") {
		f.noAuth++
	}
	if r.Header.Get("Idempotency-Key") != "" {
		f.keys[r.Method+" "+route]++
	}
	f.mu.Unlock()
	switch route {
	case "validate":
		if f.validates.Add(1) == 3 { // one validation whose render stage could not run
			json.NewEncoder(w).Encode(map[string]any{"valid": false, "status": "unavailable", "code": "RENDER_QUEUE_FULL"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"valid": true, "status": "passed"})
	case "screenshot":
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\nfake"))
	case "/api/v1/projects":
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		w.Write([]byte(`{"id":"prj_1","items":[]}`))
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"code":"RATE_LIMITED"}`))
	}
}

func TestRunStopsWhenItsSamplesAreDone(t *testing.T) {
	api := &fakeAPI{byPath: map[string]int{}, keys: map[string]int{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	f := &Fixture{Base: srv.URL, Client: NewClient(), RunID: "t"}
	for i := range 3 {
		f.Workspaces = append(f.Workspaces, &Workspace{ID: "ws_" + string(rune('a'+i)), Cell: "cell-a", Token: "tok-" + string(rune('a'+i)), ProjectID: "prj_1"})
	}
	var pages []Page
	for i := range 5 {
		pages = append(pages, Page{WS: f.Workspaces[i%3], ID: "pg_" + string(rune('a'+i))})
	}
	rec := NewRecorder()
	var lines []string
	attacks := append(f.APIAttacks(40, 0), f.ValidateAttack(pages, 2), f.ScreenshotAttack(pages[:4], 2))
	const limit = time.Minute
	took := f.Run(context.Background(), rec, attacks, limit, func(l string) { lines = append(lines, l) })
	if took >= limit {
		t.Fatalf("the run lasted its whole limit (%s): it did not stop when its samples were done", took)
	}
	if n, errs := rec.Count(OpValidate); n != 5 || errs != 1 {
		t.Errorf("validations: %d, %d failed; want each page once, one unavailable", n, errs)
	}
	if n, errs := rec.Count(OpScreenshot); n != 4 || errs != 0 {
		t.Errorf("screenshots: %d, %d failed", n, errs)
	}
	sums := Summarize(rec.Samples(), took)
	for _, s := range sums {
		if s.Op == OpValidate && s.Errors["200 unavailable RENDER_QUEUE_FULL"] != 1 {
			t.Errorf("validation errors %v", s.Errors)
		}
		if s.Op == OpWorkspaceGet && s.Count > 0 && s.Errors["429 RATE_LIMITED"] != s.Count {
			t.Errorf("workspace reads: %+v, every one a 429 from the fake", s)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.noAuth != 0 {
		t.Errorf("%d requests without a workspace's token and header", api.noAuth)
	}
	if api.keys["POST /api/v1/projects"] != api.byPath["POST /api/v1/projects"] {
		t.Errorf("project creates %d, with Idempotency-Key %d", api.byPath["POST /api/v1/projects"], api.keys["POST /api/v1/projects"])
	}
	if api.keys["POST validate"] != 0 || api.keys["GET screenshot"] != 0 {
		t.Errorf("read-only requests carried an Idempotency-Key: %v", api.keys)
	}
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "render.validate 5 (1 err)") {
		t.Errorf("progress lines %q", lines)
	}
}

func TestRunStopsAfterItsDuration(t *testing.T) {
	api := &fakeAPI{byPath: map[string]int{}, keys: map[string]int{}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	f := &Fixture{Base: srv.URL, Client: NewClient(), RunID: "t", Workspaces: []*Workspace{{ID: "ws_a", Token: "tok-a", ProjectID: "prj_1"}}}
	rec := NewRecorder()
	// Open loop, no driver: the duration ends it. At 50/s for 0.5 s, about 25 requests.
	took := f.Run(context.Background(), rec, f.APIAttacks(50, 0), 500*time.Millisecond, nil)
	total := 0
	for _, s := range Summarize(rec.Samples(), took) {
		total += s.Count
	}
	if total == 0 || total > 60 {
		t.Errorf("%d requests in a 0.5 s run at 50/s", total)
	}
	if took >= time.Minute {
		t.Errorf("took %s", took)
	}
}
