package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"slidecells/shared/testenv"
	"slidecells/shared/tracing"
)

// span is what these tests read of a span line of the file exporter (stdouttrace's JSON).
type span struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s span) attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return fmt.Sprint(a.Value.Value)
		}
	}
	return ""
}

// spansOf reads the spans a process wrote so far (nil when it wrote none).
func spansOf(t *testing.T, path string) []span {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []span
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var s span
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("%s: a line that is not a span: %v", path, err)
		}
		out = append(out, s)
	}
	return out
}

// inTrace returns the spans of trace tid among those of the named processes, by process.
func (e *env) inTrace(t *testing.T, tid string, procs ...string) map[string][]span {
	files := e.s.SpanFiles()
	out := map[string][]span{}
	for _, p := range procs {
		for _, s := range spansOf(t, files[p]) {
			if s.SpanContext.TraceID == tid {
				out[p] = append(out[p], s)
			}
		}
	}
	return out
}

// logsWith counts the log lines of a process that carry trace_id tid.
func (e *env) logsWith(t *testing.T, proc, tid string) int {
	t.Helper()
	for _, f := range e.s.LogFiles() {
		if !strings.HasSuffix(f, "/"+proc+".log") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte(`"trace_id":"`+tid+`"`))
	}
	t.Fatalf("no log of %s", proc)
	return 0
}

// TestOneTracePerScreenshot follows one screenshot request, sent with the client's own
// traceparent, through real processes — router, cell, render coordinator, renderer, preview
// host — with every process writing its spans to a file (OTEL_TRACES_EXPORTER=file): one trace
// ID spans all of them, each span the child of the one before it, every process's log lines of
// the request carry it as trace_id, and the client sees it as X-Request-ID (and as trace_id of a
// problem body). A job submitted with a traceparent runs in that trace. No span and no log
// line holds the PAT or a signed ticket (admission tickets, preview access tokens).
func TestOneTracePerScreenshot(t *testing.T) {
	file := []string{"OTEL_TRACES_EXPORTER=file"}
	e := startWith(t, "", map[string][]string{"router": file, "cell": file, "renderer": file, "preview": file}, true)
	if len(e.s.Previews) == 0 {
		t.Fatal("the stack started no preview hosts")
	}
	e.waitRender(t)
	ws := e.demo.WorkspaceA
	a := e.do(t, http.MethodPost, "/api/v1/projects", e.demo.PAT, []byte(`{"name":"Traced"}`),
		"X-Workspace-ID", ws, "Idempotency-Key", "e2e-trace-project", "Content-Type", "application/json")
	if a.status != http.StatusCreated {
		t.Fatalf("project: %d %s", a.status, a.body)
	}
	var prj struct{ ID string }
	_ = json.Unmarshal(a.body, &prj)

	// A job runs in the trace of the request that submitted it.
	jobTrace, jobParent := tracing.NewTraceID().String(), tracing.NewSpanID().String()
	body, _ := json.Marshal(map[string]any{"project_id": prj.ID, "key": "traced", "file_type": "tsx", "source": `import { Slide } from "@kit/layout";
import { Title } from "@kit/text";
export default function Traced() { return <Slide><Title>Followed</Title></Slide>; }`})
	a = e.do(t, http.MethodPost, "/api/v1/pages", e.demo.PAT, body, "X-Workspace-ID", ws, "Idempotency-Key", "e2e-trace-page", "Content-Type", "application/json",
		"traceparent", "00-"+jobTrace+"-"+jobParent+"-01")
	if a.status != http.StatusAccepted || a.header.Get("X-Request-ID") != jobTrace {
		t.Fatalf("submit page: %d X-Request-ID %q %s", a.status, a.header.Get("X-Request-ID"), a.body)
	}
	var job struct {
		JobID string `json:"job_id"`
	}
	_ = json.Unmarshal(a.body, &job)
	var page string
	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "the page job ends", func() error {
		a := e.get(t, "/api/v1/jobs/mutations/"+job.JobID, e.demo.PAT, "X-Workspace-ID", ws)
		var st struct {
			Status string
			Result struct {
				ObjectID string `json:"object_id"`
			}
		}
		_ = json.Unmarshal(a.body, &st)
		if st.Status != "succeeded" {
			return fmt.Errorf("job %s", a.body)
		}
		page = st.Result.ObjectID
		return nil
	})
	jobSpans := e.inTrace(t, jobTrace, "router", "cell-a")
	var sawJob bool
	for _, s := range jobSpans["cell-a"] {
		sawJob = sawJob || strings.HasPrefix(s.Name, "job.")
	}
	if !sawJob {
		t.Errorf("no job span in the submitting request's trace: %+v", jobSpans)
	}

	// The screenshot, with the client's traceparent.
	tid, clientSpan := tracing.NewTraceID().String(), tracing.NewSpanID().String()
	a = e.get(t, "/api/v1/pages/"+page+"/screenshot", e.demo.PAT, "X-Workspace-ID", ws,
		"traceparent", "00-"+tid+"-"+clientSpan+"-01", "tracestate", "client=1")
	if a.status != http.StatusOK {
		t.Fatalf("screenshot: %d %s", a.status, a.body)
	}
	if got := a.header.Get("X-Request-ID"); got != tid {
		t.Fatalf("X-Request-ID %q, want the client's trace %s", got, tid)
	}

	procs := []string{"router", "cell-a", "cell-a-r1", "cell-a-r2", "cell-a-preview"}
	var got map[string][]span
	byName := map[string]span{}
	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "spans of every process in the trace", func() error {
		got = e.inTrace(t, tid, procs...)
		clear(byName)
		for _, ss := range got {
			for _, s := range ss {
				byName[s.Name] = s
			}
		}
		for _, name := range []string{"router.request", "cell.get-page-screenshot", "render.attempt", "renderer.execution", "preview.request"} {
			if byName[name].Name == "" {
				return fmt.Errorf("no %s span yet; spans by process: %v", name, names(got))
			}
		}
		return nil
	})
	router, cellReq, attempt := byName["router.request"], byName["cell.get-page-screenshot"], byName["render.attempt"]
	execution, preview := byName["renderer.execution"], byName["preview.request"]
	// Each hop is the child of the one before it.
	for _, link := range []struct {
		child  span
		parent string
	}{
		{router, clientSpan}, {cellReq, router.SpanContext.SpanID}, {attempt, cellReq.SpanContext.SpanID},
		{execution, attempt.SpanContext.SpanID}, {preview, execution.SpanContext.SpanID},
	} {
		if link.child.Parent.SpanID != link.parent {
			t.Errorf("%s's parent is %s, want %s", link.child.Name, link.child.Parent.SpanID, link.parent)
		}
	}
	if router.attr("slidecells.workspace_id") != ws || cellReq.attr("slidecells.cell") != "cell-a" || cellReq.attr("slidecells.outcome") != "ok" {
		t.Errorf("router span %+v, cell span %+v: want workspace, cell and outcome", router.Attributes, cellReq.Attributes)
	}

	// Every process's log lines of the request carry the trace ID.
	renderer := "cell-a-r1"
	if len(got["cell-a-r2"]) > 0 {
		renderer = "cell-a-r2"
	}
	// (The router's access log is flushed once a second.)
	testenv.Eventually(t, 10*time.Second, 200*time.Millisecond, "log lines with the trace ID in every process", func() error {
		for _, p := range []string{"router", "cell-a", renderer, "cell-a-preview"} {
			if e.logsWith(t, p, tid) == 0 {
				return fmt.Errorf("no log line of %s carries trace_id %s", p, tid)
			}
		}
		return nil
	})

	// A problem body names the trace too.
	tid2 := tracing.NewTraceID().String()
	a = e.get(t, "/api/v1/pages/"+page+"x/screenshot", e.demo.PAT, "X-Workspace-ID", ws, "traceparent", "00-"+tid2+"-"+clientSpan+"-00")
	var p struct {
		TraceID string `json:"trace_id"`
	}
	_ = json.Unmarshal(a.body, &p)
	if a.status < 400 || p.TraceID != tid2 || a.header.Get("X-Request-ID") != tid2 {
		t.Errorf("problem %d: trace_id %q, X-Request-ID %q, want %s", a.status, p.TraceID, a.header.Get("X-Request-ID"), tid2)
	}

	// No credential in any span or log line: PATs, bearer values, signed tickets (their
	// base64 header {"alg":…).
	files := e.s.SpanFiles()
	for _, f := range append(e.s.LogFiles(), values(files)...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, secret := range []string{e.demo.PAT, "svc_pat_", "eyJhbGci"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds a credential (%.12s…)", f, secret)
			}
		}
	}
}

func names(m map[string][]span) map[string][]string {
	out := map[string][]string{}
	for p, ss := range m {
		for _, s := range ss {
			out[p] = append(out[p], s.Name)
		}
	}
	return out
}

func values(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
