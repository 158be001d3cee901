package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"slidecells/shared/ids"
)

func init() {
	isoBodies["publish-component"] = `{}`
	isoBodies["edit-component"] = `{"source":"export default () => null"}`
	isoBodies["update-component"] = `{"metadata_version":1,"title":"Hijack"}`
	stale := []string{"If-Match", `"sha256:stale"`}
	isoHeaders["publish-component"] = stale
	isoHeaders["edit-component"] = stale
	isoHeaders["replace-asset-content"] = stale
}

type componentAnswer struct {
	ID               string `json:"id"`
	Key              string `json:"key"`
	DraftHash        string `json:"draft_hash"`
	PublishedVersion int64  `json:"published_version"`
	MetadataVersion  int64  `json:"metadata_version"`
	Title            string `json:"title"`
}

func TestComponentsThroughMutationJobs(t *testing.T) {
	b := setup(t)
	prj, _ := b.createProject(t, "", b.ws, "Deck")
	post := func(t *testing.T, path, ifMatch, body string, want int) []byte {
		t.Helper()
		c := call{method: "POST", path: path, ws: b.ws, key: ids.New("k"), body: body}
		if ifMatch != "" {
			c.header = []string{"If-Match", `"` + ifMatch + `"`}
		}
		resp, got := b.call(t, c)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, got)
		}
		return got
	}
	get := func(t *testing.T, id string) componentAnswer {
		t.Helper()
		resp, body := b.call(t, call{method: "GET", path: "/api/v1/components/" + id, ws: b.ws})
		if resp.StatusCode != 200 {
			t.Fatalf("get component: %d %s", resp.StatusCode, body)
		}
		var c componentAnswer
		_ = json.Unmarshal(body, &c)
		return c
	}
	// Create: the first draft, through a job.
	job := decodeJob(t, post(t, "/api/v1/components", "", `{"key":"hero","file_type":"tsx","source":"export default function Hero() { return <h1>v1</h1> }"}`, http.StatusAccepted))
	hero := b.waitJob(t, "", b.ws, job.JobID, "succeeded").Result.ObjectID
	c := get(t, hero)
	if c.Key != "hero" || c.PublishedVersion != 0 || !strings.HasPrefix(c.DraftHash, "sha256:") {
		t.Fatalf("created: %+v", c)
	}
	// A page cannot import an unpublished component.
	j := b.submitPage(t, "", b.ws, prj, "uses-hero", `import Hero from "@components/hero"
export default () => <Hero />`)
	if done := b.waitJob(t, "", b.ws, j.JobID, "failed"); !strings.Contains(done.ErrorSummary, "COMPILE_COMPONENT_MISSING") {
		t.Fatalf("unpublished import: %+v", done)
	}
	// Publish freezes the draft: a stale hash is refused, a missing one is 422.
	post(t, "/api/v1/components/"+hero+"/publish", "sha256:stale", `{}`, http.StatusConflict)
	post(t, "/api/v1/components/"+hero+"/publish", "", `{}`, http.StatusUnprocessableEntity)
	// An empty draft hash: the store names the component's draft_hash, the client sees the header.
	for path, in := range map[string]string{"/api/v1/components/" + hero + "/publish": `{}`,
		"/api/v1/components/" + hero + "/edits": `{"source":"export default function Hero() { return <h1>v2</h1> }"}`} {
		resp, body := b.call(t, call{method: "POST", path: path, ws: b.ws, key: ids.New("k"), header: []string{"If-Match", `""`}, body: in})
		if resp.StatusCode != http.StatusUnprocessableEntity || !slices.Equal(fieldNames(t, body), []string{"header.If-Match"}) {
			t.Fatalf("POST %s with an empty If-Match: %d %s", path, resp.StatusCode, body)
		}
	}
	var pub componentAnswer
	_ = json.Unmarshal(post(t, "/api/v1/components/"+hero+"/publish", c.DraftHash, `{}`, http.StatusOK), &pub)
	if pub.PublishedVersion != 1 {
		t.Fatalf("published: %+v", pub)
	}
	j = b.submitPage(t, "", b.ws, prj, "uses-hero-2", `import Hero from "@components/hero"
export default () => <Hero />`)
	page := b.waitJob(t, "", b.ws, j.JobID, "succeeded").Result.ObjectID
	if _, body := b.call(t, call{method: "GET", path: "/api/v1/pages/" + page + "/dependencies", ws: b.ws}); !strings.Contains(string(body), `"key":"hero","version":1`) {
		t.Fatalf("page dependencies: %s", body)
	}
	// Edit the draft through a job; the stale hash is refused at submission.
	post(t, "/api/v1/components/"+hero+"/edits", "sha256:stale", `{"source":"export default () => null"}`, http.StatusConflict)
	job = decodeJob(t, post(t, "/api/v1/components/"+hero+"/edits", c.DraftHash, `{"source":"export default function Hero() { return <h1>v2</h1> }"}`, http.StatusAccepted))
	b.waitJob(t, "", b.ws, job.JobID, "succeeded")
	c2 := get(t, hero)
	if c2.DraftHash == c.DraftHash || c2.PublishedVersion != 1 {
		t.Fatalf("after the edit: %+v", c2)
	}
	// Metadata through a job, version-locked.
	job = decodeJob(t, post(t, "/api/v1/jobs/mutations/components/metadata", "", `{"component_id":"`+hero+`","metadata_version":1,"title":"Hero banner"}`, http.StatusAccepted))
	b.waitJob(t, "", b.ws, job.JobID, "succeeded")
	if c3 := get(t, hero); c3.Title != "Hero banner" || c3.MetadataVersion != 2 || c3.DraftHash != c2.DraftHash {
		t.Fatalf("after metadata: %+v", c3)
	}
	post(t, "/api/v1/jobs/mutations/components/metadata", "", `{"component_id":"`+hero+`","metadata_version":1,"title":"Stale"}`, http.StatusConflict)
	// History and versions.
	if _, body := b.call(t, call{method: "GET", path: "/api/v1/components/" + hero + "/versions", ws: b.ws}); strings.Count(string(body), `"source_digest"`) != 1 {
		t.Fatalf("versions: %s", body)
	}
	if _, body := b.call(t, call{method: "GET", path: "/api/v1/components/" + hero + "/source?version=1", ws: b.ws}); !strings.Contains(string(body), "v1") {
		t.Fatalf("source v1: %s", body)
	}
	// A draft that imports a component importing it back cannot be published: a cycle.
	job = decodeJob(t, post(t, "/api/v1/components", "", `{"key":"frame","file_type":"tsx","source":"import Hero from \"@components/hero\"\nexport default () => <Hero />"}`, http.StatusAccepted))
	frame := b.waitJob(t, "", b.ws, job.JobID, "succeeded").Result.ObjectID
	post(t, "/api/v1/components/"+frame+"/publish", get(t, frame).DraftHash, `{}`, http.StatusOK)
	// A published component's dependencies name the components they resolved to, as a page's do.
	if _, body := b.call(t, call{method: "GET", path: "/api/v1/components/" + frame + "/dependencies", ws: b.ws}); !strings.Contains(string(body), `"component_id":"`+hero+`"`) {
		t.Fatalf("frame's dependencies: %s", body)
	}
	job = decodeJob(t, post(t, "/api/v1/components/"+hero+"/edits", c2.DraftHash, `{"source":"import Frame from \"@components/frame\"\nexport default () => <Frame />"}`, http.StatusAccepted))
	if done := b.waitJob(t, "", b.ws, job.JobID, "failed"); !strings.Contains(done.ErrorSummary, "COMPILE_IMPORT_CYCLE") {
		t.Fatalf("cycle: %+v", done)
	}
}
