package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"slidecells/cell/auth"
	"slidecells/cell/authoring"
	"slidecells/cell/jobs"
	"slidecells/shared/directory"
	"slidecells/shared/ids"
)

func init() {
	isoFixtures["page_id"] = isoFixture{prefix: ids.Page, make: func(t *testing.T, b *bundle, base, ws string) string {
		prj, _ := b.createProject(t, base, ws, "Pages")
		job := b.submitPage(t, base, ws, prj, "foreign", `export default function P() { return <div>x</div> }`)
		return b.waitJob(t, base, ws, job.JobID, "succeeded").Result.ObjectID
	}}
	isoFixtures["job_id"] = isoFixture{prefix: ids.Job, make: func(t *testing.T, b *bundle, base, ws string) string {
		prj, _ := b.createProject(t, base, ws, "Jobs")
		return b.submitPage(t, base, ws, prj, "job-fixture", `export default () => null`).JobID
	}}
	isoFixtures["component_id"] = isoFixture{prefix: ids.Component, make: func(t *testing.T, b *bundle, base, ws string) string {
		return b.publishComponent(t, base, ws, ids.New("k")[2:12], `export default function C() { return <i>c</i> }`)
	}}
	isoBodies["validate-page"] = `{}`
	isoBodies["create-page-preview"] = `{}`
	isoBodies["create-project-preview"] = `{"route":"/"}`
	isoBodies["copy-page"] = `{"key":"copied"}`
	isoBodies["update-page"] = `{"metadata_version":1,"title":"Hijack"}`
	isoBodies["validate-component"] = `{}`
	isoBodies["edit-page"] = `{"version":1,"file_type":"tsx","source":"export default () => null"}`
	isoBodies["cancel-mutation-job"] = `{}`
	isoBodies["retry-mutation-job"] = `{}`
}

type jobAnswer struct {
	JobID        string `json:"job_id"`
	Kind         string `json:"kind"`
	Status       string `json:"status"`
	AttemptCount int    `json:"attempt_count"`
	MaxAttempts  int    `json:"max_attempts"`
	RetryOf      string `json:"retry_of_job_id"`
	Stage        string `json:"stage"`
	Progress     int    `json:"progress"`
	ErrorCode    string `json:"error_code"`
	ErrorSummary string `json:"error_summary"`
	Result       struct {
		ObjectID string `json:"object_id"`
		Version  int64  `json:"version"`
	} `json:"result"`
}

// publishComponent writes a published component straight into the cell database of base (the
// component operations arrive with a later step) and returns its ID.
func (b *bundle) publishComponent(t *testing.T, base, ws, key, source string) string {
	t.Helper()
	a := b.api
	if base == b.srvB.URL {
		a = b.apiB
	}
	id := ids.New(ids.Component)
	if _, err := a.DB.Pool.Exec(t.Context(), `INSERT INTO components (workspace_id, id, key, file_type, draft_source, draft_hash, published_version, created_by)
		VALUES ($1, $2, $3, 'tsx', $4, 'h', 1, 'u')`, ws, id, key, source); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DB.Pool.Exec(t.Context(), `INSERT INTO component_versions (workspace_id, component_id, version, file_type, source, source_digest, compiled_digest, job_id, created_by)
		VALUES ($1, $2, 1, 'tsx', $3, 'd', 'c', 'job', 'u')`, ws, id, source); err != nil {
		t.Fatal(err)
	}
	return id
}

func decodeJob(t *testing.T, body []byte) jobAnswer {
	t.Helper()
	var j jobAnswer
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatalf("job body: %v: %s", err, body)
	}
	return j
}

func (b *bundle) submitPage(t *testing.T, base, ws, projectID, key, source string) jobAnswer {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"project_id": projectID, "key": key, "file_type": "tsx", "source": source})
	resp, got := b.call(t, call{base: base, method: "POST", path: "/api/v1/pages", ws: ws, key: ids.New("k"), body: string(body)})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit page: %d %s", resp.StatusCode, got)
	}
	j := decodeJob(t, got)
	if resp.Header.Get("Location") != "/api/v1/jobs/mutations/"+j.JobID {
		t.Fatalf("Location %q", resp.Header.Get("Location"))
	}
	return j
}

// waitJob polls a job until it reaches a terminal state, which must be want.
func (b *bundle) waitJob(t *testing.T, base, ws, id, want string) jobAnswer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, body := b.call(t, call{base: base, method: "GET", path: "/api/v1/jobs/mutations/" + id, ws: ws})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("job %s: %d %s", id, resp.StatusCode, body)
		}
		j := decodeJob(t, body)
		switch j.Status {
		case "succeeded", "failed", "canceled":
			if j.Status != want {
				t.Fatalf("job %s ended %s (%s: %s), want %s", id, j.Status, j.ErrorCode, j.ErrorSummary, want)
			}
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, j.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPagesThroughMutationJobs(t *testing.T) {
	b := setup(t)
	prj, _ := b.createProject(t, "", b.ws, "Deck")
	base := ""

	// A component the page imports, published at version 3 (components arrive through jobs in a
	// later step; here the row is written directly).
	if _, err := b.api.DB.Pool.Exec(t.Context(), `INSERT INTO components (workspace_id, id, key, file_type, draft_source, draft_hash, published_version, created_by)
		VALUES ($1, $2, 'badge', 'tsx', '', 'h', 3, 'u')`, b.ws, "cmp_aaaaaaaaaaaaaaaaaaaaaaaaaa"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.api.DB.Pool.Exec(t.Context(), `INSERT INTO component_versions (workspace_id, component_id, version, file_type, source, source_digest, compiled_digest, job_id, created_by)
		VALUES ($1, 'cmp_aaaaaaaaaaaaaaaaaaaaaaaaaa', 3, 'tsx', 'export default function Badge() { return <b>new</b> }', 'd', 'c', 'job', 'u')`, b.ws); err != nil {
		t.Fatal(err)
	}

	t.Run("create, read, history, dependencies", func(t *testing.T) {
		j := b.submitPage(t, base, b.ws, prj, "intro", `import Badge from "@components/badge"
import { Title } from "@kit/text"
export default function Intro() { return <div><Title>Hi</Title><Badge /></div> }`)
		if j.Status != "pending" || j.Kind != "page.create" || j.MaxAttempts != 3 || j.AttemptCount != 0 {
			t.Fatalf("accepted: %+v", j)
		}
		done := b.waitJob(t, base, b.ws, j.JobID, "succeeded")
		if done.Result.Version != 1 || done.Progress != 100 || !ids.Valid(ids.Page, done.Result.ObjectID) {
			t.Fatalf("done: %+v", done)
		}
		page := done.Result.ObjectID
		resp, body := b.call(t, call{method: "GET", path: "/api/v1/pages/" + page, ws: b.ws})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"key":"intro"`) || !strings.Contains(string(body), `"version":1`) {
			t.Fatalf("get page: %d %s", resp.StatusCode, body)
		}
		resp, body = b.call(t, call{method: "GET", path: "/api/v1/pages/" + page + "/dependencies", ws: b.ws})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"key":"badge","version":3,"depth":1`) {
			t.Fatalf("dependencies: %d %s", resp.StatusCode, body)
		}
		resp, body = b.call(t, call{method: "GET", path: "/api/v1/projects/" + prj + "/pages", ws: b.ws})
		if resp.StatusCode != 200 || !strings.Contains(string(body), page) {
			t.Fatalf("project pages: %d %s", resp.StatusCode, body)
		}

		// A stale baseline is refused at submission.
		resp, body = b.call(t, call{method: "POST", path: "/api/v1/pages/" + page + "/edits", ws: b.ws, key: ids.New("k"),
			body: `{"version":7,"source":"export default () => null"}`})
		if resp.StatusCode != http.StatusConflict || code(t, body) != "VERSION_CONFLICT" {
			t.Fatalf("stale edit: %d %s", resp.StatusCode, body)
		}
		// Two edits on one baseline, both accepted: exactly one wins, the other fails with a
		// conflict at its commit. Whether the second submission still passes the submission check
		// is a race with the first job, so the loser is enqueued the way an accepted submission
		// would have been, after the winner committed.
		edit, _ := json.Marshal(map[string]any{"version": 1, "source": "export default () => <p>a</p>"})
		resp, got := b.call(t, call{method: "POST", path: "/api/v1/pages/" + page + "/edits", ws: b.ws, key: ids.New("k"), body: string(edit)})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("edit: %d %s", resp.StatusCode, got)
		}
		if won := b.waitJob(t, base, b.ws, decodeJob(t, got).JobID, "succeeded"); won.Result.Version != 2 {
			t.Fatalf("winner: %+v", won)
		}
		sc, err := b.api.Auth.Authorize(t.Context(), auth.Principal{UserID: b.user.ID, Scopes: directory.Scopes}, b.ws)
		if err != nil {
			t.Fatal(err)
		}
		loser, err := b.api.Jobs.Enqueue(t.Context(), sc, jobs.NewJob{Kind: authoring.KindPageEdit,
			Input: authoring.PageEdit{PageID: page, Version: 1, FileType: "tsx", Source: "export default () => <p>b</p>"}})
		if err != nil {
			t.Fatal(err)
		}
		if lost := b.waitJob(t, base, b.ws, loser.ID, "failed"); lost.ErrorCode != "VERSION_CONFLICT" {
			t.Fatalf("loser failed with %s: %s", lost.ErrorCode, lost.ErrorSummary)
		}
		resp, body = b.call(t, call{method: "GET", path: "/api/v1/pages/" + page + "/versions", ws: b.ws})
		if resp.StatusCode != 200 || strings.Count(string(body), `"job_id"`) != 2 || strings.Contains(string(body), `"source"`) {
			t.Fatalf("history: %d %s", resp.StatusCode, body)
		}
		resp, body = b.call(t, call{method: "GET", path: "/api/v1/pages/" + page + "/source?version=1", ws: b.ws})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `@components/badge`) {
			t.Fatalf("source v1: %d %s", resp.StatusCode, body)
		}

		// Safe metadata: version-locked by metadata_version, source untouched.
		resp, body = b.call(t, call{method: "PATCH", path: "/api/v1/pages/" + page, ws: b.ws, key: ids.New("k"), body: `{"metadata_version":1,"title":"Intro","tags":["a","b"]}`})
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"title":"Intro"`) || !strings.Contains(string(body), `"metadata_version":2`) || !strings.Contains(string(body), `"version":2`) {
			t.Fatalf("metadata: %d %s", resp.StatusCode, body)
		}
		resp, body = b.call(t, call{method: "PATCH", path: "/api/v1/pages/" + page, ws: b.ws, key: ids.New("k"), body: `{"metadata_version":1,"title":"Stale"}`})
		if resp.StatusCode != http.StatusConflict || code(t, body) != "VERSION_CONFLICT" {
			t.Fatalf("stale metadata: %d %s", resp.StatusCode, body)
		}
		// Copy: a new page with the current source, through a job.
		resp, body = b.call(t, call{method: "POST", path: "/api/v1/pages/" + page + "/copy", ws: b.ws, key: ids.New("k"), body: `{"key":"intro-copy"}`})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("copy: %d %s", resp.StatusCode, body)
		}
		cp := b.waitJob(t, base, b.ws, decodeJob(t, body).JobID, "succeeded").Result.ObjectID
		_, orig := b.call(t, call{method: "GET", path: "/api/v1/pages/" + page + "/source", ws: b.ws})
		_, dup := b.call(t, call{method: "GET", path: "/api/v1/pages/" + cp + "/source", ws: b.ws})
		var o, d struct {
			Source string `json:"source"`
		}
		_ = json.Unmarshal(orig, &o)
		_ = json.Unmarshal(dup, &d)
		if cp == page || o.Source == "" || o.Source != d.Source {
			t.Fatalf("copy %s: %q vs %q", cp, d.Source, o.Source)
		}
	})

	t.Run("compile errors fail the job with positions; manual retry", func(t *testing.T) {
		j := b.submitPage(t, base, b.ws, prj, "broken", "export default function P() {\n  return <div>\n}\n")
		done := b.waitJob(t, base, b.ws, j.JobID, "failed")
		if done.ErrorCode != "COMPILE_FAILED" || !strings.Contains(done.ErrorSummary, "page.tsx:3:") || !strings.Contains(done.ErrorSummary, "COMPILE_SYNTAX") || done.AttemptCount != 0 {
			t.Fatalf("compile failure: %+v", done)
		}
		j = b.submitPage(t, base, b.ws, prj, "missing", `import X from "@components/nope"
export default () => <X />`)
		done = b.waitJob(t, base, b.ws, j.JobID, "failed")
		if !strings.Contains(done.ErrorSummary, "COMPILE_COMPONENT_MISSING") {
			t.Fatalf("missing component: %+v", done)
		}
		resp, body := b.call(t, call{method: "POST", path: "/api/v1/jobs/mutations/" + j.JobID + "/retry", ws: b.ws, key: ids.New("k"), body: `{}`})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("retry: %d %s", resp.StatusCode, body)
		}
		retry := decodeJob(t, body)
		if retry.RetryOf != j.JobID || retry.JobID == j.JobID || retry.AttemptCount != 0 {
			t.Fatalf("retry lineage: %+v", retry)
		}
		b.waitJob(t, base, b.ws, retry.JobID, "failed") // the component is still missing
		resp, body = b.call(t, call{method: "POST", path: "/api/v1/jobs/mutations/" + j.JobID + "/cancel", ws: b.ws, key: ids.New("k"), body: `{}`})
		if resp.StatusCode != http.StatusConflict || code(t, body) != "STATE_CONFLICT" {
			t.Fatalf("cancel of a failed job: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("a requested render check blocks the write while no renderer can run it", func(t *testing.T) {
		resp, body := b.call(t, call{method: "POST", path: "/api/v1/jobs/mutations/pages", ws: b.ws, key: ids.New("k"),
			body: `{"project_id":"` + prj + `","key":"checked","file_type":"tsx","source":"export default () => null","render_check":true}`})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submit: %d %s", resp.StatusCode, body)
		}
		done := b.waitJob(t, base, b.ws, decodeJob(t, body).JobID, "failed")
		if done.ErrorCode != "RENDER_SERVICE_UNAVAILABLE" {
			t.Fatalf("render check: %+v", done)
		}
		resp, body = b.call(t, call{method: "GET", path: "/api/v1/projects/" + prj + "/pages", ws: b.ws})
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"key":"intro"`) {
			t.Fatalf("list pages: %d %s", resp.StatusCode, body) // a failed list proves nothing below
		}
		if strings.Contains(string(body), `"key":"checked"`) {
			t.Fatalf("the blocked page was written: %s", body)
		}
	})

	t.Run("bad input and taken keys are refused at submission", func(t *testing.T) {
		for _, tc := range []struct {
			name, body, code string
			status           int
		}{
			{"bad key", `{"project_id":"` + prj + `","key":"Bad Key","file_type":"tsx","source":"x"}`, "VALIDATION_FAILED", 422},
			{"bad file type", `{"project_id":"` + prj + `","key":"k","file_type":"py","source":"x"}`, "VALIDATION_FAILED", 422},
			{"taken key", `{"project_id":"` + prj + `","key":"intro","file_type":"tsx","source":"x"}`, "NAME_CONFLICT", 409},
			{"foreign project", `{"project_id":"` + ids.New(ids.Project) + `","key":"k","file_type":"tsx","source":"x"}`, "NOT_FOUND", 404},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := b.call(t, call{method: "POST", path: "/api/v1/pages", ws: b.ws, key: ids.New("k"), body: tc.body})
				if resp.StatusCode != tc.status || code(t, body) != tc.code {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
			})
		}
	})
}

func TestValidation(t *testing.T) {
	b := setup(t)
	prj, _ := b.createProject(t, "", b.ws, "Deck")
	b.publishComponent(t, "", b.ws, "card", `export default function Card() { return <section>card</section> }`)
	j := b.submitPage(t, "", b.ws, prj, "ok", `import Card from "@components/card"
export default () => <Card />`)
	page := b.waitJob(t, "", b.ws, j.JobID, "succeeded").Result.ObjectID
	type validation struct {
		Valid  bool   `json:"valid"`
		Status string `json:"status"`
		Code   string `json:"code"`
		Stages struct {
			Compile struct {
				Status      string `json:"status"`
				Diagnostics []struct {
					File   string `json:"file"`
					Line   int    `json:"line"`
					Column int    `json:"column"`
					Code   string `json:"code"`
				} `json:"diagnostics"`
			} `json:"compile"`
			Render struct {
				Status string `json:"status"`
				Code   string `json:"code"`
			} `json:"render"`
		} `json:"stages"`
	}
	run := func(t *testing.T, path, body string, wantStatus int) validation {
		t.Helper()
		resp, got := b.call(t, call{method: "POST", path: path, ws: b.ws, body: body})
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, got)
		}
		var v validation
		_ = json.Unmarshal(got, &v)
		return v
	}
	t.Run("a source that compiles: the render stage cannot run, so unavailable, never passed", func(t *testing.T) {
		for _, tc := range []struct{ name, path, body string }{
			{"page", "/api/v1/pages/" + page + "/validate", `{}`},
			{"entity current", "/api/v1/validate/entity", `{"entity_type":"page","mode":"current","entity_id":"` + page + `"}`},
			{"entity content", "/api/v1/validate/entity", `{"entity_type":"page","mode":"content","file_type":"tsx","source":"export default () => null"}`},
			{"entity edits", "/api/v1/validate/entity", `{"entity_type":"page","mode":"edits","entity_id":"` + page + `","version":1,"source":"export default () => null"}`},
			{"component content", "/api/v1/validate/entity", `{"entity_type":"component","mode":"content","file_type":"tsx","source":"export default () => null"}`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				v := run(t, tc.path, tc.body, http.StatusOK)
				if v.Valid || v.Status != "unavailable" || v.Code != "RENDER_SERVICE_UNAVAILABLE" ||
					v.Stages.Compile.Status != "passed" || v.Stages.Render.Status != "unavailable" {
					t.Fatalf("%+v", v)
				}
			})
		}
	})
	t.Run("source errors: failed, with positions", func(t *testing.T) {
		v := run(t, "/api/v1/validate/entity", `{"entity_type":"page","mode":"content","file_type":"tsx","source":"export default () => <div>\n"}`, http.StatusOK)
		if v.Valid || v.Status != "failed" || v.Stages.Compile.Status != "failed" || v.Stages.Render.Status != "skipped" ||
			len(v.Stages.Compile.Diagnostics) == 0 || v.Stages.Compile.Diagnostics[0].Line == 0 || v.Stages.Compile.Diagnostics[0].File != "page.tsx" {
			t.Fatalf("%+v", v)
		}
	})
	t.Run("bad requests", func(t *testing.T) {
		run(t, "/api/v1/validate/entity", `{"entity_type":"page","mode":"edits","entity_id":"`+page+`","version":5,"source":"x"}`, http.StatusConflict)
		run(t, "/api/v1/validate/entity", `{"entity_type":"page","mode":"current"}`, http.StatusUnprocessableEntity)
		run(t, "/api/v1/validate/entity", `{"entity_type":"slide","mode":"current"}`, http.StatusUnprocessableEntity)
		run(t, "/api/v1/validate/entity", `{"entity_type":"page","mode":"current","entity_id":"`+ids.New(ids.Page)+`"}`, http.StatusNotFound)
	})
}

// Submitting a job, cancelling and retrying it follow the idempotency rules: the same key and
// request replay the first answer and create nothing more.
func TestJobOperationsAreIdempotent(t *testing.T) {
	b := setup(t)
	prj, _ := b.createProject(t, "", b.ws, "Deck")
	body := `{"project_id":"` + prj + `","key":"once","file_type":"tsx","source":"export default () => null","max_attempts":1}`
	first := call{method: "POST", path: "/api/v1/pages", ws: b.ws, key: "submit-1", body: body}
	r1, b1 := b.call(t, first)
	r2, b2 := b.call(t, first)
	if r1.StatusCode != http.StatusAccepted || r2.StatusCode != http.StatusAccepted || string(b1) != string(b2) ||
		r2.Header.Get("Idempotency-Replayed") != "true" || r1.Header.Get("Location") != r2.Header.Get("Location") {
		t.Fatalf("replayed submission differs:\n%d %s\n%d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	var n int
	if err := b.api.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM mutation_jobs WHERE workspace_id = $1`, b.ws).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d jobs after a replayed submission (%v)", n, err)
	}
	job := decodeJob(t, b1)
	b.waitJob(t, "", b.ws, job.JobID, "succeeded")
	// A job that fails (its source does not compile), retried twice with one key: one new job.
	again := call{method: "POST", path: "/api/v1/pages", ws: b.ws, key: "submit-2",
		body: `{"project_id":"` + prj + `","key":"twice","file_type":"tsx","source":"export default () => <div>","max_attempts":1}`}
	_, got := b.call(t, again)
	failed := b.waitJob(t, "", b.ws, decodeJob(t, got).JobID, "failed")
	retry := call{method: "POST", path: "/api/v1/jobs/mutations/" + failed.JobID + "/retry", ws: b.ws, key: "retry-1", body: `{}`}
	r1, b1 = b.call(t, retry)
	r2, b2 = b.call(t, retry)
	if r1.StatusCode != http.StatusAccepted || string(b1) != string(b2) || r2.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replayed retry differs:\n%d %s\n%d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	if err := b.api.DB.Pool.QueryRow(t.Context(), `SELECT count(*) FROM mutation_jobs WHERE retry_of_job_id = $1`, failed.JobID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d retries for one key (%v)", n, err)
	}
	// Cancel of the retry (pending, running or already failed), twice with one key: one answer.
	cancel := call{method: "POST", path: "/api/v1/jobs/mutations/" + decodeJob(t, b1).JobID + "/cancel", ws: b.ws, key: "cancel-1", body: `{}`}
	r1, b1 = b.call(t, cancel)
	r2, b2 = b.call(t, cancel)
	if string(b1) != string(b2) || r1.StatusCode != r2.StatusCode || r2.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replayed cancel differs:\n%d %s\n%d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
}
