package authoring

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"slidecells/cell/catalog"
	"slidecells/cell/compile"
	"slidecells/cell/content"
	"slidecells/cell/jobs"
	"slidecells/cell/render"
	"slidecells/shared/problem"
	rc "slidecells/shared/rendercontract"
)

// TestCommitFailure: business errors of a job's commit fail the job with their code (not
// retried); a workspace being moved returns it to the queue; infrastructure errors stay
// errors (retried); the queue's own outcomes pass through.
func TestCommitFailure(t *testing.T) {
	own := jobs.Fail("X_CODE", "own")
	for _, c := range []struct {
		name     string
		err      error
		failCode string // the job fails with this code; "" when it is not a *jobs.Failure
		is       error  // errors.Is holds
		same     bool   // the very error comes back
	}{
		{"nil", nil, "", nil, true},
		{"cancel requested", jobs.ErrCanceled, "", jobs.ErrCanceled, true},
		{"lease lost", fmt.Errorf("commit: %w", jobs.ErrLeaseLost), "", jobs.ErrLeaseLost, true},
		{"fenced", jobs.ErrFenced, "", jobs.ErrFenced, true},
		{"a job failure", own, "X_CODE", nil, true},
		{"a wrapped job failure", fmt.Errorf("x: %w", own), "X_CODE", nil, false},
		{"version conflict", problem.ErrVersionConflict("page", "version", 3), string(problem.VersionConflict), nil, false},
		{"name taken", problem.New(problem.NameConflict, "taken"), string(problem.NameConflict), nil, false},
		{"not found", problem.ErrNotFound(), string(problem.NotFound), nil, false},
		{"scope required", problem.New(problem.ScopeRequired, "page:write"), string(problem.ScopeRequired), nil, false},
		{"workspace moving", problem.New(problem.WorkspaceMoving, "moving"), "", jobs.ErrFenced, false},
		{"workspace moved away", problem.New(problem.WorkspaceMisdirected, "moved"), "", jobs.ErrFenced, false},
		{"internal", problem.Wrap(errors.New("boom"), "internal error"), "", nil, true},
		{"directory unavailable", problem.ErrDirectoryUnavailable(errors.New("down")), "", nil, true},
		{"client closed", problem.Wrap(context.Canceled, "x"), "", nil, true},
		{"a plain error", errors.New("connection reset"), "", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := commitFailure(c.err)
			var f *jobs.Failure
			isFailure := errors.As(got, &f)
			if (c.failCode != "") != isFailure || (isFailure && (f.Code != c.failCode || f.Retryable)) {
				t.Fatalf("commitFailure(%v) = %#v, want a failure %q", c.err, got, c.failCode)
			}
			if c.is != nil && !errors.Is(got, c.is) {
				t.Fatalf("commitFailure(%v) = %v, not %v", c.err, got, c.is)
			}
			if c.same && got != c.err {
				t.Fatalf("commitFailure(%v) = %v, want it unchanged", c.err, got)
			}
			if c.name == "workspace moving" && problem.As(got).Code != problem.WorkspaceMoving {
				t.Fatalf("the move's problem is lost: %v", got)
			}
		})
	}
}

// TestRenderFailure: a render stage that did not succeed answers by its error's category.
func TestRenderFailure(t *testing.T) {
	for _, c := range []struct {
		name      string
		state     string
		errCode   rc.Code
		available bool
		want      problem.Code
	}{
		{"queued, no renderer", render.StateQueued, "", false, problem.RenderServiceUnavailable},
		{"executing, renderers up", render.StateExecuting, "", true, problem.RenderDeadlineExceeded},
		{"executing, its renderer frozen", render.StateExecuting, "", false, problem.RenderDeadlineExceeded},
		{"expired at the deadline", render.StateExpired, rc.CodeDeadlineExceeded, false, problem.RenderDeadlineExceeded},
		{"retry wait, renderers up", render.StateRetryWait, "", true, problem.RenderDeadlineExceeded},
		{"content", render.StateFailed, rc.CodeContentError, true, problem.RenderContentError},
		{"timeout", render.StateFailed, rc.CodeDeadlineExceeded, true, problem.RenderDeadlineExceeded},
		{"cancelled", render.StateCancelled, rc.CodeCancelled, true, problem.RenderCancelled},
		{"input expired", render.StateExpired, rc.CodeInputExpired, true, problem.RenderInputNotReproducible},
		{"input not reproducible", render.StateFailed, rc.CodeInputNotReproducible, true, problem.RenderInputNotReproducible},
		{"infrastructure", render.StateFailed, rc.CodeBrowserLost, true, problem.RenderServiceUnavailable},
		{"capacity", render.StateFailed, rc.CodeQueueFull, true, problem.RenderServiceUnavailable},
		{"configuration", render.StateFailed, rc.CodeProfileMismatch, true, problem.RenderServiceUnavailable},
		{"resource", render.StateFailed, rc.CodeOutputLimitExceeded, true, problem.RenderFailed},
		{"internal", render.StateFailed, rc.CodeInternal, true, problem.RenderFailed},
		{"an unknown code", render.StateFailed, "SOMETHING_NEW", true, problem.RenderFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := renderFailure(render.Request{State: c.state, ErrorCode: string(c.errCode), ErrorMessage: "detail"}, c.available)
			if got := problem.As(err).Code; got != c.want {
				t.Fatalf("%s/%s: %s, want %s", c.state, c.errCode, got, c.want)
			}
		})
	}
}

func TestDiagnostics(t *testing.T) {
	res := &compile.Result{Diagnostics: []compile.Diagnostic{
		{File: "page.tsx", Line: 3, Column: 7, Code: compile.CodeSyntax, Severity: compile.SeverityError, Message: "unexpected token"},
		{File: "page.tsx", Line: 4, Column: 1, Code: compile.CodeWarning, Severity: compile.SeverityWarning, Message: "unused"},
		{File: "@components/card", Line: 1, Column: 2, Code: compile.CodeComponentMissing, Severity: compile.SeverityError, Message: "no card"},
	}, DiagnosticsOmitted: 2}
	want := "page.tsx:3:7: COMPILE_SYNTAX: unexpected token\n@components/card:1:2: COMPILE_COMPONENT_MISSING: no card\n… 2 more"
	if got := diagnostics(res); got != want {
		t.Fatalf("diagnostics:\n%s\nwant:\n%s", got, want)
	}
	if got := diagnostics(&compile.Result{}); got != "" {
		t.Fatalf("no diagnostics: %q", got)
	}
}

func TestFindingsSummary(t *testing.T) {
	got := findingsSummary(RenderCheck{Message: "2 error(s)", Findings: []rc.Finding{
		{Code: "RUNTIME_ERROR", Scene: "default", Severity: rc.SeverityError, Message: "x is undefined"},
		{Code: "LAYOUT_OVERFLOW", Scene: "default", Severity: rc.SeverityWarning, Message: "overflows"},
	}})
	if want := "2 error(s)\nRUNTIME_ERROR [default] x is undefined"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
}

func TestFindRoute(t *testing.T) {
	tree := []content.RouteNode{
		{Segment: "", PageID: "pg_root", Children: []content.RouteNode{
			{Segment: "a", PageID: "pg_a", Children: []content.RouteNode{{Segment: "b", PageID: "pg_ab"}}},
			{Segment: "empty", Children: []content.RouteNode{{Segment: "leaf", PageID: "pg_leaf"}}},
		}},
		{Segment: "top", PageID: "pg_top"},
	}
	for _, c := range []struct{ path, want string }{
		{"/", "pg_root"},
		{"/a", "pg_a"},
		{"/a/b", "pg_ab"},
		{"/empty", ""},
		{"/empty/leaf", "pg_leaf"},
		{"/top", "pg_top"},
		{"/b", ""},
		{"a/b", ""},
		{"/a/b/", ""},
		{"", ""},
	} {
		t.Run(c.path, func(t *testing.T) {
			if got := findRoute(tree, "", c.path); got != c.want {
				t.Fatalf("findRoute(%q) = %q, want %q", c.path, got, c.want)
			}
		})
	}
}

// TestCheckNew: a new page's or component's key and source against its standard.
func TestCheckNew(t *testing.T) {
	for _, c := range []struct {
		name, kind, key, fileType, source string
		fields                            []string
	}{
		{"a good page", "page", "intro", "tsx", "x", nil},
		{"an html page", "page", "intro-2", "html", "<p>", nil},
		{"an html component", "component", "card", "html", "<p>", []string{"file_type"}},
		{"a jsx component", "component", "card", "jsx", "x", nil},
		{"a 64-character key", "page", "k" + strings.Repeat("a", 63), "tsx", "x", nil},
		{"a 65-character key", "page", "k" + strings.Repeat("a", 64), "tsx", "x", []string{"key"}},
		{"an underscore", "page", "my_page", "tsx", "x", []string{"key"}},
		{"a page source at the limit", "page", "p", "tsx", strings.Repeat("x", catalog.Standards["page"].Limits.MaxSourceBytes), nil},
		{"a component source over its limit", "component", "c", "tsx", strings.Repeat("x", catalog.Standards["component"].Limits.MaxSourceBytes+1), []string{"source"}},
		{"a component source at the page limit", "component", "c", "tsx", strings.Repeat("x", catalog.Standards["page"].Limits.MaxSourceBytes), []string{"source"}},
		{"an empty source", "component", "c", "tsx", "", []string{"source"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var fields []string
			for _, fe := range checkNew(c.kind, c.key, c.fileType, c.source) {
				fields = append(fields, fe.Field)
			}
			if !slices.Equal(fields, c.fields) {
				t.Fatalf("fields %v, want %v", fields, c.fields)
			}
		})
	}
}

func TestDraftHash(t *testing.T) {
	if first, again := DraftHash("tsx", "x"), DraftHash("tsx", "x"); first != again {
		t.Fatal("not stable")
	}
	for _, other := range [][2]string{{"jsx", "x"}, {"tsx", "y"}, {"tsxx", ""}, {"ts", "xx"}} {
		if DraftHash(other[0], other[1]) == DraftHash("tsx", "x") {
			t.Fatalf("DraftHash%v equals DraftHash(tsx, x)", other)
		}
	}
}

func TestKitItems(t *testing.T) {
	var want []string
	for _, k := range catalog.RuntimeKit {
		want = append(want, k.Name)
	}
	if got := KitItems(); !slices.Equal(got, want) {
		t.Fatalf("KitItems() = %v, want %v", got, want)
	}
}
